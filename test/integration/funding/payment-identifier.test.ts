import { decodePaymentSignatureHeader, encodePaymentSignatureHeader } from "@x402/core/http";
import { appendPaymentIdentifierToExtensions, generatePaymentId } from "@x402/extensions/payment-identifier";
import { describe, expect } from "vitest";
import { signIn } from "../../../testkit/actors.js";
import { assertBooksBalance } from "../../../testkit/books.js";
import {
  type FundingCall,
  fundedBuyer,
  post,
  signedPaymentV2,
  signupCall,
  usdcBalance,
} from "../../../testkit/funding.js";
import { fundingTest as test } from "../../../testkit/funding-test.js";

/**
 * Issue 41 item 2 on the funding routes: x402's `payment-identifier` extension. The 402 declares it;
 * a v2 payment carrying an id is recorded with it; the same id with the same payment and body answers
 * the recorded response (status, body, PAYMENT-RESPONSE); the same id with another payment or body is
 * 409 `payment_identifier_conflict`, and pays nothing — also when sent at once.
 */

/** The buyer signs the call's v2 challenge (as `@x402/fetch` does, echoing its extensions) and adds `id`. */
async function signedWithId(
  app: Parameters<typeof post>[0],
  buyer: { privateKey: `0x${string}` },
  c: FundingCall,
  id: string,
): Promise<string> {
  const payload = decodePaymentSignatureHeader(await signedPaymentV2(app, buyer, c));
  const extensions = { ...(payload.extensions ?? {}) };
  expect(extensions).toHaveProperty("payment-identifier"); // echoed from the 402's declaration
  appendPaymentIdentifierToExtensions(extensions, id);
  return encodePaymentSignatureHeader({ ...payload, extensions });
}

const sig = (value: string) => ({ "payment-signature": value });

async function paymentsOf(app: Parameters<typeof post>[0], payer: string) {
  return app.rt.db.payment.findMany({ where: { payerAddress: payer.toLowerCase() } });
}

