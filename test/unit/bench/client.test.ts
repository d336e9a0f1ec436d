import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { load, MAX_ERROR_SHARE, post } from "../../../bench/client.js";

/**
 * The bench's load client against a local server that fails some requests on purpose, chosen by the
 * `x-fail` header: `mid` resets the connection after the head and part of the body (the response's
 * ECONNRESET that crashed the bench), `early` resets it before any answer, `status` answers 500.
 * A failure rejects that one request; `load` counts them and fails only past 1%.
 */

let server: http.Server;
let url: string;

beforeAll(async () => {
  server = http.createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      const fail = req.headers["x-fail"];
      if (fail === "early") {
        req.socket.resetAndDestroy();
      } else if (fail === "mid") {
        res.writeHead(200, { "content-type": "application/json", "content-length": "100" });
        res.write('{"partial":', () => req.socket.resetAndDestroy());
      } else if (fail === "status") {
        res.writeHead(500, { "content-type": "application/json" }).end('{"error":"planted"}');
      } else {
        res.writeHead(200, { "content-type": "application/json" }).end('{"ok":true}');
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/chat/completions`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

const send = (fail?: string) => post(url, "k", { model: "m" }, undefined, fail ? { "x-fail": fail } : {});

describe("post", () => {
  it.for(["mid", "early", "status"])(
    "rejects a request the server fails (%s) and the next one succeeds",
    async (fail) => {
      await expect(send(fail)).rejects.toThrow();
      await expect(send()).resolves.toMatchObject({ status: 200 });
    },
  );
});

describe("load", () => {
  /** Requests whose index is `every`·k + 7, + 7 + every/3, + 7 + 2·every/3 fail: mid, early, status in turn. */
  const failing = (every: number) => (i: number) => {
    const r = i % every;
    const third = Math.floor(every / 3);
    return send(r === 7 ? "mid" : r === 7 + third ? "early" : r === 7 + 2 * third ? "status" : undefined);
  };

  it("counts failures up to 1% of the requests and carries on", async () => {
    // 1000 requests, one of each kind every 300: 4 + 3 + 3 = 10 failures, exactly 1%
    const r = await load(1000, 16, failing(300));
    expect(MAX_ERROR_SHARE).toBe(0.01);
    expect(r.errors).toBe(10);
    expect(r.samples).toHaveLength(990);
    expect(r.samples.every((s) => s.status === 200)).toBe(true);
  });

  it("fails the load past 1%, naming the first failure", async () => {
    // one failure every 30 requests: over 3%
    await expect(load(600, 16, failing(30))).rejects.toThrow(/load: \d+ requests failed, over 1% of 600; the first: /);
  });

  it("a clean load has no errors", async () => {
    const r = await load(200, 8, () => send());
    expect(r).toMatchObject({ errors: 0 });
    expect(r.samples).toHaveLength(200);
  });
});
