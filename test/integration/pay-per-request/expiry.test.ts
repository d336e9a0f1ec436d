import { describe, expect } from "vitest";
import { UPTO_MAX_TIMEOUT_SECONDS } from "../../../src/domain/pay-per-request/challenge.js";
import { assertBooksBalance } from "../../../testkit/books.js";
import { chainEnv, usdcBalance } from "../../../testkit/funding.js";
import { movableClock } from "../../../testkit/harness.js";
import { startHttpFacilitator } from "../../../testkit/http-facilitator.js";
import { addSupply } from "../../../testkit/market.js";
import {
  paymentOfPayer,
  payPerRequestTest,
  signedUpto,
  uptoBuyer,
  x402Post,
} from "../../../testkit/pay-per-request.js";

/**
 * The reconciler's deadline paths (docs/decisions.md "Pay per request"): a charge whose settle never
 * got through before its authorization's deadline is booked as the platform's loss once a block deep
 * enough, at or past the deadline, still shows the nonce unused; and a payment whose request never
 * ended (a crash left it open) is voided an hour after its deadline. The clock and the chain's time
 * are moved past the deadline; the reconciler is called as its worker calls it. Nothing moves on
 * chain, and the books balance.
 */
const clock = movableClock();
const test = payPerRequestTest.extend("facilitator", { scope: "file" }, async ({ chain }, { onCleanup }) => {
  const facilitator = await startHttpFacilitator(chain, { versions: [2] });
  onCleanup(() => facilitator.close());
  return facilitator;
});
test.override("appOptions", ({ chain, facilitator }) => ({
  env: chainEnv(chain, { FACILITATOR_URL: facilitator.url }),
  sim: {},
  syncCatalog: true,
  clock,
}));

const body = (content: string) => ({
  model: "zai-org-glm-5-1",
  max_tokens: 64,
  messages: [{ role: "user", content }],
});

test.beforeAll(async ({ app, sim }) => {
  await addSupply(app, sim, [{ priceCents: 40, quantityMicroDiem: 50_000_000n }]);
  app.rt.services.inference.invalidateBook();
});

describe("past the authorization's deadline", () => {
  test("an unsettled charge becomes the platform's booked loss; an open payment is voided", async ({
    app,
    chain,
    facilitator,
  }) => {
    const reconciler = app.rt.services.requestPayments;
    const buyer = await uptoBuyer(chain);
    const chat = body("Never settled [[sim:tokens=30]]");
    const payment = await signedUpto(app, buyer, "/chat/completions", chat);
    const before = await usdcBalance(chain, buyer.address);

    // the facilitator is down for good: the answer goes out, its settle is unknown
    facilitator.mode = "502-no-settle";
    try {
      const r = await x402Post(app, "/chat/completions", chat, { "payment-signature": payment });
      expect(r.status).toBe(200);
      const charged = await paymentOfPayer(app, buyer.address);
      expect(charged.chargeMicroUsdc).toBeGreaterThan(0n);
      expect(["reconciling", "charged", "settling"]).toContain(charged.status);

      // before the deadline the reconciler only tries the settle again (and waits)
      expect(await reconciler.reconcile(charged.id)).toBe("waiting");
      expect((await paymentOfPayer(app, buyer.address)).status).not.toBe("lost");

      // past the deadline, but no block that deep shows it yet: still waiting
      const past = (UPTO_MAX_TIMEOUT_SECONDS + 120) * 1000;
      clock.advance(past);
      expect(await reconciler.reconcile(charged.id)).toBe("waiting");

      // the chain's time passes the deadline too, and blocks bury it: the loss is final
      await chain.increaseTime(UPTO_MAX_TIMEOUT_SECONDS + 120);
      await chain.mine(app.rt.config.chain.confirmationBlocks + 2);
      expect(await reconciler.reconcile(charged.id)).toBe("lost");
      const lost = await paymentOfPayer(app, buyer.address);
      expect(lost).toMatchObject({ status: "lost", lostMicroUsdc: charged.chargeMicroUsdc, settledMicroUsdc: null });
      expect(lost.failureReason).toMatch(/expired/);
      // a second look changes nothing; nothing moved on chain
      expect(await reconciler.reconcile(charged.id)).toBe("done");
      expect(await usdcBalance(chain, buyer.address)).toBe(before);
      await assertBooksBalance(app.rt.db);

      // a payment whose request never ended (its process died after the claim): open, past its deadline
      const open = await app.rt.db.requestPayment.create({
        data: {
          accountId: lost.accountId,
          route: lost.route,
          status: "open",
          payerAddress: lost.payerAddress,
          payToAddress: lost.payToAddress,
          assetAddress: lost.assetAddress,
          facilitatorAddress: lost.facilitatorAddress,
          // another nonce of the same payer: the last digit changed (appending one could pass 78 digits)
          permit2Nonce: `${lost.permit2Nonce.slice(0, -1)}${(Number(lost.permit2Nonce.slice(-1)) + 1) % 10}`,
          maxMicroUsdc: lost.maxMicroUsdc,
          deadline: new Date(clock.now().getTime() - 60_000),
          fingerprint: "e".repeat(64),
          payload: lost.payload as object,
          requirements: lost.requirements as object,
        },
      });
      // within the hour's grace it may still be its request's: left alone
      expect(await reconciler.reconcile(open.id)).toBe("waiting");
      clock.advance(3_600_000);
      expect(await reconciler.reconcile(open.id)).toBe("void");
      expect((await app.rt.db.requestPayment.findUniqueOrThrow({ where: { id: open.id } })).status).toBe("void");
      expect(await reconciler.reconcile(open.id)).toBe("done");
      await assertBooksBalance(app.rt.db);
    } finally {
      facilitator.mode = "honest";
    }
  });
});
