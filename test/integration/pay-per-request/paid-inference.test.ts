import { decodePaymentRequiredHeader, decodePaymentResponseHeader } from "@x402/core/http";
import { PaymentRequiredV2Schema } from "@x402/core/schemas";
import { describe, expect } from "vitest";
import { estimatePromptTokens, maxChargeFor } from "../../../src/domain/inference/pipeline/admission.js";
import { formatDecimal6, worstBurnMicroDiem } from "../../../src/lib/money.js";
import { signIn } from "../../../testkit/actors.js";
import { assertBooksBalance } from "../../../testkit/books.js";
import { usdcBalance } from "../../../testkit/funding.js";
import { addSupply, fundConfirmed } from "../../../testkit/market.js";
import {
  chatBody,
  paidOpenAI,
  paymentOfPayer,
  payPerRequestTest as test,
  uptoBuyer,
  uptoFetch,
  x402Post,
} from "../../../testkit/pay-per-request.js";

/**
 * Issue 41 item 1, acceptance 1: pay per request with no account. A default `@x402/fetch` client
 * with `@x402/evm`'s upto registration wraps the OpenAI SDK's fetch and completes a chat, a streamed
 * chat and an image; for each, the USDC that left the wallet = the settled amount in
 * PAYMENT-RESPONSE = `usage.cost` (or the cost header) = the books, to the micro-USDC. An uncharged
 * failure settles 0. The real chain, facilitator, simulator, Postgres and Redis.
 */

const MODEL = "zai-org-glm-5-1";

test.beforeAll(async ({ app, sim }) => {
  await addSupply(app, sim, [
    { priceCents: 40, quantityMicroDiem: 50_000_000n },
    { priceCents: 55, quantityMicroDiem: 50_000_000n },
  ]);
  app.rt.services.inference.invalidateBook();
});

/** What left the wallet and what reached PAY_TO while `f` ran. */
async function moved<T>(chain: Parameters<typeof usdcBalance>[0], wallet: string, f: () => Promise<T>) {
  const payTo = chain.devAccounts[2]?.address ?? "";
  const [w0, p0] = await Promise.all([usdcBalance(chain, wallet), usdcBalance(chain, payTo)]);
  const out = await f();
  const [w1, p1] = await Promise.all([usdcBalance(chain, wallet), usdcBalance(chain, payTo)]);
  expect(p1 - p0).toBe(w0 - w1);
  return { out, moved: w0 - w1 };
}

/** The payment's books: its clear's gross, the cash its journal booked, its state. */
async function bookedFor(app: Parameters<typeof paymentOfPayer>[0], payer: string) {
  const p = await paymentOfPayer(app, payer);
  const clear = await app.rt.db.clear.findFirst({ where: { paymentId: p.id } });
  const [cash] = await app.rt.db.$queryRaw<{ amount: bigint }[]>`
    SELECT COALESCE(SUM(l.amount_micro_usdc), 0)::bigint AS amount FROM ledger_lines() l
      JOIN ledger_transactions t ON t.id = l.transaction_id
     WHERE t.request_payment_id = ${p.id}::uuid AND l.book = 'external'`;
  return { payment: p, gross: clear?.grossMicroUsdc ?? 0n, cash: -(cash?.amount ?? 0n) };
}

