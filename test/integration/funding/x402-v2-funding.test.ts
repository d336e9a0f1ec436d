import { x402Client } from "@x402/core/client";
import {
  decodePaymentRequiredHeader,
  decodePaymentResponseHeader,
  decodePaymentSignatureHeader,
  encodePaymentSignatureHeader,
} from "@x402/core/http";
import { PaymentRequiredV2Schema } from "@x402/core/schemas";
import type { PaymentPayload } from "@x402/core/types";
import { ExactEvmScheme, registerExactEvmScheme } from "@x402/evm/exact/client";
import {
  type DiscoveryExtension,
  extractDiscoveryInfoFromExtension,
  extractDiscoveryInfoV1,
  validateDiscoveryExtension,
} from "@x402/extensions/bazaar";
import { isPaymentIdentifierExtension } from "@x402/extensions/payment-identifier";
import { wrapFetchWithPayment } from "@x402/fetch";
import { privateKeyToAccount } from "viem/accounts";
import { describe, expect } from "vitest";
import { decodeXPaymentResponse } from "x402/shared";
import { v1OutputSchema } from "../../../src/domain/funding/discovery.js";
import { createKey, signIn } from "../../../testkit/actors.js";
import { assertBooksBalance } from "../../../testkit/books.js";
import {
  chainEnv,
  type FundingCall,
  fundedBuyer,
  post,
  signedPayment,
  signedPaymentV2,
  signupCall,
  usdcBalance,
} from "../../../testkit/funding.js";
import { fundingTest } from "../../../testkit/funding-test.js";
import { withApp } from "../../../testkit/world.js";

/**
 * Issue 29: x402 v2 beside v1 on the same funding routes. One 402 carries both challenges (v1 in
 * the body, v2 in `PAYMENT-REQUIRED`); a payment comes as `X-PAYMENT` or `PAYMENT-SIGNATURE` and is
 * answered with its own version's receipt; one authorization is one payment in either envelope.
 */

/** the wallet the service is paid to (`PAY_TO` of `chainEnv`) */
const test = fundingTest.extend("payTo", { scope: "file" }, ({ chain }) => chain.devAccounts[2]?.address ?? "");

const sig = (value: string) => ({ "payment-signature": value });

/** The v1 envelope of a v2 payment: the same authorization and signature, network `base`. */
function v1EnvelopeOf(paymentSignature: string): string {
  const v2 = decodePaymentSignatureHeader(paymentSignature);
  const v1 = { x402Version: 1, scheme: "exact", network: "base", payload: v2.payload };
  return Buffer.from(JSON.stringify(v1)).toString("base64");
}

/** A v2 payment with one field of its `accepted` requirement changed (the signature is untouched). */
function tamperedAccepted(paymentSignature: string, change: Partial<PaymentPayload["accepted"]>): string {
  const v2 = decodePaymentSignatureHeader(paymentSignature);
  return encodePaymentSignatureHeader({ ...v2, accepted: { ...v2.accepted, ...change } });
}

/**
 * A default `@x402/fetch` 2.27 client: `registerExactEvmScheme` (it registers v1 networks too) and
 * spend controls that admit the local USDC on `eip155:8453` up to 10 USDC; the fetch underneath
 * records every request's headers.
 */
function defaultV2Client(privateKey: `0x${string}`, usdcAddress: string) {
  const client = new x402Client();
  registerExactEvmScheme(client, { signer: privateKeyToAccount(privateKey) });
  client.setSpendControls({
    allowedAssets: [{ network: "eip155:8453", asset: usdcAddress, maxAmountPerPayment: "10000000" }],
  });
  const sent: Headers[] = [];
  const recording: typeof fetch = (input, init) => {
    sent.push(new Headers(input instanceof Request ? input.headers : init?.headers));
    return fetch(input, init);
  };
  return { pay: wrapFetchWithPayment(recording, client), sent };
}

