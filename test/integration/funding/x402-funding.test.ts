import { describe, expect } from "vitest";
import { decodeXPaymentResponse } from "x402/shared";
import { wrapFetchWithPayment } from "x402-fetch";
import { v1OutputSchema } from "../../../src/domain/funding/discovery.js";
import { call, createKey, signIn } from "../../../testkit/actors.js";
import { assertBooksBalance } from "../../../testkit/books.js";
import { chainEnv, fundedBuyer, post, signedPayment, usdcBalance } from "../../../testkit/funding.js";
import { fundingTest } from "../../../testkit/funding-test.js";
import type { TestApp } from "../../../testkit/harness.js";
import { withApp } from "../../../testkit/world.js";

/** the wallet the service is paid to (`PAY_TO` of `chainEnv`) */
const test = fundingTest.extend("payTo", { scope: "file" }, ({ chain }) => chain.devAccounts[2]?.address ?? "");

/** Redis refuses every new reconciliation job: the queue's job counter is no longer a number. */
async function refuseReconciliationJobs(t: TestApp): Promise<void> {
  const counter = `${t.rt.keys.bullPrefix()}:reconciliation:id`;
  await t.rt.redis.command.set(counter, "not-a-number");
  await expect(t.rt.queues.reconciliation.add("reconcile-payment", { paymentId: "probe" })).rejects.toThrow();
}

const SIGNUP = (amount: number, extra: Record<string, unknown> = {}) => ({
  path: "/v1/x402/signup" as const,
  body: { amountMicroUsdc: amount, ...extra },
});

describe("challenge (402)", () => {
  test("signup without X-PAYMENT: the spec's requirement, no writes", async ({ app, chain, payTo }) => {
    const before = await app.rt.db.payment.count();
    const accounts = await app.rt.db.account.count();
    const r = await post(app, SIGNUP(2_500_000));
    expect(r.status).toBe(402);
    expect(r.body.x402Version).toBe(1);
    expect(r.body.amountMicroUsdc).toBe(2_500_000);
    expect(r.body.accepts).toEqual([
      {
        scheme: "exact",
        network: "base",
        maxAmountRequired: "2500000",
        resource: `${app.rt.config.urls.base}/v1/x402/signup`,
        description: expect.any(String),
        mimeType: "application/json",
        payTo,
        maxTimeoutSeconds: 300,
        asset: chain.usdcAddress,
        extra: { name: "USD Coin", version: "2" },
        // x402 v1 discovery data (issue 41): the request and its 200, for v1 indexes
        outputSchema: v1OutputSchema("signup"),
      },
    ]);
    expect(await app.rt.db.payment.count()).toBe(before);
    expect(await app.rt.db.account.count()).toBe(accounts);
  });

  test.for([
    { label: "below 1 USDC", body: { amountMicroUsdc: 999_999 } },
    { label: "above 1000 USDC", body: { amountMicroUsdc: 1_000_000_001 } },
    { label: "decimal string", body: { amountMicroUsdc: "5.0" } },
    { label: "fraction", body: { amountMicroUsdc: 1_500_000.5 } },
    { label: "missing", body: {} },
    { label: "keyName too long", body: { amountMicroUsdc: 1_000_000, keyName: "x".repeat(65) } },
    { label: "ceiling out of range", body: { amountMicroUsdc: 1_000_000, maxPriceCentsPerDollar: 81 } },
  ])("400 for $label", async ({ body }, { app }) => {
    const r = await post(app, { path: "/v1/x402/signup", body });
    expect(r.status).toBe(400);
    expect((r.body.error as { code: string }).code).toBe("invalid_request");
  });

  test("top-up needs a session and refill a Bearer (401 before any challenge)", async ({ app }) => {
    expect((await post(app, { path: "/v1/x402/top-up", body: { amountMicroUsdc: 1_000_000 } })).status).toBe(401);
    expect((await post(app, { path: "/v1/x402/refill", body: { amountMicroUsdc: 1_000_000 } })).status).toBe(401);
    const user = await signIn(app);
    const refillWithCookie = await post(app, {
      path: "/v1/x402/refill",
      body: { amountMicroUsdc: 1_000_000 },
      headers: { cookie: user.cookie },
    });
    expect(refillWithCookie.status).toBe(401);
  });
});

