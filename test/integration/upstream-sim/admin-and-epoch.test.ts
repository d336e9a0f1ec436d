import { afterEach, describe, expect, test } from "vitest";
import type { UpstreamSimulator } from "../../../src/local/upstream-sim/index.js";
import { admin, get, post, startSim, userMessage } from "../../../testkit/upstream-sim.js";

let sim: UpstreamSimulator | undefined;

afterEach(async () => {
  await sim?.close();
  sim = undefined;
});

describe("admin HTTP API", () => {
  test("keys: upsert, read, set balance, revoke (API then answers 401), delete", async () => {
    sim = await startSim();
    const created = await admin(sim, "POST", "/keys", {
      key: "adm",
      diemMicro: "3000000",
      usdMicro: "1500000",
      diemCapMicro: "2000000",
    });
    expect(created.status).toBe(200);
    expect(await created.json()).toMatchObject({
      key: "adm",
      diemMicro: "3000000",
      usdMicro: "1500000",
      diemCapMicro: "2000000",
      allocationMicro: "3000000",
      availableDiemMicro: "2000000",
      accessPermitted: true,
      revoked: false,
      inFlight: 0,
    });
    expect(sim.state.getKey("adm")?.usdMicro).toBe(1_500_000n);

    const chat = await post(sim, "/chat/completions", { model: "qwen3-4b", messages: userMessage("hi") }, "adm");
    expect(chat.status).toBe(200);

    const set = await admin(sim, "POST", "/keys/adm/balance", { diemMicro: "42", diemCapMicro: null });
    expect(await set.json()).toMatchObject({ diemMicro: "42", diemCapMicro: null, availableDiemMicro: "42" });

    const list = (await (await admin(sim, "GET", "/keys")).json()) as { data: { key: string }[] };
    expect(list.data.map((k) => k.key)).toEqual(["adm"]);

    expect((await admin(sim, "POST", "/keys/adm/revoke", {})).status).toBe(200);
    expect(
      (await post(sim, "/chat/completions", { model: "qwen3-4b", messages: userMessage("hi") }, "adm")).status,
    ).toBe(401);
    expect(await (await admin(sim, "POST", "/keys/adm/revoke", { revoked: false })).json()).toMatchObject({
      revoked: false,
    });

    expect((await admin(sim, "GET", "/keys/missing")).status).toBe(404);
    expect((await admin(sim, "POST", "/keys", { key: "bad", diemMicro: "1.5" })).status).toBe(400);
    expect(await (await admin(sim, "DELETE", "/keys/adm")).json()).toEqual({ removed: true });
    expect(sim.state.getKey("adm")).toBeUndefined();
  });

  test("faults and request log over HTTP", async () => {
    sim = await startSim([{ key: "k1", diemMicro: 5_000_000n }]);
    const injected = await admin(sim, "POST", "/faults", { key: "*", fault: { kind: "http_503", count: 1 } });
    const { id } = (await injected.json()) as { id: string };
    expect(id).toMatch(/^flt_/);
    const faults = (await (await admin(sim, "GET", "/faults")).json()) as { data: { id: string; remaining: number }[] };
    expect(faults.data).toMatchObject([{ id, remaining: 1, kind: "http_503", target: "*" }]);
    expect((await admin(sim, "POST", "/faults", { key: "k1", fault: { kind: "explode" } })).status).toBe(400);

    expect((await post(sim, "/chat/completions", { model: "qwen3-4b", messages: userMessage("a") })).status).toBe(503);
    expect((await post(sim, "/chat/completions", { model: "qwen3-4b", messages: userMessage("b") })).status).toBe(200);

    await admin(sim, "POST", "/faults", { key: "k1", kind: "http_500" });
    expect(await (await admin(sim, "DELETE", "/faults?key=k1")).json()).toEqual({ cleared: 1 });

    const log = (await (await admin(sim, "GET", "/requests?key=k1&route=/chat/completions")).json()) as {
      data: { status: number; fault: string | null; burnMicroDiem: string; startedAt: string; model: string }[];
    };
    expect(log.data.map((r) => r.status)).toEqual([503, 200]);
    expect(log.data[0]).toMatchObject({ fault: "http_503", burnMicroDiem: "0", model: "qwen3-4b" });
    expect(BigInt(log.data[1]?.burnMicroDiem ?? "0")).toBe(sim.state.listRequests()[1]?.burnMicroDiem);
    expect(BigInt(log.data[1]?.burnMicroDiem ?? "0")).toBeGreaterThan(0n);
    expect(Number.isNaN(Date.parse(log.data[0]?.startedAt ?? ""))).toBe(false);

    expect((await admin(sim, "DELETE", "/requests")).status).toBe(200);
    expect(sim.state.listRequests()).toHaveLength(0);
  });

  test("clock: read, advance and set", async () => {
    const base = new Date("2026-05-10T12:00:00.000Z");
    sim = await startSim([], () => base);
    expect(await (await admin(sim, "GET", "/clock")).json()).toEqual({
      now: "2026-05-10T12:00:00.000Z",
      nextEpochBegins: "2026-05-11T00:00:00.000Z",
    });
    expect(await (await admin(sim, "POST", "/clock", { advanceMs: 13 * 3_600_000 })).json()).toEqual({
      now: "2026-05-11T01:00:00.000Z",
      nextEpochBegins: "2026-05-12T00:00:00.000Z",
    });
    expect(await (await admin(sim, "POST", "/clock", { set: "2026-06-01T08:00:00.000Z" })).json()).toMatchObject({
      now: "2026-06-01T08:00:00.000Z",
    });
    expect((await admin(sim, "POST", "/clock", {})).status).toBe(400);
  });
});

