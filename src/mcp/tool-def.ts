import type { CallToolResult, ToolAnnotations } from "@modelcontextprotocol/sdk/types.js";
import type { z } from "zod";
import type { Viewer } from "../domain/identity/viewer.js";
import type { Caller } from "../domain/inference/pipeline/session.js";
import type { Scope } from "../domain/keys/key-scopes.js";
import type { Runtime } from "../runtime.js";
import { type Json, parseArguments } from "./tool-result.js";

/** What every tool definition is made of (tools.ts, inference-tools.ts). */

export interface ToolContext {
  rt: Runtime;
  /** the Bearer key's account, resolved before any MCP processing */
  viewer: Viewer;
  /** aborted when the HTTP client goes away (a paid call is then ended without a charge) */
  signal: AbortSignal;
  /** the HTTP request's `X-Svc-Request-Id` (logs, an internal error's details) */
  requestId: string | undefined;
  /**
   * The id a paid call's record takes (`recordIds`): the POST's `X-Svc-Request-Id` for its first paid
   * call, none for a later call of a batch (its record gets a fresh id), so no two records share one.
   */
  takeRequestId: () => string | undefined;
}

/**
 * The record ids of one POST's paid calls (`ToolContext.takeRequestId`): `requestId` once, then none.
 * A JSON-RPC batch may carry several paid calls; each is its own request, with its own record, id and
 * support reference (docs/decisions.md "The support reference is the request id").
 */
export function recordIds(requestId: string | undefined): () => string | undefined {
  let left = requestId;
  return () => {
    const id = left;
    left = undefined;
    return id;
  };
}

export interface ToolDefinition {
  name: string;
  title: string;
  description: string;
  /** the arguments' contract schema: its JSON Schema is the tool's `inputSchema` */
  input: z.AnyZodObject;
  /** the shape of a successful result's `structuredContent` (a contract response schema) */
  output: z.AnyZodObject;
  annotations: ToolAnnotations;
  /** the scope the tool needs (key-scopes.ts `requireScope`, before anything else); null: the service checks */
  scope: Scope | null;
  /** the arguments parsed once, by the contract, into what `run` takes (400 naming the field) */
  parse(args: unknown): unknown;
  run(args: unknown, ctx: ToolContext): Promise<Json>;
  /** how a successful value is answered when not as JSON alone (tool-result.ts `toolResult`): e.g. image blocks */
  result?(value: Json): CallToolResult;
}

/**
 * Keeps each tool's `run` typed by what its arguments parse into: `input`'s parse, or `parse` where
 * the tool hands a service the contract's typed request (that parse is then the only one).
 */
export function defineTool<I extends z.AnyZodObject, A = z.output<I>>(def: {
  name: string;
  title: string;
  description: string;
  input: I;
  output: z.AnyZodObject;
  annotations: ToolAnnotations;
  scope: Scope | null;
  parse?: (args: unknown) => A;
  run(args: A, ctx: ToolContext): Promise<Json>;
  result?(value: Json): CallToolResult;
}): ToolDefinition {
  return { ...def, parse: def.parse ?? ((args) => parseArguments(def.input, args)) } as ToolDefinition;
}

export const UNITS =
  'USDC and DIEM amounts are decimal strings with six decimals ("0.001234"); prices are integer cents per 1 USD of DIEM face value.';

export const ON_INVALID =
  "invalid_request: an argument is wrong (error.field names it); fix it and call again, nothing was changed.";

export const ON_SUPPLY = [
  "no_eligible_supply: every posted price is above your ceiling; call set_max_price with error.cheapestPostedCents, then repeat the same call.",
  "pool_empty: nothing is posted at any price; wait and retry later (capacity shows depth).",
  "insufficient_routable_at_price: offers at your ceiling are too small for this request; send a smaller request or retry later (raising the ceiling does not help).",
].join(" ");

/**
 * A contract schema with a description on some fields, for the agent reading `inputSchema` (the
 * contract's own descriptions are OpenAPI metadata, which the JSON Schema converter does not read).
 * Validation is the contract's, unchanged.
 */
export function described<S extends z.AnyZodObject>(
  schema: S,
  text: Partial<Record<keyof S["shape"] & string, string>>,
): S {
  const shape: z.ZodRawShape = {};
  for (const [field, description] of Object.entries(text)) {
    const f = schema.shape[field] as z.ZodTypeAny | undefined;
    if (f && typeof description === "string") shape[field] = f.describe(description);
  }
  return schema.extend(shape) as unknown as S;
}

/** The caller a tool's service call is made for: the Bearer key's account and key. */
export function caller(v: Viewer, requestId?: string): Caller {
  return {
    accountId: v.accountId,
    apiKeyId: v.apiKeyId ?? "",
    ...(v.keyRules ? { key: v.keyRules } : {}),
    ...(requestId ? { requestId } : {}),
  };
}
