// Paid MCP tools (issue 41 item 4, acceptance bullet 4): with no Bearer key the connector serves
// chat_completion and generate_image paid per call through the x402 MCP transport binding. The buyer
// is the MCP SDK's own client over Streamable HTTP; its wallet signs the requirements an unpaid call
// returned with @x402/core's x402Client and @x402/evm's upto client scheme; the chain is anvil, the
// facilitator the HTTP stand-in over the real local facilitator (its settle can be refused).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { x402Client } from "@x402/core/client";
import { decodePaymentRequiredHeader } from "@x402/core/http";
import type { PaymentPayload, PaymentRequired } from "@x402/core/types";
import { toClientEvmSigner } from "@x402/evm";
import { UptoEvmScheme } from "@x402/evm/upto/client";
import { privateKeyToAccount } from "viem/accounts";
import { afterEach, beforeAll, describe, expect } from "vitest";
import { parseDecimal6 } from "../../../src/lib/money.js";
import type { LocalChain } from "../../../src/local/chain/index.js";
import { appTest, fileWorld } from "../../../testkit/app-test.js";
import { assertBooksBalance } from "../../../testkit/books.js";
import { chainEnv, fundedBuyer, startLocalChain, usdcBalance } from "../../../testkit/funding.js";
import { type HttpFacilitatorStandIn, startHttpFacilitator } from "../../../testkit/http-facilitator.js";
import { addSupply } from "../../../testkit/market.js";

const MODEL = "zai-org-glm-5-1";
const PAYMENT = "x402/payment";
const RECEIPT = "x402/payment-response";

// the local chain and the HTTP facilitator: a fixture the world's options read, so they start before
// the app and stop after it
let chain: LocalChain;
let facilitator: HttpFacilitatorStandIn;
const test = appTest
  // biome-ignore lint/correctness/noEmptyPattern: vitest reads a fixture's dependencies from this pattern
  .extend("chain", { scope: "file" }, async ({}, { onCleanup }) => {
    chain = await startLocalChain();
    onCleanup(async () => {
      await facilitator?.close();
      await chain.stop();
    });
    facilitator = await startHttpFacilitator(chain, { versions: [1, 2] });
    return chain;
  })
  .override("appOptions", ({ chain }) => ({
    sim: {},
    syncCatalog: true,
    env: chainEnv(chain, { FACILITATOR_URL: facilitator.url }),
  }));
const world = fileWorld(test);

beforeAll(async () => {
  await addSupply(world.app, world.sim, [{ priceCents: 40, quantityMicroDiem: 200_000_000n }]);
  world.app.rt.services.inference.invalidateBook();
});

const open: Client[] = [];
afterEach(async () => {
  facilitator.uptoModeFor = undefined;
  await Promise.all(open.splice(0).map((c) => c.close()));
});

/** An MCP SDK client with no credential at all. */
async function anonymous(): Promise<Client> {
  const client = new Client({ name: "paid-mcp-test", version: "1.0.0" });
  open.push(client);
  await client.connect(new StreamableHTTPClientTransport(new URL("/mcp", world.app.baseUrl)));
  return client;
}

function chatArgs(content: string) {
  return { model: MODEL, messages: [{ role: "user", content }], max_tokens: 200 };
}

async function callTool(client: Client, name: string, args: Record<string, unknown>, payment?: unknown) {
  return (await client.callTool({
    name,
    arguments: args,
    ...(payment === undefined ? {} : { _meta: { [PAYMENT]: payment } }),
  })) as CallToolResult;
}

/** An unpaid call's answer: isError with the PaymentRequired as structuredContent and as the x402/error text. */
function requirementsOf(r: CallToolResult): PaymentRequired {
  expect(r.isError).toBe(true);
  const required = r.structuredContent as unknown as PaymentRequired;
  expect(required.x402Version).toBe(2);
  const text = r.content[0]?.type === "text" ? r.content[0].text : "";
  expect(JSON.parse(text)).toEqual({ "x402/error": { code: 402, message: expect.any(String), data: required } });
  return required;
}

