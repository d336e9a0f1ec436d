/**
 * Money and usage units. Every amount is an integer `bigint` in micro-units (6 decimals):
 *   - micro-USDC: 1 USDC = 1_000_000n
 *   - micro-DIEM: 1 DIEM = 1_000_000n (1 DIEM = 1 USD of upstream usage)
 * Prices are integer cents per 1 USD of face (`priceCentsPerDollar`); fees are basis points.
 *
 * Rounding rules (docs/decisions.md "Rounding"), one per quantity:
 *   - burn (usage × per-million rates) rounds UP to the whole micro-DIEM (`burnMicroDiem`);
 *   - gross charge = burn × price / 100 rounds DOWN (`grossMicroUsdc`): the buyer is never charged
 *     more than the exact product, so the charge never exceeds burn × ceiling;
 *   - platform fee = gross × feeBps / 10_000 rounds DOWN; supplier share = gross − fee, so
 *     fee + share = gross exactly and the rounding remainder goes to the supplier.
 * No `number`, float or `Decimal` on any money path.
 */

export type MicroUsdc = bigint;
export type MicroDiem = bigint;
/** Integer cents per 1 USD of face value. */
export type PriceCents = number;
export type FeeBps = number;

export const MICRO = 1_000_000n;
export const BPS_DENOMINATOR = 10_000n;
export const CENTS_PER_DOLLAR = 100n;

/** SPEC "Limits": a buyer's ceiling is an integer 30–80 cents per dollar of face. */
export const MIN_CEILING_CENTS = 30;
export const MAX_CEILING_CENTS = 80;
/** SPEC "Limits": a new account's ceiling (signup, first sign-in). */
export const DEFAULT_CEILING_CENTS = MAX_CEILING_CENTS;
/** SPEC "Limits": an offer's price is an integer 1–80 cents per dollar of face (no price clears above 80). */
export const MIN_OFFER_PRICE_CENTS = 1;
export const MAX_OFFER_PRICE_CENTS = MAX_CEILING_CENTS;

export class MoneyError extends Error {
  override readonly name = "MoneyError";
}

function assertNonNegative(label: string, v: bigint): void {
  if (v < 0n) throw new MoneyError(`${label} must be non-negative, got ${v}`);
}

function assertIntegerIn(label: string, v: number, min: number, max: number): void {
  if (!Number.isSafeInteger(v) || v < min || v > max) {
    throw new MoneyError(`${label} must be an integer ${min}-${max}, got ${v}`);
  }
}

/** floor(a × b / d) for non-negative operands. */
export function mulDivFloor(a: bigint, b: bigint, d: bigint): bigint {
  if (d <= 0n) throw new MoneyError("divisor must be positive");
  assertNonNegative("a", a);
  assertNonNegative("b", b);
  return (a * b) / d;
}

/** ceil(a × b / d) for non-negative operands. */
export function mulDivCeil(a: bigint, b: bigint, d: bigint): bigint {
  if (d <= 0n) throw new MoneyError("divisor must be positive");
  assertNonNegative("a", a);
  assertNonNegative("b", b);
  const p = a * b;
  return (p + d - 1n) / d;
}

/** floor(amount × bps / 10_000). */
export function applyBpsFloor(amount: bigint, bps: FeeBps): bigint {
  assertIntegerIn("feeBps", bps, 0, 10_000);
  return mulDivFloor(amount, BigInt(bps), BPS_DENOMINATOR);
}

/** Gross micro-USDC for a burn at a clearing price: floor(burn × price / 100). */
export function grossMicroUsdc(burnMicroDiem: MicroDiem, priceCentsPerDollar: PriceCents): MicroUsdc {
  assertIntegerIn("priceCentsPerDollar", priceCentsPerDollar, 0, 100);
  return mulDivFloor(burnMicroDiem, BigInt(priceCentsPerDollar), CENTS_PER_DOLLAR);
}

export interface ChargeSplit {
  burnMicroDiem: MicroDiem;
  priceCentsPerDollar: PriceCents;
  grossMicroUsdc: MicroUsdc;
  feeMicroUsdc: MicroUsdc;
  supplierMicroUsdc: MicroUsdc;
}

/**
 * The charge of one clear: gross = floor(burn × price / 100), fee = floor(gross × feeBps / 10_000),
 * supplier = gross − fee. Safe for billing.
 */
export function computeCharge(burnMicroDiem: MicroDiem, priceCentsPerDollar: PriceCents, feeBps: FeeBps): ChargeSplit {
  assertNonNegative("burnMicroDiem", burnMicroDiem);
  const gross = grossMicroUsdc(burnMicroDiem, priceCentsPerDollar);
  const fee = applyBpsFloor(gross, feeBps);
  return {
    burnMicroDiem,
    priceCentsPerDollar,
    grossMicroUsdc: gross,
    feeMicroUsdc: fee,
    supplierMicroUsdc: gross - fee,
  };
}

