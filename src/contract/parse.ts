import type { z } from "zod";
import { DomainError } from "../lib/errors.js";

/**
 * Validation with the contract's schemas, for every transport: the REST routes (http/validate.ts)
 * and the GraphQL arguments (graphql/validate.ts) throw this one DomainError, so a client sees the
 * same 400 `invalid_request` naming the field (nothing changed) wherever it asks. A message that
 * begins with its field's name is a whole sentence and is sent as is; any other is prefixed with
 * the field (`name: is required`).
 */
export function invalidRequest(error: z.ZodError): DomainError {
  const issue = error.issues[0];
  const field = issue?.path.join(".") || undefined;
  const message = issue?.message ?? "invalid request";
  return new DomainError(
    "invalid_request",
    field && !message.startsWith(field) ? `${field}: ${message}` : message,
    field ? { field } : {},
  );
}

/** `value` parsed by `schema`, or the contract's 400. */
export function parseWith<T extends z.ZodTypeAny>(schema: T, value: unknown): z.infer<T> {
  const r = schema.safeParse(value);
  if (r.success) return r.data;
  throw invalidRequest(r.error);
}
