import { describe, expect } from "vitest";
import { decodeXPaymentResponse } from "x402/shared";
import { assertBooksBalance } from "../../../testkit/books.js";
import { chainEnv, fundedBuyer, post, signedPayment, signupCall, usdcBalance } from "../../../testkit/funding.js";
import { fundingTest } from "../../../testkit/funding-test.js";
import type { TestApp } from "../../../testkit/harness.js";
import {
  type HttpFacilitatorStandIn,
  type SettleMode,
  startHttpFacilitator,
} from "../../../testkit/http-facilitator.js";
import { withApp } from "../../../testkit/world.js";

/**
 * Issue 26 finding 1: a facilitator's answer that does not prove nothing moved is never a 402. The
 * service talks to a standard x402 facilitator over HTTP that settles on the local chain and then
 * loses its answer (a gateway 502, a dropped connection): the buyer gets 409 `reconciling: true`,
 * is credited exactly once by reconciliation (the real worker), and is never asked to pay again.
 */

/** a standard x402 facilitator over HTTP, settling on the file's chain */
const test = fundingTest.extend("facilitator", { scope: "file" }, async ({ chain }, { onCleanup }) => {
  const facilitator = await startHttpFacilitator(chain);
  onCleanup(() => facilitator.close());
  return facilitator;
});
test.override("appOptions", ({ chain, facilitator }) => ({
  env: chainEnv(chain, { FACILITATOR_URL: facilitator.url }),
  workers: true,
}));

async function pendingOf(app: TestApp, wallet: string): Promise<bigint | undefined> {
  const a = await app.rt.db.account.findUnique({ where: { walletAddress: wallet.toLowerCase() } });
  return a?.pendingMicroUsdc;
}

/** Waits for the reconciliation worker to credit the wallet (it retries with backoff). */
async function creditedBy(app: TestApp, wallet: string, amount: bigint): Promise<void> {
  const deadline = Date.now() + 25_000;
  while (Date.now() < deadline) {
    if ((await pendingOf(app, wallet)) === amount) return;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`not credited: ${await pendingOf(app, wallet)}`);
}

/** One funding call while the facilitator answers `/settle` in `mode`; honest again after. */
async function postWhile(
  app: TestApp,
  facilitator: HttpFacilitatorStandIn,
  mode: SettleMode,
  c: Parameters<typeof post>[1],
  payment: string,
) {
  facilitator.mode = mode;
  try {
    return await post(app, c, payment);
  } finally {
    facilitator.mode = "honest";
  }
}

function expectUnfinished(r: Awaited<ReturnType<typeof post>>) {
  expect(r.status).toBe(409);
  expect(r.body).not.toHaveProperty("accepts");
  expect(r.body.reconciling).toBe(true);
  expect((r.body.error as { code: string }).code).toBe("payment_unfinished");
  expect(r.headers.get("x-svc-error-code")).toBe("payment_unfinished");
  // SPEC: X-PAYMENT-RESPONSE on 409 too; an outcome not yet proven is not called a success
  const receipt = decodeXPaymentResponse(r.headers.get("x-payment-response") ?? "");
  expect(receipt.success).toBe(false);
  expect(receipt.network).toBe("base");
}

