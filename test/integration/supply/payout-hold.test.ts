// A refund never pays twice (issue 38): a video clear's supplier share is held until its job is
// final and no payout includes it before; a delivered or expired job's share becomes payable in
// the transaction of that move (and goes back on hold if the delivery is undone); a refunded job's
// share is never payable. A refund of a share that was already paid out is recovered from the
// supplier's later earnings (a negative payable carried forward, never the platform's). The loop:
// a supplier's own buyer queues videos on its offer, a payout runs, the key is revoked, the jobs
// are refunded a day later: the platform ends at zero loss. Real Postgres, Redis, the upstream
// simulator and a local chain for the payouts.
import { beforeEach, describe, expect } from "vitest";
import { refundClear } from "../../../src/domain/ledger/ledger.js";
import type { LocalChain } from "../../../src/local/chain/index.js";
import { call, createKey, type SignedInUser, signIn } from "../../../testkit/actors.js";
import { appTest, fileWorld } from "../../../testkit/app-test.js";
import { assertBooksBalance } from "../../../testkit/books.js";
import { createAccount, createOffer, createUpstreamKey } from "../../../testkit/fixtures.js";
import { chainEnv, startLocalChain, usdcBalance } from "../../../testkit/funding.js";
import { movableClock } from "../../../testkit/harness.js";
import { confirmedOf, emptyBook, expireLiveVideoJobs, fundConfirmed, fundedBuyerKey } from "../../../testkit/market.js";
import { as, creditClear, deleteKey, pinToHour, postOffer, registerKey, simKey } from "../../../testkit/supply.js";

let chain: LocalChain;
const clock = movableClock();

// a fixture the world's options read: the chain starts first and stops after the apps close
const test = appTest
  // biome-ignore lint/correctness/noEmptyPattern: vitest reads a fixture's dependencies from this pattern
  .extend("chain", { scope: "file" }, async ({}, { onCleanup }) => {
    pinToHour(clock, 9);
    chain = await startLocalChain();
    onCleanup(() => chain.stop());
    const treasury = chain.devAccounts[2];
    if (!treasury) throw new Error("dev account 2 missing");
    await chain.mintUsdc(treasury.address, 1_000_000_000n);
    return chain;
  })
  .override("appOptions", ({ chain }) => ({
    syncCatalog: true,
    clock,
    sim: { now: () => clock.now() },
    env: chainEnv(chain, { PAYOUT_PRIVATE_KEY: chain.devAccounts[2]?.privateKey ?? "" }),
    peer: true,
  }));
const world = fileWorld(test);

// wan-2.6 at 720p with audio: 0.6 DIEM upstream + 5% = 0.63 DIEM; at 40 cents 0.252 USDC:
// 0.2268 to the supplier, 0.0252 platform fee (10%)
const JOB = { model: "wan-2.6-text-to-video", prompt: "a fox in the snow", duration: "5s", resolution: "720p" };
const GROSS = 252_000n;
const SHARE = 226_800n;
const FEE = GROSS - SHARE;
const NEVER_FINISHES = "a fox [[sim:polls=9999]]";
const DAY_MS = 24 * 3_600_000;

beforeEach(async () => {
  // each test starts from an empty market, no live job of another test, at 09:00 UTC of a fresh day
  await emptyBook(world.app, { peers: [world.peer], endedAt: clock.now() });
  await expireLiveVideoJobs(world.app);
  world.sim.state.setVideoConfig({ processingPolls: 0, renderMs: 0, defaultOutcome: "mp4" });
  pinToHour(clock, 9);
});

/** A signed-in supplier with one key (known to the simulator) and one offer of 10 DIEM at 40 cents, posted through REST. */
async function market() {
  const user = await signIn(world.app);
  const key = await registerKey(world.app, user, simKey(world.sim));
  const offer = await postOffer(world.app, user, key.id, 40, "10.000000");
  world.app.rt.services.inference.invalidateBook();
  world.peer.rt.services.inference.invalidateBook();
  return {
    user,
    supply: { supplierAccountId: user.accountId, supplierWallet: user.walletAddress },
    key: { upstreamKeyId: key.id, offerId: offer.id },
  };
}

async function queue(apiKey: string, prompt = JOB.prompt) {
  const r = await call(world.app, {
    method: "POST",
    path: "/v1/video/queue",
    headers: { authorization: `Bearer ${apiKey}` },
    body: { ...JOB, prompt },
  });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  const queueId = (r.body as { queue_id: string }).queue_id;
  const job = await world.app.rt.db.videoJob.findUniqueOrThrow({ where: { queueId } });
  const clear = await world.app.rt.db.clear.findFirstOrThrow({ where: { requestId: job.requestId } });
  return { queueId, job, clear };
}

