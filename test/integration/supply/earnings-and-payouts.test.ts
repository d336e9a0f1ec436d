import { describe, expect } from "vitest";
import { debitPayout } from "../../../src/domain/ledger/ledger.js";
import { PAYOUT_RESEND_AFTER_MS } from "../../../src/domain/supply/payouts.js";
import { utcDay } from "../../../src/lib/clock.js";
import type { LocalChain } from "../../../src/local/chain/index.js";
import { call, type SignedInUser, signIn } from "../../../testkit/actors.js";
import { appTest, fileWorld } from "../../../testkit/app-test.js";
import { assertBooksBalance } from "../../../testkit/books.js";
import { expectError } from "../../../testkit/errors.js";
import { createAccount, createOffer, createUpstreamKey } from "../../../testkit/fixtures.js";
import { chainEnv, startLocalChain, usdcBalance } from "../../../testkit/funding.js";
import { movableClock } from "../../../testkit/harness.js";
import { payableOf } from "../../../testkit/market.js";
import { as, creditClear, pinToHour } from "../../../testkit/supply.js";

/**
 * Supplier earnings (ledger, inference history) and the daily payout run against the local chain:
 * USDC moves from the treasury (PAY_TO, dev account 2) to the supplier's wallet.
 */
let chain: LocalChain;
const clock = movableClock();
const TREASURY_USDC = 1_000_000_000n; // 1000 USDC

// a fixture the world's options read: the chain starts first and stops after the apps close
const test = appTest
  // biome-ignore lint/correctness/noEmptyPattern: vitest reads a fixture's dependencies from this pattern
  .extend("chain", { scope: "file" }, async ({}, { onCleanup }) => {
    pinToHour(clock, 9);
    chain = await startLocalChain();
    onCleanup(() => chain.stop());
    const treasury = chain.devAccounts[2];
    if (!treasury) throw new Error("dev account 2 missing");
    await chain.mintUsdc(treasury.address, TREASURY_USDC);
    return chain;
  })
  .override("appOptions", ({ chain }) => ({
    env: chainEnv(chain, { PAYOUT_PRIVATE_KEY: chain.devAccounts[2]?.privateKey ?? "" }),
    clock,
    peer: true,
  }));
const world = fileWorld(test);

interface Supplier {
  user: SignedInUser;
  offerId: string;
  upstreamKeyId: string;
}

async function newSupplier(): Promise<Supplier> {
  const user = await signIn(world.app);
  const key = await createUpstreamKey(world.app.rt.db, user.accountId);
  const offer = await createOffer(world.app.rt.db, {
    accountId: user.accountId,
    upstreamKeyId: key.id,
    priceCentsPerDollar: 50,
    quantityMicroDiem: 100_000_000n,
  });
  return { user, offerId: offer.id, upstreamKeyId: key.id };
}

/** Earnings of `shareMicro` for the supplier (gross = share + 10% fee, rounded as a clear would). */
async function earn(s: Supplier, grossMicro: bigint, extra: { createdAt?: Date; model?: string } = {}) {
  const buyer = await createAccount(world.app.rt.db);
  const fee = grossMicro / 10n;
  const r = await creditClear(world.app.rt.db, {
    buyerAccountId: buyer.id,
    supplierAccountId: s.user.accountId,
    offerId: s.offerId,
    upstreamKeyId: s.upstreamKeyId,
    grossMicroUsdc: grossMicro,
    feeMicroUsdc: fee,
    ...extra,
  });
  return { ...r, buyer, share: grossMicro - fee };
}

async function ledger(user: SignedInUser, query = "") {
  const res = await call(world.app, { method: "GET", path: `/v1/supply/ledger${query}`, headers: as(user) });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body as {
    payableUsdc: string;
    paidOutUsdc: string;
    payoutPendingUsdc: string;
    recentPayouts: { status: string; amountUsdc: string; transaction: string | null; period: string }[];
    data: { id: string; kind: string; amountUsdc: string; transactionKind: string; createdAt: string }[];
    nextCursor: string | null;
  };
}