function expectPaidWithV2Only(sent: Headers[]) {
  expect(sent).toHaveLength(2); // the challenge, then the paid retry
  expect(sent[0]?.has("payment-signature")).toBe(false);
  expect(sent[1]?.get("payment-signature")).toBeTruthy();
  expect(sent.some((h) => h.has("x-payment"))).toBe(false);
}

describe("one 402, both versions", () => {
  test("signup: the v1 body byte for byte as before plus outputSchema, and PAYMENT-REQUIRED is its v2 twin", async ({
    app,
    chain,
    payTo,
  }) => {
    const resource = `${app.rt.config.urls.base}/v1/x402/signup`;
    const res = await fetch(resource, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ amountMicroUsdc: 2_500_000, keyName: "a" }),
    });
    expect(res.status).toBe(402);
    // the spec's v1 challenge, exactly the bytes the service sent before issue 29, with the
    // requirement's x402 v1 discovery data (`outputSchema`, issue 41) as its last field
    const text = await res.text();
    const outputSchema = JSON.stringify(v1OutputSchema("signup"));
    expect(text).toBe(
      `{"x402Version":1,"error":{"code":"payment_required","message":"Payment required: sign the requirement in \`accepts\` and retry with X-PAYMENT."},"accepts":[{"scheme":"exact","network":"base","maxAmountRequired":"2500000","resource":"${resource}","description":"Create an account and API key, prepaid with USDC","mimeType":"application/json","payTo":"${payTo}","maxTimeoutSeconds":300,"asset":"${chain.usdcAddress}","extra":{"name":"USD Coin","version":"2"},"outputSchema":${outputSchema}}],"amountMicroUsdc":2500000}`,
    );
    // what x402 v1 discovery reads of it: POST with the signup's JSON body fields
    const v1 = JSON.parse(text) as { accepts: Record<string, unknown>[] };
    expect(extractDiscoveryInfoV1(v1.accepts[0] as never)?.input).toMatchObject({ method: "POST", bodyType: "json" });
    const header = res.headers.get("payment-required") ?? "";
    const v2 = decodePaymentRequiredHeader(header);
    expect(PaymentRequiredV2Schema.safeParse(v2).success).toBe(true);
    expect(v2).toEqual({
      x402Version: 2,
      error: "Payment required: sign the requirement in `accepts` and retry with PAYMENT-SIGNATURE.",
      resource: {
        url: resource,
        description: "Create an account and API key, prepaid with USDC",
        mimeType: "application/json",
        // the Bazaar's service metadata; no iconUrl: the docs site is on 127.0.0.1 here
        serviceName: "svc inference marketplace",
        tags: ["inference", "llm", "openai-compatible", "image-generation", "usdc"],
      },
      accepts: [
        {
          scheme: "exact",
          network: "eip155:8453",
          amount: "2500000",
          asset: chain.usdcAddress,
          payTo,
          maxTimeoutSeconds: 300,
          extra: { name: "USD Coin", version: "2" },
        },
      ],
      extensions: {
        bazaar: expect.anything(),
        "payment-identifier": { info: { required: false }, schema: expect.objectContaining({ type: "object" }) },
      },
    });
    expect(isPaymentIdentifierExtension(v2.extensions?.["payment-identifier"])).toBe(true);
    // the Bazaar discovery extension, valid by the package's own validator, POST with the JSON body
    const discovery = extractDiscoveryInfoFromExtension(v2.extensions?.bazaar as DiscoveryExtension);
    expect(validateDiscoveryExtension(v2.extensions?.bazaar as DiscoveryExtension)).toEqual({ valid: true });
    expect(discovery).toMatchObject({ input: { type: "http", method: "POST", bodyType: "json" } });
    expect(res.headers.get("x-svc-error-code")).toBe("payment_required");
  });

  test("top-up and refill: both challenges name the same amount, payee, asset and resource", async ({ app }) => {
    const user = await signIn(app);
    const key = await createKey(app, user);
    const calls: FundingCall[] = [
      { path: "/v1/x402/top-up", body: { amountMicroUsdc: 1_000_000 }, headers: { cookie: user.cookie } },
      {
        path: "/v1/x402/refill",
        body: { amountMicroUsdc: 3_000_000 },
        headers: { authorization: `Bearer ${key.apiKey}` },
      },
    ];
    for (const c of calls) {
      const r = await post(app, c);
      expect(r.status).toBe(402);
      const [v1] = r.body.accepts as Record<string, unknown>[];
      const v2 = decodePaymentRequiredHeader(r.headers.get("payment-required") ?? "");
      expect(PaymentRequiredV2Schema.safeParse(v2).success).toBe(true);
      expect(v2.resource.url).toBe(v1?.resource);
      expect(v2.resource.description).toBe(v1?.description);
      expect(v2.accepts).toEqual([
        {
          scheme: v1?.scheme,
          network: "eip155:8453",
          amount: v1?.maxAmountRequired,
          asset: v1?.asset,
          payTo: v1?.payTo,
          maxTimeoutSeconds: v1?.maxTimeoutSeconds,
          extra: v1?.extra,
        },
      ]);
      expect(v2.accepts[0]?.amount).toBe(String(c.body.amountMicroUsdc));
    }
  });

  test("garbage PAYMENT-SIGNATURE, or a v1 payload in it: 402 invalid_payment with both challenge forms", async ({
    app,
    chain,
  }) => {
    const buyer = await fundedBuyer(chain, 2_000_000n);
    const c = signupCall(1_000_000);
    const v1Payment = await signedPayment(app, buyer, c);
    for (const value of ["bm90IGEgcGF5bWVudA==", "%%%", v1Payment]) {
      const r = await post(app, c, sig(value));
      expect(r.status).toBe(402);
      expect((r.body.error as { code: string; message: string }).code).toBe("invalid_payment");
      expect((r.body.error as { message: string }).message).toBe(
        "PAYMENT-SIGNATURE is not a valid x402 exact payment payload.",
      );
      expect(r.headers.get("x-svc-error-code")).toBe("invalid_payment");
      expect(r.body.accepts).toHaveLength(1);
      const v2 = decodePaymentRequiredHeader(r.headers.get("payment-required") ?? "");
      expect(PaymentRequiredV2Schema.safeParse(v2).success).toBe(true);
      expect(v2.error).toBe("PAYMENT-SIGNATURE is not a valid x402 exact payment payload.");
    }
    expect(await usdcBalance(chain, buyer.address)).toBe(2_000_000n);
    expect(await app.rt.db.payment.count({ where: { payerAddress: buyer.address.toLowerCase() } })).toBe(0);
  });

  test("X-PAYMENT and PAYMENT-SIGNATURE together: 400, nothing settled", async ({ app, chain }) => {
    const buyer = await fundedBuyer(chain, 2_000_000n);
    const c = signupCall(1_000_000);
    const v2 = await signedPaymentV2(app, buyer, c);
    const r = await post(app, c, { "x-payment": v1EnvelopeOf(v2), ...sig(v2) });
    expect(r.status).toBe(400);
    expect(r.body.error).toMatchObject({
      code: "invalid_request",
      message: "Send one payment header: X-PAYMENT (x402 v1) or PAYMENT-SIGNATURE (x402 v2), not both.",
    });
    expect(r.body).not.toHaveProperty("accepts");
    expect(await usdcBalance(chain, buyer.address)).toBe(2_000_000n);
    expect(await app.rt.db.payment.count({ where: { payerAddress: buyer.address.toLowerCase() } })).toBe(0);
  });
});