/** Split an already-known gross (e.g. a refund of a clear, or a video job priced up front). */
export function splitGross(
  gross: MicroUsdc,
  feeBps: FeeBps,
): { feeMicroUsdc: MicroUsdc; supplierMicroUsdc: MicroUsdc } {
  assertNonNegative("gross", gross);
  const fee = applyBpsFloor(gross, feeBps);
  return { feeMicroUsdc: fee, supplierMicroUsdc: gross - fee };
}

/** Text pricing in micro-DIEM per 1M tokens (integers). */
export interface TokenRates {
  inputMicroPerM: bigint;
  outputMicroPerM: bigint;
  /** cache-read rate; absent → billed at the input rate */
  cacheMicroPerM?: bigint | null;
  /** cache-write rate (`pricing.cache_write`); absent → billed at the input rate */
  cacheWriteMicroPerM?: bigint | null;
}

export interface TextPricing extends TokenRates {
  /** long-context tier: when prompt tokens exceed the threshold, these rates apply to the whole request */
  extended?: (TokenRates & { thresholdTokens: number }) | null;
}

export interface TokenUsage {
  promptTokens: number;
  completionTokens: number;
  /** cache-read tokens, included in promptTokens */
  cachedTokens?: number;
  /** cache-write tokens (`cache_creation_input_tokens`), included in promptTokens */
  cacheWriteTokens?: number;
}

/**
 * DIEM burn of one text request, rounded UP to the whole micro-DIEM, as the upstream computes it:
 *   ceil(((prompt − cached − cacheWrite) × input + cached × cache + cacheWrite × cache_write
 *         + completion × output) / 1_000_000)
 * with the extended rates when prompt > threshold; a missing cache or cache-write rate is the input
 * rate. Token counts are integers; cached + cacheWrite never exceed prompt.
 */
export function burnMicroDiem(pricing: TextPricing, usage: TokenUsage): MicroDiem {
  const prompt = toTokens("promptTokens", usage.promptTokens);
  const completion = toTokens("completionTokens", usage.completionTokens);
  const cached = toTokens("cachedTokens", usage.cachedTokens ?? 0);
  const written = toTokens("cacheWriteTokens", usage.cacheWriteTokens ?? 0);
  if (cached + written > prompt) throw new MoneyError("cachedTokens + cacheWriteTokens cannot exceed promptTokens");
  const ext = pricing.extended;
  const rates: TokenRates = ext && prompt > BigInt(ext.thresholdTokens) ? ext : pricing;
  const cacheRate = rates.cacheMicroPerM ?? rates.inputMicroPerM;
  const writeRate = rates.cacheWriteMicroPerM ?? rates.inputMicroPerM;
  const numerator =
    (prompt - cached - written) * rates.inputMicroPerM +
    cached * cacheRate +
    written * writeRate +
    completion * rates.outputMicroPerM;
  return mulDivCeil(numerator, 1n, MICRO);
}

/**
 * The most `burnMicroDiem` can be for `promptTokens` and `completionTokens`, however the upstream
 * splits the prompt between uncached, cache-read and cache-write tokens: the burn with every
 * prompt token at the dearest of the three rates (the burn is linear in each split, so the
 * maximum is at one of those corners). What a request is admitted with, so a cache write priced
 * above the input rate can never burn past the admitted maximum.
 */
export function worstBurnMicroDiem(
  pricing: TextPricing,
  usage: Pick<TokenUsage, "promptTokens" | "completionTokens">,
): MicroDiem {
  const { promptTokens, completionTokens } = usage;
  const ext = pricing.extended;
  const rates: TokenRates = ext && promptTokens > ext.thresholdTokens ? ext : pricing;
  const input = rates.inputMicroPerM;
  // the common case (no cache rate above the input rate): the plain burn, one computation on the hot path
  if ((rates.cacheMicroPerM ?? input) <= input && (rates.cacheWriteMicroPerM ?? input) <= input) {
    return burnMicroDiem(pricing, { promptTokens, completionTokens });
  }
  return maxBig(
    burnMicroDiem(pricing, { promptTokens, completionTokens }),
    burnMicroDiem(pricing, { promptTokens, completionTokens, cachedTokens: promptTokens }),
    burnMicroDiem(pricing, { promptTokens, completionTokens, cacheWriteTokens: promptTokens }),
  );
}

function toTokens(label: string, n: number): bigint {
  if (!Number.isSafeInteger(n) || n < 0) throw new MoneyError(`${label} must be a non-negative integer, got ${n}`);
  return BigInt(n);
}

