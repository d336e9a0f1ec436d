// Fall-forward across supplier keys (SPEC "What the service does" 4), on the pipeline over the
// project's SQL stores (testkit/market-pipeline.ts: a database cloned from the migrated template):
// which keys are tried, in which order, how each failure marks its key, the five-key cap and a lost
// answer. The upstream is scripted; test/integration/inference runs the same over HTTP and the
// upstream simulator.
import { afterEach, describe, expect, test } from "vitest";
import type { UpstreamFailure } from "../../../src/adapters/upstream/client.js";
import { Attempted, type AttemptResult } from "../../../src/domain/inference/pipeline/attempt-loop.js";
import type { AttemptScope, Usage } from "../../../src/domain/inference/pipeline/session.js";
import { MAX_ATTEMPTS } from "../../../src/domain/inference/routing/clearing.js";
import { type Answered, answered } from "../../../src/domain/inference/routing/lanes.js";
import { CONFIRM_INTERVAL_MS, EXHAUSTED_COOLDOWN_MS } from "../../../src/domain/inference/routing/supplier-keys.js";
import { DomainError } from "../../../src/lib/errors.js";
import { type MarketWorld, marketPipeline, openText, useMarketDb } from "../../../testkit/market-pipeline.js";

const USAGE: Usage = { promptTokens: 30, completionTokens: 10 };
const PRICES = [30, 35, 40, 45, 50, 55];

const marketDb = useMarketDb();
let world: MarketWorld;
afterEach(async () => {
  await world?.pipeline.close();
});

/** A buyer and one offer (on its own key) per price; the keys by price. */
async function market(prices = PRICES, o: Parameters<typeof marketPipeline>[1] = {}) {
  world = await marketPipeline(marketDb(), o);
  const buyer = await world.market.addBuyer({ confirmedMicroUsdc: 10_000_000n, ceilingCents: 80 });
  const keys = new Map<number, string>();
  for (const priceCents of prices) {
    keys.set(priceCents, (await world.market.addOffer({ priceCents, quantityMicroDiem: 50_000_000n })).upstreamKeyId);
  }
  const keyAt = (price: number) => keys.get(price) as string;
  return { buyer, keyAt };
}

/** A call that answers with `script[i]` on the i-th attempt (then settles), noting each attempt's key. */
function scripted(script: Array<UpstreamFailure | "lost" | "ok">) {
  const tried: string[] = [];
  const call = async ({ attempt }: AttemptScope): Promise<AttemptResult<Answered<string>>> => {
    const step = script[tried.length] ?? "ok";
    tried.push(attempt.upstreamKeyId);
    if (step === "ok") return answered({ kind: "settled", usage: USAGE }, "answer");
    if (step === "lost") return Attempted.lost("timeout", new DomainError("upstream_error", "The answer was lost."));
    return Attempted.failed(step);
  };
  return { tried, call };
}

const fail = (kind: UpstreamFailure["kind"], status?: number): UpstreamFailure => ({ kind, status, message: kind });

/** The one ended request (the record written with its ending); `after` records are skipped. */
async function record(after = 0) {
  const [item, ...more] = (await world.market.requests()).slice(after);
  expect(more).toEqual([]);
  if (!item) throw new Error("no request recorded");
  return item;
}

/** Each attempt of the one ended request: its key, outcome and upstream status. */
const attemptsOf = async () => (await record()).attempts.map((a) => [a.upstreamKeyId, a.outcome, a.upstreamStatus]);
const outcomes = async () => (await record()).attempts.map((a) => a.outcome);

/** Nothing is held once the request ended: no gate slot, no escrow reservation (live figures). */
async function expectNothingHeld() {
  expect(world.gates.held()).toEqual([]);
  const r = await world.market.sql.query<{ n: bigint }>(
    `SELECT (SELECT count(*) FROM accounts a CROSS JOIN LATERAL svc_account_live(a.id) l WHERE l.reserved <> 0)
          + (SELECT count(*) FROM offers o LEFT JOIN svc_offers_unfolded(ARRAY[o.id]) u ON true
              WHERE o.reserved_micro_diem - COALESCE(u.burn, 0) <> 0) AS n`,
  );
  expect(r.rows[0]?.n).toBe(0n);
}