/** The buyer signs the requirements as a wallet with @x402/fetch's client does (the local USDC allowed). */
async function sign(buyer: { privateKey: `0x${string}` }, required: PaymentRequired): Promise<PaymentPayload> {
  const client = new x402Client().setSpendControls({ allowedAssets: true });
  client.register("eip155:8453", new UptoEvmScheme(toClientEvmSigner(privateKeyToAccount(buyer.privateKey))));
  return client.createPaymentPayload(required);
}

function receiptOf(r: CallToolResult): Record<string, unknown> {
  const receipt = r._meta?.[RECEIPT] as Record<string, unknown> | undefined;
  expect(receipt, JSON.stringify(r).slice(0, 400)).toBeDefined();
  return receipt as Record<string, unknown>;
}

describe("no key: what is served without paying", () => {
  test("arguments are checked first: invalid_request naming the field, nothing asked", async () => {
    const client = await anonymous();
    const r = await callTool(client, "chat_completion", { model: MODEL, messages: "hello" });
    expect(r.isError).toBe(true);
    expect(r.structuredContent).toBeUndefined();
    const body = JSON.parse(r.content[0]?.type === "text" ? r.content[0].text : "{}");
    expect(body.error).toMatchObject({ code: "invalid_request", field: "messages" });
    expect(facilitator.requests).toEqual([]);
  });

  test("an unpaid call gets the upto requirements, sized as the REST 402 sizes them; nothing moves", async () => {
    const settlesBefore = facilitator.settleCalls;
    const client = await anonymous();
    const required = requirementsOf(await callTool(client, "chat_completion", chatArgs("hi [[sim:tokens=10]]")));
    expect(required.accepts).toHaveLength(1);
    const accepted = required.accepts[0];
    expect(accepted).toMatchObject({
      scheme: "upto",
      network: "eip155:8453",
      asset: world.app.rt.config.chain.usdcAddress,
    });
    expect(BigInt(accepted?.amount ?? "0")).toBeGreaterThan(0n);
    // the REST route's 402 for the same body asks the same maximum
    const rest = await fetch(`${world.app.baseUrl}/x402/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ ...chatArgs("hi [[sim:tokens=10]]"), stream: false }),
    });
    expect(rest.status).toBe(402);
    const restRequired = decodePaymentRequiredHeader(rest.headers.get("payment-required") ?? "");
    expect(restRequired.accepts[0]?.amount).toBe(accepted?.amount);
    expect(facilitator.settleCalls).toBe(settlesBefore);
  });
});

describe("paid per call", () => {
  test("chat_completion: a completion and its receipt; USDC moved == receipt == costUsdc; books balance", async () => {
    const buyer = await fundedBuyer(chain, 5_000_000n, { approvePermit2: true });
    const client = await anonymous();
    const args = chatArgs("Hello there [[sim:tokens=40]]");
    const required = requirementsOf(await callTool(client, "chat_completion", args));
    const payment = await sign(buyer, required);
    const before = await usdcBalance(chain, buyer.address);

    const r = await callTool(client, "chat_completion", args, payment);
    expect(r.isError, JSON.stringify(r.content).slice(0, 400)).toBeFalsy();
    const value = r.structuredContent as Record<string, unknown>;
    expect((value.message as { content: string }).content.length).toBeGreaterThan(0);
    const receipt = receiptOf(r);
    expect(receipt).toMatchObject({ success: true, network: "eip155:8453" });
    expect(String(receipt.payer).toLowerCase()).toBe(buyer.address.toLowerCase());
    const moved = before - (await usdcBalance(chain, buyer.address));
    expect(moved).toBeGreaterThan(0n);
    expect(BigInt(String(receipt.amount))).toBe(moved);
    expect(parseDecimal6(value.costUsdc as string)).toBe(moved);
    expect(moved).toBeLessThanOrEqual(BigInt(required.accepts[0]?.amount ?? "0"));
    expect(value.balanceRemainingUsdc).toBeUndefined();
    // the record: under the payer's wallet, charged and settled exactly what moved
    const record = await world.app.rt.db.inferenceRequest.findFirstOrThrow({
      where: { id: value.supportReference as string },
      include: { payment: true, account: true },
    });
    expect(record.costMicroUsdc).toBe(moved);
    expect(record.payment?.settledMicroUsdc).toBe(moved);
    expect(record.payment?.status).toBe("settled");
    expect(record.account.walletAddress.toLowerCase()).toBe(buyer.address.toLowerCase());
    await assertBooksBalance(world.app.rt.db);

    // the same payment again: the recorded answer, nothing moves twice
    const again = await callTool(client, "chat_completion", args, payment);
    expect(again.isError).toBeFalsy();
    expect(again.structuredContent).toEqual(value);
    expect(receiptOf(again)).toEqual(receipt);
    expect(before - (await usdcBalance(chain, buyer.address))).toBe(moved);
    // the same payment for another request of the same maximum (a prompt as long): refused as
    // having paid for another request, nothing charged for it
    const other = await callTool(client, "chat_completion", chatArgs("Hello where [[sim:tokens=40]]"), payment);
    expect(other.isError).toBe(true);
    const otherText = other.content[0]?.type === "text" ? other.content[0].text : "{}";
    expect(JSON.parse(otherText).error?.code, otherText.slice(0, 300)).toBe("conflict");
    expect(before - (await usdcBalance(chain, buyer.address))).toBe(moved);
    await assertBooksBalance(world.app.rt.db);
  });

  test("the same payment on two connections at once: one charge; the other gets that answer or waits", async () => {
    const buyer = await fundedBuyer(chain, 5_000_000n, { approvePermit2: true });
    const [a, b] = [await anonymous(), await anonymous()];
    const args = chatArgs("Twice at once [[sim:tokens=30]]");
    const payment = await sign(buyer, requirementsOf(await callTool(a, "chat_completion", args)));
    const before = await usdcBalance(chain, buyer.address);
    const results = await Promise.all([a, b].map((c) => callTool(c, "chat_completion", args, payment)));
    const answered = results.filter((r) => !r.isError);
    expect(answered.length, JSON.stringify(results).slice(0, 600)).toBeGreaterThanOrEqual(1);
    for (const r of results.filter((x) => x.isError)) {
      // the payment's request was still in flight: do not pay again
      const text = r.content[0]?.type === "text" ? r.content[0].text : "{}";
      expect(JSON.parse(text).error?.code, text.slice(0, 300)).toBe("payment_unfinished");
    }
    const moved = before - (await usdcBalance(chain, buyer.address));
    expect(moved).toBeGreaterThan(0n);
    for (const r of answered) {
      expect(BigInt(String(receiptOf(r).amount))).toBe(moved);
      expect(parseDecimal6((r.structuredContent as { costUsdc: string }).costUsdc)).toBe(moved);
    }
    // afterwards the payment answers its recorded result, and nothing moves again
    const later = await callTool(b, "chat_completion", args, payment);
    expect(later.isError).toBeFalsy();
    expect(BigInt(String(receiptOf(later).amount))).toBe(moved);
    expect(before - (await usdcBalance(chain, buyer.address))).toBe(moved);
    await assertBooksBalance(world.app.rt.db);
  });

  test("generate_image: the images and the receipt; USDC moved == receipt == costUsdc", async () => {
    const buyer = await fundedBuyer(chain, 5_000_000n, { approvePermit2: true });
    const client = await anonymous();
    const args = { model: "venice-sd35", prompt: "a lighthouse at dusk", variants: 2 };
    const required = requirementsOf(await callTool(client, "generate_image", args));
    const before = await usdcBalance(chain, buyer.address);
    const r = await callTool(client, "generate_image", args, await sign(buyer, required));
    expect(r.isError, JSON.stringify(r.content).slice(0, 400)).toBeFalsy();
    const value = r.structuredContent as Record<string, unknown>;
    expect(value).toMatchObject({ imageCount: 2, mimeType: "image/webp", clearingPriceCents: 40 });
    expect(r.content.filter((c) => c.type === "image")).toHaveLength(2);
    const moved = before - (await usdcBalance(chain, buyer.address));
    // two images at 10_000 micro-DIEM each, cleared at 40 cents
    expect(moved).toBe(8_000n);
    expect(BigInt(String(receiptOf(r).amount))).toBe(moved);
    expect(parseDecimal6(value.costUsdc as string)).toBe(moved);
    await assertBooksBalance(world.app.rt.db);
  });

  test("an uncharged answer settles 0: the images, a receipt of 0, nothing moved", async () => {
    const buyer = await fundedBuyer(chain, 5_000_000n, { approvePermit2: true });
    const client = await anonymous();
    // the upstream flags the prompt, delivers and bills nothing: not charged (images.test.ts)
    const args = { model: "venice-sd35", prompt: "flagged [[sim:content_violation_free]]" };
    const required = requirementsOf(await callTool(client, "generate_image", args));
    const before = await usdcBalance(chain, buyer.address);
    const r = await callTool(client, "generate_image", args, await sign(buyer, required));
    expect(r.isError, JSON.stringify(r.content).slice(0, 400)).toBeFalsy();
    expect(r.structuredContent).toMatchObject({ imageCount: 1, costUsdc: "0.000000" });
    expect(receiptOf(r)).toMatchObject({ success: true, amount: "0", transaction: "" });
    expect(await usdcBalance(chain, buyer.address)).toBe(before);
    await assertBooksBalance(world.app.rt.db);
  });

  test("a payload that is not an upto payment: the requirements again, with the reason; nothing moves", async () => {
    const client = await anonymous();
    const [verifies, settles] = [facilitator.requests.length, facilitator.settleCalls];
    const r = await callTool(client, "chat_completion", chatArgs("x [[sim:tokens=10]]"), { x402Version: 2, junk: 1 });
    const required = requirementsOf(r);
    expect(required.error).toMatch(/not an x402 v2 upto payment/);
    // refused before anyone was asked
    expect([facilitator.requests.length, facilitator.settleCalls]).toEqual([verifies, settles]);
  });

  test("a refused settle withholds the content: isError, the failed receipt, no completion, nothing moved", async () => {
    const buyer = await fundedBuyer(chain, 5_000_000n, { approvePermit2: true });
    const client = await anonymous();
    const args = chatArgs("The secret answer [[sim:tokens=30]]");
    const required = requirementsOf(await callTool(client, "chat_completion", args));
    const payment = await sign(buyer, required);
    const before = await usdcBalance(chain, buyer.address);
    facilitator.uptoModeFor = () => "refuse";

    const r = await callTool(client, "chat_completion", args, payment);
    expect(r.isError).toBe(true);
    const data = r.structuredContent as Record<string, unknown>;
    expect(data[RECEIPT]).toMatchObject({ success: false });
    expect(receiptOf(r)).toMatchObject({ success: false });
    // nothing of the tool's: one text block, the x402/error wrapper
    expect(r.content).toHaveLength(1);
    expect(JSON.parse(r.content[0]?.type === "text" ? r.content[0].text : "{}")["x402/error"].code).toBe(402);
    expect(Object.keys(data).sort()).toEqual(
      ["accepts", "error", "extensions", "resource", RECEIPT, "x402Version"].sort(),
    );
    expect(data.error).toMatch(/withheld/);
    expect(await usdcBalance(chain, buyer.address)).toBe(before);
    await assertBooksBalance(world.app.rt.db);
  });
});
