import { createPublicClient, http } from "viem";
import { describe, expect } from "vitest";
import { createChainGateway } from "../../../src/adapters/chain/usdc-gateway.js";
import { call } from "../../../testkit/actors.js";
import { assertBooksBalance } from "../../../testkit/books.js";
import {
  cancelAuthorization,
  chainEnv,
  fundedBuyer,
  post,
  readXPayment,
  signedPayment,
  signupCall,
  siweSession,
  usdcBalance,
} from "../../../testkit/funding.js";
import { fundingTest } from "../../../testkit/funding-test.js";
import { movableClock, type TestApp } from "../../../testkit/harness.js";
import { type HttpFacilitatorStandIn, startHttpFacilitator } from "../../../testkit/http-facilitator.js";
import { startLaggingRpc } from "../../../testkit/lagging-rpc.js";
import { withApp } from "../../../testkit/world.js";

/**
 * Issue 38 item 5, reconciliation: a settle-failure write never overwrites what the chain scan
 * credited; a signup the scan credited still leads its buyer to a key; an authorization cancelled on
 * chain ends its payment; a lagging RPC's "not found" reverses nothing; the scan reads the chain in
 * a stable order. The reconciler is driven by hand (no workers) so each step is seen.
 */

const test = fundingTest.extend("facilitator", { scope: "file" }, async ({ chain }, { onCleanup }) => {
  const facilitator = await startHttpFacilitator(chain);
  onCleanup(() => facilitator.close());
  return facilitator;
});
test.override("appOptions", ({ chain, facilitator }) => ({
  env: chainEnv(chain, { FACILITATOR_URL: facilitator.url }),
}));

async function paymentOf(app: TestApp, wallet: string) {
  return app.rt.db.payment.findFirstOrThrow({ where: { payerAddress: wallet.toLowerCase() } });
}

async function pendingOf(app: TestApp, wallet: string): Promise<bigint | undefined> {
  return (await app.rt.db.account.findUnique({ where: { walletAddress: wallet.toLowerCase() } }))?.pendingMicroUsdc;
}

async function postWhile(
  app: TestApp,
  facilitator: HttpFacilitatorStandIn,
  mode: HttpFacilitatorStandIn["mode"],
  c: Parameters<typeof post>[1],
  payment: string,
) {
  facilitator.mode = mode;
  try {
    return await post(app, c, payment);
  } finally {
    facilitator.mode = "honest";
    facilitator.afterSettle = undefined;
  }
}

describe("the settle path's failure write", () => {
  test("the facilitator says the settle failed after the chain scan credited the transfer: the credit stands, once", async ({
    app,
    chain,
    facilitator,
  }) => {
    const buyer = await fundedBuyer(chain, 5_000_000n);
    const c = signupCall(2_000_000);
    const payment = await signedPayment(app, buyer, c);
    const calls = facilitator.settleCalls;
    // the transfer lands; before the facilitator's (wrong) verdict reaches the service, the chain
    // scan finds the transfer and credits the payment
    facilitator.afterSettle = async (settled) => {
      expect(settled.ok).toBe(true);
      const p = await paymentOf(app, buyer.address);
      expect(await app.rt.services.payments.reconcilePayment(p.id)).toBe("credited");
    };
    const r = await postWhile(app, facilitator, "settle-then-refuse", c, payment);
    expect(await usdcBalance(chain, buyer.address)).toBe(3_000_000n);
    // never "no money moved": the record answers
    expect(r.status).toBe(200);
    expect(r.body).not.toHaveProperty("accepts");
    const p = await paymentOf(app, buyer.address);
    expect(p.status).toBe("pending");
    expect(r.body).toMatchObject({ idempotent: true, keyIssued: false, transaction: p.settlementTxHash });
    expect(await pendingOf(app, buyer.address)).toBe(2_000_000n);

    // a replay answers from the record, settles nothing, credits nothing
    const replay = await post(app, c, payment);
    expect(replay.status).toBe(200);
    expect(replay.body).toMatchObject({ idempotent: true, transaction: p.settlementTxHash });
    expect(facilitator.settleCalls).toBe(calls + 1);
    expect((await app.rt.services.payments.reconcileOutstanding()).credited).toBe(0);
    expect(await pendingOf(app, buyer.address)).toBe(2_000_000n);

    // and the credit confirms like any other
    await chain.mine(5);
    await app.rt.services.payments.confirmPending();
    expect((await app.rt.db.payment.findUniqueOrThrow({ where: { id: p.id } })).status).toBe("confirmed");
    await assertBooksBalance(app.rt.db);
  });
});

