// Operability (issue 18): GET /metrics in Prometheus form — HTTP answers by route pattern, clears by
// modality, fall-forwards, scrape-time gauges — and /readyz failing when a dependency is gone.
import { describe, expect } from "vitest";
import { fileWorld, appTest as test } from "../../../testkit/app-test.js";
import { addSupply, chat, fundedBuyerKey } from "../../../testkit/market.js";
import { withApp } from "../../../testkit/world.js";

// the fold waits a minute, so a clear is read unfolded (its slices still count its charge)
test.override("appOptions", { sim: {}, syncCatalog: true, env: { ESCROW_FOLD_MS: "60000" } });
const world = fileWorld(test);

async function scrape(): Promise<string> {
  const res = await fetch(`${world.app.baseUrl}/metrics`);
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toMatch(/^text\/plain/);
  return res.text();
}

/** The value of one sample line (name with its labels exactly as exposed), or 0 when absent. */
function sample(text: string, line: string): number {
  const hit = text.split("\n").find((l) => l.startsWith(`${line} `));
  return hit ? Number(hit.slice(line.length + 1)) : 0;
}

describe("GET /metrics", () => {
  test("a clear, a fall-forward and the HTTP answers are counted; gauges are read at scrape time", async () => {
    const supply = await addSupply(world.app, world.sim, [
      { priceCents: 30, quantityMicroDiem: 50_000_000n },
      { priceCents: 31, quantityMicroDiem: 50_000_000n },
    ]);
    world.app.rt.services.inference.invalidateBook();
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const before = await scrape();
    // the cheaper key fails once: the request falls forward to the next and clears there
    const first = supply.keys[0];
    if (!first) throw new Error("no key");
    world.sim.state.injectFault(first.secret, { kind: "http_500", count: 1 });
    const r = await chat(world.app, buyer.apiKey, {
      model: "zai-org-glm-5-1",
      messages: [{ role: "user", content: "hi" }],
    });
    expect(r.status).toBe(200);
    const bad = await fetch(`${world.app.baseUrl}/v1/models/no-such-model`);
    expect(bad.status).toBe(404);
    const after = await scrape();
    expect(
      sample(after, 'svc_clears_total{modality="text"}') - sample(before, 'svc_clears_total{modality="text"}'),
    ).toBe(1);
    expect(
      sample(after, 'svc_fall_forwards_total{kind="retryable"}') -
        sample(before, 'svc_fall_forwards_total{kind="retryable"}'),
    ).toBe(1);
    const chatCount =
      'svc_http_request_duration_seconds_count{route="/v1/chat/completions",method="POST",status="200"}';
    expect(sample(after, chatCount) - sample(before, chatCount)).toBe(1);
    // the route pattern, never the raw path
    expect(after).toContain('route="/v1/models/:id",method="GET",status="404"');
    expect(after).not.toContain("no-such-model");
    // scrape-time gauges and Node's own
    expect(after).toMatch(/^svc_escrow_held\{side="buyer_micro_usdc"\} \d+/m);
    expect(after).toMatch(/^svc_queue_depth\{queue="video"\} \d+/m);
    expect(after).toMatch(/^svc_reconciliation_backlog \d+/m);
    expect(after).toMatch(/^svc_process_resident_memory_bytes \d+/m);
    // no read replica configured: no replica gauge (a lag of 0 would claim a replica that is not there)
    expect(after).not.toContain("svc_read_replica_");
    // aggregates only: no key, wallet or account in the exposition
    expect(after).not.toContain(buyer.apiKey);
    expect(after).not.toContain(buyer.accountId);
  });
});

