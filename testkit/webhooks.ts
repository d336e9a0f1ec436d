import { createServer, type IncomingMessage, type Server } from "node:http";
import type { Socket } from "node:net";
import { Webhook } from "standardwebhooks";
import { expect } from "vitest";
import type { ResolveHost } from "../src/adapters/webhooks/resolve-host.js";
import { call, type Res, type SignedInUser } from "./actors.js";
import type { TestApp } from "./harness.js";

/**
 * Webhook receivers and helpers for the tests of issue 30: a receiver on loopback (the service
 * reaches it with WEBHOOK_ALLOW_PRIVATE, on in local mode), a resolver that maps names to addresses
 * (injected as the app's `resolveHost`), and registration through the REST route.
 */

/** One request the receiver got. */
export interface ReceivedHook {
  headers: Record<string, string>;
  body: string;
  /** the parsed body: `{type, timestamp, data}` */
  json: { type: string; timestamp: string; data: Record<string, unknown> };
  /** what the receiver answered */
  status: number;
}

export interface Receiver {
  /** `http://127.0.0.1:<port>/hook` */
  url: string;
  received: ReceivedHook[];
  /** how the receiver answers the n-th request (0-based): a status (default 200) */
  answer: (n: number, hook: ReceivedHook) => number;
  /** the first request (already received or to come) matching `match`, within `timeoutMs` */
  waitFor(match: (h: ReceivedHook) => boolean, timeoutMs?: number): Promise<ReceivedHook>;
  /** every request matching `match` so far */
  all(match: (h: ReceivedHook) => boolean): ReceivedHook[];
  close(): Promise<void>;
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    req.on("error", reject);
  });
}

