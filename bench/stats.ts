// Percentiles and the shape of the bench's figures.
import type { Sample } from "./client.js";

/** The p-th percentile of an ascending array (nearest rank, as every earlier bench figure). */
export function pct(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
}

/** Rounded to µs, for printing. */
export function ms(x: number): number {
  return Number.isFinite(x) ? +x.toFixed(3) : x;
}

/** One timing of many samples, ascending. */
export function series(samples: readonly Sample[], pick: (s: Sample) => number): number[] {
  return samples.map(pick).sort((a, b) => a - b);
}

/** p50 and p99 of one timing. */
export function p50p99(samples: readonly Sample[], pick: (s: Sample) => number): { p50: number; p99: number } {
  const xs = series(samples, pick);
  return { p50: pct(xs, 50), p99: pct(xs, 99) };
}

/** p50 of each `Server-Timing` phase (`name;dur=ms`) over many answers. */
export function serverTimingP50(samples: readonly Sample[]): Record<string, number> {
  const byName = new Map<string, number[]>();
  for (const s of samples) {
    for (const part of (s.serverTiming ?? "").split(",")) {
      const m = /^\s*(\w+);dur=([\d.]+)/.exec(part);
      if (!m?.[1] || !m[2]) continue;
      const xs = byName.get(m[1]) ?? [];
      xs.push(Number(m[2]));
      byName.set(m[1], xs);
    }
  }
  const out: Record<string, number> = {};
  for (const [name, xs] of byName)
    out[name] = ms(
      pct(
        xs.sort((a, b) => a - b),
        50,
      ),
    );
  return out;
}

/**
 * One target of issue 19: the service's figure beside its floor (what the bare pass-through proxy,
 * or the upstream itself, reached in this same run) and whether the target is met.
 */
export interface TargetLine {
  bench: `target.${string}`;
  target: number;
  service: number;
  floor: number | null;
  met: boolean;
  unit: string;
  [more: string]: unknown;
}

export function targetLine(
  name: string,
  o: {
    target: number;
    service: number;
    floor: number | null;
    unit: string;
    higherIsBetter?: boolean;
    /** further conditions the target has besides the figure (false: not met whatever the figure) */
    requires?: boolean;
    [more: string]: unknown;
  },
): TargetLine {
  const { target, service, floor, unit, higherIsBetter, requires, ...more } = o;
  const met =
    Number.isFinite(service) && (higherIsBetter ? service >= target : service <= target) && requires !== false;
  return {
    bench: `target.${name}`,
    target: ms(target),
    service: ms(service),
    floor: floor === null ? null : ms(floor),
    met,
    unit,
    ...more,
  };
}

/**
 * One `service ÷ portkey` figure of issue 32: the service's figure beside Portkey's, measured in the
 * same rounds, and their ratio (null when Portkey's is not positive, where a ratio means nothing).
 * `targetRatio` is issue 32's bound where it states one against Portkey; `met` then says whether the
 * ratio keeps to it (and to `targetMs`, when the issue adds an absolute bound).
 */
export function portkeyRatioLine(
  name: string,
  o: {
    service: number;
    portkey: number;
    unit: string;
    method: string;
    higherIsBetter?: boolean;
    targetRatio?: number;
    targetMs?: number;
    [more: string]: unknown;
  },
): Record<string, unknown> {
  const { service, portkey, unit, method, higherIsBetter, targetRatio, targetMs, ...more } = o;
  const ratio = Number.isFinite(service) && Number.isFinite(portkey) && portkey > 0 ? service / portkey : null;
  const line: Record<string, unknown> = {
    bench: `vs_portkey.${name}`,
    service: ms(service),
    portkey: ms(portkey),
    ratio: ratio === null ? null : +ratio.toFixed(3),
    unit,
  };
  if (targetRatio !== undefined) {
    line.targetRatio = targetRatio;
    if (targetMs !== undefined) line.targetMs = targetMs;
    line.met =
      ratio !== null &&
      (higherIsBetter ? ratio >= targetRatio : ratio <= targetRatio) &&
      (targetMs === undefined || service <= targetMs);
  }
  return { ...line, method, ...more };
}
