import { decodePaymentResponseHeader } from "@x402/core/http";
import { describe, expect } from "vitest";
import { formatDecimal6 } from "../../../src/lib/money.js";
import { assertBooksBalance } from "../../../testkit/books.js";
import { chainEnv, usdcBalance } from "../../../testkit/funding.js";
import type { TestApp } from "../../../testkit/harness.js";
import { startHttpFacilitator } from "../../../testkit/http-facilitator.js";
import { addSupply } from "../../../testkit/market.js";
import {
  chatBody,
  paymentOfPayer,
  payPerRequestTest,
  signedUpto,
  uptoBuyer,
  x402Post,
} from "../../../testkit/pay-per-request.js";

/**
 * Issue 41 acceptance 2 and the money rules of a settle that does not simply succeed. The service
 * talks to a standard x402 facilitator over HTTP (the testkit stand-in, settling on the local chain
 * with the real local facilitator) that settles and then answers 502: the buyer gets the answer,
 * the charge is reconciled from the chain once (the real worker), and no second payment is asked
 * for. A facilitator that refuses the settle: the buffered answer is withheld, the stream's last
 * frame says so, and the charge is booked as the platform's loss. The books balance after each.
 */

const test = payPerRequestTest.extend("facilitator", { scope: "file" }, async ({ chain }, { onCleanup }) => {
  const facilitator = await startHttpFacilitator(chain, { versions: [1, 2] });
  onCleanup(() => facilitator.close());
  return facilitator;
});
test.override("appOptions", ({ chain, facilitator }) => ({
  env: chainEnv(chain, { FACILITATOR_URL: facilitator.url }),
  sim: {},
  syncCatalog: true,
  workers: true,
}));

const CHAT = "/chat/completions";
const sig = (value: string) => ({ "payment-signature": value });

test.beforeAll(async ({ app, sim }) => {
  await addSupply(app, sim, [{ priceCents: 40, quantityMicroDiem: 50_000_000n }]);
  app.rt.services.inference.invalidateBook();
});

/** Waits for the payer's payment to reach `status` (the reconciliation worker retries with backoff). */
async function paymentReaches(app: TestApp, payer: string, status: string) {
  const deadline = Date.now() + 25_000;
  for (;;) {
    const p = await paymentOfPayer(app, payer);
    if (p.status === status || Date.now() > deadline) return p;
    await new Promise((r) => setTimeout(r, 200));
  }
}

describe("a facilitator that settles on chain and answers 502", () => {
  test("the buyer gets the answer; one charge, reconciled from the chain; never a second payment", async ({
    app,
    chain,
    facilitator,
  }) => {
    const buyer = await uptoBuyer(chain);
    const body = chatBody("Settle and lose it [[sim:tokens=30]]");
    const payment = await signedUpto(app, buyer, CHAT, body);
    const before = await usdcBalance(chain, buyer.address);
    const settles = facilitator.settleCalls;
    facilitator.mode = "settle-then-502";
    let r: Awaited<ReturnType<typeof x402Post>>;
    try {
      r = await x402Post(app, CHAT, body, sig(payment));
    } finally {
      facilitator.mode = "honest";
    }
    // the content was paid for (most likely): it is delivered; the receipt says the outcome is open
    expect(r.status).toBe(200);
    expect((r.body.choices as unknown[]).length).toBeGreaterThan(0);
    const cost = r.headers.get("x-svc-cost-usdc") ?? "";
    const receipt = decodePaymentResponseHeader(r.headers.get("payment-response") ?? "");
    expect(receipt.success).toBe(false);
    expect(formatDecimal6(BigInt(receipt.amount ?? "0"))).toBe(cost);

    const p = await paymentReaches(app, buyer.address, "settled");
    expect(p.status).toBe("settled");
    const moved = before - (await usdcBalance(chain, buyer.address));
    expect(formatDecimal6(moved)).toBe(cost);
    expect(p).toMatchObject({ chargeMicroUsdc: moved, settledMicroUsdc: moved });
    expect(p.settlementTxHash).toMatch(/^0x[0-9a-f]{64}$/);
    // one settle request, one transfer: the reconciler read the chain, it did not settle again
    expect(facilitator.settleCalls - settles).toBe(1);
    // the same payment again answers its recorded response, no 402
    const again = await x402Post(app, CHAT, body, sig(payment));
    expect(again.status).toBe(200);
    expect(before - (await usdcBalance(chain, buyer.address))).toBe(moved);
    await assertBooksBalance(app.rt.db);
  });
});