describe("paid signup, top-up and refill with the real x402 buyer client", () => {
  test("signup → key, pending credit, USDC moved; confirmed after the blocks; then refill and top-up", async ({
    app,
    chain,
    payTo,
  }) => {
    const buyer = await fundedBuyer(chain, 50_000_000n);
    const payToBefore = await usdcBalance(chain, payTo);
    const pay = wrapFetchWithPayment(fetch, buyer as never, 1_000_000_000n);
    const res = await pay(`${app.baseUrl}/v1/x402/signup`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ amountMicroUsdc: 5_000_000, keyName: "my agent", maxPriceCentsPerDollar: 60 }),
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as Record<string, unknown>;
    expect(body.apiKey).toMatch(/^svc_/);
    expect(body.keyPrefix).toBe(String(body.apiKey).slice(0, 12));
    expect(body.walletAddress).toBe(buyer.address.toLowerCase());
    expect(body.pendingUsdc).toBe("5.000000");
    expect(body.confirmationBlocks).toBe(5);
    expect(body.transaction).toMatch(/^0x[0-9a-f]{64}$/);
    const receipt = decodeXPaymentResponse(res.headers.get("x-payment-response") ?? "");
    expect(receipt.transaction.toLowerCase()).toBe(body.transaction);
    expect(await usdcBalance(chain, buyer.address)).toBe(45_000_000n);
    expect(await usdcBalance(chain, payTo)).toBe(payToBefore + 5_000_000n);

    const apiKey = String(body.apiKey);
    const bearer = { authorization: `Bearer ${apiKey}` };
    const me = await call(app, { method: "GET", path: "/v1/agent/me", headers: bearer });
    expect(me.body).toMatchObject({
      confirmedUsdc: "0.000000",
      pendingUsdc: "5.000000",
      maxPriceCentsPerDollar: 60,
      hasEverFunded: false,
    });

    // not deep enough yet
    await app.rt.services.payments.confirmPending();
    expect((await call(app, { method: "GET", path: "/v1/agent/me", headers: bearer })).body).toMatchObject({
      pendingUsdc: "5.000000",
    });
    await chain.mine(5);
    const c = await app.rt.services.payments.confirmPending();
    expect(c.confirmed).toBe(1);
    const after = await call(app, { method: "GET", path: "/v1/agent/me", headers: bearer });
    expect(after.body).toMatchObject({ confirmedUsdc: "5.000000", pendingUsdc: "0.000000", hasEverFunded: true });
    expect((after.body as { firstFundedAt: string }).firstFundedAt).toMatch(/Z$/);
    // idempotent: a second pass confirms nothing
    expect((await app.rt.services.payments.confirmPending()).confirmed).toBe(0);

    // refill with the key (no key minted)
    const keysBefore = await app.rt.db.apiKey.count();
    const refill = await pay(`${app.baseUrl}/v1/x402/refill`, {
      method: "POST",
      headers: { "content-type": "application/json", ...bearer },
      body: JSON.stringify({ amountMicroUsdc: 2_000_000 }),
    });
    expect(refill.status).toBe(200);
    expect(await refill.json()).toMatchObject({
      confirmedUsdc: "5.000000",
      pendingUsdc: "2.000000",
      topUpAmountUsdc: "2.000000",
      walletAddress: buyer.address.toLowerCase(),
    });
    expect(await app.rt.db.apiKey.count()).toBe(keysBefore);

    // top-up with a session on the same wallet
    const user = await signIn(app, { address: buyer.address, privateKey: buyer.privateKey });
    const topUp = await pay(`${app.baseUrl}/v1/x402/top-up`, {
      method: "POST",
      headers: { "content-type": "application/json", cookie: user.cookie },
      body: JSON.stringify({ amountMicroUsdc: 1_000_000 }),
    });
    expect(topUp.status).toBe(200);
    expect(await topUp.json()).toMatchObject({ pendingUsdc: "3.000000", topUpAmountUsdc: "1.000000" });
    expect(await usdcBalance(chain, buyer.address)).toBe(42_000_000n);
    await assertBooksBalance(app.rt.db);
  });
});

