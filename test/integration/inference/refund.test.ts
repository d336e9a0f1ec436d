// The refund of a clear (src/domain/ledger/ledger.ts refundClear, issue 16: what a failed or
// rejected video job gets): exactly once under concurrent callers, the buyer made whole, the
// supplier's whole share taken back (a share already paid out from its later earnings: the payable
// goes negative), the platform giving back only its fee, the books balanced.
import { describe, expect } from "vitest";
import { debitPayout, refundClear } from "../../../src/domain/ledger/ledger.js";
import { call } from "../../../testkit/actors.js";
import { fileWorld, appTest as test } from "../../../testkit/app-test.js";
import { assertBooksBalance } from "../../../testkit/books.js";
import type { TestApp } from "../../../testkit/harness.js";
import { addSupply, confirmedOf, fundedBuyerKey, payableOf, withdrawSupply } from "../../../testkit/market.js";

test.override("appOptions", { sim: {}, syncCatalog: true });
const world = fileWorld(test);

/** One image job (venice-sd35 × 2 = 20,000 micro-DIEM at 40 cents: 8,000 micro-USDC, fee 800). */
async function oneClear(app: TestApp) {
  const supply = await addSupply(app, world.sim, [{ priceCents: 40, quantityMicroDiem: 1_000_000n }]);
  app.rt.services.inference.invalidateBook();
  const buyer = await fundedBuyerKey(app, 1_000_000n);
  const r = await call(app, {
    method: "POST",
    path: "/v1/image/generate",
    headers: { authorization: `Bearer ${buyer.apiKey}` },
    body: { model: "venice-sd35", prompt: "x", variants: 2 },
  });
  expect(r.status).toBe(200);
  const clear = await app.rt.db.clear.findFirstOrThrow({ where: { buyerAccountId: buyer.accountId } });
  await withdrawSupply(app, supply);
  return { buyer, clear, supplierAccountId: supply.supplierAccountId };
}

describe("refundClear", () => {
  test("ten concurrent refunds of one clear: exactly one moves money; the buyer is whole again", async () => {
    const { buyer, clear, supplierAccountId } = await oneClear(world.app);
    expect([clear.grossMicroUsdc, clear.feeMicroUsdc, clear.supplierMicroUsdc]).toEqual([8_000n, 800n, 7_200n]);
    expect(await confirmedOf(world.app, buyer.accountId)).toBe(1_000_000n - 8_000n);
    expect(await payableOf(world.app, supplierAccountId)).toBe(7_200n);
    const db = world.app.rt.db;
    const results = await Promise.all(
      Array.from({ length: 10 }, () => db.$transaction((tx) => refundClear(tx, { clearId: clear.id, at: new Date() }))),
    );
    const done = results.filter((r) => r !== null);
    expect(done).toHaveLength(1);
    expect(done[0]).toMatchObject({ buyerMicroUsdc: 8_000n, supplierMicroUsdc: 7_200n, platformMicroUsdc: 800n });
    expect(await confirmedOf(world.app, buyer.accountId)).toBe(1_000_000n);
    expect(await payableOf(world.app, supplierAccountId)).toBe(0n);
    expect((await db.clear.findFirstOrThrow({ where: { id: clear.id } })).refundedAt).not.toBeNull();
    expect(await db.ledgerTransaction.count({ where: { clearId: clear.id, kind: "refund" } })).toBe(1);
    // a later call is a no-op
    expect(await db.$transaction((tx) => refundClear(tx, { clearId: clear.id, at: new Date() }))).toBeNull();
    await assertBooksBalance(db);
  });

  test("a share already paid out is recovered from later earnings: the payable goes negative, the platform bears nothing", async () => {
    const { buyer, clear, supplierAccountId } = await oneClear(world.app);
    const db = world.app.rt.db;
    // the supplier was paid 5,000 of its 7,200 before the refund
    await db.$transaction(async (tx) => {
      const payout = await tx.payout.create({
        data: {
          accountId: supplierAccountId,
          period: "2026-11-24",
          toAddress: "0x2222222222222222222222222222222222222222",
          amountMicroUsdc: 5_000n,
        },
      });
      await debitPayout(tx, { accountId: supplierAccountId, payoutId: payout.id, amountMicroUsdc: 5_000n });
    });
    const r = await db.$transaction((tx) => refundClear(tx, { clearId: clear.id, at: new Date() }));
    expect(r).toMatchObject({
      buyerMicroUsdc: 8_000n,
      supplierMicroUsdc: 7_200n,
      fromHeld: false,
      platformMicroUsdc: 800n,
    });
    expect(await confirmedOf(world.app, buyer.accountId)).toBe(1_000_000n);
    // 2,200 of the share was still payable; the 5,000 paid out is owed back (carried forward)
    expect(await payableOf(world.app, supplierAccountId)).toBe(-5_000n);
    const journal = await db.ledgerTransaction.findFirstOrThrow({
      where: { clearId: clear.id, kind: "refund" },
      include: { entries: true },
    });
    expect(Object.fromEntries(journal.entries.map((e) => [e.book, e.amountMicroUsdc]))).toEqual({
      buyer_confirmed: 8_000n,
      supplier_payable: -7_200n,
      platform_fee: -800n,
    });
    await assertBooksBalance(db);
  });

  test("the market's totals lose a refunded clear once, whether the fold applied it or not", async () => {
    const app = world.app;
    const db = app.rt.db;
    const folded = await oneClear(app);
    await db.$queryRaw`SELECT * FROM svc_fold_all()`;
    const unfolded = await oneClear(app);
    const before = await app.rt.services.market.stats();
    const refunds = await Promise.all(
      [folded, unfolded, folded, unfolded].map(({ clear }) =>
        db.$transaction((tx) => refundClear(tx, { clearId: clear.id, at: new Date() })),
      ),
    );
    expect(refunds.filter((r) => r !== null)).toHaveLength(2);
    const after = await app.rt.services.market.stats();
    expect(before.savings.clears - after.savings.clears).toBe(2);
    expect(before.savings.paidMicroUsdc - after.savings.paidMicroUsdc).toBe(16_000n);
    expect(before.savings.faceMicroUsdc - after.savings.faceMicroUsdc).toBe(40_000n);
    expect(before.today.byModality.image.clears - after.today.byModality.image.clears).toBe(2);
    // the unfolded one's fold adds it to its holder's row, where the refund already took it out
    await db.$queryRaw`SELECT * FROM svc_fold_all()`;
    expect(await app.rt.services.market.stats()).toMatchObject({ savings: after.savings, today: after.today });
    await assertBooksBalance(db);
  });
});
