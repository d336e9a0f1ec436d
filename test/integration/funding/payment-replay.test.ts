import { describe, expect } from "vitest";
import { assertBooksBalance } from "../../../testkit/books.js";
import {
  fundedBuyer,
  post,
  readXPayment,
  signAuthorization,
  signedPayment,
  signupCall,
  usdcBalance,
  writeXPayment,
} from "../../../testkit/funding.js";
import { fundingTest as test } from "../../../testkit/funding-test.js";
import type { TestApp } from "../../../testkit/harness.js";

/**
 * Issue 38 item 5: a replayed payment header is answered from its record only after its signature
 * verifies against the recorded authorization, and never shows another payer's account; payments
 * are unique by (payer, nonce), as EIP-3009 defines nonces.
 */

async function accountOf(app: TestApp, wallet: string) {
  return app.rt.db.account.findUnique({ where: { walletAddress: wallet.toLowerCase() } });
}

/** nothing of the payer's account in an answer: no id, no wallet, no balance */
function expectNoAccount(body: Record<string, unknown>) {
  for (const field of ["accountId", "walletAddress", "pendingUsdc", "confirmedUsdc", "apiKey", "transaction"]) {
    expect(body).not.toHaveProperty(field);
  }
}

describe("a replay is answered from the record only for the payer's own signed authorization", () => {
  test("the credited payment's authorization with another key's signature: 402 invalid_payment, no account shown", async ({
    app,
    chain,
  }) => {
    const buyer = await fundedBuyer(chain, 5_000_000n);
    const c = signupCall(2_000_000);
    const header = await signedPayment(app, buyer, c);
    const first = await post(app, c, header);
    expect(first.status).toBe(200);

    // whoever copied the authorization (it is on chain once settled) signs it with a key of their own
    const { authorization } = readXPayment(header);
    const stranger = await fundedBuyer(chain, 0n);
    const forged = writeXPayment(authorization, await signAuthorization(chain, stranger, authorization));
    const r = await post(app, c, forged);
    expect(r.status).toBe(402);
    expect((r.body.error as { code: string }).code).toBe("invalid_payment");
    expect(r.body.accepts).toHaveLength(1);
    expectNoAccount(r.body);
    expect(r.headers.get("x-payment-response")).toBeNull();

    // a signature that is no signature at all
    const garbage = writeXPayment(authorization, `0x${"11".repeat(65)}`);
    const g = await post(app, c, garbage);
    expect(g.status).toBe(402);
    expectNoAccount(g.body);

    // the payer's own replay still answers from the record
    const replay = await post(app, c, header);
    expect(replay.status).toBe(200);
    expect(replay.body).toMatchObject({ idempotent: true, accountId: first.body.accountId });
    expect((await accountOf(app, buyer.address))?.pendingMicroUsdc).toBe(2_000_000n);
    await assertBooksBalance(app.rt.db);
  });

  test("a signed field changed under the payer's signature (validBefore): 402, no account shown", async ({
    app,
    chain,
  }) => {
    const buyer = await fundedBuyer(chain, 5_000_000n);
    const c = signupCall(1_000_000);
    const header = await signedPayment(app, buyer, c);
    expect((await post(app, c, header)).status).toBe(200);
    const { authorization, signature } = readXPayment(header);
    const stretched = { ...authorization, validBefore: String(BigInt(authorization.validBefore) + 3600n) };
    const r = await post(app, c, writeXPayment(stretched, signature));
    expect(r.status).toBe(402);
    expect((r.body.error as { code: string }).code).toBe("invalid_payment");
    expectNoAccount(r.body);
    await assertBooksBalance(app.rt.db);
  });
});

describe("payments are unique by (payer, nonce)", () => {
  test("two payers signing the same nonce: both settle, each credits its own account once", async ({ app, chain }) => {
    const first = await fundedBuyer(chain, 5_000_000n);
    const c = signupCall(1_500_000);
    const header = await signedPayment(app, first, c);
    const a = await post(app, c, header);
    expect(a.status).toBe(200);

    // another wallet signs its own authorization with the very same nonce (EIP-3009 nonces are per
    // authorizer: the token accepts both)
    const second = await fundedBuyer(chain, 5_000_000n);
    const { authorization } = readXPayment(header);
    const theirs = { ...authorization, from: second.address };
    const b = await post(app, c, writeXPayment(theirs, await signAuthorization(chain, second, theirs)));
    expect(b.status).toBe(200);
    expect(b.body.apiKey).toMatch(/^svc_/);
    expect(b.body).not.toHaveProperty("idempotent");
    expect(b.body.walletAddress).toBe(second.address.toLowerCase());
    expect(b.body.accountId).not.toBe(a.body.accountId);
    expect(b.body.transaction).not.toBe(a.body.transaction);

    expect(await usdcBalance(chain, first.address)).toBe(3_500_000n);
    expect(await usdcBalance(chain, second.address)).toBe(3_500_000n);
    expect((await accountOf(app, first.address))?.pendingMicroUsdc).toBe(1_500_000n);
    expect((await accountOf(app, second.address))?.pendingMicroUsdc).toBe(1_500_000n);
    const rows = await app.rt.db.payment.findMany({ where: { authorizationNonce: authorization.nonce } });
    expect(rows.map((p) => p.status).sort()).toEqual(["pending", "pending"]);
    await chain.mine(5);
    expect((await app.rt.services.payments.confirmPending()).confirmed).toBeGreaterThanOrEqual(2);
    expect((await accountOf(app, second.address))?.confirmedMicroUsdc).toBe(1_500_000n);
    await assertBooksBalance(app.rt.db);
  });
});