describe("exactly-once credit", () => {
  test("a replayed signup returns idempotent: true without apiKey and credits nothing", async ({ app, chain }) => {
    const buyer = await fundedBuyer(chain, 10_000_000n);
    const c = SIGNUP(3_000_000);
    const payment = await signedPayment(app, buyer, c);
    const first = await post(app, c, payment);
    expect(first.status).toBe(200);
    expect(first.body.apiKey).toMatch(/^svc_/);
    const replay = await post(app, c, payment);
    expect(replay.status).toBe(200);
    expect(replay.body.idempotent).toBe(true);
    expect(replay.body).not.toHaveProperty("apiKey");
    // its key was issued, on the first answer
    expect(replay.body).not.toHaveProperty("keyIssued");
    expect(replay.body.transaction).toBe(first.body.transaction);
    expect(replay.headers.get("x-payment-response")).toBeTruthy();
    const account = await app.rt.db.account.findUniqueOrThrow({
      where: { walletAddress: buyer.address.toLowerCase() },
    });
    expect(account.pendingMicroUsdc).toBe(3_000_000n);
    expect(await usdcBalance(chain, buyer.address)).toBe(7_000_000n);
    await assertBooksBalance(app.rt.db);
  });

  test("ten concurrent submissions of one payment credit once and mint one key", async ({ app, chain }) => {
    const buyer = await fundedBuyer(chain, 10_000_000n);
    const c = SIGNUP(4_000_000);
    const payment = await signedPayment(app, buyer, c);
    const results = await Promise.all(Array.from({ length: 10 }, () => post(app, c, payment)));
    expect(results.map((r) => r.status)).toEqual(Array(10).fill(200));
    expect(results.filter((r) => typeof r.body.apiKey === "string")).toHaveLength(1);
    expect(results.filter((r) => r.body.idempotent === true)).toHaveLength(9);
    expect(new Set(results.map((r) => r.body.transaction)).size).toBe(1);
    const account = await app.rt.db.account.findUniqueOrThrow({
      where: { walletAddress: buyer.address.toLowerCase() },
    });
    expect(account.pendingMicroUsdc).toBe(4_000_000n);
    expect(await app.rt.db.apiKey.count({ where: { accountId: account.id } })).toBe(1);
    expect(await app.rt.db.payment.count({ where: { accountId: account.id } })).toBe(1);
    expect(await usdcBalance(chain, buyer.address)).toBe(6_000_000n);
    await assertBooksBalance(app.rt.db);
  });
});

