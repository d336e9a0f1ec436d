import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { decodePaymentResponseHeader } from "@x402/core/http";
import type { PaidOutcome } from "../domain/pay-per-request/ppr-service.js";
import { DomainError, type HeaderField, isDomainError } from "../lib/errors.js";
import { PAID_TOOLS, type PaidTool } from "./inference-tools.js";
import type { ToolContext } from "./tool-def.js";
import { asDomainError, type Json, toolError } from "./tool-result.js";
import {
  PAYMENT_RESPONSE_META,
  paidResult,
  paymentOf,
  paymentRequiredResult,
  type SettleReceipt,
  settlementFailedResult,
} from "./x402-binding.js";

/**
 * Tool calls with no Bearer key (docs/decisions.md "Paid MCP tools"): the paid tools are
 * paid per call through the x402 MCP binding and served by the pay-per-request service exactly as
 * `POST /x402/v1/…` serves the same REST body (the same price, challenge, verification, run, settle
 * and duplicate rules; the payment pays for that REST request); every other tool answers the usual
 * `authentication_failed` as a tool error. This file only carries the payload in and the outcome
 * out, in the binding's shapes (x402-binding.ts): no money rule lives here.
 */

export type AnonymousContext = Omit<ToolContext, "viewer">;

const BY_NAME = new Map(PAID_TOOLS.map((t) => [t.definition.name, t]));

/** The settle receipt of a `PAYMENT-RESPONSE` value, as the binding's `_meta` carries it (an object). */
function receiptOf(value: string | undefined): SettleReceipt | undefined {
  if (value === undefined) return undefined;
  try {
    return decodePaymentResponseHeader(value) as unknown as SettleReceipt;
  } catch {
    return undefined;
  }
}

/** A thrown error's receipt (a settle of 0 on an uncharged failure, or a refused settle). */
function errorReceipt(err: DomainError): SettleReceipt | undefined {
  const f = err.details.paymentResponse as HeaderField | undefined;
  return f && typeof f.value === "string" ? receiptOf(f.value) : undefined;
}

async function payPerCall(
  t: PaidTool,
  args: unknown,
  meta: Record<string, unknown> | undefined,
  ctx: AnonymousContext,
): Promise<CallToolResult> {
  // the arguments are checked as the keyed call checks them (400 naming the field) before any price
  t.definition.parse(args);
  const payment = paymentOf(meta);
  const service = ctx.rt.services.payPerRequest;
  const body = t.restBody(args);
  const requestId = ctx.takeRequestId();
  const call = { route: t.route, body, signal: ctx.signal, ...(requestId ? { requestId } : {}) };
  let out: PaidOutcome;
  try {
    out = await service.serve({ ...call, payment });
  } catch (err) {
    const receipt = isDomainError(err) ? errorReceipt(err) : undefined;
    if (!receipt || !isDomainError(err)) throw err;
    if (err.code === "invalid_payment" && receipt.success === false) {
      // the settle was refused: the content is withheld; the requirements to pay again come with it
      const again = await service.serve({ ...call, payment: undefined }).catch(() => undefined);
      const required = again?.type === "challenge" ? (again.required as unknown as Json) : { x402Version: 2 };
      return settlementFailedResult({ ...required, error: err.message }, receipt);
    }
    // an uncharged failure: the tool error, with the receipt of its settle of 0
    return { ...toolError(err), _meta: { [PAYMENT_RESPONSE_META]: receipt } };
  }
  if (out.type === "challenge") {
    return paymentRequiredResult(out.required as unknown as Json, out.required.error ?? "Payment required");
  }
  if (out.type !== "answer") throw new DomainError("internal_error", "A buffered paid call answered a stream.");
  const receipt = receiptOf(out.receipt.value);
  if (!receipt) throw new DomainError("internal_error", "A paid answer without its settlement receipt.");
  const value = t.present({ body: out.body, cost: out.cost }, body);
  const result = t.definition.result?.(value) ?? {
    content: [{ type: "text" as const, text: JSON.stringify(value) }],
    structuredContent: value,
  };
  return paidResult(result, receipt);
}

/** A tool call with no Bearer key: a paid tool paid per call, any other the usual authentication error. */
export async function anonymousCall(
  name: string,
  args: unknown,
  meta: Record<string, unknown> | undefined,
  ctx: AnonymousContext,
): Promise<CallToolResult> {
  const t = BY_NAME.get(name);
  try {
    if (!t) {
      throw new DomainError(
        "authentication_failed",
        `${name} needs an API key (Authorization: Bearer svc_…); without one only ${[...BY_NAME.keys()].join(" and ")}, paid per call with x402, are served.`,
      );
    }
    return await payPerCall(t, args, meta, ctx);
  } catch (err) {
    return toolError(asDomainError(err, { tool: name, requestId: ctx.requestId }));
  }
}
