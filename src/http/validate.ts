import type { z } from "zod";
import { invalidRequest, parseWith } from "../contract/parse.js";

/**
 * Request validation with the API contract's schemas (src/contract). Failures are the contract's
 * 400 `invalid_request` naming the field (contract/parse.ts, shared with the GraphQL arguments).
 */

/** A body, query or path params; an absent body counts as `{}`. */
export function parse<T extends z.ZodTypeAny>(schema: T, value: unknown): z.infer<T> {
  return parseWith(schema, value ?? {});
}

/**
 * The transport shape of a body the domain validates too (inference): parsed as sent (an absent body
 * is not `{}`). On failure the domain's own check speaks first, so a request the service would refuse
 * gets exactly the service's answer; the contract's answer is for what only it refuses.
 */
export function checkShape(schema: z.ZodTypeAny, value: unknown, domainCheck?: (value: unknown) => unknown): void {
  const r = schema.safeParse(value);
  if (r.success) return;
  domainCheck?.(value);
  throw invalidRequest(r.error);
}