describe("rejections", () => {
  test("top-up paid by another wallet is 403 before settlement (nothing moves)", async ({ app, chain }) => {
    const owner = await fundedBuyer(chain, 0n);
    const stranger = await fundedBuyer(chain, 5_000_000n);
    const user = await signIn(app, { address: owner.address, privateKey: owner.privateKey });
    const c = {
      path: "/v1/x402/top-up" as const,
      body: { amountMicroUsdc: 1_000_000 },
      headers: { cookie: user.cookie },
    };
    const payment = await signedPayment(app, stranger, c);
    const r = await post(app, c, payment);
    expect(r.status).toBe(403);
    expect((r.body.error as { code: string }).code).toBe("payer_mismatch");
    expect(await usdcBalance(chain, stranger.address)).toBe(5_000_000n);
    expect(await app.rt.db.payment.count({ where: { payerAddress: stranger.address.toLowerCase() } })).toBe(0);
  });

  test("refill paid by another wallet than the key's is 403", async ({ app, chain }) => {
    const user = await signIn(app);
    const key = await createKey(app, user);
    const stranger = await fundedBuyer(chain, 5_000_000n);
    const c = {
      path: "/v1/x402/refill" as const,
      body: { amountMicroUsdc: 1_000_000 },
      headers: { authorization: `Bearer ${key.apiKey}` },
    };
    const r = await post(app, c, await signedPayment(app, stranger, c));
    expect(r.status).toBe(403);
    expect(await usdcBalance(chain, stranger.address)).toBe(5_000_000n);
  });

  test("a payment the facilitator refuses (payer cannot cover it) is 402 with accepts, nothing credited", async ({
    app,
    chain,
  }) => {
    const broke = await fundedBuyer(chain, 500_000n);
    const c = SIGNUP(1_000_000);
    const r = await post(app, c, await signedPayment(app, broke, c));
    expect(r.status).toBe(402);
    expect(r.body.accepts).toHaveLength(1);
    expect(await app.rt.db.account.count({ where: { walletAddress: broke.address.toLowerCase() } })).toBe(0);
    expect(await usdcBalance(chain, broke.address)).toBe(500_000n);
  });

  test("a payment for another amount than the body is 402 with accepts", async ({ app, chain }) => {
    const buyer = await fundedBuyer(chain, 5_000_000n);
    const payment = await signedPayment(app, buyer, SIGNUP(1_000_000));
    const r = await post(app, SIGNUP(2_000_000), payment);
    expect(r.status).toBe(402);
    expect(r.body.accepts).toHaveLength(1);
    // the header and the body name the same code (SPEC Errors rule 1)
    expect((r.body.error as { code: string }).code).toBe("invalid_payment");
    expect(r.headers.get("x-svc-error-code")).toBe("invalid_payment");
    expect(await usdcBalance(chain, buyer.address)).toBe(5_000_000n);
  });

  test("garbage X-PAYMENT is 402 with accepts", async ({ app }) => {
    const r = await post(app, SIGNUP(1_000_000), "bm90IGEgcGF5bWVudA==");
    expect(r.status).toBe(402);
    expect(r.body.accepts).toHaveLength(1);
    expect(r.headers.get("x-svc-error-code")).toBe((r.body.error as { code: string }).code);
    const plain = await post(app, SIGNUP(1_000_000));
    expect(plain.headers.get("x-svc-error-code")).toBe("payment_required");
    expect((plain.body.error as { code: string }).code).toBe("payment_required");
  });

  test("a payment credited by signup, replayed on refill: 409 credited, with its transaction and receipt", async ({
    app,
    chain,
  }) => {
    const buyer = await fundedBuyer(chain, 5_000_000n);
    const c = SIGNUP(1_000_000);
    const payment = await signedPayment(app, buyer, c);
    const first = await post(app, c, payment);
    expect(first.status).toBe(200);
    const refill = {
      path: "/v1/x402/refill" as const,
      body: { amountMicroUsdc: 1_000_000 },
      headers: { authorization: `Bearer ${String(first.body.apiKey)}` },
    };
    const r = await post(app, refill, payment);
    expect(r.status).toBe(409);
    expect(r.body).not.toHaveProperty("accepts");
    expect(r.body).toMatchObject({ credited: true, transaction: first.body.transaction });
    expect((r.body.error as { code: string }).code).toBe("payment_unfinished");
    expect(r.headers.get("x-svc-error-code")).toBe("payment_unfinished");
    expect(decodeXPaymentResponse(r.headers.get("x-payment-response") ?? "")).toMatchObject({
      success: true,
      transaction: first.body.transaction,
    });
    const account = await app.rt.db.account.findUniqueOrThrow({
      where: { walletAddress: buyer.address.toLowerCase() },
    });
    expect(account.pendingMicroUsdc).toBe(1_000_000n);
    await assertBooksBalance(app.rt.db);
  });
});

