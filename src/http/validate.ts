import type { z } from "zod";
import { uuid } from "../contract/common.js";
import { DomainError } from "../lib/errors.js";

/**
 * Request validation with the API contract's schemas (src/contract). Failures are 400
 * `invalid_request` naming the field (nothing changed). A message that begins with its field's name
 * is a whole sentence and is sent as is; any other is prefixed with the field (`name: is required`).
 */
function invalid(error: z.ZodError): DomainError {
  const issue = error.issues[0];
  const field = issue?.path.join(".") || undefined;
  const message = issue?.message ?? "invalid request";
  return new DomainError(
    "invalid_request",
    field && !message.startsWith(field) ? `${field}: ${message}` : message,
    field ? { field } : {},
  );
}

/** A body, query or path params; an absent body counts as `{}`. */
export function parse<T extends z.ZodTypeAny>(schema: T, value: unknown): z.infer<T> {
  const r = schema.safeParse(value ?? {});
  if (r.success) return r.data;
  throw invalid(r.error);
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
  throw invalid(r.error);
}

/** A uuid inside a body the domain goes on to check (the supply offer's `upstreamKeyId`). */
export function parseUuid(value: unknown, field: string): string {
  const r = uuid.safeParse(value);
  if (!r.success) throw new DomainError("invalid_request", `${field} must be a uuid.`, { field });
  return r.data.toLowerCase();
}
