import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import type { z } from "zod";
import { parseWith } from "../contract/parse.js";
import { DomainError, isDomainError } from "../lib/errors.js";
import { logger } from "../lib/logger.js";

/**
 * How MCP tools answer (docs/decisions.md "MCP connector"): a result is its JSON as text content
 * plus the same object as `structuredContent`; an error is a tool error (`isError: true`, never a
 * JSON-RPC error) whose text is the REST error body `{"error":{"code","message",...details}}`, with
 * the same codes and details REST sends (MCP has no headers, so `retryAfterSeconds` stays in it).
 */

export type Json = Record<string, unknown>;

export function toolResult(value: Json): CallToolResult {
  return { content: [{ type: "text", text: JSON.stringify(value) }], structuredContent: value };
}

/** The error body of a tool error: what REST puts in `error`; bigints as integer strings. */
export function toolErrorBody(err: DomainError): { error: Json } {
  const details: Json = {};
  for (const [k, v] of Object.entries(err.details)) {
    // the x402 receipt is a funding header; no tool settles a payment
    if (k === "paymentResponse" || v === undefined) continue;
    details[k] = typeof v === "bigint" ? v.toString() : v;
  }
  return { error: { code: err.code, message: err.message, ...details } };
}

export function toolError(err: DomainError): CallToolResult {
  return { content: [{ type: "text", text: JSON.stringify(toolErrorBody(err)) }], isError: true };
}

/** Anything a tool threw as a DomainError; an unknown error is logged once and masked (500 `internal_error`). */
export function asDomainError(err: unknown, ctx: { tool: string; requestId: string | undefined }): DomainError {
  if (isDomainError(err)) return err;
  logger.error({ err, tool: ctx.tool, requestId: ctx.requestId }, "mcp tool failed");
  return new DomainError("internal_error", "Internal error.", ctx.requestId ? { requestId: ctx.requestId } : {});
}

/**
 * A tool's arguments checked with the contract's schema (contract/parse.ts `parseWith`): the first
 * issue becomes `invalid_request` naming the field, exactly as REST answers its 400. Absent
 * arguments count as `{}`.
 */
export function parseArguments<S extends z.ZodTypeAny>(schema: S, value: unknown): z.output<S> {
  return parseWith(schema, value ?? {});
}