describe("fall-forward to the next cheapest offer", () => {
  test("a 401 marks the key auth_failed (no cooldown) and the next cheapest offer answers", async () => {
    const { buyer, keyAt } = await market();
    const { tried, call } = scripted([fail("auth", 401)]);
    const { settled } = await world.pipeline.run(await openText(world, buyer), call);
    expect(tried).toEqual([keyAt(30), keyAt(35)]);
    expect(settled.clearingPriceCents).toBe(35);
    expect(await world.market.upstreamKey(keyAt(30))).toMatchObject({ status: "auth_failed", cooldownUntil: null });
    expect((await world.market.upstreamKey(keyAt(35))).status).toBe("active");
    expect(await attemptsOf()).toEqual([
      [keyAt(30), "supplier_auth_failed", 401],
      [keyAt(35), "succeeded", null],
    ]);
    expect(await record()).toMatchObject({ status: "succeeded", clearingPriceCents: 35, attemptCount: 2 });
    await expectNothingHeld();
    // the marked key is out of routing: the next request starts on the next offer
    const next = scripted([]);
    await world.pipeline.run(await openText(world, buyer), next.call);
    expect(next.tried).toEqual([keyAt(35)]);
  });

  test("a 402 cools the key down for EXHAUSTED_COOLDOWN_MS and asks for its balance; it routes again after", async () => {
    const { buyer, keyAt } = await market();
    const { tried, call } = scripted([fail("payment", 402)]);
    const at = world.clock.now().getTime();
    const { settled } = await world.pipeline.run(await openText(world, buyer), call);
    expect(tried).toEqual([keyAt(30), keyAt(35)]);
    expect(settled.clearingPriceCents).toBe(35);
    expect(await world.market.upstreamKey(keyAt(30))).toMatchObject({
      status: "active",
      cooldownUntil: new Date(at + EXHAUSTED_COOLDOWN_MS),
    });
    expect(world.refreshed).toEqual([keyAt(30)]);
    expect(await outcomes()).toEqual(["supplier_exhausted", "succeeded"]);
    // cooling down: skipped…
    const during = scripted([]);
    world.clock.advance(EXHAUSTED_COOLDOWN_MS - 1);
    await world.pipeline.run(await openText(world, buyer), during.call);
    expect(during.tried).toEqual([keyAt(35)]);
    // …until the clock passes the cooldown
    world.clock.advance(1);
    world.pipeline.invalidateBook();
    const after = scripted([]);
    await world.pipeline.run(await openText(world, buyer), after.call);
    expect(after.tried).toEqual([keyAt(30)]);
  });

  test.each([
    ["a 5xx", fail("server", 503)],
    ["a 429", fail("rate_limited", 429)],
    ["a timeout", fail("timeout")],
    ["a reset connection", fail("network")],
  ])("%s falls forward to a key not tried yet and leaves the key as it is", async (_name, failure) => {
    const { buyer, keyAt } = await market();
    const { tried, call } = scripted([failure]);
    await world.pipeline.run(await openText(world, buyer), call);
    // the failed key is still the cheapest and routable, but a request never tries a key twice
    expect(tried).toEqual([keyAt(30), keyAt(35)]);
    expect(await world.market.upstreamKey(keyAt(30))).toMatchObject({ status: "active", cooldownUntil: null });
    expect(world.refreshed).toEqual([]);
    expect(await outcomes()).toEqual(["retryable_failure", "succeeded"]);
    await expectNothingHeld();
  });

  test("the buyer's own 4xx is relayed: no other key is tried, none is marked, nothing is charged", async () => {
    const { buyer, keyAt } = await market();
    const { tried, call } = scripted([fail("request", 400)]);
    const session = await openText(world, buyer);
    const err = await world.pipeline.run(session, call).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DomainError);
    expect(err).toMatchObject({ code: "invalid_request", details: { supportReference: session.supportReference } });
    expect(tried).toEqual([keyAt(30)]);
    expect(await world.market.upstreamKey(keyAt(30))).toMatchObject({ status: "active", cooldownUntil: null });
    expect(await record()).toMatchObject({ status: "failed", errorCode: "invalid_request", clearId: null });
    expect(await outcomes()).toEqual(["request_rejected"]);
    expect((await world.market.account(buyer.accountId)).confirmedMicroUsdc).toBe(10_000_000n);
    await expectNothingHeld();
  });
});

