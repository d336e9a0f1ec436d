import { describe, expect } from "vitest";
import { assertBooksBalance } from "../../../testkit/books.js";
import { chainEnv, fundedBuyer, post, signedPayment, usdcBalance } from "../../../testkit/funding.js";
import { fundingTest } from "../../../testkit/funding-test.js";
import { startHttpFacilitator } from "../../../testkit/http-facilitator.js";

/**
 * Found by the funding simulation (docs/decisions.md "Seeded money simulation (issue 38)"): two
 * submissions of one payment at once, the second one's verify answered only after the first one's
 * settlement landed. The facilitator then says the authorization's nonce is used; before the fix
 * the second was answered 402 `invalid_payment` — "no money moved" (SPEC funding rule 4) — while
 * the first one was charged and credited, and a buyer told so pays again. It is answered from the
 * record instead, like any duplicate.
 */

const test = fundingTest.extend("facilitator", { scope: "file" }, async ({ chain }, { onCleanup }) => {
  const facilitator = await startHttpFacilitator(chain);
  onCleanup(() => facilitator.close());
  return facilitator;
});
test.override("appOptions", ({ chain, facilitator }) => ({
  env: chainEnv(chain, { FACILITATOR_URL: facilitator.url }),
}));

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("a duplicate whose verify answers after the payment settled", () => {
  for (const route of ["signup", "refill"] as const) {
    test(`${route}: answered from the record (200 idempotent), never 402; one credit`, async ({
      app,
      chain,
      facilitator,
    }) => {
      const buyer = await fundedBuyer(chain, 10_000_000n);
      let c: Parameters<typeof post>[1] = { path: "/v1/x402/signup", body: { amountMicroUsdc: 2_000_000 } };
      if (route === "refill") {
        // the wallet signs up first; its key is the refill's caller
        const first = await post(app, c, await signedPayment(app, buyer, c));
        expect(first.status).toBe(200);
        c = {
          path: "/v1/x402/refill",
          body: { amountMicroUsdc: 3_000_000 },
          headers: { authorization: `Bearer ${String(first.body.apiKey)}` },
        };
      }
      const payment = await signedPayment(app, buyer, c);
      const settledBefore = facilitator.settled.length;

      // both submissions reach the facilitator's verify (neither has claimed the payment yet); the
      // first goes on, the second's verify answers once the first one's settlement landed
      let arrived = 0;
      let bothArrived = () => {};
      const both = new Promise<void>((resolve) => {
        bothArrived = resolve;
      });
      facilitator.beforeVerify = async () => {
        const n = ++arrived;
        if (n === 2) bothArrived();
        await both;
        if (n === 2) while (facilitator.settled.length === settledBefore) await sleep(10);
      };
      let results: Awaited<ReturnType<typeof post>>[];
      try {
        results = await Promise.all([post(app, c, payment), post(app, c, payment)]);
      } finally {
        facilitator.beforeVerify = undefined;
      }
      expect(arrived).toBe(2);
      expect(facilitator.settled.length).toBe(settledBefore + 1);

      expect(results.map((r) => r.status)).toEqual([200, 200]);
      expect(results.filter((r) => r.body.idempotent === true)).toHaveLength(1);
      expect(results.filter((r) => "accepts" in r.body)).toHaveLength(0);
      expect(new Set(results.map((r) => r.body.transaction)).size).toBe(1);

      const account = await app.rt.db.account.findUniqueOrThrow({
        where: { walletAddress: buyer.address.toLowerCase() },
      });
      const paid = route === "signup" ? 2_000_000n : 5_000_000n;
      expect(account.pendingMicroUsdc).toBe(paid);
      expect(await usdcBalance(chain, buyer.address)).toBe(10_000_000n - paid);
      await assertBooksBalance(app.rt.db);
    });
  }
});
