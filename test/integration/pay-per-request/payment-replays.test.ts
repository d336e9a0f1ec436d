import { decodePaymentResponseHeader } from "@x402/core/http";
import { generatePaymentId } from "@x402/extensions/payment-identifier";
import { describe, expect } from "vitest";
import { assertBooksBalance } from "../../../testkit/books.js";
import { usdcBalance } from "../../../testkit/funding.js";
import { addSupply } from "../../../testkit/market.js";
import {
  chatBody,
  paymentOfPayer,
  signedUpto,
  payPerRequestTest as test,
  uptoBuyer,
  x402Post,
} from "../../../testkit/pay-per-request.js";

/**
 * Issue 41 items 1 and 2: a payment authorization is used once. The same PAYMENT-SIGNATURE again
 * gets the recorded answer (its PAYMENT-RESPONSE too), sent at once it gets 409 while the first
 * runs, for another request it is 409; a payment-identifier id answers the recorded response for the
 * same payment and request, and 409 `payment_identifier_conflict` for another. Money moves once.
 */

const CHAT = "/chat/completions";
const sig = (value: string) => ({ "payment-signature": value });

test.beforeAll(async ({ app, sim }) => {
  await addSupply(app, sim, [{ priceCents: 40, quantityMicroDiem: 50_000_000n }]);
  app.rt.services.inference.invalidateBook();
});

async function paymentsOf(app: Parameters<typeof paymentOfPayer>[0], payer: string) {
  return app.rt.db.requestPayment.findMany({ where: { payerAddress: payer.toLowerCase() } });
}

describe("the same payment", () => {
  test("sent again: the recorded answer and receipt; the money moved once", async ({ app, chain }) => {
    const buyer = await uptoBuyer(chain);
    const body = chatBody("Once [[sim:tokens=25]]");
    const payment = await signedUpto(app, buyer, CHAT, body);
    const before = await usdcBalance(chain, buyer.address);
    const first = await x402Post(app, CHAT, body, sig(payment));
    expect(first.status).toBe(200);
    const charged = before - (await usdcBalance(chain, buyer.address));
    expect(charged).toBeGreaterThan(0n);
    const again = await x402Post(app, CHAT, body, sig(payment));
    expect(again.status).toBe(200);
    expect(again.body).toEqual(first.body);
    expect(again.headers.get("payment-response")).toBe(first.headers.get("payment-response"));
    expect(again.headers.get("x-svc-support-reference")).toBe(first.headers.get("x-svc-support-reference"));
    expect(before - (await usdcBalance(chain, buyer.address))).toBe(charged);
    expect(await paymentsOf(app, buyer.address)).toHaveLength(1);
    await assertBooksBalance(app.rt.db);
  });

  test("sent twice at once: one runs, the other is 409 while it runs, then gets its answer", async ({
    app,
    chain,
    sim,
  }) => {
    const buyer = await uptoBuyer(chain);
    const body = chatBody("Twice [[sim:tokens=25]]");
    const payment = await signedUpto(app, buyer, CHAT, body);
    const before = await usdcBalance(chain, buyer.address);
    // the first one to reach the upstream is slow: the other arrives while it runs
    sim.state.injectFault("*", { kind: "latency", ms: 1_500, count: 1 });
    const both = await Promise.all([x402Post(app, CHAT, body, sig(payment)), x402Post(app, CHAT, body, sig(payment))]);
    sim.state.clearFaults();
    expect(both.map((r) => r.status).sort()).toEqual([200, 409]);
    const busy = both.find((r) => r.status === 409);
    expect(busy?.body).toMatchObject({ error: { code: "payment_unfinished" }, inFlight: true });
    const ran = both.find((r) => r.status === 200);
    const charged = BigInt(decodePaymentResponseHeader(ran?.headers.get("payment-response") ?? "").amount ?? "-1");
    expect(before - (await usdcBalance(chain, buyer.address))).toBe(charged);
    const later = await x402Post(app, CHAT, body, sig(payment));
    expect(later.status).toBe(200);
    expect(later.body).toEqual(ran?.body);
    expect(before - (await usdcBalance(chain, buyer.address))).toBe(charged);
    await assertBooksBalance(app.rt.db);
  });

  test("for another request: 409, nothing charged for it", async ({ app, chain }) => {
    const buyer = await uptoBuyer(chain);
    // two bodies of one maximum: the payment answers either challenge
    const payment = await signedUpto(app, buyer, CHAT, chatBody("Ask A"));
    expect((await x402Post(app, CHAT, chatBody("Ask A"), sig(payment))).status).toBe(200);
    const after = await usdcBalance(chain, buyer.address);
    const other = await x402Post(app, CHAT, chatBody("Ask B"), sig(payment));
    expect(other.status).toBe(409);
    expect(other.body).toMatchObject({ error: { code: "conflict" } });
    expect(await usdcBalance(chain, buyer.address)).toBe(after);
    await assertBooksBalance(app.rt.db);
  });

  test("a stream sent again: the recorded stream, whole", async ({ app, chain }) => {
    const buyer = await uptoBuyer(chain);
    const body = chatBody("Stream once [[sim:tokens=20]]", { stream: true });
    const payment = await signedUpto(app, buyer, CHAT, body);
    const first = await x402Post(app, CHAT, body, sig(payment));
    expect(first.status).toBe(200);
    expect(first.text).toContain('"object":"svc.cost"');
    expect(first.text).toContain("data: [DONE]");
    const again = await x402Post(app, CHAT, body, sig(payment));
    expect(again.status).toBe(200);
    expect(again.headers.get("content-type")).toMatch(/^text\/event-stream/);
    expect(again.text).toBe(first.text);
    expect((await paymentOfPayer(app, buyer.address)).status).toBe("settled");
    await assertBooksBalance(app.rt.db);
  });
});