describe("issue 39: a refusal blames the key only when the key is at fault", () => {
  const refused = (reason: UpstreamFailure["reason"], status: number): UpstreamFailure => ({
    kind: "request",
    status,
    reason,
    message: String(reason),
  });

  test.each([
    ["a region-restricted model", refused("region_restricted", 403), "model_region_restricted"],
    ["the alpha-only Responses API", refused("alpha_only", 401), "upstream_access_denied"],
    ["a Pro-only model", refused("pro_only", 401), "upstream_access_denied"],
  ])("%s: answered 403 at once, no other key asked, the key untouched and still routed", async (_, f, code) => {
    const { buyer, keyAt } = await market();
    const { tried, call } = scripted([f]);
    const err = await world.pipeline.run(await openText(world, buyer), call).catch((e: unknown) => e);
    expect(err).toMatchObject({ code, status: 403, details: { upstreamStatus: f.status } });
    expect(tried).toEqual([keyAt(30)]);
    expect(await world.market.upstreamKey(keyAt(30))).toMatchObject({ status: "active", cooldownUntil: null });
    expect(world.confirmed).toEqual([]);
    expect(await outcomes()).toEqual(["request_rejected"]);
    await expectNothingHeld();
    const next = scripted([]);
    await world.pipeline.run(await openText(world, buyer), next.call);
    expect(next.tried).toEqual([keyAt(30)]);
  });

  test("an unclear 401/403 confirms the key; a valid one stays routed, asked again only after CONFIRM_INTERVAL_MS", async () => {
    const { buyer, keyAt } = await market();
    const first = scripted([fail("auth_unclear", 403)]);
    await world.pipeline.run(await openText(world, buyer), first.call);
    expect(first.tried).toEqual([keyAt(30), keyAt(35)]);
    expect(world.confirmed).toEqual([keyAt(30)]);
    expect(await world.market.upstreamKey(keyAt(30))).toMatchObject({ status: "active", cooldownUntil: null });
    expect(await outcomes()).toEqual(["retryable_failure", "succeeded"]);
    // the same refusal again within the interval: no second read of the key
    const again = scripted([fail("auth_unclear", 403)]);
    await world.pipeline.run(await openText(world, buyer), again.call);
    expect(again.tried).toEqual([keyAt(30), keyAt(35)]);
    expect(world.confirmed).toEqual([keyAt(30)]);
    world.clock.advance(CONFIRM_INTERVAL_MS);
    await world.pipeline.run(await openText(world, buyer), scripted([fail("auth_unclear", 401)]).call);
    expect(world.confirmed).toEqual([keyAt(30), keyAt(30)]);
    expect((await world.market.upstreamKey(keyAt(30))).status).toBe("active");
  });

  test("an unclear refusal by a revoked key: its confirmation marks it before the next attempt", async () => {
    let revoked = "";
    const { buyer, keyAt } = await market(PRICES, { revoked: (id) => id === revoked });
    revoked = keyAt(30);
    const { tried, call } = scripted([fail("auth_unclear", 401)]);
    await world.pipeline.run(await openText(world, buyer), call);
    expect(tried).toEqual([keyAt(30), keyAt(35)]);
    expect((await world.market.upstreamKey(keyAt(30))).status).toBe("auth_failed");
    const next = scripted([]);
    await world.pipeline.run(await openText(world, buyer), next.call);
    expect(next.tried).toEqual([keyAt(35)]);
  });
});