async function retrieve(apiKey: string, queueId: string) {
  const res = await fetch(`${world.app.baseUrl}/v1/video/retrieve`, {
    method: "POST",
    headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
    body: JSON.stringify({ queue_id: queueId }),
  });
  const type = res.headers.get("content-type") ?? "";
  await res.arrayBuffer();
  return { status: res.status, type };
}

/** The supplier's payable and held balances, as the account row holds them. */
async function balances(accountId: string) {
  const rows = await world.app.rt.db.$queryRaw<{ payable: bigint; held: bigint }[]>`
    SELECT supplier_payable_micro_usdc AS payable, supplier_held_micro_usdc AS held FROM accounts WHERE id = ${accountId}::uuid`;
  const r = rows[0];
  if (!r) throw new Error("no account");
  return { payable: BigInt(r.payable), held: BigInt(r.held) };
}

/** Journals of the hold of one clear (release, rehold) and its refund, oldest first, with postings by book. */
async function journalsOf(clearId: string) {
  const rows = await world.app.rt.db.ledgerTransaction.findMany({
    where: { clearId },
    include: { entries: true },
    orderBy: { createdAt: "asc" },
  });
  return rows.map((r) => ({
    kind: r.kind,
    idempotencyKey: r.idempotencyKey,
    postings: Object.fromEntries(r.entries.map((e) => [e.book, e.amountMicroUsdc])),
  }));
}

/** Sum of the platform_fee lines (the clears' fees and the refunds' reversals) of these clears. */
async function platformFeeOf(clearIds: string[]): Promise<bigint> {
  const r = await world.app.rt.db.$queryRaw<{ total: bigint }[]>`
    SELECT COALESCE(SUM(l.amount_micro_usdc), 0)::bigint AS total
      FROM ledger_lines() l LEFT JOIN ledger_transactions t ON t.id = l.transaction_id
     WHERE l.book = 'platform_fee'
       AND (l.transaction_id = ANY(${clearIds}::uuid[]) OR t.clear_id = ANY(${clearIds}::uuid[]))`;
  return BigInt(r[0]?.total ?? 0n);
}

async function ledger(user: SignedInUser) {
  const res = await call(world.app, { method: "GET", path: "/v1/supply/ledger", headers: as(user) });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body as {
    payableUsdc: string;
    heldUsdc: string;
    paidOutUsdc: string;
    data: { kind: string; book: string; amountUsdc: string; transactionKind: string }[];
  };
}

async function gqlLedger(user: SignedInUser) {
  const res = await call(world.app, {
    method: "POST",
    path: "/graphql",
    headers: as(user),
    body: { query: "{ mySupplierLedger { payable held entries { book kind amount transactionKind } } }" },
  });
  const body = res.body as {
    data?: {
      mySupplierLedger: {
        payable: string;
        held: string;
        entries: { book: string; kind: string; amount: string; transactionKind: string }[];
      };
    };
    errors?: unknown[];
  };
  expect(body.errors, JSON.stringify(body.errors)).toBeUndefined();
  return body.data?.mySupplierLedger;
}

async function payoutsOf(accountId: string) {
  return world.app.rt.db.payout.findMany({ where: { accountId }, orderBy: { createdAt: "asc" } });
}

