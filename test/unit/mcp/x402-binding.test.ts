// The x402 MCP transport binding's shapes (x402 specs/transports-v2/mcp.md): where a payment is read
// from, and how a payment requirement, a settle receipt and a refused settle are answered.
import { describe, expect, test } from "vitest";
import { paidResult, paymentOf, paymentRequiredResult, settlementFailedResult } from "../../../src/mcp/x402-binding.js";

const REQUIRED = {
  x402Version: 2,
  error: "Payment required",
  resource: { url: "http://127.0.0.1/x402/v1/chat/completions", description: "chat", mimeType: "application/json" },
  accepts: [{ scheme: "upto", network: "eip155:8453", amount: "821", asset: "0xa", payTo: "0xb" }],
};
const RECEIPT = { success: true, transaction: `0x${"1".repeat(64)}`, network: "eip155:8453", amount: "700" };

describe("x402 MCP binding", () => {
  test("the payment is _meta['x402/payment'] as sent; none when absent or null", () => {
    expect(paymentOf(undefined)).toBeUndefined();
    expect(paymentOf({})).toBeUndefined();
    expect(paymentOf({ "x402/payment": null })).toBeUndefined();
    expect(paymentOf({ "x402/payment": { x402Version: 2 } })).toEqual({ payload: { x402Version: 2 } });
    // a malformed payload is still handed over: the service answers it with the requirements
    expect(paymentOf({ "x402/payment": "junk" })).toEqual({ payload: "junk" });
  });

  test("payment required: isError, the PaymentRequired as structuredContent and in the x402/error text", () => {
    const r = paymentRequiredResult(REQUIRED, "pay first");
    expect(r.isError).toBe(true);
    expect(r.structuredContent).toEqual(REQUIRED);
    expect(r.content).toHaveLength(1);
    const text = r.content[0]?.type === "text" ? r.content[0].text : "";
    expect(JSON.parse(text)).toEqual({ "x402/error": { code: 402, message: "pay first", data: REQUIRED } });
    expect(r._meta).toBeUndefined();
  });

  test("a paid result keeps the tool's answer and adds the receipt under _meta", () => {
    const answer = { content: [{ type: "text" as const, text: "{}" }], structuredContent: {}, _meta: { other: 1 } };
    const r = paidResult(answer, RECEIPT);
    expect(r.content).toEqual(answer.content);
    expect(r._meta).toEqual({ other: 1, "x402/payment-response": RECEIPT });
    expect(r.isError).toBeUndefined();
  });

  test("a refused settle: isError, the requirements with the failed receipt, nothing of the tool's", () => {
    const failed = { success: false, transaction: "", network: "eip155:8453", errorReason: "insufficient_funds" };
    const r = settlementFailedResult(REQUIRED, failed);
    expect(r.isError).toBe(true);
    expect(r.structuredContent).toEqual({ ...REQUIRED, "x402/payment-response": failed });
    expect(r.content).toHaveLength(1);
    const text = r.content[0]?.type === "text" ? r.content[0].text : "";
    expect(JSON.parse(text)["x402/error"]).toMatchObject({ code: 402, data: r.structuredContent });
    expect(r._meta).toEqual({ "x402/payment-response": failed });
  });
});