describe("the 402", () => {
  test("an unpaid call: upto on eip155:8453 for the request's maximum at its ceiling; nothing written", async ({
    app,
    chain,
  }) => {
    const body = chatBody("Price me", { svc: { maxPriceCentsPerDollar: 55 } });
    // an Authorization header is ignored: no key is read
    const r = await x402Post(app, "/chat/completions", body, { authorization: "Bearer svc_not_a_key" });
    expect(r.status).toBe(402);
    expect(r.headers.get("x-svc-error-code")).toBe("payment_required");
    const required = PaymentRequiredV2Schema.parse(
      decodePaymentRequiredHeader(r.headers.get("payment-required") ?? ""),
    );
    const req = required.accepts[0];
    // sized as admission sizes it: the prompt estimate and the completion cap at the worst rates, at 55
    const model = await app.rt.services.inference.model(MODEL, "text", "chat");
    const burn = worstBurnMicroDiem(model.pricing, {
      promptTokens: estimatePromptTokens(body.messages, 1),
      completionTokens: 64,
    });
    expect(req).toMatchObject({
      scheme: "upto",
      network: "eip155:8453",
      asset: chain.usdcAddress,
      payTo: chain.devAccounts[2]?.address,
      amount: maxChargeFor(burn, 55).toString(),
      extra: { facilitatorAddress: chain.devAccounts[1]?.address, assetTransferMethod: "permit2" },
    });
    expect(required.resource.url).toMatch(/\/x402\/v1\/chat\/completions$/);
    expect(required.extensions).toHaveProperty("payment-identifier");
    expect(r.body).toMatchObject({
      x402Version: 2,
      error: { code: "payment_required" },
      maxAmountMicroUsdc: Number(req?.amount),
      accepts: [{ scheme: "upto", outputSchema: { input: { type: "http", method: "POST" } } }],
    });
    expect(await app.rt.db.requestPayment.count()).toBe(0);
    // the /v1 twin still needs its Bearer key
    const keyed = await fetch(`${app.baseUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    expect(keyed.status).toBe(401);
  });

  test("every pay-per-request route answers 402 unpaid; its /v1 twin still answers 401 without a key", async ({
    app,
  }) => {
    const calls: [string, Record<string, unknown>][] = [
      ["/chat/completions", chatBody("Hi")],
      ["/responses", { model: MODEL, input: "Hi", max_output_tokens: 64 }],
      ["/messages", { model: MODEL, max_tokens: 64, messages: [{ role: "user", content: "Hi" }] }],
      ["/image/generate", { model: "venice-sd35", prompt: "a fox" }],
      ["/images/generations", { model: "venice-sd35", prompt: "a fox", n: 1 }],
    ];
    for (const [path, body] of calls) {
      const paid = await x402Post(app, path, body);
      expect([path, paid.status]).toEqual([path, 402]);
      const required = decodePaymentRequiredHeader(paid.headers.get("payment-required") ?? "");
      expect(required.accepts[0]?.scheme).toBe("upto");
      expect(BigInt(required.accepts[0]?.amount ?? "0")).toBeGreaterThan(0n);
      const keyed = await fetch(`${app.baseUrl}/v1${path}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
      });
      expect([path, keyed.status]).toEqual([path, 401]);
    }
  });
});

describe("paid with a default @x402/fetch client around the OpenAI SDK", () => {
  test("a chat: wallet = PAYMENT-RESPONSE = usage.cost = books; an account without a key", async ({ app, chain }) => {
    const buyer = await uptoBuyer(chain);
    const { client } = paidOpenAI(app, buyer.privateKey);
    const { out, moved: left } = await moved(chain, buyer.address, () =>
      client.chat.completions.create(chatBody("Hello [[sim:tokens=30]]") as never).withResponse(),
    );
    const { data, response } = out as unknown as { data: { usage: Record<string, unknown> }; response: Response };
    expect(left).toBeGreaterThan(0n);
    const receipt = decodePaymentResponseHeader(response.headers.get("payment-response") ?? "");
    expect(receipt).toMatchObject({ success: true, network: "eip155:8453", amount: left.toString() });
    expect((data.usage.cost_details as { cost_usdc: string }).cost_usdc).toBe(formatDecimal6(left));
    expect(response.headers.get("x-svc-cost-usdc")).toBe(formatDecimal6(left));
    expect(response.headers.has("x-balance-remaining")).toBe(false);
    const { payment, gross, cash } = await bookedFor(app, buyer.address);
    expect(payment).toMatchObject({ status: "settled", chargeMicroUsdc: left, settledMicroUsdc: left });
    expect(payment.settlementTxHash).toBe(receipt.transaction.toLowerCase());
    expect([gross, cash]).toEqual([left, left]);
    // recorded under the payer's wallet, with no key and no balance of its own touched
    const account = await app.rt.db.account.findUniqueOrThrow({
      where: { walletAddress: buyer.address.toLowerCase() },
      include: { apiKeys: true },
    });
    expect(account).toMatchObject({ authProvider: "x402", confirmedMicroUsdc: 0n, reservedMicroUsdc: 0n });
    expect(account.apiKeys).toHaveLength(0);
    const record = await app.rt.db.inferenceRequest.findFirstOrThrow({
      where: { id: response.headers.get("x-svc-support-reference") ?? "" },
    });
    expect(record).toMatchObject({ accountId: account.id, apiKeyId: null, paymentId: payment.id, status: "succeeded" });
    await assertBooksBalance(app.rt.db);
  });

  test("a streamed chat: settled after the last content; the cost frame carries the receipt", async ({
    app,
    chain,
  }) => {
    const buyer = await uptoBuyer(chain);
    const { client } = paidOpenAI(app, buyer.privateKey);
    const chunks: Record<string, unknown>[] = [];
    const { moved: left } = await moved(chain, buyer.address, async () => {
      const stream = await client.chat.completions.create({
        ...chatBody("Stream [[sim:tokens=40]]"),
        stream: true,
      } as never);
      for await (const c of stream as unknown as AsyncIterable<Record<string, unknown>>) chunks.push(c);
    });
    const usage = chunks.find((c) => c.usage)?.usage as { cost_details: { cost_usdc: string } };
    const cost = chunks.find((c) => c.object === "svc.cost") as {
      costUsdc: string;
      payment: { status: string; amountUsdc: string; transaction: string; paymentResponse: string };
    };
    expect(left).toBeGreaterThan(0n);
    expect(usage.cost_details.cost_usdc).toBe(formatDecimal6(left));
    expect(cost.costUsdc).toBe(formatDecimal6(left));
    expect(cost.payment).toMatchObject({ status: "settled", amountUsdc: formatDecimal6(left) });
    expect(decodePaymentResponseHeader(cost.payment.paymentResponse)).toMatchObject({
      success: true,
      amount: left.toString(),
      transaction: cost.payment.transaction,
    });
    const { payment, gross, cash } = await bookedFor(app, buyer.address);
    expect(payment.status).toBe("settled");
    expect([gross, cash]).toEqual([left, left]);
    await assertBooksBalance(app.rt.db);
  });

  test("an image: the cost header = PAYMENT-RESPONSE = what left the wallet = books", async ({ app, chain }) => {
    const buyer = await uptoBuyer(chain);
    const { client } = paidOpenAI(app, buyer.privateKey);
    const { out, moved: left } = await moved(chain, buyer.address, () =>
      client.images.generate({ model: "venice-sd35", prompt: "a red fox", n: 1 }).withResponse(),
    );
    const { data, response } = out;
    expect(data.data?.[0]?.b64_json?.length).toBeGreaterThan(0);
    expect(left).toBeGreaterThan(0n);
    expect(response.headers.get("x-svc-cost-usdc")).toBe(formatDecimal6(left));
    expect(decodePaymentResponseHeader(response.headers.get("payment-response") ?? "")).toMatchObject({
      success: true,
      amount: left.toString(),
    });
    const { gross, cash } = await bookedFor(app, buyer.address);
    expect([gross, cash]).toEqual([left, left]);
    await assertBooksBalance(app.rt.db);
  });
});