describe("the attempt cap", () => {
  test(`at most MAX_ATTEMPTS (${MAX_ATTEMPTS}) distinct keys, cheapest first; then 502 upstream_error, nothing charged`, async () => {
    const { buyer, keyAt } = await market();
    const { tried, call } = scripted(PRICES.map(() => fail("server", 500)));
    const session = await openText(world, buyer);
    const err = await world.pipeline.run(session, call).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: "upstream_error", details: { supportReference: session.supportReference } });
    expect(tried).toEqual(PRICES.slice(0, MAX_ATTEMPTS).map(keyAt));
    expect(tried).not.toContain(keyAt(55));
    expect(await record()).toMatchObject({ status: "failed", errorCode: "upstream_error", attemptCount: MAX_ATTEMPTS });
    expect(await outcomes()).toEqual(Array(MAX_ATTEMPTS).fill("retryable_failure"));
    expect(await world.market.clears()).toEqual([]);
    expect((await world.market.account(buyer.accountId)).confirmedMicroUsdc).toBe(10_000_000n);
    await expectNothingHeld();
  });

  test("the fifth key may answer", async () => {
    const { buyer, keyAt } = await market();
    const { tried, call } = scripted(PRICES.slice(0, MAX_ATTEMPTS - 1).map(() => fail("payment", 402)));
    const { settled } = await world.pipeline.run(await openText(world, buyer), call);
    expect(tried).toHaveLength(MAX_ATTEMPTS);
    expect(settled.clearingPriceCents).toBe(PRICES[MAX_ATTEMPTS - 1]);
    expect(world.refreshed).toEqual(PRICES.slice(0, MAX_ATTEMPTS - 1).map(keyAt));
  });
});

describe("an answer that may be lost", () => {
  test("is never retried on another key: the request ends 502, nothing charged, the key not marked", async () => {
    const { buyer, keyAt } = await market();
    const { tried, call } = scripted(["lost"]);
    const session = await openText(world, buyer);
    const err = await world.pipeline.run(session, call).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: "upstream_error", details: { supportReference: session.supportReference } });
    expect(tried).toEqual([keyAt(30)]);
    expect(await record()).toMatchObject({ status: "failed", errorCode: "upstream_answer_lost", clearId: null });
    expect((await record()).attempts).toMatchObject([
      { outcome: "retryable_failure", errorKind: "answer lost: timeout" },
    ]);
    expect(await world.market.upstreamKey(keyAt(30))).toMatchObject({ status: "active", cooldownUntil: null });
    expect((await world.market.account(buyer.accountId)).confirmedMicroUsdc).toBe(10_000_000n);
    await expectNothingHeld();
  });
});

describe("borrowed keys (a video quote) fall forward on the same key-health path", () => {
  const refuse = (why: string) => new DomainError("pool_empty", `refused: ${why}`);

  test("a 402 cools the borrowed key down, a 401 marks it; the next cheapest is asked; each is given back", async () => {
    const { keyAt } = await market();
    const asked: string[] = [];
    const at = world.clock.now().getTime();
    const answer = await world.pipeline.runBorrowed({ ceilingCents: 80, waitForKey: false, refuse }, async (key) => {
      asked.push(key.upstreamKeyId);
      if (asked.length === 1) return Attempted.failed(fail("payment", 402));
      if (asked.length === 2) return Attempted.failed(fail("auth", 403));
      return Attempted.ok("quote");
    });
    expect(answer).toBe("quote");
    expect(asked).toEqual([keyAt(30), keyAt(35), keyAt(40)]);
    expect((await world.market.upstreamKey(keyAt(30))).cooldownUntil).toEqual(new Date(at + EXHAUSTED_COOLDOWN_MS));
    expect((await world.market.upstreamKey(keyAt(35))).status).toBe("auth_failed");
    expect(world.gates.held()).toEqual([]);
  });

  test(`after MAX_ATTEMPTS keys failed: refused "exhausted"`, async () => {
    await market();
    const asked: string[] = [];
    const err = await world.pipeline
      .runBorrowed({ ceilingCents: 80, waitForKey: false, refuse }, async (key) => {
        asked.push(key.upstreamKeyId);
        return Attempted.failed(fail("server", 502));
      })
      .catch((e: unknown) => e);
    expect(err).toMatchObject({ message: "refused: exhausted" });
    expect(asked).toHaveLength(MAX_ATTEMPTS);
    expect(world.gates.held()).toEqual([]);
  });
});