describe("svc_escrow_held", () => {
  test("what slices hold less their unfolded charges: unchanged by the fold", async () => {
    await addSupply(world.app, world.sim, [{ priceCents: 40, quantityMicroDiem: 50_000_000n }]);
    world.app.rt.services.inference.invalidateBook();
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const r = await chat(world.app, buyer.apiKey, {
      model: "zai-org-glm-5-1",
      messages: [{ role: "user", content: "Hello [[sim:tokens=40]]" }],
    });
    expect(r.status).toBe(200);
    const slices = async () => {
      const [s] = await world.app.rt.db.$queryRaw<
        { ba: bigint; bc: bigint; oa: bigint; oc: bigint }[]
      >`SELECT (SELECT COALESCE(sum(amount_micro_usdc), 0) FROM buyer_escrows)::bigint AS ba,
               (SELECT COALESCE(sum(charged_micro_usdc), 0) FROM buyer_escrows)::bigint AS bc,
               (SELECT COALESCE(sum(amount_micro_diem), 0) FROM offer_escrows)::bigint AS oa,
               (SELECT COALESCE(sum(charged_micro_diem), 0) FROM offer_escrows)::bigint AS oc`;
      if (!s) throw new Error("no sums");
      return s;
    };
    const held = (text: string) => ({
      buyer: sample(text, 'svc_escrow_held{side="buyer_micro_usdc"}'),
      offer: sample(text, 'svc_escrow_held{side="offer_micro_diem"}'),
    });
    // unfolded: the slices still hold the charge and count it, and the gauge leaves it out
    const unfolded = await slices();
    const gross = BigInt(Math.round(Number(r.headers.get("x-svc-cost-usdc")) * 1e6));
    expect(gross).toBeGreaterThan(0n);
    expect(unfolded.bc).toBeGreaterThanOrEqual(gross);
    expect(unfolded.oc).toBeGreaterThan(0n);
    const before = held(await scrape());
    expect(before).toEqual({ buyer: Number(unfolded.ba - unfolded.bc), offer: Number(unfolded.oa - unfolded.oc) });
    expect(before.buyer).toBeLessThan(Number(unfolded.ba));
    // the fold takes the charges out of the slices: what is held stays what it was
    await world.app.rt.services.inference.escrow.fold();
    const folded = await slices();
    expect([folded.bc, folded.oc]).toEqual([0n, 0n]);
    expect(held(await scrape())).toEqual(before);
    expect(before).toEqual({ buyer: Number(folded.ba), offer: Number(folded.oa) });
  });
});

describe("svc_escrow_holders_expired", () => {
  test("a holder whose lease expired counts until the sweeper releases it; a live one never does", async () => {
    const db = world.app.rt.db;
    const now = world.app.rt.clock.now();
    const gauge = async () => sample(await scrape(), "svc_escrow_holders_expired");
    const base = await gauge();
    // a process that died a minute after its last heartbeat, and one alive
    const dead = await db.escrowHolder.create({
      data: { id: crypto.randomUUID(), expiresAt: new Date(now.getTime() - 60_000) },
    });
    await db.escrowHolder.create({ data: { id: crypto.randomUUID(), expiresAt: new Date(now.getTime() + 60_000) } });
    expect(await gauge()).toBe(base + 1);
    expect((await world.app.rt.services.inference.escrow.releaseExpired()).released).toBeGreaterThanOrEqual(1);
    expect(await db.escrowHolder.findUnique({ where: { id: dead.id } })).toBeNull();
    expect(await gauge()).toBe(0);
  });
});

describe("GET /readyz", () => {
  test("200 while Postgres and Redis answer; 503 once Redis is gone", async () => {
    const ok = await fetch(`${world.app.baseUrl}/readyz`);
    expect([ok.status, await ok.text()]).toEqual([200, "ready\n"]);
    expect(ok.headers.get("retry-after")).toBeNull();
    // a runtime of its own, whose Redis command connection is then closed
    await withApp(
      {
        beside: world.app,
        prefix: `${world.app.rt.config.redis.prefix}-readyz`,
        env: { UPSTREAM_BASE_URL: world.sim.baseUrl },
        closeMayFail: true,
      },
      async (other) => {
        other.rt.redis.command.disconnect();
        const down = await fetch(`${other.baseUrl}/readyz`);
        expect([down.status, await down.text()]).toEqual([503, "not ready\n"]);
        // every 503 carries Retry-After (issue 40)
        expect(down.headers.get("retry-after")).toBe("1");
      },
    );
  });
});
