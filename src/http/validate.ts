import { z } from "zod";
import { DomainError } from "../lib/errors.js";

/** Parses a body or query with zod; failures are 400 naming the field (nothing changed). */
export function parse<T extends z.ZodTypeAny>(schema: T, value: unknown): z.infer<T> {
  const r = schema.safeParse(value ?? {});
  if (r.success) return r.data;
  const issue = r.error.issues[0];
  const field = issue?.path.join(".") || undefined;
  throw new DomainError(
    "invalid_request",
    `${field ? `${field}: ` : ""}${issue?.message ?? "invalid request"}`,
    field ? { field } : {},
  );
}

export const uuidParam = z.string().uuid({ message: "must be a uuid" });

export function parseUuid(value: unknown, field: string): string {
  const r = uuidParam.safeParse(value);
  if (!r.success) throw new DomainError("invalid_request", `${field} must be a uuid.`, { field });
  return r.data.toLowerCase();
}

export const keyName = (min: number) =>
  z
    .string({ required_error: "is required", invalid_type_error: "must be a string" })
    .min(min, { message: `must be ${min}-64 characters` })
    .max(64, { message: "must be at most 64 characters" });

/** ?limit=&cursor= */
export const pageQuery = z.object({
  limit: z
    .string()
    .regex(/^\d+$/, { message: "must be an integer 1-100" })
    .transform(Number)
    .refine((n) => n >= 1 && n <= 100, { message: "must be an integer 1-100" })
    .optional(),
  cursor: z.string().max(200).optional(),
});