describe("paid with a default @x402/fetch 2.27 client", () => {
  test("signup, refill and top-up: 200, PAYMENT-SIGNATURE sent, PAYMENT-RESPONSE says success with the transaction", async ({
    app,
    chain,
    payTo,
  }) => {
    const buyer = await fundedBuyer(chain, 20_000_000n);
    const payToBefore = await usdcBalance(chain, payTo);
    const { pay, sent } = defaultV2Client(buyer.privateKey, chain.usdcAddress);

    const signup = await pay(`${app.baseUrl}/v1/x402/signup`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ amountMicroUsdc: 5_000_000, keyName: "v2 agent", maxPriceCentsPerDollar: 60 }),
    });
    expect(signup.status).toBe(200);
    expectPaidWithV2Only(sent);
    const body = (await signup.json()) as Record<string, unknown>;
    expect(body.apiKey).toMatch(/^svc_/);
    expect(body).toMatchObject({ walletAddress: buyer.address.toLowerCase(), pendingUsdc: "5.000000" });
    expect(signup.headers.get("x-payment-response")).toBeNull();
    expect(decodePaymentResponseHeader(signup.headers.get("payment-response") ?? "")).toEqual({
      success: true,
      transaction: body.transaction,
      network: "eip155:8453",
      payer: buyer.address.toLowerCase(),
    });
    expect(await usdcBalance(chain, buyer.address)).toBe(15_000_000n);
    expect(await usdcBalance(chain, payTo)).toBe(payToBefore + 5_000_000n);

    sent.length = 0;
    const bearer = { authorization: `Bearer ${String(body.apiKey)}` };
    const refill = await pay(`${app.baseUrl}/v1/x402/refill`, {
      method: "POST",
      headers: { "content-type": "application/json", ...bearer },
      body: JSON.stringify({ amountMicroUsdc: 2_000_000 }),
    });
    expect(refill.status).toBe(200);
    expectPaidWithV2Only(sent);
    const refilled = (await refill.json()) as Record<string, unknown>;
    expect(refilled).toMatchObject({ pendingUsdc: "7.000000", topUpAmountUsdc: "2.000000" });
    expect(decodePaymentResponseHeader(refill.headers.get("payment-response") ?? "")).toMatchObject({
      success: true,
      transaction: refilled.transaction,
    });

    sent.length = 0;
    const user = await signIn(app, { address: buyer.address, privateKey: buyer.privateKey });
    const topUp = await pay(`${app.baseUrl}/v1/x402/top-up`, {
      method: "POST",
      headers: { "content-type": "application/json", cookie: user.cookie },
      body: JSON.stringify({ amountMicroUsdc: 1_000_000 }),
    });
    expect(topUp.status).toBe(200);
    expectPaidWithV2Only(sent);
    const toppedUp = (await topUp.json()) as Record<string, unknown>;
    expect(toppedUp).toMatchObject({ pendingUsdc: "8.000000", topUpAmountUsdc: "1.000000" });
    expect(decodePaymentResponseHeader(topUp.headers.get("payment-response") ?? "")).toMatchObject({
      success: true,
      transaction: toppedUp.transaction,
    });

    expect(await usdcBalance(chain, buyer.address)).toBe(12_000_000n);
    const account = await app.rt.db.account.findUniqueOrThrow({
      where: { walletAddress: buyer.address.toLowerCase() },
    });
    expect(account.pendingMicroUsdc).toBe(8_000_000n);
    await assertBooksBalance(app.rt.db);
  });

  test("a client with the v2 exact scheme alone (no v1 network at all) pays", async ({ app, chain }) => {
    const buyer = await fundedBuyer(chain, 2_000_000n);
    const client = new x402Client()
      .register("eip155:8453", new ExactEvmScheme(privateKeyToAccount(buyer.privateKey)))
      .setSpendControls({ allowedAssets: [{ network: "eip155:8453", asset: chain.usdcAddress }] });
    const res = await wrapFetchWithPayment(fetch, client)(`${app.baseUrl}/v1/x402/signup`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ amountMicroUsdc: 1_000_000 }),
    });
    expect(res.status).toBe(200);
    expect((await res.json()) as Record<string, unknown>).toMatchObject({ pendingUsdc: "1.000000" });
    expect(decodePaymentResponseHeader(res.headers.get("payment-response") ?? "").success).toBe(true);
    expect(await usdcBalance(chain, buyer.address)).toBe(1_000_000n);
  });
});

