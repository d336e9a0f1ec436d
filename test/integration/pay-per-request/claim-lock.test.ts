import { expect } from "vitest";
import { lockAccountRow } from "../../../src/adapters/account-lock.js";
import { Prisma } from "../../../src/generated/prisma/client.js";
import { assertBooksBalance } from "../../../testkit/books.js";
import { addSupply } from "../../../testkit/market.js";
import {
  chatBody,
  paymentOfPayer,
  signedUpto,
  payPerRequestTest as test,
  uptoBuyer,
  x402Post,
} from "../../../testkit/pay-per-request.js";
import { someoneWaitsOnARow } from "../../../testkit/row-locks.js";

/**
 * A duplicate payment's claim locks the payer's account row and then inserts a payment row of the
 * same nonce. When that happened while the first request was ending, the ending's record waited
 * for the account lock (its foreign-key check) while the claim's insert waited for the ending's
 * payment row: a deadlock, and the ending failed with settle_failed (seen in CI on the MCP twin of
 * "the same payment on two connections"). Here the claim's lock is held, exactly as the claim takes
 * it, across the first request's ending: the ending must commit under it, and the claim's insert then
 * finds the payment taken (a duplicate), nothing else.
 */

const CHAT = "/chat/completions";

test.beforeAll(async ({ app, sim }) => {
  await addSupply(app, sim, [{ priceCents: 40, quantityMicroDiem: 50_000_000n }]);
  app.rt.services.inference.invalidateBook();
});

test("a claim holding the payer's account lock does not hold up the ending of the payment's request", async ({
  app,
  chain,
  sim,
}) => {
  const db = app.rt.db;
  const buyer = await uptoBuyer(chain);
  const body = chatBody("Ends under a claim [[sim:tokens=25]]");
  const payment = await signedUpto(app, buyer, CHAT, body);
  // the upstream is slow once: the payment is claimed and its request in flight while the lock is taken
  sim.state.injectFault("*", { kind: "latency", ms: 800, count: 1 });
  const first = x402Post(app, CHAT, body, { "payment-signature": payment });
  let row = await db.requestPayment.findFirst({ where: { payerAddress: buyer.address.toLowerCase() } });
  for (let i = 0; !row && i < 500; i++) {
    await new Promise((r) => setTimeout(r, 10));
    row = await db.requestPayment.findFirst({ where: { payerAddress: buyer.address.toLowerCase() } });
  }
  if (!row) throw new Error("the payment was never claimed");
  expect(row.status).toBe("open");
  const claimed = row;

  // the ending held up by the lock: a backend of this database waits on a row or a transaction
  let firstDone = false;
  void first.finally(() => {
    firstDone = true;
  });
  // stopped once the first request answered: the race below is then already decided
  const heldUp = async () => ((await someoneWaitsOnARow(db, () => firstDone)) ? "held up" : "answered first");

  const outcome = await db
    .$transaction(
      async (tx) => {
        expect(await lockAccountRow(tx, claimed.accountId)).toBe(true);
        const ended = await Promise.race([first.then((r) => r.status), heldUp()]);
        // the claim goes on: its insert of the same authorization
        const insert = await tx.requestPayment
          .create({
            data: {
              accountId: claimed.accountId,
              route: claimed.route,
              payerAddress: claimed.payerAddress,
              payToAddress: claimed.payToAddress,
              assetAddress: claimed.assetAddress,
              facilitatorAddress: claimed.facilitatorAddress,
              permit2Nonce: claimed.permit2Nonce,
              maxMicroUsdc: claimed.maxMicroUsdc,
              deadline: claimed.deadline,
              fingerprint: claimed.fingerprint,
              payload: claimed.payload as Prisma.InputJsonValue,
              requirements: claimed.requirements as Prisma.InputJsonValue,
            },
          })
          .then(
            () => "inserted",
            (e: unknown) => (e instanceof Prisma.PrismaClientKnownRequestError ? e.code : String(e)),
          );
        // nothing of the claim is kept
        throw Object.assign(new Error("rolled back"), { outcome: { ended, insert } });
      },
      { timeout: 30_000 },
    )
    .catch((e: { outcome?: { ended: number | string; insert: string } }) => e.outcome);

  // the ending committed while the lock was held; the claim's insert then met the taken payment
  expect(outcome).toEqual({ ended: 200, insert: "P2002" });
  const answered = await first;
  expect(answered.status).toBe(200);
  const paid = await paymentOfPayer(app, buyer.address);
  expect(paid.id).toBe(claimed.id);
  expect(paid.status).toBe("settled");
  expect(paid.settledMicroUsdc).toBeGreaterThan(0n);
  expect(await db.requestPayment.count({ where: { payerAddress: buyer.address.toLowerCase() } })).toBe(1);
  await assertBooksBalance(db);
});