describe("the payment-identifier", () => {
  test("the same id and payment: the recorded response; another payment under it: 409", async ({ app, chain }) => {
    const buyer = await uptoBuyer(chain);
    const body = chatBody("Identified [[sim:tokens=25]]");
    const id = generatePaymentId();
    const payment = await signedUpto(app, buyer, CHAT, body, { id });
    const before = await usdcBalance(chain, buyer.address);
    const first = await x402Post(app, CHAT, body, sig(payment));
    expect(first.status).toBe(200);
    const charged = before - (await usdcBalance(chain, buyer.address));
    const row = await app.rt.db.paymentIdentifier.findUniqueOrThrow({
      where: { payerAddress_identifier: { payerAddress: buyer.address.toLowerCase(), identifier: id } },
    });
    expect(row).toMatchObject({ route: "POST /x402/v1/chat/completions", responseStatus: 200 });

    const again = await x402Post(app, CHAT, body, sig(payment));
    expect(again.status).toBe(200);
    expect(again.body).toEqual(first.body);
    expect(again.headers.get("payment-response")).toBe(first.headers.get("payment-response"));

    // a client that signs again for the same request under the same id pays nothing more
    const resigned = await x402Post(app, CHAT, body, sig(await signedUpto(app, buyer, CHAT, body, { id })));
    expect(resigned.status).toBe(409);
    expect(resigned.headers.get("x-svc-error-code")).toBe("payment_identifier_conflict");
    expect(resigned.body).toMatchObject({ error: { code: "payment_identifier_conflict" } });
    expect(before - (await usdcBalance(chain, buyer.address))).toBe(charged);
    expect(await paymentsOf(app, buyer.address)).toHaveLength(1);
    await assertBooksBalance(app.rt.db);
  });

  test("a malformed id is 400 before anything is charged", async ({ app, chain }) => {
    const buyer = await uptoBuyer(chain);
    const body = chatBody("Bad id");
    const r = await x402Post(
      app,
      CHAT,
      body,
      sig(await signedUpto(app, buyer, CHAT, body, { id: "short", unchecked: true })),
    );
    expect(r.status).toBe(400);
    expect(r.body).toMatchObject({ error: { code: "invalid_request" } });
    expect(await paymentsOf(app, buyer.address)).toHaveLength(0);
  });
});

describe("an authorization that expires too soon", () => {
  test("is refused before anything runs or is recorded: its settle could come after its deadline", async ({
    app,
    chain,
  }) => {
    const buyer = await uptoBuyer(chain);
    const body = chatBody("Quick [[sim:tokens=10]]");
    const before = await usdcBalance(chain, buyer.address);
    // a deadline seconds away: the facilitator's verify takes it, the stream would outlive it
    const short = await signedUpto(app, buyer, CHAT, { ...body, stream: true }, { timeoutSeconds: 30 });
    const r = await x402Post(app, CHAT, { ...body, stream: true }, sig(short));
    expect(r.status).toBe(402);
    expect(r.body).toMatchObject({ error: { code: "invalid_payment", message: expect.stringContaining("deadline") } });
    expect(await paymentsOf(app, buyer.address)).toHaveLength(0);
    // the same client signing the validity the 402 asks for pays
    const full = await signedUpto(app, buyer, CHAT, body);
    expect((await x402Post(app, CHAT, body, sig(full))).status).toBe(200);
    expect(await paymentsOf(app, buyer.address)).toHaveLength(1);
    expect(await usdcBalance(chain, buyer.address)).toBeLessThan(before);
    await assertBooksBalance(app.rt.db);
  });
});

describe("one wallet, many payments", () => {
  test("at once: only the payments its USDC covers together run; the rest are refused unrun", async ({
    app,
    chain,
    sim,
  }) => {
    const body = chatBody("Cover me [[sim:tokens=10]]");
    const unpaid = await x402Post(app, CHAT, body);
    const max = BigInt((unpaid.body as { maxAmountMicroUsdc: number }).maxAmountMicroUsdc);
    // enough for one maximum and a half: three authorizations verify alone, two cannot settle together
    const buyer = await uptoBuyer(chain, max + max / 2n);
    const payments = await Promise.all([1, 2, 3].map(() => signedUpto(app, buyer, CHAT, body)));
    sim.state.injectFault("*", { kind: "latency", ms: 1_000, count: 3 });
    const answers = await Promise.all(payments.map((p) => x402Post(app, CHAT, body, sig(p))));
    sim.state.clearFaults();
    expect(answers.map((r) => r.status).sort()).toEqual([200, 402, 402]);
    for (const r of answers.filter((a) => a.status === 402)) {
      expect(r.body).toMatchObject({ error: { code: "invalid_payment", message: expect.stringContaining("cover") } });
    }
    expect(await paymentsOf(app, buyer.address)).toHaveLength(1);
    await assertBooksBalance(app.rt.db);
  });
});