describe("one authorization, one payment, in either envelope", () => {
  test("a settled v2 signup replayed: 200 idempotent, no key; its v1 envelope credits nothing twice", async ({
    app,
    chain,
  }) => {
    const buyer = await fundedBuyer(chain, 10_000_000n);
    const c = signupCall(3_000_000);
    const payment = await signedPaymentV2(app, buyer, c);
    const first = await post(app, c, sig(payment));
    expect(first.status).toBe(200);
    expect(first.body.apiKey).toMatch(/^svc_/);

    const replay = await post(app, c, sig(payment));
    expect(replay.status).toBe(200);
    expect(replay.body.idempotent).toBe(true);
    expect(replay.body).not.toHaveProperty("apiKey");
    expect(replay.body.transaction).toBe(first.body.transaction);
    expect(decodePaymentResponseHeader(replay.headers.get("payment-response") ?? "")).toMatchObject({
      success: true,
      transaction: first.body.transaction,
    });

    // the same authorization in the v1 envelope: the same payment, answered in v1
    const v1 = await post(app, c, v1EnvelopeOf(payment));
    expect(v1.status).toBe(200);
    expect(v1.body.idempotent).toBe(true);
    expect(v1.body).not.toHaveProperty("apiKey");
    expect(v1.headers.get("payment-response")).toBeNull();
    expect(decodeXPaymentResponse(v1.headers.get("x-payment-response") ?? "")).toMatchObject({
      success: true,
      transaction: first.body.transaction,
      network: "base",
    });

    const account = await app.rt.db.account.findUniqueOrThrow({
      where: { walletAddress: buyer.address.toLowerCase() },
    });
    expect(account.pendingMicroUsdc).toBe(3_000_000n);
    expect(await app.rt.db.payment.count({ where: { accountId: account.id } })).toBe(1);
    expect(await app.rt.db.apiKey.count({ where: { accountId: account.id } })).toBe(1);
    expect(await usdcBalance(chain, buyer.address)).toBe(7_000_000n);
    await assertBooksBalance(app.rt.db);
  });

  test("ten concurrent submissions, five per envelope, of one authorization: one credit, one key", async ({
    app,
    chain,
  }) => {
    const buyer = await fundedBuyer(chain, 10_000_000n);
    const c = signupCall(4_000_000);
    const payment = await signedPaymentV2(app, buyer, c);
    const v1 = v1EnvelopeOf(payment);
    const results = await Promise.all(
      Array.from({ length: 10 }, (_, i) => (i % 2 === 0 ? post(app, c, sig(payment)) : post(app, c, v1))),
    );
    expect(results.map((r) => r.status)).toEqual(Array(10).fill(200));
    expect(results.filter((r) => typeof r.body.apiKey === "string")).toHaveLength(1);
    expect(new Set(results.map((r) => r.body.transaction)).size).toBe(1);
    // each answer carries the receipt of the envelope it came in
    results.forEach((r, i) => {
      expect(r.headers.get(i % 2 === 0 ? "payment-response" : "x-payment-response"), `#${i}`).toBeTruthy();
      expect(r.headers.get(i % 2 === 0 ? "x-payment-response" : "payment-response"), `#${i}`).toBeNull();
    });
    const account = await app.rt.db.account.findUniqueOrThrow({
      where: { walletAddress: buyer.address.toLowerCase() },
    });
    expect(account.pendingMicroUsdc).toBe(4_000_000n);
    expect(await app.rt.db.payment.count({ where: { accountId: account.id } })).toBe(1);
    expect(await usdcBalance(chain, buyer.address)).toBe(6_000_000n);
    await assertBooksBalance(app.rt.db);
  });
});