describe("supplier earnings", () => {
  test("GET /v1/supply/ledger: supplier_payable entries newest first, paginated, with the totals", async () => {
    const s = await newSupplier();
    await earn(s, 1_000_000n); // share 0.9
    await earn(s, 2_000_000n); // share 1.8
    await earn(s, 333_333n); // fee 33 333, share 300 000
    const l = await ledger(s.user);
    expect(l.payableUsdc).toBe("3.000000");
    expect(l.paidOutUsdc).toBe("0.000000");
    expect(l.recentPayouts).toEqual([]);
    expect(l.data.map((e) => e.amountUsdc)).toEqual(["0.300000", "1.800000", "0.900000"]);
    expect(l.data.every((e) => e.kind === "supplier_credit" && e.transactionKind === "clear")).toBe(true);
    expect(l.nextCursor).toBeNull();

    const p1 = await ledger(s.user, "?limit=2");
    expect(p1.data.map((e) => e.amountUsdc)).toEqual(["0.300000", "1.800000"]);
    expect(p1.nextCursor).not.toBeNull();
    const p2 = await ledger(s.user, `?limit=2&cursor=${p1.nextCursor}`);
    expect(p2.data.map((e) => e.amountUsdc)).toEqual(["0.900000"]);
    expect(p2.nextCursor).toBeNull();

    // another account sees none of it
    const other = await signIn(world.app);
    const o = await ledger(other);
    expect(o).toMatchObject({ payableUsdc: "0.000000", data: [] });
    await assertBooksBalance(world.app.rt.db);
  });

  test("GET /v1/supply/inference-history: the clears sold, newest first, never the buyer", async () => {
    const s = await newSupplier();
    const t0 = Date.now() - 60_000;
    const a = await earn(s, 1_000_000n, { createdAt: new Date(t0), model: "model-a" });
    const b = await earn(s, 2_000_000n, { createdAt: new Date(t0 + 1_000), model: "model-b" });
    const res = await call(world.app, {
      method: "GET",
      path: "/v1/supply/inference-history?limit=1",
      headers: as(s.user),
    });
    expect(res.status).toBe(200);
    const page = res.body as { data: Record<string, unknown>[]; nextCursor: string };
    expect(page.data).toHaveLength(1);
    expect(page.data[0]).toMatchObject({
      clearId: b.clearId,
      model: "model-b",
      modality: "text",
      priceCentsPerDollar: 50,
      burnDiem: "4.000000",
      grossUsdc: "2.000000",
      feeUsdc: "0.200000",
      earnedUsdc: "1.800000",
      refunded: false,
    });
    expect(Object.keys(page.data[0] ?? {}).sort()).toEqual(
      [
        "burnDiem",
        "clearId",
        "createdAt",
        "earnedUsdc",
        "feeUsdc",
        "grossUsdc",
        "modality",
        "model",
        "offerId",
        "priceCentsPerDollar",
        "refunded",
        "refundedAt",
        "upstreamKeyId",
      ].sort(),
    );
    const next = await call(world.app, {
      method: "GET",
      path: `/v1/supply/inference-history?limit=1&cursor=${page.nextCursor}`,
      headers: as(s.user),
    });
    const rows = (next.body as { data: { clearId: string }[] }).data;
    expect(rows.map((r) => r.clearId)).toEqual([a.clearId]);
    const text = JSON.stringify([res.body, next.body]);
    for (const secret of [
      a.buyer.id,
      a.buyer.walletAddress,
      b.buyer.id,
      b.buyer.walletAddress,
      a.requestId,
      b.requestId,
    ]) {
      expect(text).not.toContain(secret);
    }
    // the buyer sees nothing of it as a supplier
    const buyerView = await signIn(world.app);
    const none = await call(world.app, { method: "GET", path: "/v1/supply/inference-history", headers: as(buyerView) });
    expect((none.body as { data: unknown[] }).data).toEqual([]);
  });

  test("bad pagination values are 400", async () => {
    const s = await signIn(world.app);
    for (const path of [
      "/v1/supply/ledger?limit=0",
      "/v1/supply/ledger?limit=101",
      "/v1/supply/ledger?cursor=garbage",
      "/v1/supply/inference-history?limit=abc",
      "/v1/supply/inference-history?cursor=bm9wZQ",
      "/v1/supply/offers/mine?limit=0",
    ]) {
      expectError(await call(world.app, { method: "GET", path, headers: as(s) }), 400, "invalid_request", path);
    }
  });
});

