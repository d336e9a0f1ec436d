import { numberToPlainString } from "./money.js";

/**
 * An exact non-negative decimal: `units / 10^scale` (e.g. 0.375 is `{units: 375n, scale: 3}`). What a
 * price a client sends as a JSON number or a decimal string is, read from its text (never through
 * float arithmetic), so rules over it are integer arithmetic.
 */
export interface ExactDecimal {
  units: bigint;
  scale: number;
}

/** At most 15 integer digits and 18 decimals: any price a client means, and bounded bigints. */
const DECIMAL = /^(\d{1,15})(?:\.(\d{1,18}))?$/;

/**
 * A non-negative decimal read exactly from a JSON number (its shortest decimal text, which is the
 * text the client sent for any number with at most 17 significant digits) or a decimal string
 * (`"0.375"`; no sign, no exponent). Undefined for anything else: negatives, non-finite numbers, more
 * than 15 integer digits or 18 decimals.
 */
export function exactDecimal(value: unknown): ExactDecimal | undefined {
  let text: string;
  if (typeof value === "number") {
    if (!Number.isFinite(value) || value < 0) return undefined;
    text = numberToPlainString(value);
  } else if (typeof value === "string") {
    text = value.trim();
  } else {
    return undefined;
  }
  const m = DECIMAL.exec(text);
  if (!m) return undefined;
  const frac = m[2] ?? "";
  return { units: BigInt(`${m[1]}${frac}`), scale: frac.length };
}