describe("a signup the chain scan credited", () => {
  test("the replay says no key was issued; the wallet signs in (SIWE) and creates its key", async ({
    app,
    chain,
    facilitator,
  }) => {
    const buyer = await fundedBuyer(chain, 5_000_000n);
    const c = signupCall(3_000_000);
    const payment = await signedPayment(app, buyer, c);
    const r = await postWhile(app, facilitator, "settle-then-502", c, payment);
    expect(r.status).toBe(409);
    expect(r.body.reconciling).toBe(true);
    const p = await paymentOf(app, buyer.address);
    expect(await app.rt.services.payments.reconcilePayment(p.id)).toBe("credited");

    const replay = await post(app, c, payment);
    expect(replay.status).toBe(200);
    expect(replay.body).toMatchObject({ idempotent: true, keyIssued: false });
    expect(replay.body).not.toHaveProperty("apiKey");

    // the documented recovery: a session on the paying wallet, then a key
    const cookie = await siweSession(app, buyer);
    const created = await call(app, {
      method: "POST",
      path: "/v1/account/api-keys",
      headers: { cookie },
      body: { name: "after the scan" },
    });
    expect(created.status).toBe(201);
    const apiKey = String((created.body as { apiKey: string }).apiKey);
    const me = await call(app, { method: "GET", path: "/v1/agent/me", headers: { authorization: `Bearer ${apiKey}` } });
    expect(me.status).toBe(200);
    expect(me.body).toMatchObject({ pendingUsdc: "3.000000", walletAddress: buyer.address.toLowerCase() });
    expect(await pendingOf(app, buyer.address)).toBe(3_000_000n);
    await assertBooksBalance(app.rt.db);
  });
});

describe("an authorization cancelled on chain", () => {
  test("ends its payment as failed instead of reconciling forever; nothing credited", async ({
    app,
    chain,
    facilitator,
  }) => {
    const buyer = await fundedBuyer(chain, 5_000_000n);
    const c = signupCall(1_000_000);
    const payment = await signedPayment(app, buyer, c);
    const r = await postWhile(app, facilitator, "502-no-settle", c, payment);
    expect(r.status).toBe(409);
    const p = await paymentOf(app, buyer.address);
    expect(p.status).toBe("reconciling");
    expect(await app.rt.services.payments.reconcilePayment(p.id)).toBe("waiting");

    // the payer cancels the authorization it signed (EIP-3009 cancelAuthorization)
    await cancelAuthorization(chain, buyer, readXPayment(payment).authorization.nonce);
    // a cancellation counts once it is CONFIRMATION_BLOCKS deep
    expect(await app.rt.services.payments.reconcilePayment(p.id)).toBe("waiting");
    await chain.mine(5);
    expect(await app.rt.services.payments.reconcilePayment(p.id)).toBe("failed");
    const after = await app.rt.db.payment.findUniqueOrThrow({ where: { id: p.id } });
    expect(after.status).toBe("failed");
    expect(after.failureReason).toMatch(/cancel/i);
    expect(await usdcBalance(chain, buyer.address)).toBe(5_000_000n);
    expect(await pendingOf(app, buyer.address)).toBeUndefined();
    // the scan leaves it alone now, and the payment cannot be sent again
    const scan = await app.rt.services.payments.reconcileOutstanding();
    expect(scan.credited).toBe(0);
    const replay = await post(app, c, payment);
    expect(replay.status).toBe(402);
    expect((replay.body.error as { code: string }).code).toBe("invalid_payment");
    await assertBooksBalance(app.rt.db);
  });
});

describe("a lagging RPC", () => {
  test("its 'not found' for a pending settlement reverses nothing, however late it is", async ({ app, chain }) => {
    const head = await createPublicClient({ transport: http(chain.rpcUrl) }).getBlockNumber({ cacheTime: 0 });
    const buyer = await fundedBuyer(chain, 5_000_000n);
    const c = signupCall(2_500_000);
    const r = await post(app, c, await signedPayment(app, buyer, c));
    expect(r.status).toBe(200);
    const p = await paymentOf(app, buyer.address);
    expect(p.status).toBe("pending");

    // a node that stopped before the settlement: the transaction is not found there, and the
    // authorization looks unused; hours pass (past the authorization's validBefore)
    const lagging = await startLaggingRpc(chain.rpcUrl, head);
    const later = movableClock();
    later.advance(3 * 3_600_000);
    try {
      await withApp(
        { beside: app, env: chainEnv(chain, { CHAIN_RPC_URL: lagging.url }), clock: later },
        async (behind) => {
          const outcome = await behind.rt.services.payments.confirmPending();
          expect(outcome.reversed).toBe(0);
        },
      );
    } finally {
      await lagging.close();
    }
    expect((await app.rt.db.payment.findUniqueOrThrow({ where: { id: p.id } })).status).toBe("pending");
    expect(await pendingOf(app, buyer.address)).toBe(2_500_000n);

    // the node the service trusts catches up: the credit confirms
    await chain.mine(5);
    await app.rt.services.payments.confirmPending();
    expect((await app.rt.db.payment.findUniqueOrThrow({ where: { id: p.id } })).status).toBe("confirmed");
    await assertBooksBalance(app.rt.db);
  });
});

