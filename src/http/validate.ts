import type { z } from "zod";
import { parseWith } from "../contract/parse.js";

/**
 * Request validation with the API contract's schemas (src/contract). Failures are the contract's
 * 400 `invalid_request` naming the field (contract/parse.ts, shared with the services' request
 * parses, the GraphQL arguments and the MCP tools). The inference and funding bodies are not parsed
 * here: the contract's `parse…Request` turns each into its typed request exactly once
 * (src/http/routes/inference.ts, src/domain/funding/funding-service.ts).
 */

/** A body, query or path params; an absent body counts as `{}`. */
export function parse<T extends z.ZodTypeAny>(schema: T, value: unknown): z.infer<T> {
  return parseWith(schema, value ?? {});
}
