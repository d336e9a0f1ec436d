/**
 * Money on screen. Amounts arrive as integer strings of micro-units (MicroUsdc, MicroDiem: 6
 * decimals) and are formatted with bigint arithmetic, exactly, never through floating point.
 * Display only: truncation toward zero when fewer decimals are shown (docs/decisions.md "Web app").
 */
const SCALE = 1_000_000n;

function toBig(micro: string | bigint | null | undefined): bigint {
  if (micro === null || micro === undefined || micro === "") return 0n;
  return typeof micro === "bigint" ? micro : BigInt(micro);
}

/** `"12345678"` → `"12.345678"` (six decimals) or fewer (`decimals`), grouped thousands. */
export function formatMicro(micro: string | bigint | null | undefined, decimals = 6): string {
  const v = toBig(micro);
  const neg = v < 0n;
  const abs = neg ? -v : v;
  const whole = (abs / SCALE).toString().replace(/\B(?=(\d{3})+(?!\d))/g, ",");
  const frac = (abs % SCALE).toString().padStart(6, "0").slice(0, decimals);
  return `${neg ? "−" : ""}${whole}${decimals > 0 ? `.${frac}` : ""}`;
}

/**
 * `"$1.23"`-style USDC for headline numbers: 2 decimals from $1 up, otherwise up to 6 (trailing
 * zeros trimmed to 2), so a sub-cent amount never reads as $0.00. Truncated; exact value in a title.
 */
export function usd(micro: string | bigint | null | undefined, decimals?: number): string {
  const v = toBig(micro);
  const abs = v < 0n ? -v : v;
  let s = formatMicro(v, decimals ?? (abs >= SCALE || abs === 0n ? 2 : 6));
  if (decimals === undefined && abs < SCALE && abs !== 0n) s = s.replace(/(\.\d{2}\d*?)0+$/, "$1");
  return s.startsWith("−") ? `−$${s.slice(1)}` : `$${s}`;
}

/** `1 clear`, `2 clears`. */
export function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? "" : "s"}`;
}

/** DIEM with up to `decimals` places. */
export function diem(micro: string | bigint | null | undefined, decimals = 2): string {
  return `${formatMicro(micro, decimals)} DIEM`;
}

/**
 * `"1.5"` → `1500000n`: a user-typed decimal (at most six places) to micro-units; undefined when it
 * is not a plain non-negative decimal.
 */
export function parseDecimal6(text: string): bigint | undefined {
  const t = text.trim();
  const m = /^(\d{1,12})(?:\.(\d{0,6}))?$/.exec(t);
  if (!m) return undefined;
  const whole = m[1] ?? "0";
  const frac = (m[2] ?? "").padEnd(6, "0");
  return BigInt(whole) * SCALE + BigInt(frac);
}

/**
 * A micro-unit amount as a JS number of whole units, FOR CHART GEOMETRY ONLY (axis positions are
 * floats); never use it for a figure a person reads as money.
 */
export function chartUnits(micro: string | bigint | null | undefined): number {
  const v = toBig(micro);
  return Number(v / SCALE) + Number(v % SCALE) / 1_000_000;
}

export function sumMicro(values: (string | bigint | null | undefined)[]): bigint {
  let total = 0n;
  for (const v of values) total += toBig(v);
  return total;
}

export function bigOf(micro: string | bigint | null | undefined): bigint {
  return toBig(micro);
}

/** Basis points as a percentage with one decimal (`8125` → `81.2%`), integer maths. */
export function bpsPercent(bps: number | null | undefined): string {
  if (bps === null || bps === undefined) return "—";
  return `${Math.trunc(bps / 100)}.${Math.trunc((Math.abs(bps) % 100) / 10)}%`;
}

/** An axis tick in dollars (chart geometry only, see `chartUnits`): `$0`, `$0.00018`, `$1.5`. */
export function dollarTick(v: number): string {
  if (v === 0) return "$0";
  return `$${Number(v.toPrecision(2))}`;
}