describe("a facilitator that settles on chain and loses its answer", () => {
  test.for([["settle-then-502" as const], ["settle-then-drop" as const]] as const)(
    "signup, %s: 409 reconciling, credited once from the chain, never asked to pay again",
    async ([mode], { app, chain, facilitator }) => {
      const buyer = await fundedBuyer(chain, 5_000_000n);
      const c = signupCall(2_000_000);
      const payment = await signedPayment(app, buyer, c);
      const calls = facilitator.settleCalls;
      const r = await postWhile(app, facilitator, mode, c, payment);
      expectUnfinished(r);
      // the transfer happened on chain
      expect(await usdcBalance(chain, buyer.address)).toBe(3_000_000n);
      // paying the same authorization again is answered from the record: 409, never a second settle
      const replay = await post(app, c, payment);
      expect(replay.status).toBe(409);
      expect(replay.body.reconciling).toBe(true);
      expect(facilitator.settleCalls).toBe(calls + 1);

      await creditedBy(app, buyer.address, 2_000_000n);
      const p = await app.rt.db.payment.findFirstOrThrow({ where: { payerAddress: buyer.address.toLowerCase() } });
      expect(p.status).toBe("pending");
      expect(p.settlementTxHash).toMatch(/^0x[0-9a-f]{64}$/);
      // exactly once: another scan and another job credit nothing more
      expect(await app.rt.services.payments.reconcilePayment(p.id)).toBe("already");
      expect((await app.rt.services.payments.reconcileOutstanding()).credited).toBe(0);
      expect(await pendingOf(app, buyer.address)).toBe(2_000_000n);
      expect(await app.rt.db.payment.count({ where: { payerAddress: buyer.address.toLowerCase() } })).toBe(1);
      // the record now answers: the idempotent replay, which says the signup's key was never issued
      // (the wallet's session mints one: reconciliation.test.ts)
      const after = await post(app, c, payment);
      expect(after.status).toBe(200);
      expect(after.body).toMatchObject({ idempotent: true, keyIssued: false });
      expect(after.body).not.toHaveProperty("apiKey");
      expect(after.body.transaction).toBe(p.settlementTxHash);
      expect(facilitator.settleCalls).toBe(calls + 1);
      await assertBooksBalance(app.rt.db);
    },
  );

  test("refill, settle-then-502: 409 reconciling, credited once to the key's account", async ({
    app,
    chain,
    facilitator,
  }) => {
    const buyer = await fundedBuyer(chain, 10_000_000n);
    const sc = signupCall(1_000_000);
    const signup = await post(app, sc, await signedPayment(app, buyer, sc));
    expect(signup.status).toBe(200);
    const c = {
      path: "/v1/x402/refill" as const,
      body: { amountMicroUsdc: 3_000_000 },
      headers: { authorization: `Bearer ${String(signup.body.apiKey)}` },
    };
    const payment = await signedPayment(app, buyer, c);
    const r = await postWhile(app, facilitator, "settle-then-502", c, payment);
    expectUnfinished(r);
    expect(await usdcBalance(chain, buyer.address)).toBe(6_000_000n);
    expect((await post(app, c, payment)).status).toBe(409);
    await creditedBy(app, buyer.address, 4_000_000n);
    const again = await post(app, c, payment);
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ pendingUsdc: "4.000000", topUpAmountUsdc: "3.000000", idempotent: true });
    expect(await pendingOf(app, buyer.address)).toBe(4_000_000n);
    await assertBooksBalance(app.rt.db);
  });

  test("a 502 that came before the facilitator settled: reconciliation watches and credits once when it lands", async ({
    app,
    chain,
    facilitator,
  }) => {
    const buyer = await fundedBuyer(chain, 5_000_000n);
    const c = signupCall(1_500_000);
    const payment = await signedPayment(app, buyer, c);
    const r = await postWhile(app, facilitator, "502-then-settle", c, payment);
    expectUnfinished(r);
    await facilitator.lateSettlements();
    expect(await usdcBalance(chain, buyer.address)).toBe(3_500_000n);
    await creditedBy(app, buyer.address, 1_500_000n);
    expect((await app.rt.services.payments.reconcileOutstanding()).credited).toBe(0);
    expect(await pendingOf(app, buyer.address)).toBe(1_500_000n);
    await assertBooksBalance(app.rt.db);
  });

  test("a 502 with nothing settled: still 409 (unknown), nothing credited while the authorization is unused", async ({
    app,
    chain,
    facilitator,
  }) => {
    const buyer = await fundedBuyer(chain, 5_000_000n);
    const c = signupCall(1_000_000);
    const payment = await signedPayment(app, buyer, c);
    const r = await postWhile(app, facilitator, "502-no-settle", c, payment);
    expectUnfinished(r);
    expect(await usdcBalance(chain, buyer.address)).toBe(5_000_000n);
    const p = await app.rt.db.payment.findFirstOrThrow({ where: { payerAddress: buyer.address.toLowerCase() } });
    expect(p.status).toBe("reconciling");
    // the authorization is valid until validBefore: the reconciler keeps watching, credits nothing
    expect(await app.rt.services.payments.reconcilePayment(p.id)).toBe("waiting");
    expect(await app.rt.db.account.count({ where: { walletAddress: buyer.address.toLowerCase() } })).toBe(0);
    expect((await post(app, c, payment)).status).toBe(409);
    await assertBooksBalance(app.rt.db);
  });
});

describe("a facilitator that says no before anything moved", () => {
  test("success: false with a reason: 402 with accepts, nothing moved, the row failed", async ({
    app,
    chain,
    facilitator,
  }) => {
    const buyer = await fundedBuyer(chain, 5_000_000n);
    const c = signupCall(1_000_000);
    const payment = await signedPayment(app, buyer, c);
    const r = await postWhile(app, facilitator, "refuse", c, payment);
    expect(r.status).toBe(402);
    expect(r.body.accepts).toHaveLength(1);
    expect((r.body.error as { code: string }).code).toBe("invalid_payment");
    expect(r.headers.get("x-svc-error-code")).toBe("invalid_payment");
    expect(await usdcBalance(chain, buyer.address)).toBe(5_000_000n);
    const p = await app.rt.db.payment.findFirstOrThrow({ where: { payerAddress: buyer.address.toLowerCase() } });
    expect(p.status).toBe("failed");
    await assertBooksBalance(app.rt.db);
  });
});

describe("a facilitator that speaks x402 v2 (lists eip155:8453 in /supported)", () => {
  test("the service sends it v2 bodies; a settled payment whose answer is lost is still 409 reconciling, credited once", async ({
    app,
    chain,
  }) => {
    const v2 = await startHttpFacilitator(chain, { versions: [1, 2] });
    try {
      await withApp({ beside: app, env: chainEnv(chain, { FACILITATOR_URL: v2.url }) }, async (svc) => {
        const honest = await fundedBuyer(chain, 5_000_000n);
        const c1 = signupCall(1_000_000);
        const ok = await post(svc, c1, await signedPayment(svc, honest, c1));
        expect(ok.status).toBe(200);
        expect(decodeXPaymentResponse(ok.headers.get("x-payment-response") ?? "")).toMatchObject({ success: true });

        const buyer = await fundedBuyer(chain, 5_000_000n);
        const c2 = signupCall(2_000_000);
        const r = await postWhile(svc, v2, "settle-then-502", c2, await signedPayment(svc, buyer, c2));
        expectUnfinished(r);
        expect(await usdcBalance(chain, buyer.address)).toBe(3_000_000n);
        // the file's app runs the workers on the same queue
        await creditedBy(app, buyer.address, 2_000_000n);
        expect((await app.rt.services.payments.reconcileOutstanding()).credited).toBe(0);
        await assertBooksBalance(app.rt.db);
      });
      expect(v2.requests.map((q) => q.path)).toEqual(["/verify", "/settle", "/verify", "/settle"]);
      for (const q of v2.requests) {
        expect(q.body).toMatchObject({
          x402Version: 2,
          paymentPayload: { x402Version: 2, accepted: { network: "eip155:8453" } },
          paymentRequirements: { scheme: "exact", network: "eip155:8453" },
        });
      }
      expect(v2.supportedCalls).toBe(1);
    } finally {
      await v2.close();
    }
  });
});
