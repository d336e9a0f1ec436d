// Idle escrow slices linger (issue 19; docs/decisions.md "Idle slices linger"): a buyer's next
// request within the linger period is admitted in memory (no top-up before the upstream call); the
// slice goes back by itself once idle for the period; a lingering slice is admitted against exactly
// as a busy one (a revoked key, another process's pressure); a give-back never moves what the sweeper
// already released; a clean shutdown gives lingering slices back. Books balanced throughout.
import { describe, expect } from "vitest";
import { loadConfig } from "../../../src/config.js";
import { parseDecimal6 } from "../../../src/lib/money.js";
import { fileWorld, appTest as test } from "../../../testkit/app-test.js";
import { assertBooksBalance } from "../../../testkit/books.js";
import { expectHoldsReleased } from "../../../testkit/holds.js";
import { addSupply, chat, confirmedOf, fundedBuyerKey, reservedOf, withdrawSupply } from "../../../testkit/market.js";
import { withApp } from "../../../testkit/world.js";

const LINGER_MS = 1_500;
test.override("appOptions", { sim: {}, syncCatalog: true, peer: true, env: { ESCROW_LINGER_MS: String(LINGER_MS) } });
const world = fileWorld(test);
const MODEL = "zai-org-glm-5-1";
const MSG = { model: MODEL, messages: [{ role: "user", content: "hello" }], max_tokens: 64 };

const costOf = (r: { headers: Headers }) => parseDecimal6(r.headers.get("x-svc-cost-usdc") ?? "") ?? 0n;

/** Waits (up to 3 × the linger) until nothing is held for the buyer any more. */
async function lingerOver(accountId: string): Promise<void> {
  await expect
    .poll(
      async () => (await reservedOf(world.app, accountId)) === 0n && (await world.app.rt.db.offerEscrow.count()) === 0,
      {
        timeout: 3 * LINGER_MS,
        interval: 50,
      },
    )
    .toBe(true);
}

async function supply(priceCents = 40) {
  const s = await addSupply(world.app, world.sim, [{ priceCents, quantityMicroDiem: 200_000_000n }]);
  world.app.rt.services.inference.invalidateBook();
  world.peer.rt.services.inference.invalidateBook();
  return s;
}