describe("a video clear's share is held until its job is final", () => {
  test("while the job renders the share is held, not payable; the day's payout pays the other earnings only", async () => {
    const { supply, key } = await market();
    const buyer = await fundedBuyerKey(world.app, 1_000_000n);
    const { clear } = await queue(buyer.apiKey, NEVER_FINISHES);
    expect(await balances(supply.supplierAccountId)).toEqual({ payable: 0n, held: SHARE });
    // other earnings of 1.8 USDC (a chat clear, final when it settles)
    const other = await createAccount(world.app.rt.db);
    await creditClear(world.app.rt.db, {
      buyerAccountId: other.id,
      supplierAccountId: supply.supplierAccountId,
      offerId: key.offerId,
      upstreamKeyId: key.upstreamKeyId,
      grossMicroUsdc: 2_000_000n,
      feeMicroUsdc: 200_000n,
    });
    expect(await balances(supply.supplierAccountId)).toEqual({ payable: 1_800_000n, held: SHARE });

    await world.app.rt.services.earnings.runDailyPayouts();
    const payouts = await payoutsOf(supply.supplierAccountId);
    expect(payouts.map((p) => p.amountMicroUsdc)).toEqual([1_800_000n]);
    expect(await usdcBalance(chain, supply.supplierWallet)).toBe(1_800_000n);
    expect(await balances(supply.supplierAccountId)).toEqual({ payable: 0n, held: SHARE });
    // the clear's line is on the held book; nothing of the hold moved yet
    const lines = await world.app.rt.db.$queryRaw<{ book: string; amount: bigint }[]>`
      SELECT book::text AS book, amount_micro_usdc AS amount FROM ledger_lines()
       WHERE transaction_id = ${clear.id}::uuid AND account_id = ${supply.supplierAccountId}::uuid`;
    expect(lines).toEqual([{ book: "supplier_held", amount: SHARE }]);
    expect(await journalsOf(clear.id)).toEqual([]);
    await assertBooksBalance(world.app.rt.db);
  });

  test("delivered: the share becomes payable with the delivery, once, and the supplier ledger shows it", async () => {
    const { supply, user } = await market();
    const buyer = await fundedBuyerKey(world.app, 1_000_000n);
    const { queueId, clear } = await queue(buyer.apiKey);
    expect(await balances(supply.supplierAccountId)).toEqual({ payable: 0n, held: SHARE });
    const got = await retrieve(buyer.apiKey, queueId);
    expect([got.status, got.type]).toEqual([200, "video/mp4"]);
    expect(await balances(supply.supplierAccountId)).toEqual({ payable: SHARE, held: 0n });
    expect(await journalsOf(clear.id)).toEqual([
      {
        kind: "release",
        idempotencyKey: `release:${clear.id}:1`,
        postings: { supplier_held: -SHARE, supplier_payable: SHARE },
      },
    ]);
    // later retrieves (410) and sweeps move nothing more
    expect((await retrieve(buyer.apiKey, queueId)).status).toBe(410);
    await Promise.all([world.app.rt.services.videoJobs.sweep(), world.peer.rt.services.videoJobs.sweep()]);
    expect(await journalsOf(clear.id)).toHaveLength(1);

    // the supplier's view: the credit on the held book, then its release to payable
    const l = await ledger(user);
    expect([l.payableUsdc, l.heldUsdc]).toEqual(["0.226800", "0.000000"]);
    // (sorted: a journal's lines carry the database's time, a clear's the app's pinned clock)
    const lines = l.data.map((d) => [d.book, d.kind, d.transactionKind, d.amountUsdc].join(" ")).sort();
    expect(lines).toEqual([
      "supplier_held release release -0.226800",
      "supplier_held supplier_credit clear 0.226800",
      "supplier_payable release release 0.226800",
    ]);
    expect((await gqlLedger(user))?.held).toBe("0");
    await assertBooksBalance(world.app.rt.db);
  });

  test("a delivery undone (the transfer broke) puts the share back on hold; the next delivery releases it again", async () => {
    const { supply } = await market();
    const buyer = await fundedBuyerKey(world.app, 1_000_000n);
    const { queueId, clear } = await queue(buyer.apiKey);
    const first = await world.app.rt.services.videoJobs.retrieve(buyer.accountId, queueId);
    if (first.kind !== "media") throw new Error(`expected media, got ${first.kind}`);
    expect(await balances(supply.supplierAccountId)).toEqual({ payable: SHARE, held: 0n });
    // the transfer breaks: undici's body answers its own destroy with an AbortError, expected here
    first.body.on("error", () => undefined);
    first.body.destroy();
    await first.undelivered();
    expect(await balances(supply.supplierAccountId)).toEqual({ payable: 0n, held: SHARE });
    // a payout now pays nothing of it
    await world.app.rt.services.earnings.runDailyPayouts();
    expect(await payoutsOf(supply.supplierAccountId)).toEqual([]);

    const got = await retrieve(buyer.apiKey, queueId);
    expect([got.status, got.type]).toEqual([200, "video/mp4"]);
    expect(await balances(supply.supplierAccountId)).toEqual({ payable: SHARE, held: 0n });
    expect((await journalsOf(clear.id)).map((j) => [j.kind, j.idempotencyKey, j.postings])).toEqual([
      ["release", `release:${clear.id}:1`, { supplier_held: -SHARE, supplier_payable: SHARE }],
      ["rehold", `rehold:${clear.id}:2`, { supplier_held: SHARE, supplier_payable: -SHARE }],
      ["release", `release:${clear.id}:3`, { supplier_held: -SHARE, supplier_payable: SHARE }],
    ]);
    await assertBooksBalance(world.app.rt.db);
  });

  test("finished, not retrieved in time: the share becomes payable once, whatever the expiry races (two processes, a late retrieve)", async () => {
    const { supply } = await market();
    const buyer = await fundedBuyerKey(world.app, 1_000_000n);
    const { queueId, job, clear } = await queue(buyer.apiKey);
    await world.app.rt.services.videoJobs.pollDue(); // the media is ready; nobody fetches it
    expect(await balances(supply.supplierAccountId)).toEqual({ payable: 0n, held: SHARE });
    clock.advance(DAY_MS + 3_600_000);
    // the buyer's late retrieve races both processes' expiry: one final move, one release
    const [late] = await Promise.all([
      retrieve(buyer.apiKey, queueId),
      world.app.rt.services.videoJobs.expireStale(),
      world.peer.rt.services.videoJobs.expireStale(),
      world.app.rt.services.videoJobs.sweep(),
    ]);
    const final = (await world.app.rt.db.videoJob.findUniqueOrThrow({ where: { id: job.id } })).status;
    expect(["expired", "delivered"]).toContain(final);
    if (final === "delivered") expect([late.status, late.type]).toEqual([200, "video/mp4"]);
    expect(await balances(supply.supplierAccountId)).toEqual({ payable: SHARE, held: 0n });
    expect((await journalsOf(clear.id)).map((j) => j.kind)).toEqual(["release"]);
    await assertBooksBalance(world.app.rt.db);
  });

  test("refunded: the hold is reversed, nothing was ever payable, the platform gives back only its fee", async () => {
    const { supply } = await market();
    const buyer = await fundedBuyerKey(world.app, 1_000_000n);
    const { clear } = await queue(buyer.apiKey, "a fox [[sim:video=failed]]");
    expect(await balances(supply.supplierAccountId)).toEqual({ payable: 0n, held: SHARE });
    const swept = await Promise.all([
      world.app.rt.services.videoJobs.sweep(),
      world.peer.rt.services.videoJobs.sweep(),
    ]);
    expect(swept[0].refunded + swept[1].refunded).toBe(1);
    expect(await journalsOf(clear.id)).toEqual([
      {
        kind: "refund",
        idempotencyKey: `refund:${clear.id}`,
        postings: { buyer_confirmed: GROSS, supplier_held: -SHARE, platform_fee: -FEE },
      },
    ]);
    expect(await balances(supply.supplierAccountId)).toEqual({ payable: 0n, held: 0n });
    expect(await confirmedOf(world.app, buyer.accountId)).toBe(1_000_000n);
    expect(await platformFeeOf([clear.id])).toBe(0n);
    await assertBooksBalance(world.app.rt.db);
  });
});