describe("settled but not recorded (409) and reconciliation", () => {
  test("a database failure after settlement → 409 reconciling, then credited once from the chain", async ({
    app,
    chain,
  }) => {
    const buyer = await fundedBuyer(chain, 5_000_000n);
    const c = SIGNUP(2_000_000);
    const payment = await signedPayment(app, buyer, c);
    // make the credit write fail: the ledger refuses top-up entries while this trigger exists
    await app.rt.db.$executeRawUnsafe(`
      CREATE FUNCTION test_fail_topup() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN RAISE EXCEPTION 'injected database failure'; END $$`);
    await app.rt.db.$executeRawUnsafe(
      `CREATE TRIGGER test_fail_topup BEFORE INSERT ON ledger_entries FOR EACH ROW EXECUTE FUNCTION test_fail_topup()`,
    );
    let r: Awaited<ReturnType<typeof post>>;
    try {
      r = await post(app, c, payment);
    } finally {
      await app.rt.db.$executeRawUnsafe("DROP TRIGGER test_fail_topup ON ledger_entries");
      await app.rt.db.$executeRawUnsafe("DROP FUNCTION test_fail_topup()");
    }
    expect(r.status).toBe(409);
    expect(r.body).toMatchObject({ reconciling: true, transaction: expect.stringMatching(/^0x[0-9a-f]{64}$/) });
    expect(r.body).not.toHaveProperty("accepts");
    expect(r.headers.get("x-payment-response")).toBeTruthy();
    // the money moved on chain, nothing is credited yet
    expect(await usdcBalance(chain, buyer.address)).toBe(3_000_000n);
    const p = await app.rt.db.payment.findFirstOrThrow({ where: { payerAddress: buyer.address.toLowerCase() } });
    expect(p.status).toBe("reconciling");
    // the queued job exists
    expect(await app.rt.queues.reconciliation.getJob(`reconcile-${p.id}`)).toBeTruthy();

    expect(await app.rt.services.payments.reconcilePayment(p.id)).toBe("credited");
    expect(await app.rt.services.payments.reconcilePayment(p.id)).toBe("already");
    expect((await app.rt.services.payments.reconcileOutstanding()).credited).toBe(0);
    const account = await app.rt.db.account.findUniqueOrThrow({
      where: { walletAddress: buyer.address.toLowerCase() },
    });
    expect(account.pendingMicroUsdc).toBe(2_000_000n);
    // a replay now answers from the record
    const replay = await post(app, c, payment);
    expect(replay.status).toBe(200);
    expect(replay.body.idempotent).toBe(true);
    await assertBooksBalance(app.rt.db);
  });

  test("a crash between settle and write is recovered by the chain scan", async ({ app, chain, payTo }) => {
    const buyer = await fundedBuyer(chain, 5_000_000n);
    const c = SIGNUP(1_500_000);
    const header = await signedPayment(app, buyer, c);
    // what a process that died right after settling leaves behind: the intent row, the transfer on chain
    const { buildBothRequirements, decodePaymentHeader, exactPaymentOf } = await import(
      "../../../src/domain/funding/x402.js"
    );
    const decoded = decodePaymentHeader(header);
    if (!decoded) throw new Error("decode");
    const payment = exactPaymentOf(
      decoded,
      buildBothRequirements({
        amountMicroUsdc: 1_500_000n,
        resource: `${app.rt.config.urls.base}/v1/x402/signup`,
        description: "x",
        payTo,
        asset: chain.usdcAddress,
        usdcName: "USD Coin",
        usdcVersion: "2",
        chainId: 8453,
      }),
    );
    const row = await app.rt.db.payment.create({
      data: {
        kind: "signup",
        status: "settling",
        payerAddress: decoded.payer,
        payToAddress: decoded.payTo,
        assetAddress: chain.usdcAddress.toLowerCase(),
        amountMicroUsdc: decoded.valueMicroUsdc,
        authorizationNonce: decoded.nonce,
        validBefore: decoded.validBefore,
        createdAt: new Date(Date.now() - 5 * 60_000),
      },
    });
    const settled = await app.rt.facilitator.settle(payment);
    expect(settled.ok).toBe(true);
    const scan = await app.rt.services.payments.reconcileOutstanding();
    expect(scan.credited).toBe(1);
    const p = await app.rt.db.payment.findUniqueOrThrow({ where: { id: row.id } });
    expect(p.status).toBe("pending");
    expect(p.settlementTxHash).toBe(settled.ok ? settled.value.transaction.toLowerCase() : "");
    expect((await app.rt.services.payments.reconcileOutstanding()).credited).toBe(0);
    const account = await app.rt.db.account.findUniqueOrThrow({
      where: { walletAddress: buyer.address.toLowerCase() },
    });
    expect(account.pendingMicroUsdc).toBe(1_500_000n);
    expect(account.authProvider).toBe("x402");
    await assertBooksBalance(app.rt.db);
  });

  test("settled, the write fails and the queue is down, but the row is marked: reconciling true, the scan credits it", async ({
    chain,
  }) => {
    await withApp({ env: chainEnv(chain), closeMayFail: true }, async (broken) => {
      const buyer = await fundedBuyer(chain, 5_000_000n);
      const c = SIGNUP(1_000_000);
      const payment = await signedPayment(broken, buyer, c);
      await broken.rt.db.$executeRawUnsafe(`
        CREATE FUNCTION test_fail_topup() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN RAISE EXCEPTION 'injected database failure'; END $$`);
      await broken.rt.db.$executeRawUnsafe(
        `CREATE TRIGGER test_fail_topup BEFORE INSERT ON ledger_entries FOR EACH ROW EXECUTE FUNCTION test_fail_topup()`,
      );
      await refuseReconciliationJobs(broken);
      const r = await post(broken, c, payment);
      await broken.rt.db.$executeRawUnsafe("DROP TRIGGER test_fail_topup ON ledger_entries");
      expect(r.status).toBe(409);
      expect(r.body).toMatchObject({ reconciling: true, transaction: expect.stringMatching(/^0x[0-9a-f]{64}$/) });
      const p = await broken.rt.db.payment.findFirstOrThrow({ where: { payerAddress: buyer.address.toLowerCase() } });
      expect(p.status).toBe("reconciling");
      expect((await broken.rt.services.payments.reconcileOutstanding()).credited).toBe(1);
      expect(
        (await broken.rt.db.account.findUniqueOrThrow({ where: { walletAddress: buyer.address.toLowerCase() } }))
          .pendingMicroUsdc,
      ).toBe(1_000_000n);
      await assertBooksBalance(broken.rt.db);
    });
  });

  test("settled, and neither the credit, the mark nor the queue can be written: 409 reconciling false", async ({
    chain,
  }) => {
    await withApp({ env: chainEnv(chain), closeMayFail: true }, async (broken) => {
      const buyer = await fundedBuyer(chain, 5_000_000n);
      const c = SIGNUP(1_000_000);
      const payment = await signedPayment(broken, buyer, c);
      // every move of a payment row past `settling` fails: the credit and the reconciling mark
      await broken.rt.db.$executeRawUnsafe(`
        CREATE FUNCTION test_fail_payment_move() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN RAISE EXCEPTION 'injected database failure'; END $$`);
      await broken.rt.db.$executeRawUnsafe(
        `CREATE TRIGGER test_fail_payment_move BEFORE UPDATE ON payments FOR EACH ROW
           WHEN (NEW.status <> 'settling') EXECUTE FUNCTION test_fail_payment_move()`,
      );
      await refuseReconciliationJobs(broken);
      const r = await post(broken, c, payment);
      await broken.rt.db.$executeRawUnsafe("DROP TRIGGER test_fail_payment_move ON payments");
      expect(r.status).toBe(409);
      expect(r.body).not.toHaveProperty("accepts");
      expect(r.body).toMatchObject({ reconciling: false, transaction: expect.stringMatching(/^0x[0-9a-f]{64}$/) });
      expect(decodeXPaymentResponse(r.headers.get("x-payment-response") ?? "")).toMatchObject({
        success: true,
        transaction: r.body.transaction,
      });
      expect(await usdcBalance(chain, buyer.address)).toBe(4_000_000n);
      // what the operator's recovery does: reconcile the payment from the chain, once
      const p = await broken.rt.db.payment.findFirstOrThrow({ where: { payerAddress: buyer.address.toLowerCase() } });
      expect(p.status).toBe("settling");
      expect(await broken.rt.services.payments.reconcilePayment(p.id)).toBe("credited");
      expect(await broken.rt.services.payments.reconcilePayment(p.id)).toBe("already");
      await assertBooksBalance(broken.rt.db);
    });
  });

  test("signup on a wallet with 10 active keys: 409 credited, no key", async ({ app, chain }) => {
    const buyer = await fundedBuyer(chain, 5_000_000n);
    const user = await signIn(app, { address: buyer.address, privateKey: buyer.privateKey });
    for (let i = 0; i < 10; i++) await createKey(app, user, `k${i}`);
    const c = SIGNUP(1_000_000);
    const r = await post(app, c, await signedPayment(app, buyer, c));
    expect(r.status).toBe(409);
    expect(r.body).toMatchObject({ credited: true, transaction: expect.stringMatching(/^0x/) });
    // credited: neither queued for crediting nor waiting for a human (SPEC funding rules 6 and 9)
    expect(r.body).not.toHaveProperty("reconciling");
    expect(r.body.error).not.toHaveProperty("reconciling");
    expect(r.body).not.toHaveProperty("accepts");
    expect(decodeXPaymentResponse(r.headers.get("x-payment-response") ?? "")).toMatchObject({
      success: true,
      transaction: r.body.transaction,
    });
    const account = await app.rt.db.account.findUniqueOrThrow({ where: { id: user.accountId } });
    expect(account.pendingMicroUsdc).toBe(1_000_000n);
    expect(await app.rt.db.apiKey.count({ where: { accountId: user.accountId, status: "active" } })).toBe(10);
    await assertBooksBalance(app.rt.db);
  });
});