describe("what a payment never does", () => {
  test("an uncharged failure settles 0: nothing moves, the error carries that receipt", async ({ app, chain, sim }) => {
    const buyer = await uptoBuyer(chain);
    const { fetch: pay } = uptoFetch(buyer.privateKey);
    sim.state.injectFault("*", { kind: "http_503" });
    try {
      const { out, moved: left } = await moved(chain, buyer.address, () =>
        pay(`${app.baseUrl}/x402/v1/chat/completions`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify(chatBody("Fail me")),
        }),
      );
      expect(out.status).toBe(502);
      expect(((await out.json()) as { error: { code: string } }).error.code).toBe("upstream_error");
      expect(left).toBe(0n);
      expect(decodePaymentResponseHeader(out.headers.get("payment-response") ?? "")).toMatchObject({
        success: true,
        amount: "0",
        transaction: "",
      });
    } finally {
      sim.state.clearFaults();
    }
    const { payment, gross, cash } = await bookedFor(app, buyer.address);
    expect(payment).toMatchObject({ status: "settled", chargeMicroUsdc: 0n, settledMicroUsdc: 0n });
    expect([gross, cash]).toEqual([0n, 0n]);
    await assertBooksBalance(app.rt.db);
  });

  test("touch the prepaid balance of a wallet that also holds one", async ({ app, chain }) => {
    const buyer = await uptoBuyer(chain);
    const user = await signIn(app, { address: buyer.address, privateKey: buyer.privateKey });
    await fundConfirmed(app, user.accountId, 2_000_000n);
    const { client } = paidOpenAI(app, buyer.privateKey);
    const { moved: left } = await moved(chain, buyer.address, () =>
      client.chat.completions.create(chatBody("Mine [[sim:tokens=20]]") as never),
    );
    expect(left).toBeGreaterThan(0n);
    const account = await app.rt.db.account.findUniqueOrThrow({ where: { id: user.accountId } });
    expect(account).toMatchObject({ confirmedMicroUsdc: 2_000_000n, reservedMicroUsdc: 0n, authProvider: "idp" });
    const { payment, gross } = await bookedFor(app, buyer.address);
    expect(payment.accountId).toBe(user.accountId);
    expect(gross).toBe(left);
    await assertBooksBalance(app.rt.db);
  });
});