/** "1.234567" from 1234567n; always six decimals; negative values keep their sign. */
export function formatDecimal6(micro: bigint): string {
  const neg = micro < 0n;
  const abs = neg ? -micro : micro;
  const whole = abs / MICRO;
  const frac = (abs % MICRO).toString().padStart(6, "0");
  return `${neg ? "-" : ""}${whole}.${frac}`;
}

const DECIMAL6 = /^(\d{1,15})(?:\.(\d{1,6}))?$/;

/**
 * Parses a non-negative decimal string with at most six decimals into micro-units.
 * Returns undefined for anything else (signs, exponents, more than six decimals): nothing is rounded.
 */
export function parseDecimal6(s: string): bigint | undefined {
  const m = DECIMAL6.exec(s.trim());
  if (!m) return undefined;
  const whole = BigInt(m[1] ?? "0");
  const frac = BigInt((m[2] ?? "").padEnd(6, "0"));
  return whole * MICRO + frac;
}

/**
 * Converts a decimal number as published by the upstream (JSON number such as 1.54 or 0.286)
 * into micro-units, rounding UP past the sixth decimal. Uses the number's shortest decimal
 * representation (exactly the JSON text for published prices), never float arithmetic.
 * For catalog rates and balances read from the upstream only.
 */
export function upstreamDecimalToMicro(value: number | string): bigint {
  const text = typeof value === "number" ? numberToPlainString(value) : value.trim();
  const m = /^(-?)(\d*)(?:\.(\d*))?$/.exec(text);
  if (!m || (m[2] === "" && (m[3] ?? "") === "")) throw new MoneyError(`not a decimal: ${text}`);
  const neg = m[1] === "-";
  const whole = BigInt(m[2] || "0");
  const fracDigits = m[3] ?? "";
  const head = BigInt(fracDigits.slice(0, 6).padEnd(6, "0"));
  const rest = fracDigits.slice(6);
  const roundUp = /[1-9]/.test(rest) ? 1n : 0n;
  const abs = whole * MICRO + head;
  // round away from zero for positives (up), toward zero for negatives (never overstates a debt)
  return neg ? -abs : abs + roundUp;
}

/** A finite number's shortest decimal text without exponent notation (exact: from its digits, no arithmetic). */
export function numberToPlainString(n: number): string {
  if (!Number.isFinite(n)) throw new MoneyError(`not a finite number: ${n}`);
  const s = String(n);
  if (!/e/i.test(s)) return s;
  // expand exponent notation exactly from the digits
  const m = /^(-?)(\d)(?:\.(\d+))?e([+-]\d+)$/i.exec(s);
  if (!m) throw new MoneyError(`cannot expand ${s}`);
  const sign = m[1] ?? "";
  const digits = `${m[2] ?? ""}${m[3] ?? ""}`;
  const exp = Number(m[4]);
  const point = 1 + exp;
  if (point <= 0) return `${sign}0.${"0".repeat(-point)}${digits}`;
  if (point >= digits.length) return `${sign}${digits}${"0".repeat(point - digits.length)}`;
  return `${sign}${digits.slice(0, point)}.${digits.slice(point)}`;
}

/**
 * A video job's DIEM (docs/public/pricing.md "A video job"): the upstream's quote plus the published
 * markup, rounded UP to the micro-DIEM.
 */
export function videoJobMicroDiem(upstreamQuoteMicro: MicroDiem, markupBps: FeeBps): MicroDiem {
  if (upstreamQuoteMicro < 0n) throw new MoneyError("a quote cannot be negative");
  assertIntegerIn("markupBps", markupBps, 0, 10_000);
  return mulDivCeil(upstreamQuoteMicro, BPS_DENOMINATOR + BigInt(markupBps), BPS_DENOMINATOR);
}

/** Micro-USDC to the six-decimal string the REST API renders. */
export const formatUsdc = formatDecimal6;
/** Micro-DIEM to the six-decimal string the REST API renders. */
export const formatDiem = formatDecimal6;

/** The USDC an amount of DIEM costs at a price: floor(diem × price / 100). */
export function usdcForDiem(diemMicro: MicroDiem, priceCentsPerDollar: PriceCents): MicroUsdc {
  return grossMicroUsdc(diemMicro, priceCentsPerDollar);
}

/** Minimum of bigints. */
export function minBig(...xs: bigint[]): bigint {
  if (xs.length === 0) throw new MoneyError("minBig of nothing");
  let m = xs[0] as bigint;
  for (const x of xs) if (x < m) m = x;
  return m;
}

export function maxBig(...xs: bigint[]): bigint {
  if (xs.length === 0) throw new MoneyError("maxBig of nothing");
  let m = xs[0] as bigint;
  for (const x of xs) if (x > m) m = x;
  return m;
}