describe("a facilitator that answers 502 and settles nothing", () => {
  test("the reconciler sees the authorization unused and settles it (once) while it holds", async ({
    app,
    chain,
    facilitator,
  }) => {
    const buyer = await uptoBuyer(chain);
    const body = chatBody("Settle me later [[sim:tokens=30]]");
    const payment = await signedUpto(app, buyer, CHAT, body);
    const before = await usdcBalance(chain, buyer.address);
    const settles = facilitator.settleCalls;
    facilitator.mode = "502-no-settle";
    let r: Awaited<ReturnType<typeof x402Post>>;
    try {
      r = await x402Post(app, CHAT, body, sig(payment));
    } finally {
      facilitator.mode = "honest";
    }
    expect(r.status).toBe(200);
    expect(decodePaymentResponseHeader(r.headers.get("payment-response") ?? "").success).toBe(false);
    const p = await paymentReaches(app, buyer.address, "settled");
    expect(p.status).toBe("settled");
    const moved = before - (await usdcBalance(chain, buyer.address));
    expect(formatDecimal6(moved)).toBe(r.headers.get("x-svc-cost-usdc"));
    expect(p.settledMicroUsdc).toBe(moved);
    expect(facilitator.settleCalls - settles).toBeGreaterThanOrEqual(2);
    await assertBooksBalance(app.rt.db);
  });
});

describe("a facilitator that refuses the settle", () => {
  test("buffered: the answer is withheld (402), the charge is the platform's booked loss", async ({
    app,
    chain,
    facilitator,
  }) => {
    const buyer = await uptoBuyer(chain);
    const body = chatBody("Refuse me [[sim:tokens=30]]");
    const payment = await signedUpto(app, buyer, CHAT, body);
    const before = await usdcBalance(chain, buyer.address);
    facilitator.mode = "refuse";
    let r: Awaited<ReturnType<typeof x402Post>>;
    try {
      r = await x402Post(app, CHAT, body, sig(payment));
    } finally {
      facilitator.mode = "honest";
    }
    expect(r.status).toBe(402);
    expect(r.body).toMatchObject({ error: { code: "invalid_payment" } });
    expect(r.body).not.toHaveProperty("choices");
    expect(decodePaymentResponseHeader(r.headers.get("payment-response") ?? "")).toMatchObject({
      success: false,
      amount: "0",
    });
    expect(await usdcBalance(chain, buyer.address)).toBe(before);
    const p = await paymentOfPayer(app, buyer.address);
    expect(p.status).toBe("lost");
    expect(p.chargeMicroUsdc).toBeGreaterThan(0n);
    expect(p.lostMicroUsdc).toBe(p.chargeMicroUsdc);
    // the supplier is paid for what it delivered; the platform's loss line says who bore it
    const [loss] = await app.rt.db.$queryRaw<{ amount: bigint }[]>`
      SELECT COALESCE(SUM(amount_micro_usdc), 0)::bigint AS amount FROM ledger_lines() WHERE book = 'platform_loss'
         AND transaction_id IN (SELECT id FROM ledger_transactions WHERE request_payment_id = ${p.id}::uuid)`;
    expect(loss?.amount).toBe(-(p.chargeMicroUsdc ?? 0n));
    // a wallet that left a charge unpaid pays per request no more: its next payment is refused unrun
    const next = chatBody("Again [[sim:tokens=5]]");
    const again = await x402Post(app, CHAT, next, sig(await signedUpto(app, buyer, CHAT, next)));
    expect(again.status).toBe(402);
    expect(again.body).toMatchObject({
      error: { code: "invalid_payment", message: expect.stringContaining("unpaid") },
    });
    expect(await app.rt.db.requestPayment.count({ where: { payerAddress: buyer.address.toLowerCase() } })).toBe(1);
    await assertBooksBalance(app.rt.db);
  });

  test("streamed: the content went; the last frame says the settle was refused; the loss is booked", async ({
    app,
    chain,
    facilitator,
  }) => {
    const buyer = await uptoBuyer(chain);
    const body = chatBody("Refuse my stream [[sim:tokens=30]]", { stream: true });
    const payment = await signedUpto(app, buyer, CHAT, body);
    facilitator.mode = "refuse";
    let r: Awaited<ReturnType<typeof x402Post>>;
    try {
      r = await x402Post(app, CHAT, body, sig(payment));
    } finally {
      facilitator.mode = "honest";
    }
    expect(r.status).toBe(200);
    expect(r.text).toContain('"delta"');
    expect(r.text).toContain('"code":"invalid_payment"');
    expect(r.text).not.toContain("data: [DONE]");
    const p = await paymentOfPayer(app, buyer.address);
    expect(p.status).toBe("lost");
    await assertBooksBalance(app.rt.db);
  });
});