describe("epoch reset at 00:00 UTC", () => {
  test("DIEM returns to the allocation, the cap's spend resets, USD is untouched", async () => {
    sim = await startSim(
      [{ key: "k1", diemMicro: 2_000_000n, usdMicro: 700_000n, diemCapMicro: 1_000n, allocationMicro: 3_000_000n }],
      () => new Date("2026-03-01T23:59:00.000Z"),
    );
    const first = await post(sim, "/chat/completions", {
      model: "zai-org-glm-5-1",
      messages: userMessage("x".repeat(4000)),
    });
    expect(first.status).toBe(200);
    const spent = sim.state.getKey("k1");
    expect(spent?.spentDiemEpochMicro).toBeGreaterThanOrEqual(1_000n);
    expect(spent?.diemMicro).toBeLessThan(2_000_000n);
    expect((await post(sim, "/chat/completions", { model: "qwen3-4b", messages: userMessage("y") })).status).toBe(402);

    const before = (await (await get(sim, "/api_keys/rate_limits")).json()) as {
      data: { nextEpochBegins: string; accessPermitted: boolean };
    };
    expect(before.data).toMatchObject({ nextEpochBegins: "2026-03-02T00:00:00.000Z", accessPermitted: false });

    sim.state.advanceClock(60_000); // 00:00:00 on 2026-03-02
    expect(sim.state.getKey("k1")).toMatchObject({
      diemMicro: 3_000_000n,
      spentDiemEpochMicro: 0n,
      usdMicro: 700_000n,
      accessPermitted: true,
    });
    const after = (await (await get(sim, "/api_keys/rate_limits")).json()) as typeof before;
    expect(after.data).toMatchObject({ nextEpochBegins: "2026-03-03T00:00:00.000Z", accessPermitted: true });
    expect((await post(sim, "/chat/completions", { model: "qwen3-4b", messages: userMessage("y") })).status).toBe(200);
  });

  test("the injected clock alone triggers the reset (no admin call)", async () => {
    let now = new Date("2026-03-01T23:59:59.000Z");
    sim = await startSim([{ key: "k1", diemMicro: 10n }], () => now);
    expect(
      (await post(sim, "/chat/completions", { model: "zai-org-glm-5-1", messages: userMessage("go") })).status,
    ).toBe(200);
    expect(
      (await post(sim, "/chat/completions", { model: "zai-org-glm-5-1", messages: userMessage("go") })).status,
    ).toBe(402);
    now = new Date("2026-03-02T00:00:01.000Z");
    const res = await post(sim, "/chat/completions", { model: "zai-org-glm-5-1", messages: userMessage("go") });
    expect(res.status).toBe(200);
    expect(res.headers.get("x-venice-balance-diem")).toBe("0.00001");
  });
});