describe("facilitator down and signup fuse", () => {
  test("a facilitator nobody answers: 503, nothing charged or credited", async ({ chain }) => {
    await withApp({ env: chainEnv(chain, { FACILITATOR_URL: "http://127.0.0.1:9/x402" }) }, async (down) => {
      const buyer = await fundedBuyer(chain, 2_000_000n);
      const c = SIGNUP(1_000_000);
      const r = await post(down, c, await signedPayment(down, buyer, c));
      expect(r.status).toBe(503);
      expect((r.body.error as { code: string }).code).toBe("facilitator_unavailable");
      expect(await down.rt.db.account.count()).toBe(0);
      expect(await usdcBalance(chain, buyer.address)).toBe(2_000_000n);
      await assertBooksBalance(down.rt.db);
    });
  });

  test("the fuse trips after SIGNUP_FUSE_MAX facilitator-bound signups: 429 with Retry-After", async ({ chain }) => {
    await withApp({ env: chainEnv(chain, { SIGNUP_FUSE_MAX: "2", SIGNUP_FUSE_WINDOW_S: "60" }) }, async (fused) => {
      const statuses: number[] = [];
      let retryAfter: string | null = null;
      for (let i = 0; i < 3; i++) {
        const buyer = await fundedBuyer(chain, 1_000_000n);
        const c = SIGNUP(1_000_000);
        const r = await post(fused, c, await signedPayment(fused, buyer, c));
        statuses.push(r.status);
        if (r.status === 429) retryAfter = r.headers.get("retry-after");
      }
      expect(statuses).toEqual([200, 200, 429]);
      expect(Number(retryAfter)).toBeGreaterThan(0);
      expect(Number(retryAfter)).toBeLessThanOrEqual(60);
      // challenges never touch the facilitator and are never fused
      expect((await post(fused, SIGNUP(1_000_000))).status).toBe(402);
    });
  });
});