describe("a refund after a payout is recovered from later earnings", () => {
  test("the payable goes negative, is carried forward and shown; later earnings pay it back before any payout", async () => {
    const user = await signIn(world.app);
    const k = await createUpstreamKey(world.app.rt.db, user.accountId);
    const o = await createOffer(world.app.rt.db, {
      accountId: user.accountId,
      upstreamKeyId: k.id,
      priceCentsPerDollar: 50,
      quantityMicroDiem: 100_000_000n,
    });
    const buyer = await createAccount(world.app.rt.db);
    const earn = (grossMicroUsdc: bigint) =>
      creditClear(world.app.rt.db, {
        buyerAccountId: buyer.id,
        supplierAccountId: user.accountId,
        offerId: o.id,
        upstreamKeyId: k.id,
        grossMicroUsdc,
        feeMicroUsdc: grossMicroUsdc / 10n,
      });
    const paid = await earn(2_000_000n); // share 1.8
    await world.app.rt.services.earnings.runDailyPayouts();
    expect(await usdcBalance(chain, user.walletAddress)).toBe(1_800_000n);
    expect((await balances(user.accountId)).payable).toBe(0n);

    // the paid clear is refunded after the payout
    const r = await world.app.rt.db.$transaction((tx) => refundClear(tx, { clearId: paid.clearId, at: clock.now() }));
    expect(r).toMatchObject({ buyerMicroUsdc: 2_000_000n, supplierMicroUsdc: 1_800_000n, platformMicroUsdc: 200_000n });
    expect(await journalsOf(paid.clearId)).toEqual([
      {
        kind: "refund",
        idempotencyKey: `refund:${paid.clearId}`,
        postings: { buyer_confirmed: 2_000_000n, supplier_payable: -1_800_000n, platform_fee: -200_000n },
      },
    ]);
    expect(await balances(user.accountId)).toEqual({ payable: -1_800_000n, held: 0n });
    expect(await platformFeeOf([paid.clearId])).toBe(0n);
    // REST and GraphQL show the negative carry
    const l = await ledger(user);
    expect(l.payableUsdc).toBe("-1.800000");
    expect(l.data[0]).toMatchObject({ book: "supplier_payable", kind: "refund", amountUsdc: "-1.800000" });
    expect(await gqlLedger(user)).toMatchObject({ payable: "-1800000", held: "0" });
    await assertBooksBalance(world.app.rt.db);

    // the next day: 2.7 USDC earned, 0.9 of it still owed back: below the minimum, nothing is paid
    clock.advance(DAY_MS);
    await earn(3_000_000n);
    expect((await balances(user.accountId)).payable).toBe(900_000n);
    await world.app.rt.services.earnings.runDailyPayouts();
    expect(await usdcBalance(chain, user.walletAddress)).toBe(1_800_000n);
    // the day after: 0.9 more; the payout pays the positive balance only
    clock.advance(DAY_MS);
    await earn(1_000_000n);
    await world.app.rt.services.earnings.runDailyPayouts();
    expect(await usdcBalance(chain, user.walletAddress)).toBe(3_600_000n);
    expect((await payoutsOf(user.accountId)).map((p) => p.amountMicroUsdc)).toEqual([1_800_000n, 1_800_000n]);
    expect((await balances(user.accountId)).payable).toBe(0n);
    await assertBooksBalance(world.app.rt.db);
  });
});