describe("the same id", () => {
  test("with the same payment and body: the recorded 200, its receipt, no key shown twice", async ({ app, chain }) => {
    const buyer = await fundedBuyer(chain, 10_000_000n);
    const c = signupCall(3_000_000, { keyName: "idempotent" });
    const id = generatePaymentId();
    const payment = await signedWithId(app, buyer, c, id);

    const first = await post(app, c, sig(payment));
    expect(first.status).toBe(200);
    expect(first.body.apiKey).toMatch(/^svc_/);
    const receipt = first.headers.get("payment-response");
    expect(receipt).toBeTruthy();

    const again = await post(app, c, sig(payment));
    expect(again.status).toBe(200);
    expect(again.headers.get("payment-response")).toBe(receipt);
    const { apiKey: _key, keyPrefix: _prefix, keyName: _name, ...shown } = first.body;
    expect(again.body).toEqual({ ...shown, idempotent: true });

    const row = await app.rt.db.paymentIdentifier.findUniqueOrThrow({
      where: { payerAddress_identifier: { payerAddress: buyer.address.toLowerCase(), identifier: id } },
    });
    expect(row).toMatchObject({ route: "POST /v1/x402/signup", responseStatus: 200 });
    expect(JSON.stringify(row.responseBody)).not.toContain("svc_");
    expect(await usdcBalance(chain, buyer.address)).toBe(7_000_000n);
    expect(await paymentsOf(app, buyer.address)).toHaveLength(1);
  });

  test("with another payment (signed again) or another body: 409, nothing charged", async ({ app, chain }) => {
    const buyer = await fundedBuyer(chain, 10_000_000n);
    const c = signupCall(2_000_000);
    const id = generatePaymentId("retry_");
    const first = await post(app, c, sig(await signedWithId(app, buyer, c, id)));
    expect(first.status).toBe(200);

    const resigned = await post(app, c, sig(await signedWithId(app, buyer, c, id)));
    expect(resigned.status).toBe(409);
    expect(resigned.headers.get("x-svc-error-code")).toBe("payment_identifier_conflict");
    expect(resigned.body).toMatchObject({
      error: {
        code: "payment_identifier_conflict",
        message: expect.stringContaining("already used with another payment or request"),
      },
    });
    expect(resigned.body).not.toHaveProperty("accepts");

    // the same authorization for another body: another request under the id
    const other = signupCall(2_000_000, { keyName: "other" });
    const payload = decodePaymentSignatureHeader(await signedWithId(app, buyer, c, id));
    const sameIdOtherBody = await post(app, other, sig(encodePaymentSignatureHeader(payload)));
    expect([sameIdOtherBody.status, sameIdOtherBody.body.error]).toMatchObject([
      409,
      { code: "payment_identifier_conflict" },
    ]);

    expect(await usdcBalance(chain, buyer.address)).toBe(8_000_000n);
    expect(await paymentsOf(app, buyer.address)).toHaveLength(1);
    await assertBooksBalance(app.rt.db);
  });

  test("is the payer's: another wallet's payment may use it", async ({ app, chain }) => {
    const id = generatePaymentId();
    for (const amount of [1_000_000, 2_000_000]) {
      const buyer = await fundedBuyer(chain, 5_000_000n);
      const c = signupCall(amount);
      const r = await post(app, c, sig(await signedWithId(app, buyer, c, id)));
      expect(r.status).toBe(200);
      expect(await usdcBalance(chain, buyer.address)).toBe(5_000_000n - BigInt(amount));
    }
  });

  test("after a payment that moved nothing (refused: no funds), a new payment may use it", async ({ app, chain }) => {
    const buyer = await fundedBuyer(chain, 0n);
    const c = signupCall(1_000_000);
    const id = generatePaymentId();
    const refused = await post(app, c, sig(await signedWithId(app, buyer, c, id)));
    expect(refused.status).toBe(402);
    expect(await app.rt.db.paymentIdentifier.count({ where: { identifier: id } })).toBe(0);

    await chain.mintUsdc(buyer.address, 1_000_000n);
    const paid = await post(app, c, sig(await signedWithId(app, buyer, c, id)));
    expect(paid.status).toBe(200);
    expect(await usdcBalance(chain, buyer.address)).toBe(0n);
  });

  test("a forged header naming a settled payment (its nonce is public) takes no id from its payer", async ({
    app,
    chain,
  }) => {
    const buyer = await fundedBuyer(chain, 10_000_000n);
    const c = signupCall(1_000_000);
    const settled = decodePaymentSignatureHeader(await signedPaymentV2(app, buyer, c));
    expect((await post(app, c, sig(encodePaymentSignatureHeader(settled)))).status).toBe(200);

    // the same authorization with another signature, under an id the payer has not used yet
    const id = generatePaymentId();
    const auth = settled.payload as { signature: string; authorization: unknown };
    const forged = {
      ...settled,
      payload: { ...auth, signature: `0x${"ab".repeat(65)}` },
      extensions: { ...settled.extensions, "payment-identifier": { info: { required: false, id } } },
    };
    const refused = await post(app, c, sig(encodePaymentSignatureHeader(forged)));
    expect([refused.status, (refused.body.error as { code: string }).code]).toEqual([402, "invalid_payment"]);
    expect(await app.rt.db.paymentIdentifier.count({ where: { identifier: id } })).toBe(0);

    const own = await post(app, c, sig(await signedWithId(app, buyer, c, id)));
    expect(own.status).toBe(200);
    expect(await usdcBalance(chain, buyer.address)).toBe(8_000_000n);
  });

  test("on refill and top-up: the recorded answer again, as it was then", async ({ app, chain }) => {
    const buyer = await fundedBuyer(chain, 12_000_000n);
    const signup = await post(
      app,
      signupCall(1_000_000),
      sig(await signedPaymentV2(app, buyer, signupCall(1_000_000))),
    );
    expect(signup.status).toBe(200);
    const user = await signIn(app, { address: buyer.address, privateKey: buyer.privateKey });
    const calls: FundingCall[] = [
      {
        path: "/v1/x402/refill",
        body: { amountMicroUsdc: 2_000_000 },
        headers: { authorization: `Bearer ${String(signup.body.apiKey)}` },
      },
      { path: "/v1/x402/top-up", body: { amountMicroUsdc: 3_000_000 }, headers: { cookie: user.cookie } },
    ];
    for (const c of calls) {
      const payment = await signedWithId(app, buyer, c, generatePaymentId());
      const first = await post(app, c, sig(payment));
      expect(first.status, c.path).toBe(200);
      // the balance moves on (another payment, no id): the recorded answer does not
      const later = { ...c, body: { amountMicroUsdc: 1_000_000 } };
      expect((await post(app, later, sig(await signedPaymentV2(app, buyer, later)))).status).toBe(200);
      const again = await post(app, c, sig(payment));
      expect(again.status, c.path).toBe(200);
      expect(again.body).toEqual({ ...first.body, idempotent: true });
      expect(again.headers.get("payment-response")).toBe(first.headers.get("payment-response"));
    }
    expect(await usdcBalance(chain, buyer.address)).toBe(4_000_000n);
    await assertBooksBalance(app.rt.db);
  });
});

