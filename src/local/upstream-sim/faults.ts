import { normalizeRoute } from "./http-util.js";

/**
 * Faults injected into the simulator (by the admin API or a test): what each kind does to a request,
 * and the list they are taken from, request by request.
 */

export const SIM_FAULT_KINDS = [
  "http_429",
  "http_429_overloaded",
  "http_500",
  "http_503",
  "http_504",
  "http_402_balance",
  "http_402_spend_limit",
  // the documented refusals: each answers its status with the documented body
  "http_400",
  "http_401_auth",
  "http_401_pro_only",
  "http_401_alpha",
  "http_403_region",
  "http_403_unauthorized",
  "http_404",
  "http_409_consent",
  "http_413",
  "http_415",
  "http_422_content_policy",
  "timeout",
  "drop",
  "truncate_stream",
  "close_before_content",
  "midstream_error",
  "latency",
] as const;
export type SimFaultKind = (typeof SIM_FAULT_KINDS)[number];

/** Faults that only make sense (and only match) on streaming requests. */
export const STREAM_ONLY_FAULTS: ReadonlySet<SimFaultKind> = new Set([
  "truncate_stream",
  "close_before_content",
  "midstream_error",
]);

export function isSimFaultKind(value: unknown): value is SimFaultKind {
  return typeof value === "string" && (SIM_FAULT_KINDS as readonly string[]).includes(value);
}

export interface SimFault {
  kind: SimFaultKind;
  /** how many matching requests it affects; absent = until cleared */
  count?: number;
  /** only requests to this route (path below /api/v1, e.g. "/chat/completions"); absent = inference routes */
  route?: string;
  /** only requests for this model id */
  model?: string;
  /** `latency`: delay before the first byte, ms */
  ms?: number;
  /** `truncate_stream` / `midstream_error`: content chunks emitted first (defaults 2 / 0) */
  afterChunks?: number;
}

export interface SimFaultEntry extends SimFault {
  id: string;
  /** key the fault is attached to, or "*" */
  target: string;
  /** matching requests left (null = unlimited) */
  remaining: number | null;
  hits: number;
}

/** The injected faults, in injection order. */
export class SimFaults {
  private readonly entries: SimFaultEntry[] = [];
  private faultSeq = 0;

  /** Attaches a fault to a key, or to every key with "*". Returns the fault id. */
  inject(target: string, fault: SimFault): string {
    if (!isSimFaultKind(fault.kind)) throw new Error(`unknown fault kind: ${String(fault.kind)}`);
    if (fault.count !== undefined && (!Number.isInteger(fault.count) || fault.count < 1)) {
      throw new Error("count must be a positive integer");
    }
    this.faultSeq += 1;
    const entry: SimFaultEntry = {
      ...fault,
      route: fault.route === undefined ? undefined : normalizeRoute(fault.route),
      id: `flt_${this.faultSeq}`,
      target,
      remaining: fault.count ?? null,
      hits: 0,
    };
    this.entries.push(entry);
    return entry.id;
  }

  /** Removes faults: all, those of one target ("*" or a key), or the one with this id. Returns how many. */
  clear(targetOrId?: string): number {
    const before = this.entries.length;
    if (targetOrId === undefined) {
      this.entries.length = 0;
    } else {
      const keep = this.entries.filter((f) => f.target !== targetOrId && f.id !== targetOrId);
      this.entries.length = 0;
      this.entries.push(...keep);
    }
    return before - this.entries.length;
  }

  list(): SimFaultEntry[] {
    return this.entries.map((f) => ({ ...f }));
  }

  /**
   * @internal Consumes the faults that apply to one request: key-specific faults first, then "*".
   * All matching `latency` faults add up; the first matching other fault wins. Stream-only faults
   * match streaming requests only; a fault without `route` matches inference routes only.
   */
  take(req: { key: string; route: string; model: string | null; stream: boolean; inference: boolean }): {
    latencyMs: number;
    fault: SimFaultEntry | null;
  } {
    let latencyMs = 0;
    let chosen: SimFaultEntry | null = null;
    if (this.entries.length === 0) return { latencyMs, fault: chosen };
    const ordered = [
      ...this.entries.filter((f) => f.target === req.key),
      ...this.entries.filter((f) => f.target === "*"),
    ];
    for (const f of ordered) {
      if (f.route !== undefined ? f.route !== req.route : !req.inference) continue;
      if (f.model !== undefined && f.model !== req.model) continue;
      if (STREAM_ONLY_FAULTS.has(f.kind) && !req.stream) continue;
      if (f.kind === "latency") {
        latencyMs += Math.max(0, f.ms ?? 0);
      } else if (chosen === null) {
        chosen = f;
      } else {
        continue;
      }
      f.hits += 1;
      if (f.remaining !== null) f.remaining -= 1;
    }
    for (let i = this.entries.length - 1; i >= 0; i--) {
      if (this.entries[i]?.remaining === 0) this.entries.splice(i, 1);
    }
    return { latencyMs, fault: chosen ? { ...chosen } : null };
  }
}