describe("lingering escrow slices", () => {
  test("the default linger is 1 s; 0 gives an idle slice back in the ending", () => {
    const load = (env: Record<string, string>) => {
      const r = loadConfig({ DATABASE_URL: "postgresql://x@127.0.0.1/x", ...env }, { mode: "local" });
      if (!r.ok) throw new Error(r.errors.join("\n"));
      return r.config.limits.escrowLingerMs;
    };
    expect(load({})).toBe(1_000);
    expect(load({ ESCROW_LINGER_MS: "0" })).toBe(0);
    expect(
      loadConfig({ DATABASE_URL: "postgresql://x@127.0.0.1/x", ESCROW_LINGER_MS: "-1" }, { mode: "local" }).ok,
    ).toBe(false);
  });

  test("serial requests from one buyer: only the first tops up; the slice stays, then goes back by itself", async () => {
    const s = await supply();
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const router = world.app.rt.services.inference;
    const before = router.batchStats().escrow;
    let spent = 0n;
    for (let i = 0; i < 6; i++) {
      const r = await chat(world.app, buyer.apiKey, MSG);
      expect(r.status).toBe(200);
      spent += costOf(r);
    }
    // the slice has been idle since the last ending, before its answer came back: count from here,
    // not after the checks below (a loaded machine spends part of the linger period on them)
    const idleFrom = Date.now();
    const after = router.batchStats().escrow;
    expect(after.admitted - before.admitted).toBe(6);
    expect(after.takes - before.takes).toBe(1);
    expect(after.inMemory - before.inMemory).toBe(5);
    // right after the last request the process still holds the buyer's slice and the offer's
    expect(await reservedOf(world.app, buyer.accountId)).toBeGreaterThan(0n);
    expect(await world.app.rt.db.buyerEscrow.count({ where: { accountId: buyer.accountId } })).toBe(1);
    expect(await confirmedOf(world.app, buyer.accountId)).toBe(5_000_000n - spent);
    await assertBooksBalance(world.app.rt.db);
    // idle for the linger period: everything goes back, nothing more is charged
    await lingerOver(buyer.accountId);
    expect(Date.now() - idleFrom).toBeGreaterThanOrEqual(LINGER_MS - 100);
    await expectHoldsReleased(world.app, buyer.accountId);
    expect(await confirmedOf(world.app, buyer.accountId)).toBe(5_000_000n - spent);
    await assertBooksBalance(world.app.rt.db);
    await withdrawSupply(world.app, s);
  });

  test("a revoked key is refused although its buyer's slice lingers in the process", async () => {
    const s = await supply();
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    expect((await chat(world.peer, buyer.apiKey, MSG)).status).toBe(200);
    expect(await reservedOf(world.app, buyer.accountId)).toBeGreaterThan(0n);
    const keyId = (await world.app.rt.db.apiKey.findFirstOrThrow({ where: { accountId: buyer.accountId } })).id;
    await world.app.rt.services.apiKeys.revokeKey({
      actor: { accountId: buyer.accountId, credential: "session" },
      keyId,
    });
    await expect.poll(async () => (await chat(world.peer, buyer.apiKey, MSG)).status, { timeout: 5_000 }).toBe(401);
    await lingerOver(buyer.accountId);
    await assertBooksBalance(world.app.rt.db);
    await withdrawSupply(world.app, s);
  });

  test("another process refused for want of the balance gets a lingering slice back at once (escrow pressure)", async () => {
    const s = await supply();
    // the balance covers one request's maximum at the ceiling and little more: the first process's
    // slice takes all of it and keeps it while idle
    const buyer = await fundedBuyerKey(world.app, 60_000n);
    const body = { ...MSG, max_tokens: 4_000 };
    const first = await chat(world.app, buyer.apiKey, body);
    expect(first.status, JSON.stringify(first.body)).toBe(200);
    const left = 60_000n - costOf(first);
    expect(await reservedOf(world.app, buyer.accountId)).toBe(left);
    const startedAt = Date.now();
    const second = await chat(world.peer, buyer.apiKey, body);
    expect(second.status, JSON.stringify(second.body)).toBe(200);
    // well inside the linger period: the slice came back through pressure, not the timer
    expect(Date.now() - startedAt).toBeLessThan(LINGER_MS);
    expect(await confirmedOf(world.app, buyer.accountId)).toBe(left - costOf(second));
    await lingerOver(buyer.accountId);
    await assertBooksBalance(world.app.rt.db);
    await withdrawSupply(world.app, s);
  });

  test("a give-back after the sweeper released the slices moves nothing twice; the process registers anew", async () => {
    const s = await supply();
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const router = world.app.rt.services.inference;
    expect((await chat(world.app, buyer.apiKey, MSG)).status).toBe(200);
    expect(await reservedOf(world.app, buyer.accountId)).toBeGreaterThan(0n);
    // the process stalls past its lease: the sweeper gives its slices back
    await world.app.rt.db.escrowHolder.updateMany({ data: { expiresAt: new Date(Date.now() - 1_000) } });
    const { released } = await router.escrow.releaseExpired();
    expect(released).toBeGreaterThan(0);
    await expectHoldsReleased(world.app, buyer.accountId);
    // the lingered slices' own give-back comes later and finds nothing to move
    await new Promise((r) => setTimeout(r, LINGER_MS + 100));
    await router.escrow.returnIdle();
    await expectHoldsReleased(world.app, buyer.accountId);
    await assertBooksBalance(world.app.rt.db);
    // the next request finds the lease gone, registers again and clears
    const next = await chat(world.app, buyer.apiKey, MSG);
    expect(next.status).toBe(200);
    await lingerOver(buyer.accountId);
    await assertBooksBalance(world.app.rt.db);
    await withdrawSupply(world.app, s);
  });

  test("many buyers on both processes at once: each pays exactly its own, and every slice goes back", async () => {
    const s = await supply();
    const buyers = await Promise.all(Array.from({ length: 6 }, () => fundedBuyerKey(world.app, 2_000_000n)));
    const spent = new Map<string, bigint>();
    await Promise.all(
      buyers.map(async (b, i) => {
        let total = 0n;
        for (let j = 0; j < 8; j++) {
          const r = await chat((i + j) % 2 === 0 ? world.app : world.peer, b.apiKey, MSG);
          expect(r.status).toBe(200);
          total += costOf(r);
        }
        spent.set(b.accountId, total);
      }),
    );
    await assertBooksBalance(world.app.rt.db);
    for (const b of buyers) {
      await lingerOver(b.accountId);
      expect(await confirmedOf(world.app, b.accountId)).toBe(2_000_000n - (spent.get(b.accountId) ?? 0n));
    }
    expect(await world.app.rt.db.buyerEscrow.count()).toBe(0);
    await assertBooksBalance(world.app.rt.db);
    await withdrawSupply(world.app, s);
  });

  test("a clean shutdown gives lingering slices back at once", async () => {
    const s = await supply();
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    await withApp(
      {
        beside: world.app,
        env: {
          UPSTREAM_BASE_URL: world.sim.baseUrl,
          ESCROW_LINGER_MS: "30000",
        },
      },
      async (third) => {
        expect((await chat(third, buyer.apiKey, MSG)).status).toBe(200);
        expect(await reservedOf(world.app, buyer.accountId)).toBeGreaterThan(0n);
      },
    );
    await expectHoldsReleased(world.app, buyer.accountId);
    await assertBooksBalance(world.app.rt.db);
    await withdrawSupply(world.app, s);
  });
});