describe("the loop: a supplier buys its own videos, is paid, revokes its key, the jobs are refunded", () => {
  test("the payout never included the unfinished shares; the platform's books end at zero loss", async () => {
    // one person: a supplier account that is also its own buyer
    const person = await signIn(world.app);
    const key = await registerKey(world.app, person, simKey(world.sim));
    await postOffer(world.app, person, key.id, 40, "10.000000");
    world.app.rt.services.inference.invalidateBook();
    const apiKey = (await createKey(world.app, person)).apiKey;
    const FUNDED = 2_000_000n;
    await fundConfirmed(world.app, person.accountId, FUNDED);

    // five jobs that never finish: 5 × 0.2268 = 1.134 USDC of shares, above the payout minimum
    const jobs = [];
    for (let i = 0; i < 5; i++) jobs.push(await queue(apiKey, `${NEVER_FINISHES} ${i}`));
    const clearIds = jobs.map((j) => j.clear.id);
    expect(jobs.every((j) => j.clear.supplierAccountId === person.accountId)).toBe(true);
    expect(await confirmedOf(world.app, person.accountId)).toBe(FUNDED - 5n * GROSS);

    // the day's payout: nothing of the unfinished shares
    await world.app.rt.services.earnings.runDailyPayouts();
    expect(await payoutsOf(person.accountId)).toEqual([]);
    expect(await usdcBalance(chain, person.walletAddress)).toBe(0n);
    expect(await balances(person.accountId)).toEqual({ payable: 0n, held: 5n * SHARE });

    // the supplier walks away with its key
    expect((await deleteKey(world.app, person, key.id)).status).toBe(200);

    // a day later the jobs were never delivered: refunded
    clock.advance(DAY_MS + 3_600_000);
    await world.app.rt.services.videoJobs.sweep();
    await world.app.rt.services.videoJobs.sweep();
    const statuses = await world.app.rt.db.videoJob.findMany({
      where: { id: { in: jobs.map((j) => j.job.id) } },
      select: { status: true },
    });
    expect(statuses.map((s) => s.status)).toEqual(Array(5).fill("refunded"));
    await world.app.rt.services.earnings.runDailyPayouts();

    // the person got back exactly what they put in and nothing more
    const paidOut = await usdcBalance(chain, person.walletAddress);
    expect(paidOut).toBe(0n);
    expect(await confirmedOf(world.app, person.accountId)).toBe(FUNDED);
    expect(await balances(person.accountId)).toEqual({ payable: 0n, held: 0n });
    // the platform: its fees on these clears net to zero, and what it holds for the person
    // (funded − paid out) covers what it owes them (confirmed + payable + held): no loss
    expect(await platformFeeOf(clearIds)).toBe(0n);
    const { payable, held } = await balances(person.accountId);
    const owed = (await confirmedOf(world.app, person.accountId)) + payable + held;
    expect(FUNDED - paidOut - owed).toBe(0n);
    await assertBooksBalance(world.app.rt.db);
  });
});