/** A webhook receiver on 127.0.0.1 that records every POST and answers `answer(n)` (200 by default). */
export async function startReceiver(): Promise<Receiver> {
  const received: ReceivedHook[] = [];
  const waiters: { match: (h: ReceivedHook) => boolean; resolve: (h: ReceivedHook) => void }[] = [];
  let server: Server | undefined;
  const receiver: Receiver = {
    url: "",
    received,
    answer: () => 200,
    async waitFor(match, timeoutMs = 15_000) {
      const found = received.find(match);
      if (found) return found;
      return new Promise<ReceivedHook>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no matching webhook within ${timeoutMs} ms`)), timeoutMs);
        waiters.push({
          match,
          resolve: (h) => {
            clearTimeout(timer);
            resolve(h);
          },
        });
      });
    },
    all: (match) => received.filter(match),
    close: () => new Promise<void>((r) => (server ? server.close(() => r()) : r())),
  };
  server = createServer(async (req, res) => {
    const body = await readBody(req);
    let json: ReceivedHook["json"];
    try {
      json = JSON.parse(body) as ReceivedHook["json"];
    } catch {
      json = { type: "", timestamp: "", data: {} };
    }
    const headers = Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, String(v)]));
    const hook: ReceivedHook = { headers, body, json, status: 0 };
    hook.status = receiver.answer(received.length, hook);
    received.push(hook);
    res.writeHead(hook.status, { "content-type": "text/plain" }).end("ok");
    for (const w of [...waiters]) {
      if (w.match(hook)) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(hook);
      }
    }
  });
  const listening = server;
  await new Promise<void>((r) => listening.listen(0, "127.0.0.1", () => r()));
  receiver.url = `http://127.0.0.1:${(listening.address() as { port: number }).port}/hook`;
  return receiver;
}

/** A resolver that knows only `map`'s names (an unknown name does not resolve). */
export function hostsResolver(map: Record<string, string[]>): ResolveHost {
  return async (name) => {
    const found = map[name.toLowerCase()];
    if (!found) throw new Error(`getaddrinfo ENOTFOUND ${name}`);
    return found;
  };
}

/** Whether a received request verifies with the endpoint's secret (Standard Webhooks, `standardwebhooks`). */
export function verifies(secret: string, hook: ReceivedHook): boolean {
  try {
    new Webhook(secret).verify(hook.body, {
      "webhook-id": hook.headers["webhook-id"] ?? "",
      "webhook-timestamp": hook.headers["webhook-timestamp"] ?? "",
      "webhook-signature": hook.headers["webhook-signature"] ?? "",
    });
    return true;
  } catch {
    return false;
  }
}

/** `POST /v1/webhooks` with the given credential headers. */
export function registerWebhook(
  app: TestApp,
  headers: Record<string, string>,
  body: Record<string, unknown>,
): Promise<Res> {
  return call(app, { method: "POST", path: "/v1/webhooks", headers, body });
}

/** Matches the delivery of one event (its `webhook-id`), for a receiver's `waitFor` and `all`. */
export const hasWebhookId =
  (eventId: string) =>
  (h: { headers: Record<string, string> }): boolean =>
    h.headers["webhook-id"] === eventId;

/** `POST /v1/webhooks/{id}/test` as `user` (202 expected): the test event's id. */
export async function sendTestEvent(app: TestApp, user: SignedInUser, id: string): Promise<string> {
  const r = await call(app, { method: "POST", path: `/v1/webhooks/${id}/test`, headers: { cookie: user.cookie } });
  expect(r.status).toBe(202);
  return (r.body as { id: string }).id;
}

/** Registers an endpoint (201 expected): its id and secret. */
export async function webhookFor(
  app: TestApp,
  headers: Record<string, string>,
  body: Record<string, unknown>,
): Promise<{ id: string; secret: string }> {
  const r = await registerWebhook(app, headers, body);
  if (r.status !== 201) throw new Error(`webhook registration failed: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body as { id: string; secret: string };
}

/**
 * A receiver that misbehaves, on 127.0.0.1, counting the connections the service opens to it (the
 * server's side: `open` is how many are still open now). Kinds:
 * - `silent`: reads the request and never answers;
 * - `trickle`: answers with a status line and header bytes trickled forever, never ending the headers;
 * - `stream`: answers 200 at once, then streams a body forever;
 * - `large`: answers 200 with a `LARGE_BODY_BYTES` body, written as fast as the connection takes it;
 * - `slow`: answers 200 after 100 ms (a healthy receiver that is not instant: `maxConcurrent` shows overlap).
 */
export type HostileKind = "silent" | "trickle" | "stream" | "large" | "slow";

/** What `large` sends: far more than any socket buffer holds, so a reader that stops shows it. */
export const LARGE_BODY_BYTES = 32 * 1024 * 1024;

export interface HostileReceiver {
  url: string;
  /** connections accepted so far */
  accepted: number;
  /** connections open now */
  open: number;
  /** requests whose headers arrived, with their webhook-id */
  requests: string[];
  /** body bytes handed to the connection (`large`, `stream`), per connection in order of acceptance */
  bodyBytesWritten: number[];
  /** whether a `large` body was written whole */
  bodiesFinished: number;
  /** the most requests it had unanswered at once */
  maxConcurrent: number;
  /** until `check()` holds (polled on each connection event and every 20 ms), at most `timeoutMs` */
  until(check: (r: HostileReceiver) => boolean, timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

export async function startHostileReceiver(kind: HostileKind): Promise<HostileReceiver> {
  const server = createServer();
  const sockets = new Set<Socket>();
  const timers = new Set<NodeJS.Timeout>();
  let unanswered = 0;
  const r: HostileReceiver = {
    url: "",
    accepted: 0,
    open: 0,
    requests: [],
    bodyBytesWritten: [],
    bodiesFinished: 0,
    maxConcurrent: 0,
    async until(check, timeoutMs = 30_000) {
      const start = Date.now();
      while (!check(r)) {
        if (Date.now() - start > timeoutMs) {
          throw new Error(`hostile receiver (${kind}): condition not met within ${timeoutMs} ms (open ${r.open})`);
        }
        await new Promise((res) => setTimeout(res, 20));
      }
    },
    async close() {
      for (const t of timers) clearInterval(t);
      for (const s of sockets) s.destroy();
      await new Promise<void>((res) => server.close(() => res()));
    },
  };
  server.on("connection", (socket) => {
    r.accepted++;
    r.open++;
    sockets.add(socket);
    socket.on("close", () => {
      r.open--;
      sockets.delete(socket);
    });
  });
  server.on("request", (req, res) => {
    r.requests.push(String(req.headers["webhook-id"] ?? ""));
    req.resume();
    const slot = r.bodyBytesWritten.push(0) - 1;
    const every = (ms: number, fn: () => void) => {
      const t = setInterval(fn, ms);
      timers.add(t);
      res.on("close", () => {
        clearInterval(t);
        timers.delete(t);
      });
    };
    res.on("error", () => undefined);
    if (kind === "silent") return;
    if (kind === "slow") {
      unanswered++;
      r.maxConcurrent = Math.max(r.maxConcurrent, unanswered);
      const t = setTimeout(() => {
        timers.delete(t);
        unanswered--;
        res.writeHead(200, { "content-type": "text/plain" }).end("ok");
      }, 100);
      timers.add(t);
      return;
    }
    if (kind === "trickle") {
      // a status line and then header bytes, one every 20 ms: the headers never end
      const socket = res.socket;
      socket?.write("HTTP/1.1 200 OK\r\nX-Trickle: ");
      every(20, () => socket?.write("a"));
      return;
    }
    res.writeHead(200, { "content-type": "text/plain" });
    const chunk = Buffer.alloc(1024, 0x61);
    if (kind === "stream") {
      every(5, () => {
        if (res.write(chunk)) r.bodyBytesWritten[slot] = (r.bodyBytesWritten[slot] ?? 0) + chunk.length;
      });
      return;
    }
    // large: as fast as the connection takes it, stopping when the client goes away
    const big = Buffer.alloc(64 * 1024, 0x62);
    let left = LARGE_BODY_BYTES;
    const pump = () => {
      while (left > 0 && !res.destroyed) {
        left -= big.length;
        r.bodyBytesWritten[slot] = (r.bodyBytesWritten[slot] ?? 0) + big.length;
        if (!res.write(big)) return void res.once("drain", pump);
      }
      if (left <= 0) res.end(() => r.bodiesFinished++);
    };
    pump();
  });
  await new Promise<void>((res) => server.listen(0, "127.0.0.1", () => res()));
  r.url = `http://127.0.0.1:${(server.address() as { port: number }).port}/hook`;
  return r;
}