describe("rejections with v2", () => {
  test("top-up paid by another wallet: 403 before settlement, nothing moves", async ({ app, chain }) => {
    const owner = await fundedBuyer(chain, 0n);
    const stranger = await fundedBuyer(chain, 5_000_000n);
    const user = await signIn(app, { address: owner.address, privateKey: owner.privateKey });
    const c: FundingCall = {
      path: "/v1/x402/top-up",
      body: { amountMicroUsdc: 1_000_000 },
      headers: { cookie: user.cookie },
    };
    const r = await post(app, c, sig(await signedPaymentV2(app, stranger, c)));
    expect(r.status).toBe(403);
    expect((r.body.error as { code: string }).code).toBe("payer_mismatch");
    expect(await usdcBalance(chain, stranger.address)).toBe(5_000_000n);
    expect(await app.rt.db.payment.count({ where: { payerAddress: stranger.address.toLowerCase() } })).toBe(0);
  });

  test("refill paid by another wallet than the key's: 403, nothing moves", async ({ app, chain }) => {
    const user = await signIn(app);
    const key = await createKey(app, user);
    const stranger = await fundedBuyer(chain, 5_000_000n);
    const c: FundingCall = {
      path: "/v1/x402/refill",
      body: { amountMicroUsdc: 1_000_000 },
      headers: { authorization: `Bearer ${key.apiKey}` },
    };
    const r = await post(app, c, sig(await signedPaymentV2(app, stranger, c)));
    expect(r.status).toBe(403);
    expect(await usdcBalance(chain, stranger.address)).toBe(5_000_000n);
  });

  test.for([
    { label: "another amount than the body", change: {}, body: 2_000_000, reason: "signed amount differs" },
    {
      label: "another network",
      change: { network: "eip155:1" as const },
      body: 1_000_000,
      reason: "network must be eip155:8453",
    },
    {
      label: "another asset",
      change: { asset: "0x0000000000000000000000000000000000000001" },
      body: 1_000_000,
      reason: "asset must be",
    },
    {
      label: "another payTo",
      change: { payTo: "0x0000000000000000000000000000000000000002" },
      body: 1_000_000,
      reason: "payTo",
    },
    {
      label: "another accepted amount",
      change: { amount: "2000000" },
      body: 1_000_000,
      reason: "signed amount differs",
    },
  ])(
    "a v2 payment for $label: 402 invalid_payment, nothing moves",
    async ({ change, body, reason }, { app, chain }) => {
      const buyer = await fundedBuyer(chain, 5_000_000n);
      const payment = tamperedAccepted(await signedPaymentV2(app, buyer, signupCall(1_000_000)), change);
      const r = await post(app, signupCall(body), sig(payment));
      expect(r.status).toBe(402);
      expect((r.body.error as { code: string }).code).toBe("invalid_payment");
      expect((r.body.error as { message: string }).message).toContain(
        "PAYMENT-SIGNATURE does not match this challenge",
      );
      expect((r.body.error as { message: string }).message).toContain(reason);
      expect(decodePaymentRequiredHeader(r.headers.get("payment-required") ?? "").accepts).toHaveLength(1);
      expect(await usdcBalance(chain, buyer.address)).toBe(5_000_000n);
    },
  );

  test("a v2 payment credited by signup, replayed on refill: 409 credited with PAYMENT-RESPONSE", async ({
    app,
    chain,
  }) => {
    const buyer = await fundedBuyer(chain, 5_000_000n);
    const c = signupCall(1_000_000);
    const payment = await signedPaymentV2(app, buyer, c);
    const first = await post(app, c, sig(payment));
    expect(first.status).toBe(200);
    const refill: FundingCall = {
      path: "/v1/x402/refill",
      body: { amountMicroUsdc: 1_000_000 },
      headers: { authorization: `Bearer ${String(first.body.apiKey)}` },
    };
    const r = await post(app, refill, sig(payment));
    expect(r.status).toBe(409);
    expect(r.body).toMatchObject({ credited: true, transaction: first.body.transaction });
    expect(r.headers.get("x-payment-response")).toBeNull();
    expect(decodePaymentResponseHeader(r.headers.get("payment-response") ?? "")).toMatchObject({
      success: true,
      transaction: first.body.transaction,
      network: "eip155:8453",
    });
    await assertBooksBalance(app.rt.db);
  });

  test("a database failure after a v2 settlement: 409 reconciling with PAYMENT-RESPONSE, credited once from the chain", async ({
    app,
    chain,
  }) => {
    const buyer = await fundedBuyer(chain, 5_000_000n);
    const c = signupCall(2_000_000);
    const payment = await signedPaymentV2(app, buyer, c);
    await app.rt.db.$executeRawUnsafe(`
      CREATE FUNCTION test_fail_topup_v2() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN RAISE EXCEPTION 'injected database failure'; END $$`);
    await app.rt.db.$executeRawUnsafe(
      `CREATE TRIGGER test_fail_topup_v2 BEFORE INSERT ON ledger_entries FOR EACH ROW EXECUTE FUNCTION test_fail_topup_v2()`,
    );
    let r: Awaited<ReturnType<typeof post>>;
    try {
      r = await post(app, c, sig(payment));
    } finally {
      await app.rt.db.$executeRawUnsafe("DROP TRIGGER test_fail_topup_v2 ON ledger_entries");
      await app.rt.db.$executeRawUnsafe("DROP FUNCTION test_fail_topup_v2()");
    }
    expect(r.status).toBe(409);
    expect(r.body).toMatchObject({ reconciling: true, transaction: expect.stringMatching(/^0x[0-9a-f]{64}$/) });
    expect(decodePaymentResponseHeader(r.headers.get("payment-response") ?? "")).toMatchObject({
      success: true,
      transaction: r.body.transaction,
    });
    expect(await usdcBalance(chain, buyer.address)).toBe(3_000_000n);
    const p = await app.rt.db.payment.findFirstOrThrow({ where: { payerAddress: buyer.address.toLowerCase() } });
    expect(p.status).toBe("reconciling");
    // a replay while reconciling, in either envelope: 409, never a second settlement
    const again = await post(app, c, v1EnvelopeOf(payment));
    expect(again.status).toBe(409);
    expect(again.body.reconciling).toBe(true);
    expect(again.headers.get("x-payment-response")).toBeTruthy();

    expect(await app.rt.services.payments.reconcilePayment(p.id)).toBe("credited");
    expect(await app.rt.services.payments.reconcilePayment(p.id)).toBe("already");
    const replay = await post(app, c, sig(payment));
    expect(replay.status).toBe(200);
    expect(replay.body.idempotent).toBe(true);
    const account = await app.rt.db.account.findUniqueOrThrow({
      where: { walletAddress: buyer.address.toLowerCase() },
    });
    expect(account.pendingMicroUsdc).toBe(2_000_000n);
    await assertBooksBalance(app.rt.db);
  });

  test("a facilitator nobody answers: 503 naming PAYMENT-SIGNATURE, nothing charged", async ({ chain }) => {
    await withApp({ env: chainEnv(chain, { FACILITATOR_URL: "http://127.0.0.1:9/x402" }) }, async (down) => {
      const buyer = await fundedBuyer(chain, 2_000_000n);
      const c = signupCall(1_000_000);
      const r = await post(down, c, sig(await signedPaymentV2(down, buyer, c)));
      expect(r.status).toBe(503);
      expect(r.body.error).toMatchObject({ code: "facilitator_unavailable" });
      expect((r.body.error as { message: string }).message).toContain("with the same PAYMENT-SIGNATURE");
      expect(await usdcBalance(chain, buyer.address)).toBe(2_000_000n);
    });
  });
});