describe("the chain scan reads in a stable order", () => {
  test("settlements come back by block and log index, whatever order the node answers in", async ({ app, chain }) => {
    // two more settlements to the payee, so there is an order to keep
    for (const amount of [1_000_000, 1_100_000]) {
      const buyer = await fundedBuyer(chain, 2_000_000n);
      const c = signupCall(amount);
      expect((await post(app, c, await signedPayment(app, buyer, c))).status).toBe(200);
    }
    const node = await startLaggingRpc(chain.rpcUrl, 1n << 62n);
    node.reverseLogs = true;
    try {
      const gateway = createChainGateway({ rpcUrl: node.url, chainId: chain.chainId, usdcAddress: chain.usdcAddress });
      const head = await gateway.getBlockNumber();
      if (!head.ok) throw new Error("head");
      const payTo = app.rt.config.chain.payTo as `0x${string}`;
      const logs = await gateway.getUsdcSettlements({ to: payTo, fromBlock: 0n, toBlock: head.value });
      if (!logs.ok) throw new Error(logs.failure.message);
      expect(logs.value.length).toBeGreaterThanOrEqual(3);
      const order = logs.value.map((l) => [l.blockNumber, l.logIndex] as const);
      const sorted = [...order].sort((a, b) => (a[0] === b[0] ? a[1] - b[1] : a[0] < b[0] ? -1 : 1));
      expect(order).toEqual(sorted);
      // and every settlement still carries its authorization
      expect(logs.value.filter((l) => l.authorizationNonce !== null).length).toBeGreaterThanOrEqual(3);
    } finally {
      await node.close();
    }
  });

  test("uncredited payments are reconciled oldest first, a batch at a time", async ({ app, chain }) => {
    // two payments a crash left `settling` after their transfers moved: the older is written last
    const rows = [];
    for (const minutesAgo of [5, 10]) {
      const buyer = await fundedBuyer(chain, 2_000_000n);
      const c = signupCall(1_000_000);
      const header = await signedPayment(app, buyer, c);
      const a = readXPayment(header).authorization;
      const settled = await app.rt.facilitator.settle({
        x402Version: 1,
        authorization: a,
        signature: readXPayment(header).signature,
        requirements: {
          chainId: chain.chainId,
          amountMicroUsdc: 1_000_000n,
          payTo: a.to,
          asset: chain.usdcAddress,
          resource: `${app.rt.config.urls.base}/v1/x402/signup`,
          description: "x",
          mimeType: "application/json",
          maxTimeoutSeconds: 300,
          extra: { name: "USD Coin", version: "2" },
        },
      });
      expect(settled.ok).toBe(true);
      rows.push(
        await app.rt.db.payment.create({
          data: {
            kind: "signup",
            status: "settling",
            payerAddress: a.from.toLowerCase(),
            payToAddress: a.to.toLowerCase(),
            assetAddress: chain.usdcAddress.toLowerCase(),
            amountMicroUsdc: 1_000_000n,
            authorizationNonce: a.nonce,
            validBefore: new Date(Number(a.validBefore) * 1000),
            createdAt: new Date(Date.now() - minutesAgo * 60_000),
          },
        }),
      );
    }
    const [newer, older] = rows;
    if (!newer || !older) throw new Error("rows");
    expect((await app.rt.services.payments.reconcileOutstanding({ batch: 1 })).credited).toBe(1);
    expect((await app.rt.db.payment.findUniqueOrThrow({ where: { id: older.id } })).status).toBe("pending");
    expect((await app.rt.db.payment.findUniqueOrThrow({ where: { id: newer.id } })).status).toBe("settling");
    expect((await app.rt.services.payments.reconcileOutstanding({ batch: 1 })).credited).toBe(1);
    expect((await app.rt.db.payment.findUniqueOrThrow({ where: { id: newer.id } })).status).toBe("pending");
    await assertBooksBalance(app.rt.db);
  });
});
