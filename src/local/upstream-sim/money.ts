/**
 * Exact micro-unit helpers for the upstream simulator. Amounts are bigint micro-units (6 decimals);
 * the wire uses decimal numbers/strings. Nothing here uses floating-point arithmetic on amounts:
 * numbers coming from the model catalog are converted through their shortest decimal representation.
 */

export const MICRO_PER_UNIT = 1_000_000n;

const DECIMAL_RE = /^(-)?(\d+)(?:\.(\d+))?$/;

/** Parses a decimal string ("1.54", "-0.000001", "30") into micro-units; throws on more than 6 decimals. */
export function parseDecimalToMicro(text: string): bigint {
  const match = DECIMAL_RE.exec(text.trim());
  if (!match) throw new Error(`not a decimal amount: ${text}`);
  const [, sign, whole = "0", frac = ""] = match;
  if (frac.length > 6) throw new Error(`more than 6 decimals: ${text}`);
  const micro = BigInt(whole) * MICRO_PER_UNIT + BigInt(frac.padEnd(6, "0"));
  return sign ? -micro : micro;
}

/**
 * Converts a catalog price (a JS number such as 1.54) into micro-units exactly, using the number's
 * shortest round-trip decimal form. Throws when the price is not representable in 6 decimals.
 */
export function numberToMicro(value: number): bigint {
  if (!Number.isFinite(value)) throw new Error(`not a finite amount: ${value}`);
  const text = String(value);
  if (text.includes("e") || text.includes("E")) {
    // Exponent form only shows up for tiny or huge numbers; re-render with fixed decimals and verify.
    const fixed = value.toFixed(6);
    if (Number(fixed) !== value) throw new Error(`price not representable in micro-units: ${text}`);
    return parseDecimalToMicro(fixed);
  }
  return parseDecimalToMicro(text);
}

/** Renders micro-units as a minimal decimal string: 30847100n → "30.8471", 0n → "0", -5n → "-0.000005". */
export function formatMicro(micro: bigint): string {
  const negative = micro < 0n;
  const abs = negative ? -micro : micro;
  const whole = abs / MICRO_PER_UNIT;
  const frac = (abs % MICRO_PER_UNIT).toString().padStart(6, "0").replace(/0+$/, "");
  return `${negative ? "-" : ""}${whole}${frac ? `.${frac}` : ""}`;
}

/** Micro-units as a JSON number (for wire fields Venice sends as numbers, e.g. `cost.diem`). */
export function microToNumber(micro: bigint): number {
  return Number(formatMicro(micro));
}

/** ceil(a / b) for a ≥ 0, b > 0. */
export function ceilDiv(a: bigint, b: bigint): bigint {
  return (a + b - 1n) / b;
}

/** Accepts a bigint, an integer number, or a decimal-integer string (admin API input). */
export function toMicroBigint(value: unknown, field: string): bigint {
  if (typeof value === "bigint") return value;
  if (typeof value === "number" && Number.isSafeInteger(value)) return BigInt(value);
  if (typeof value === "string" && /^-?\d+$/.test(value.trim())) return BigInt(value.trim());
  throw new Error(`${field} must be an integer amount of micro-units (decimal string)`);
}
