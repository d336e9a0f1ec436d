import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import type { Json } from "./tool-result.js";

/**
 * The x402 MCP transport binding (x402 `specs/transports-v2/mcp.md`; docs/decisions.md "Paid MCP
 * tools"), as shapes only: where a tool call carries its payment, and how a tool result
 * carries a payment requirement or a settle receipt. No money rule lives here: what a call costs,
 * whether a payment is good and what is settled are the pay-per-request service's.
 *
 * - the payment: `params._meta["x402/payment"]`, an x402 v2 `PaymentPayload`;
 * - the receipt: the result's `_meta["x402/payment-response"]`, a `SettleResponse`;
 * - payment required (unpaid, or the payment was refused): `isError: true`, the `PaymentRequired` as
 *   `structuredContent` and, JSON-encoded in `content[0].text`, as `{"x402/error": {code: 402,
 *   message, data: PaymentRequired}}`;
 * - settlement failed: the same, with the failed receipt in `structuredContent["x402/payment-response"]`
 *   and no content of the tool's (withheld).
 */

export const PAYMENT_META = "x402/payment";
export const PAYMENT_RESPONSE_META = "x402/payment-response";
export const X402_ERROR = "x402/error";

/** The x402 `SettleResponse` a receipt carries (success, transaction, network, payer, amount, errorReason). */
export type SettleReceipt = Json & { success: boolean; transaction: string; network: string };

/**
 * The payment a tool call carries, as sent (the service decodes and judges it: anything that is not
 * an x402 v2 upto PaymentPayload is answered with the requirements and the reason), or undefined.
 */
export function paymentOf(meta: Record<string, unknown> | undefined): { payload: unknown } | undefined {
  const raw = meta?.[PAYMENT_META];
  return raw === undefined || raw === null ? undefined : { payload: raw };
}

/** A payment is asked for: the requirements as structured content and, wrapped, as text (the spec's both forms). */
export function paymentRequiredResult(required: Json, message = "Payment required"): CallToolResult {
  const data = required;
  return {
    isError: true,
    structuredContent: data,
    content: [{ type: "text", text: JSON.stringify({ [X402_ERROR]: { code: 402, message, data } }) }],
  };
}

/** The settle was refused after the tool ran: its content is withheld, the failed receipt says why. */
export function settlementFailedResult(required: Json, receipt: SettleReceipt): CallToolResult {
  const data = { ...required, [PAYMENT_RESPONSE_META]: receipt };
  return {
    isError: true,
    structuredContent: data,
    content: [
      {
        type: "text",
        text: JSON.stringify({ [X402_ERROR]: { code: 402, message: "Payment settlement failed", data } }),
      },
    ],
    _meta: { [PAYMENT_RESPONSE_META]: receipt },
  };
}

/** A paid tool's answer with its settle receipt. */
export function paidResult(result: CallToolResult, receipt: SettleReceipt): CallToolResult {
  return { ...result, _meta: { ...(result._meta ?? {}), [PAYMENT_RESPONSE_META]: receipt } };
}
