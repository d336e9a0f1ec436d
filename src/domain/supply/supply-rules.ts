import { DomainError } from "../../lib/errors.js";
import { MAX_OFFER_PRICE_CENTS, MICRO, MIN_OFFER_PRICE_CENTS, parseDecimal6 } from "../../lib/money.js";

/**
 * Input rules of the supply side (SPEC "Supplier records", "Limits"). Pure functions: each one
 * returns the normalised value or throws `invalid_request` naming the field, before anything is
 * read or written.
 */

/** Sanity bound on one offer (docs/decisions.md "Supply"): 1 000 000 DIEM. */
export const MAX_OFFER_QUANTITY_MICRO_DIEM = 1_000_000n * MICRO;
export const MAX_LABEL_LENGTH = 64;
export const MAX_UPSTREAM_SECRET_LENGTH = 512;
/** Secrets shorter than this show no characters in the masked display. */
const MIN_SECRET_LENGTH_FOR_LAST4 = 12;

export function assertOfferPrice(value: unknown, field = "priceCentsPerDollar"): number {
  if (
    typeof value !== "number" ||
    !Number.isInteger(value) ||
    value < MIN_OFFER_PRICE_CENTS ||
    value > MAX_OFFER_PRICE_CENTS
  ) {
    throw new DomainError(
      "invalid_request",
      `${field} must be an integer ${MIN_OFFER_PRICE_CENTS}-${MAX_OFFER_PRICE_CENTS}; nothing was changed.`,
      { field },
    );
  }
  return value;
}

/** SPEC "Supplier records": a decimal string with six decimals — digits, a point, exactly six digits. */
const SIX_DECIMALS = /^\d{1,15}\.\d{6}$/;

/**
 * A DIEM quantity given as a decimal string with exactly six decimals ("12.500000", "0.000001"),
 * strictly positive and at most MAX_OFFER_QUANTITY. Nothing is rounded or padded: "12.5", "1" and
 * seven decimals are a 400 (SPEC "Supplier records"): the service sells exactly what the supplier wrote.
 */
export function parseQuantityDiem(value: unknown, field = "quantityDiem"): bigint {
  const micro = typeof value === "string" && SIX_DECIMALS.test(value) ? parseDecimal6(value) : undefined;
  if (micro === undefined) {
    throw new DomainError(
      "invalid_request",
      `${field} must be a decimal string with exactly six decimals, e.g. "25.000000".`,
      { field },
    );
  }
  return assertQuantity(micro, field);
}

/** The same bound for callers that already hold micro-DIEM (GraphQL `MicroDiem`). */
export function assertQuantity(micro: bigint, field = "quantityDiem"): bigint {
  if (micro <= 0n) throw new DomainError("invalid_request", `${field} must be greater than 0.`, { field });
  if (micro > MAX_OFFER_QUANTITY_MICRO_DIEM) {
    throw new DomainError("invalid_request", `${field} must be at most 1000000 DIEM.`, { field });
  }
  return micro;
}

export function assertLabel(value: unknown, field = "label"): string {
  if (typeof value !== "string") throw new DomainError("invalid_request", `${field} must be a string.`, { field });
  const label = value.trim();
  if (label.length < 1 || label.length > MAX_LABEL_LENGTH) {
    throw new DomainError("invalid_request", `${field} must be 1-${MAX_LABEL_LENGTH} characters.`, { field });
  }
  return label;
}

export function assertUpstreamSecret(value: unknown, field = "upstreamApiKey"): string {
  if (typeof value !== "string" || value.length === 0) {
    throw new DomainError("invalid_request", `${field} must be a non-empty string.`, { field });
  }
  if (value.length > MAX_UPSTREAM_SECRET_LENGTH || !/^[\x21-\x7e]+$/.test(value)) {
    throw new DomainError(
      "invalid_request",
      `${field} must be 1-${MAX_UPSTREAM_SECRET_LENGTH} printable characters without spaces.`,
      { field },
    );
  }
  return value;
}

/** What the masked display may show of a secret: its last four characters, only when long enough. */
export function secretLast4(secret: string): string {
  return secret.length >= MIN_SECRET_LENGTH_FOR_LAST4 ? secret.slice(-4) : "";
}