describe("daily payouts", () => {
  test("pays suppliers at or above 1 USDC once per UTC day; confirms at depth; the books balance", async () => {
    const a = await newSupplier();
    const b = await newSupplier();
    await earn(a, 3_000_000n); // share 2.7 USDC
    await earn(b, 1_000_000n); // share 0.9 USDC: below the minimum
    const treasuryBefore = await usdcBalance(chain, chain.devAccounts[2]?.address ?? "");

    const run = await world.app.rt.services.earnings.runDailyPayouts();
    expect(run.paid).toBeGreaterThanOrEqual(1);
    expect(await usdcBalance(chain, a.user.walletAddress)).toBe(2_700_000n);
    expect(await usdcBalance(chain, b.user.walletAddress)).toBe(0n);
    expect(await payableOf(world.app, a.user.accountId)).toBe(0n);
    expect(await payableOf(world.app, b.user.accountId)).toBe(900_000n);
    const [payout] = await world.app.rt.db.payout.findMany({ where: { accountId: a.user.accountId } });
    expect(payout).toMatchObject({
      status: "submitted",
      amountMicroUsdc: 2_700_000n,
      period: utcDay(clock.now()),
      toAddress: a.user.walletAddress.toLowerCase(),
    });
    expect(payout?.txHash).toMatch(/^0x[0-9a-f]{64}$/);
    expect(await world.app.rt.db.payout.count({ where: { accountId: b.user.accountId } })).toBe(0);
    await assertBooksBalance(world.app.rt.db);

    // a second run the same day moves nothing more
    const again = await world.app.rt.services.earnings.runDailyPayouts();
    expect(again).toMatchObject({ paid: 0, created: 0 });
    expect(await usdcBalance(chain, a.user.walletAddress)).toBe(2_700_000n);
    expect(await world.app.rt.db.payout.count({ where: { accountId: a.user.accountId } })).toBe(1);

    // confirmation depth (CONFIRMATION_BLOCKS = 5 in tests)
    await chain.mine(5);
    const confirming = await world.app.rt.services.earnings.runDailyPayouts();
    expect(confirming.confirmed).toBeGreaterThanOrEqual(1);
    expect((await world.app.rt.db.payout.findFirstOrThrow({ where: { accountId: a.user.accountId } })).status).toBe(
      "confirmed",
    );
    const l = await ledger(a.user);
    expect(l).toMatchObject({ payableUsdc: "0.000000", paidOutUsdc: "2.700000", payoutPendingUsdc: "0.000000" });
    expect(l.data[0]).toMatchObject({ kind: "payout", amountUsdc: "-2.700000", transactionKind: "payout" });
    expect(l.recentPayouts[0]).toMatchObject({
      status: "confirmed",
      amountUsdc: "2.700000",
      transaction: payout?.txHash,
    });
    const treasuryAfter = await usdcBalance(chain, chain.devAccounts[2]?.address ?? "");
    expect(treasuryBefore - treasuryAfter).toBeGreaterThanOrEqual(2_700_000n);
    await assertBooksBalance(world.app.rt.db);

    // the next UTC day pays what accrued since
    await earn(a, 2_000_000n); // share 1.8
    await earn(b, 200_000n); // b now at 1.08
    clock.advance(24 * 3_600_000);
    await world.app.rt.services.earnings.runDailyPayouts();
    expect(await usdcBalance(chain, a.user.walletAddress)).toBe(4_500_000n);
    expect(await usdcBalance(chain, b.user.walletAddress)).toBe(1_080_000n);
    expect(await world.app.rt.db.payout.count({ where: { accountId: a.user.accountId } })).toBe(2);
    await assertBooksBalance(world.app.rt.db);
  });

  test("payout.sent goes to the supplier's endpoint with the recorded transfer, once, and nowhere else", async () => {
    const a = await newSupplier();
    const other = await newSupplier();
    await earn(a, 2_000_000n); // share 1.8 USDC
    const hooks = world.app.rt.services.webhooks;
    const url = "http://127.0.0.1:9/hooks"; // loopback: allowed in local mode; nothing is delivered here
    const mine = await hooks.register({
      accountId: a.user.accountId,
      credential: "session",
      url,
      events: ["payout.sent"],
    });
    const theirs = await hooks.register({
      accountId: other.user.accountId,
      credential: "session",
      url,
      events: ["payout.sent"],
    });

    await world.app.rt.services.earnings.runDailyPayouts();
    const payout = await world.app.rt.db.payout.findFirstOrThrow({ where: { accountId: a.user.accountId } });
    expect(payout.txHash).toMatch(/^0x[0-9a-f]{64}$/);
    const events = await world.app.rt.db.webhookEvent.findMany({ where: { endpointId: mine.webhook.id } });
    expect(events.map((e) => e.type)).toEqual(["payout.sent"]);
    expect(events[0]?.payload).toMatchObject({
      id: payout.id,
      period: payout.period,
      toAddress: a.user.walletAddress.toLowerCase(),
      amountUsdc: "1.800000",
      status: "submitted",
      transaction: payout.txHash,
    });
    // no secret of the treasury and nothing of another account in it
    expect(JSON.stringify(events[0]?.payload)).not.toMatch(/privateKey|PAYOUT_PRIVATE_KEY/);
    expect(await world.app.rt.db.webhookEvent.count({ where: { endpointId: theirs.webhook.id } })).toBe(0);

    // a second run the same day sends nothing, and so tells nothing
    await world.app.rt.services.earnings.runDailyPayouts();
    expect(await world.app.rt.db.webhookEvent.count({ where: { endpointId: mine.webhook.id } })).toBe(1);
    await assertBooksBalance(world.app.rt.db);
  });

  test("concurrent runs in two processes pay each supplier exactly once", async () => {
    const suppliers = await Promise.all(Array.from({ length: 3 }, () => newSupplier()));
    for (const s of suppliers) await earn(s, 2_000_000n);
    const runs = await Promise.all([
      world.app.rt.services.earnings.runDailyPayouts(),
      world.peer.rt.services.earnings.runDailyPayouts(),
      world.app.rt.services.earnings.runDailyPayouts(),
      world.peer.rt.services.earnings.runDailyPayouts(),
    ]);
    expect(runs.filter((r) => !r.busy).length).toBeGreaterThanOrEqual(1);
    // anything a busy run skipped is picked up by the next run
    await world.app.rt.services.earnings.runDailyPayouts();
    for (const s of suppliers) {
      expect(await usdcBalance(chain, s.user.walletAddress)).toBe(1_800_000n);
      expect(await world.app.rt.db.payout.count({ where: { accountId: s.user.accountId } })).toBe(1);
    }
    await assertBooksBalance(world.app.rt.db);
  });

  test("crash recovery: a recorded payout never sent is sent by the next run, once", async () => {
    const s = await newSupplier();
    await earn(s, 2_000_000n); // 1.8
    await recordPayout(s, 1_800_000n, null);
    await world.app.rt.services.earnings.runDailyPayouts();
    expect(await usdcBalance(chain, s.user.walletAddress)).toBe(1_800_000n);
    await world.app.rt.services.earnings.runDailyPayouts();
    expect(await usdcBalance(chain, s.user.walletAddress)).toBe(1_800_000n);
    const p = await world.app.rt.db.payout.findFirstOrThrow({ where: { accountId: s.user.accountId } });
    expect(p.status).toBe("submitted");
    await assertBooksBalance(world.app.rt.db);
  });

  test("crash recovery: a transfer sent but not recorded is found on chain and adopted, not sent again", async () => {
    const s = await newSupplier();
    await earn(s, 3_000_000n); // 2.7
    const p = await recordPayout(s, 2_700_000n, clock.now());
    // the crashed process's transfer reached the chain
    const sent = await world.app.rt.payoutChain?.transferUsdc({
      to: s.user.walletAddress as `0x${string}`,
      amountMicro: 2_700_000n,
    });
    if (!sent?.ok) throw new Error("transfer failed");

    await world.app.rt.services.earnings.runDailyPayouts(); // too early to touch an attempt in flight
    expect(await world.app.rt.db.payout.findUniqueOrThrow({ where: { id: p.id } })).toMatchObject({
      status: "pending",
      txHash: null,
    });
    clock.advance(PAYOUT_RESEND_AFTER_MS + 1_000);
    const run = await world.app.rt.services.earnings.runDailyPayouts();
    expect(run.adopted).toBe(1);
    expect(await world.app.rt.db.payout.findUniqueOrThrow({ where: { id: p.id } })).toMatchObject({
      status: "submitted",
      txHash: sent.value.txHash.toLowerCase(),
    });
    expect(await usdcBalance(chain, s.user.walletAddress)).toBe(2_700_000n);
    await assertBooksBalance(world.app.rt.db);
  });

  test("crash recovery: an attempt that never reached the chain is sent again after the wait", async () => {
    const s = await newSupplier();
    await earn(s, 2_000_000n);
    const p = await recordPayout(s, 1_800_000n, clock.now());
    await world.app.rt.services.earnings.runDailyPayouts();
    expect(await usdcBalance(chain, s.user.walletAddress)).toBe(0n);
    clock.advance(PAYOUT_RESEND_AFTER_MS + 1_000);
    await world.app.rt.services.earnings.runDailyPayouts();
    expect(await usdcBalance(chain, s.user.walletAddress)).toBe(1_800_000n);
    expect((await world.app.rt.db.payout.findUniqueOrThrow({ where: { id: p.id } })).status).toBe("submitted");
    await world.app.rt.services.earnings.runDailyPayouts();
    expect(await usdcBalance(chain, s.user.walletAddress)).toBe(1_800_000n);
  });

  test("crash recovery: an attempt too old for the chain search is left for a human", async () => {
    const s = await newSupplier();
    await earn(s, 2_000_000n);
    const p = await recordPayout(s, 1_800_000n, new Date(clock.now().getTime() - 5 * 3_600_000));
    await world.app.rt.services.earnings.runDailyPayouts();
    expect(await usdcBalance(chain, s.user.walletAddress)).toBe(0n);
    expect((await world.app.rt.db.payout.findUniqueOrThrow({ where: { id: p.id } })).status).toBe("pending");
    await assertBooksBalance(world.app.rt.db);
  });

  test("a transfer refused before sending fails the payout and returns the amount (payout_reversal)", async () => {
    const s = await newSupplier();
    await earn(s, 3_000_000_000n); // share 2700 USDC: more than the treasury holds
    const run = await world.app.rt.services.earnings.runDailyPayouts();
    expect(run.failed).toBeGreaterThanOrEqual(1);
    const p = await world.app.rt.db.payout.findFirstOrThrow({ where: { accountId: s.user.accountId } });
    expect(p).toMatchObject({ status: "failed", txHash: null });
    expect(p.failureReason).toMatch(/refused/);
    expect(await payableOf(world.app, s.user.accountId)).toBe(2_700_000_000n);
    expect(await usdcBalance(chain, s.user.walletAddress)).toBe(0n);
    const l = await ledger(s.user);
    expect(l.data.slice(0, 2).map((e) => [e.transactionKind, e.amountUsdc])).toEqual([
      ["payout_reversal", "2700.000000"],
      ["payout", "-2700.000000"],
    ]);
    expect(l.recentPayouts[0]).toMatchObject({ status: "failed" });
    // not retried the same day
    await world.app.rt.services.earnings.runDailyPayouts();
    expect(await world.app.rt.db.payout.count({ where: { accountId: s.user.accountId } })).toBe(1);
    await assertBooksBalance(world.app.rt.db);
  });
});

/** What a crashed run leaves: the payout row and its journal committed, the send maybe attempted. */
async function recordPayout(s: Supplier, amount: bigint, submittedAt: Date | null) {
  return world.app.rt.db.$transaction(async (tx) => {
    const p = await tx.payout.create({
      data: {
        accountId: s.user.accountId,
        period: utcDay(clock.now()),
        toAddress: s.user.walletAddress.toLowerCase(),
        amountMicroUsdc: amount,
        submittedAt,
      },
    });
    await debitPayout(tx, { accountId: s.user.accountId, payoutId: p.id, amountMicroUsdc: amount });
    return p;
  });
}