describe("at once", () => {
  test("six payments signed under one id, sent together: one credit, five 409s", async ({ app, chain }) => {
    const buyer = await fundedBuyer(chain, 20_000_000n);
    const c = signupCall(2_000_000);
    const id = generatePaymentId();
    const payments = await Promise.all(Array.from({ length: 6 }, () => signedWithId(app, buyer, c, id)));
    expect(new Set(payments.map((p) => decodePaymentSignatureHeader(p).payload.authorization)).size).toBe(6);

    const answers = await Promise.all(payments.map((p) => post(app, c, sig(p))));
    const statuses = answers.map((a) => a.status).sort();
    expect(statuses).toEqual([200, 409, 409, 409, 409, 409]);
    for (const a of answers.filter((x) => x.status === 409)) {
      expect((a.body.error as { code: string }).code).toBe("payment_identifier_conflict");
    }
    expect(await usdcBalance(chain, buyer.address)).toBe(18_000_000n);
    const rows = await paymentsOf(app, buyer.address);
    expect(rows.map((p) => p.status)).toEqual(["pending"]);
    const account = await app.rt.db.account.findUniqueOrThrow({
      where: { walletAddress: buyer.address.toLowerCase() },
    });
    expect(account.pendingMicroUsdc).toBe(2_000_000n);
    await assertBooksBalance(app.rt.db);
  });

  test("one payment under one id sent five times together: one credit, five 200s with its transaction", async ({
    app,
    chain,
  }) => {
    const buyer = await fundedBuyer(chain, 10_000_000n);
    const c = signupCall(4_000_000);
    const payment = await signedWithId(app, buyer, c, generatePaymentId());
    const answers = await Promise.all(Array.from({ length: 5 }, () => post(app, c, sig(payment))));
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200, 200]);
    expect(new Set(answers.map((a) => a.body.transaction)).size).toBe(1);
    expect(answers.filter((a) => typeof a.body.apiKey === "string")).toHaveLength(1);
    expect(await usdcBalance(chain, buyer.address)).toBe(6_000_000n);
    expect(await paymentsOf(app, buyer.address)).toHaveLength(1);
    await assertBooksBalance(app.rt.db);
  });
});

describe("a malformed id", () => {
  test("is 400 naming it, before anything is charged", async ({ app, chain }) => {
    const buyer = await fundedBuyer(chain, 2_000_000n);
    const c = signupCall(1_000_000);
    const payload = decodePaymentSignatureHeader(await signedPaymentV2(app, buyer, c));
    for (const id of ["short", "has spaces in it, sixteen+", 42]) {
      const extensions = { ...payload.extensions, "payment-identifier": { info: { required: false, id } } };
      const r = await post(app, c, sig(encodePaymentSignatureHeader({ ...payload, extensions })));
      expect(r.status).toBe(400);
      expect(r.body.error).toMatchObject({
        code: "invalid_request",
        message:
          "PAYMENT-SIGNATURE's payment-identifier id must be 16-128 characters of letters, digits, - and _; nothing was charged.",
      });
    }
    expect(await usdcBalance(chain, buyer.address)).toBe(2_000_000n);
    expect(await paymentsOf(app, buyer.address)).toHaveLength(0);
  });
});
