import { describe, expect } from "vitest";
import { formatDecimal6 } from "../../../src/lib/money.js";
import { call } from "../../../testkit/actors.js";
import { fileWorld, appTest as test } from "../../../testkit/app-test.js";
import { assertBooksBalance } from "../../../testkit/books.js";
import { addSupply, chat, fundedBuyerKey } from "../../../testkit/market.js";

// One append per clear (docs/decisions.md "One append per clear"): an ending appends its clear and
// moves no balance; the holder's fold moves them later. Here the fold waits a minute, so every figure
// below is read while the clear is unfolded: each reader (REST, the services GraphQL and MCP share)
// must show it live, and the same after the fold.
const MODEL = "zai-org-glm-5-1";
test.override("appOptions", { sim: {}, syncCatalog: true, env: { ESCROW_FOLD_MS: "60000" } });
const world = fileWorld(test);

describe("live figures between an append and its fold", () => {
  test("balance, payable, offer remaining, key balance and key spend include an unfolded clear", async () => {
    const supply = await addSupply(world.app, world.sim, [{ priceCents: 40, quantityMicroDiem: 50_000_000n }]);
    const offerId = supply.keys[0]?.offerId ?? "";
    const keyId = supply.keys[0]?.upstreamKeyId ?? "";
    const buyer = await fundedBuyerKey(world.app, 10_000_000n);
    const db = world.app.rt.db;
    const rawBefore = await db.account.findUniqueOrThrow({ where: { id: buyer.accountId } });

    const r = await chat(world.app, buyer.apiKey, {
      model: `svc/${MODEL}`,
      messages: [{ role: "user", content: "Hello [[sim:tokens=40]]" }],
    });
    expect(r.status).toBe(200);
    const gross = BigInt(Math.round(Number(r.headers.get("x-svc-cost-usdc")) * 1e6));
    expect(gross).toBeGreaterThan(0n);
    const clear = await db.clear.findFirstOrThrow({ where: { buyerAccountId: buyer.accountId } });
    expect(clear.holder).not.toBeNull();

    // unfolded: the rows are as they were
    const raw = await db.account.findUniqueOrThrow({ where: { id: buyer.accountId } });
    expect(raw.confirmedMicroUsdc).toBe(rawBefore.confirmedMicroUsdc);
    // every reader is live
    expect(r.headers.get("x-balance-remaining")).toBe(formatDecimal6(10_000_000n - gross));
    const me = await call(world.app, {
      method: "GET",
      path: "/v1/agent/me",
      headers: { authorization: `Bearer ${buyer.apiKey}` },
    });
    expect(JSON.stringify(me.body)).toContain(formatDecimal6(10_000_000n - gross));
    const s = world.app.rt.services;
    expect((await s.accounts.balances(buyer.accountId)).confirmedMicroUsdc).toBe(10_000_000n - gross);
    const ledger = await s.earnings.supplierLedger({ accountId: supply.supplierAccountId });
    expect(ledger.payableMicroUsdc).toBe(clear.supplierMicroUsdc);
    const offers = await s.offers.listOffers({ accountId: supply.supplierAccountId });
    const offer = offers.items.find((o) => o.id === offerId);
    expect(offer?.remainingMicroDiem).toBe(50_000_000n - clear.burnMicroDiem);
    expect(offer?.soldMicroDiem).toBe(clear.burnMicroDiem);
    const keys = await s.supply.listUpstreamKeys(supply.supplierAccountId);
    expect(keys.find((k) => k.id === keyId)?.balanceMicroDiem).toBe(100_000_000n - clear.burnMicroDiem);
    const apiKey = await db.apiKey.findFirstOrThrow({ where: { accountId: buyer.accountId } });
    const [usage] = await s.apiKeys.usageOf([apiKey]);
    expect(usage?.spentMicroUsdc).toBe(gross);
    await assertBooksBalance(db);

    // the fold moves the rows; the live figures stay what they were
    await s.inference.escrow.fold();
    const folded = await db.account.findUniqueOrThrow({ where: { id: buyer.accountId } });
    expect(folded.confirmedMicroUsdc).toBe(10_000_000n - gross);
    expect((await db.offer.findUniqueOrThrow({ where: { id: offerId } })).remainingMicroDiem).toBe(
      50_000_000n - clear.burnMicroDiem,
    );
    expect((await s.accounts.balances(buyer.accountId)).confirmedMicroUsdc).toBe(10_000_000n - gross);
    expect((await s.earnings.supplierLedger({ accountId: supply.supplierAccountId })).payableMicroUsdc).toBe(
      clear.supplierMicroUsdc,
    );
    const [after] = await s.apiKeys.usageOf([apiKey]);
    expect(after?.spentMicroUsdc).toBe(gross);
    await assertBooksBalance(db);
  });
});
