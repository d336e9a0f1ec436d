/**
 * In-memory state of the upstream simulator: keys and balances, the epoch clock, injected faults and
 * the request log. Shared by the HTTP handlers and the admin API; tests may drive it directly.
 */

export interface SimKeyInit {
  key: string;
  /** current DIEM balance, micro-DIEM */
  diemMicro: bigint;
  /** USD balance, micro-USD (default 0) */
  usdMicro?: bigint;
  /** per-epoch DIEM spend limit of this key, micro-DIEM (null/absent = no cap) */
  diemCapMicro?: bigint | null;
  revoked?: boolean;
  /** DIEM the balance resets to at 00:00 UTC (default: the initial `diemMicro`) */
  allocationMicro?: bigint;
  /** requests per minute per model (default 100000, reported in rate_limits and headers) */
  rpmLimit?: number;
  /** tokens per minute per model (default 100000000) */
  tpmLimit?: number;
  /**
   * whether the key's account is an alpha tester (default true): without it `POST /responses`
   * (documented "available to Alpha testers only") answers 401 `MSG_ALPHA_ONLY`
   */
  alphaAccess?: boolean;
}

export interface SimKeySnapshot {
  key: string;
  diemMicro: bigint;
  usdMicro: bigint;
  diemCapMicro: bigint | null;
  allocationMicro: bigint;
  /** DIEM spent by this key in the current epoch (counts against `diemCapMicro`) */
  spentDiemEpochMicro: bigint;
  /** what `GET /api_keys/rate_limits` reports as DIEM: the balance clamped to the cap's remainder */
  availableDiemMicro: bigint;
  accessPermitted: boolean;
  revoked: boolean;
  alphaAccess: boolean;
  inFlight: number;
  /** highest concurrent in-flight count seen since the key was added or `resetRequests()` */
  peakInFlight: number;
  rpmLimit: number;
  tpmLimit: number;
}

export interface SimBalancePatch {
  diemMicro?: bigint;
  usdMicro?: bigint;
  diemCapMicro?: bigint | null;
  allocationMicro?: bigint;
  /** set the epoch spend counter (e.g. 0n to lift a reached cap) */
  spentDiemEpochMicro?: bigint;
}

export const SIM_FAULT_KINDS = [
  "http_429",
  "http_429_overloaded",
  "http_500",
  "http_503",
  "http_504",
  "http_402_balance",
  "http_402_spend_limit",
  // the documented refusals (issue 39): each answers its status with the documented body
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

export interface SimRecordedUsage {
  promptTokens: number;
  completionTokens: number;
  totalTokens: number;
  cachedTokens: number;
  /** prompt tokens written to the cache (`cache_creation_input_tokens`) */
  cacheWriteTokens: number;
}

export interface SimRequestRecord {
  id: string;
  method: string;
  /** path below /api/v1, e.g. "/chat/completions" */
  route: string;
  /** bearer key presented (null when absent) */
  key: string | null;
  /** the W3C `traceparent` header the caller sent (null when absent): whose trace the call continues */
  traceparent: string | null;
  /** the query string, without `?` ("" when none) */
  query: string;
  /**
   * the JSON body as the simulator parsed it: what the caller really sent (null: no body, not JSON, or
   * an older request: bodies are kept for the latest MAX_BODIES requests). Read it, never change it.
   */
  body: unknown;
  /** canonical model id when resolvable, else the raw `model` value, else null */
  model: string | null;
  stream: boolean;
  /** HTTP status sent; 0 when no response was sent (drop, timeout, client gone first) */
  status: number;
  usage: SimRecordedUsage | null;
  burnMicroDiem: bigint;
  chargedDiemMicro: bigint;
  chargedUsdMicro: bigint;
  /** prepaid charge given back later (failed / content-policy video jobs) */
  refundedMicro: bigint;
  fault: SimFaultKind | null;
  /** the client closed the connection before the response completed */
  aborted: boolean;
  startedAt: Date;
  endedAt: Date | null;
}

/**
 * How a simulated video job ends (chosen at queue time by a `[[sim:video=…]]` prompt directive, else
 * the configured default; `*-private` models default to `download_url`):
 * - `mp4`: retrieve serves `video/mp4` bytes;
 * - `download_url`: retrieve answers JSON COMPLETED, the media behind the queue's `download_url`;
 * - `failed`: retrieve answers 200 `{status:"failed"}`, the quote refunded;
 * - `content_policy`: retrieve answers 422 `provider_content_policy`, the quote refunded;
 * - `completed_no_media`: retrieve answers JSON COMPLETED but no media is ever served (no
 *   `download_url` either) and nothing is refunded.
 */
export type SimVideoOutcome = "mp4" | "download_url" | "failed" | "content_policy" | "completed_no_media";

/** Outcomes that `[[sim:video=…]]` and the configured default may select (`download_url` follows the model). */
export const SIM_VIDEO_SELECTABLE_OUTCOMES = ["mp4", "failed", "content_policy", "completed_no_media"] as const;
export type SimVideoSelectableOutcome = (typeof SIM_VIDEO_SELECTABLE_OUTCOMES)[number];

export function isSimVideoSelectableOutcome(value: unknown): value is SimVideoSelectableOutcome {
  return typeof value === "string" && (SIM_VIDEO_SELECTABLE_OUTCOMES as readonly string[]).includes(value);
}

/** Outcomes the upstream refunds (once, when a retrieve discovers them). */
export const SIM_VIDEO_REFUNDED_OUTCOMES: ReadonlySet<SimVideoOutcome> = new Set(["failed", "content_policy"]);

export interface SimVideoJob {
  queueId: string;
  model: string;
  /** bearer key (secret) that queued and owns the job */
  key: string;
  /** the quote debited at queue, micro-DIEM (= micro-USD); the whole of `charged` */
  quoteMicro: bigint;
  charged: { diemMicro: bigint; usdMicro: bigint };
  outcome: SimVideoOutcome;
  /** retrieve calls that still answer PROCESSING */
  processingPollsLeft: number;
  /** render time on the sim clock: retrieve answers PROCESSING until `createdAt + renderMs` */
  renderMs: number;
  createdAt: Date;
  /** when a retrieve first found rendering over */
  completedAt: Date | null;
  /** the upstream gave the quote back (failed / content_policy, exactly once) */
  refunded: boolean;
  deleted: boolean;
  /** request record of the queue call (its `refundedMicro` is updated on refund) */
  queueRecordId: string;
}

/** Video knobs for jobs queued from now on (`POST /__admin/video/config`). */
export interface SimVideoConfig {
  /** retrieve calls answering PROCESSING (default 1; per job `[[sim:polls=N]]`) */
  processingPolls: number;
  /** render time in ms on the sim clock (default 0; per job `[[sim:render_ms=N]]`) */
  renderMs: number;
  /** outcome of jobs queued without `[[sim:video=…]]` on non-download models (default `mp4`) */
  defaultOutcome: SimVideoSelectableOutcome;
}

/** One key's video money as the upstream sees it, micro-DIEM (= micro-USD). */
export interface SimVideoBurn {
  /** Σ quotes debited at queue */
  chargedMicro: bigint;
  /** Σ quotes given back (failed / content_policy jobs whose failure a retrieve discovered) */
  refundedMicro: bigint;
  /** chargedMicro − refundedMicro */
  netMicro: bigint;
  /** jobs queued */
  jobs: number;
}

export interface SimRequestFilter {
  key?: string;
  route?: string;
  model?: string;
}

interface RateWindow {
  startMs: number;
  requests: number;
  tokens: number;
}

interface KeyRecord {
  key: string;
  diemMicro: bigint;
  usdMicro: bigint;
  diemCapMicro: bigint | null;
  allocationMicro: bigint;
  spentDiemEpochMicro: bigint;
  revoked: boolean;
  alphaAccess: boolean;
  inFlight: number;
  peakInFlight: number;
  rpmLimit: number;
  tpmLimit: number;
  windows: Map<string, RateWindow>;
}

const DAY_MS = 86_400_000;
const MINUTE_MS = 60_000;
const MAX_RECORDS = 100_000;
/** request bodies are kept on the latest this many records (a benchmark's log stays small) */
const MAX_BODIES = 1_000;
export const DEFAULT_RPM_LIMIT = 100_000;
export const DEFAULT_TPM_LIMIT = 100_000_000;

/** Normalises a route filter: "chat/completions", "/api/v1/chat/completions" → "/chat/completions". */
export function normalizeRoute(route: string): string {
  let r = route.trim();
  if (r.startsWith("/api/v1")) r = r.slice("/api/v1".length);
  if (!r.startsWith("/")) r = `/${r}`;
  return r.length > 1 && r.endsWith("/") ? r.slice(0, -1) : r;
}

export class SimState {
  private readonly keys = new Map<string, KeyRecord>();
  private readonly faults: SimFaultEntry[] = [];
  private records: SimRequestRecord[] = [];
  /** the records holding a body, oldest first (at most MAX_BODIES) */
  private withBody: SimRequestRecord[] = [];
  private readonly baseNow: () => Date;
  private offsetMs = 0;
  private epochDay: number;
  private faultSeq = 0;
  private requestSeq = 0;
  /** @internal video jobs by queue id */
  readonly videoJobs = new Map<string, SimVideoJob & { record: SimRequestRecord }>();
  /** retrieve calls answering PROCESSING before a job completes (default 1; per-job `[[sim:polls=N]]`) */
  videoProcessingPolls = 1;
  /** render time of a new job on the sim clock, ms (default 0; per-job `[[sim:render_ms=N]]`) */
  videoRenderMs = 0;
  /** outcome of a new job without a `[[sim:video=…]]` directive on a non-download model */
  videoDefaultOutcome: SimVideoSelectableOutcome = "mp4";
  /**
   * the country the simulator believes its callers are in (ISO 3166 alpha-2, default "US"): a model
   * whose `regionRestrictions` do not list it is refused 403 "…unavailable in your region"
   */
  private region = "US";

  constructor(opts: { now?: () => Date; keys?: readonly SimKeyInit[] } = {}) {
    this.baseNow = opts.now ?? (() => new Date());
    this.epochDay = Math.floor(this.nowMs() / DAY_MS);
    for (const init of opts.keys ?? []) this.addKey(init);
  }

  // ---------------------------------------------------------------- clock and epoch

  nowMs(): number {
    return this.baseNow().getTime() + this.offsetMs;
  }

  now(): Date {
    return new Date(this.nowMs());
  }

  /** Next 00:00 UTC after the simulated now. */
  nextEpochBegins(): Date {
    return new Date((Math.floor(this.nowMs() / DAY_MS) + 1) * DAY_MS);
  }

  /** Moves the simulated clock forward (or back, with a negative value). */
  advanceClock(ms: number): Date {
    this.offsetMs += ms;
    this.tick();
    return this.now();
  }

  /** Sets the simulated clock to `at` (the injected/base clock keeps running from there). */
  setClock(at: Date): Date {
    this.offsetMs = at.getTime() - this.baseNow().getTime();
    this.tick();
    return this.now();
  }

  /**
   * Applies the epoch reset when the simulated clock crossed 00:00 UTC: every key's DIEM balance goes
   * back to its allocation and its epoch spend counter to 0 (unused DIEM does not roll over). USD is
   * untouched. Called lazily by every read and request.
   */
  tick(): void {
    const day = Math.floor(this.nowMs() / DAY_MS);
    if (day === this.epochDay) return;
    this.epochDay = day;
    for (const k of this.keys.values()) {
      k.diemMicro = k.allocationMicro;
      k.spentDiemEpochMicro = 0n;
    }
  }

  // ---------------------------------------------------------------- keys

  /** Registers a new key; throws if it exists. */
  addKey(init: SimKeyInit): SimKeySnapshot {
    if (this.keys.has(init.key)) throw new Error("key already exists");
    return this.upsertKey(init);
  }

  /** Creates or replaces a key (resets its epoch spend and in-flight peak, keeps the live in-flight count). */
  upsertKey(init: SimKeyInit): SimKeySnapshot {
    if (typeof init.key !== "string" || init.key.length === 0) throw new Error("key must be a non-empty string");
    const existing = this.keys.get(init.key);
    const record: KeyRecord = {
      key: init.key,
      diemMicro: init.diemMicro,
      usdMicro: init.usdMicro ?? 0n,
      diemCapMicro: init.diemCapMicro ?? null,
      allocationMicro: init.allocationMicro ?? init.diemMicro,
      spentDiemEpochMicro: 0n,
      revoked: init.revoked ?? false,
      alphaAccess: init.alphaAccess ?? true,
      inFlight: existing?.inFlight ?? 0,
      peakInFlight: existing?.inFlight ?? 0,
      rpmLimit: init.rpmLimit ?? DEFAULT_RPM_LIMIT,
      tpmLimit: init.tpmLimit ?? DEFAULT_TPM_LIMIT,
      windows: new Map(),
    };
    this.keys.set(init.key, record);
    return this.snapshot(record);
  }

  removeKey(key: string): boolean {
    return this.keys.delete(key);
  }

  getKey(key: string): SimKeySnapshot | undefined {
    this.tick();
    const k = this.keys.get(key);
    return k ? this.snapshot(k) : undefined;
  }

  listKeys(): SimKeySnapshot[] {
    this.tick();
    return [...this.keys.values()].map((k) => this.snapshot(k));
  }

  setBalance(key: string, patch: SimBalancePatch): SimKeySnapshot {
    this.tick();
    const k = this.requireKey(key);
    if (patch.diemMicro !== undefined) k.diemMicro = patch.diemMicro;
    if (patch.usdMicro !== undefined) k.usdMicro = patch.usdMicro;
    if (patch.diemCapMicro !== undefined) k.diemCapMicro = patch.diemCapMicro;
    if (patch.allocationMicro !== undefined) k.allocationMicro = patch.allocationMicro;
    if (patch.spentDiemEpochMicro !== undefined) k.spentDiemEpochMicro = patch.spentDiemEpochMicro;
    return this.snapshot(k);
  }

  revokeKey(key: string, revoked = true): SimKeySnapshot {
    const k = this.requireKey(key);
    k.revoked = revoked;
    return this.snapshot(k);
  }

  /** Whether the key's account may call the alpha-only `POST /responses`. */
  setAlphaAccess(key: string, alphaAccess: boolean): SimKeySnapshot {
    const k = this.requireKey(key);
    k.alphaAccess = alphaAccess;
    return this.snapshot(k);
  }

  /** The callers' country, as the region restrictions see it. */
  callerRegion(): string {
    return this.region;
  }

  /** Sets the callers' country (two letters, e.g. "DE"): models restricted to other regions answer 403. */
  setCallerRegion(region: string): string {
    if (!/^[A-Za-z]{2}$/.test(region)) throw new Error("region must be a two-letter country code");
    this.region = region.toUpperCase();
    return this.region;
  }

  private requireKey(key: string): KeyRecord {
    const k = this.keys.get(key);
    if (!k) throw new Error("unknown key");
    return k;
  }

  private snapshot(k: KeyRecord): SimKeySnapshot {
    return {
      key: k.key,
      diemMicro: k.diemMicro,
      usdMicro: k.usdMicro,
      diemCapMicro: k.diemCapMicro,
      allocationMicro: k.allocationMicro,
      spentDiemEpochMicro: k.spentDiemEpochMicro,
      availableDiemMicro: availableDiem(k),
      accessPermitted: admissionFailure(k) === null,
      revoked: k.revoked,
      alphaAccess: k.alphaAccess,
      inFlight: k.inFlight,
      peakInFlight: k.peakInFlight,
      rpmLimit: k.rpmLimit,
      tpmLimit: k.tpmLimit,
    };
  }

  // ---------------------------------------------------------------- used by the HTTP handlers

  /** @internal live record of an active, non-revoked key */
  lookupActiveKey(key: string): KeyRecord | "unknown" | "revoked" {
    const k = this.keys.get(key);
    if (!k) return "unknown";
    return k.revoked ? "revoked" : k;
  }

  /** @internal */
  enter(k: KeyRecord): void {
    k.inFlight += 1;
    if (k.inFlight > k.peakInFlight) k.peakInFlight = k.inFlight;
  }

  /** @internal */
  leave(k: KeyRecord): void {
    if (k.inFlight > 0) k.inFlight -= 1;
  }

  /** @internal the current per-model rate window of a key (rolled over every UTC minute) */
  rateWindow(k: KeyRecord, model: string): RateWindow {
    const start = Math.floor(this.nowMs() / MINUTE_MS) * MINUTE_MS;
    let w = k.windows.get(model);
    if (!w || w.startMs !== start) {
      w = { startMs: start, requests: 0, tokens: 0 };
      k.windows.set(model, w);
    }
    return w;
  }

  /**
   * @internal Debits a finished token-priced request: the whole burn goes to DIEM when the DIEM balance
   * is positive (it may go slightly negative), else to USD when USD is positive, else to DIEM anyway
   * (the request already ran). DIEM debits count against the key's epoch spend.
   */
  debit(k: KeyRecord, burnMicro: bigint): { diemMicro: bigint; usdMicro: bigint } {
    if (burnMicro <= 0n) return { diemMicro: 0n, usdMicro: 0n };
    if (k.diemMicro <= 0n && k.usdMicro > 0n) {
      k.usdMicro -= burnMicro;
      return { diemMicro: 0n, usdMicro: burnMicro };
    }
    k.diemMicro -= burnMicro;
    k.spentDiemEpochMicro += burnMicro;
    return { diemMicro: burnMicro, usdMicro: 0n };
  }

  /**
   * @internal Debits a prepaid (quoted) amount up front, only if one currency covers it whole
   * (DIEM first, then USD, within the key's DIEM cap). Returns null when it does not fit.
   */
  debitPrepaid(k: KeyRecord, amountMicro: bigint): { diemMicro: bigint; usdMicro: bigint } | null {
    if (amountMicro <= 0n) return { diemMicro: 0n, usdMicro: 0n };
    if (availableDiem(k) >= amountMicro) {
      k.diemMicro -= amountMicro;
      k.spentDiemEpochMicro += amountMicro;
      return { diemMicro: amountMicro, usdMicro: 0n };
    }
    if (k.usdMicro >= amountMicro) {
      k.usdMicro -= amountMicro;
      return { diemMicro: 0n, usdMicro: amountMicro };
    }
    return null;
  }

  /** @internal Gives back a prepaid charge (failed/refunded media jobs). */
  refund(k: KeyRecord, charged: { diemMicro: bigint; usdMicro: bigint }): void {
    k.diemMicro += charged.diemMicro;
    k.spentDiemEpochMicro -= charged.diemMicro;
    k.usdMicro += charged.usdMicro;
  }

  // ---------------------------------------------------------------- faults

  /** Attaches a fault to a key, or to every key with "*". Returns the fault id. */
  injectFault(target: string, fault: SimFault): string {
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
    this.faults.push(entry);
    return entry.id;
  }

  /** Removes faults: all, those of one target ("*" or a key), or the one with this id. Returns how many. */
  clearFaults(targetOrId?: string): number {
    const before = this.faults.length;
    if (targetOrId === undefined) {
      this.faults.length = 0;
    } else {
      const keep = this.faults.filter((f) => f.target !== targetOrId && f.id !== targetOrId);
      this.faults.length = 0;
      this.faults.push(...keep);
    }
    return before - this.faults.length;
  }

  listFaults(): SimFaultEntry[] {
    return this.faults.map((f) => ({ ...f }));
  }

  /**
   * @internal Consumes the faults that apply to one request: key-specific faults first, then "*".
   * All matching `latency` faults add up; the first matching other fault wins. Stream-only faults
   * match streaming requests only; a fault without `route` matches inference routes only.
   */
  takeFaults(req: { key: string; route: string; model: string | null; stream: boolean; inference: boolean }): {
    latencyMs: number;
    fault: SimFaultEntry | null;
  } {
    let latencyMs = 0;
    let chosen: SimFaultEntry | null = null;
    if (this.faults.length === 0) return { latencyMs, fault: chosen };
    const ordered = [
      ...this.faults.filter((f) => f.target === req.key),
      ...this.faults.filter((f) => f.target === "*"),
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
    for (let i = this.faults.length - 1; i >= 0; i--) {
      if (this.faults[i]?.remaining === 0) this.faults.splice(i, 1);
    }
    return { latencyMs, fault: chosen ? { ...chosen } : null };
  }

  // ---------------------------------------------------------------- request log

  /** @internal Starts a log entry (visible immediately, `endedAt` null until finished). */
  startRecord(init: {
    method: string;
    route: string;
    key: string | null;
    traceparent?: string | null;
    query?: string;
  }): SimRequestRecord {
    this.requestSeq += 1;
    const record: SimRequestRecord = {
      id: `req_${this.requestSeq}`,
      method: init.method,
      route: init.route,
      key: init.key,
      traceparent: init.traceparent ?? null,
      query: init.query ?? "",
      body: null,
      model: null,
      stream: false,
      status: 0,
      usage: null,
      burnMicroDiem: 0n,
      chargedDiemMicro: 0n,
      chargedUsdMicro: 0n,
      refundedMicro: 0n,
      fault: null,
      aborted: false,
      startedAt: this.now(),
      endedAt: null,
    };
    this.records.push(record);
    if (this.records.length > MAX_RECORDS) this.records = this.records.slice(-Math.floor(MAX_RECORDS * 0.9));
    return record;
  }

  /** @internal Keeps the parsed body on its record (dropping the oldest kept body past MAX_BODIES). */
  recordBody(record: SimRequestRecord, body: unknown): void {
    record.body = body;
    this.withBody.push(record);
    if (this.withBody.length > MAX_BODIES) {
      const dropped = this.withBody.splice(0, this.withBody.length - MAX_BODIES);
      for (const r of dropped) r.body = null;
    }
  }

  /** Request log, oldest first, optionally filtered (copies; `route` accepts "/chat/completions"). */
  listRequests(filter: SimRequestFilter = {}): SimRequestRecord[] {
    const route = filter.route === undefined ? undefined : normalizeRoute(filter.route);
    return this.records
      .filter(
        (r) =>
          (filter.key === undefined || r.key === filter.key) &&
          (route === undefined || r.route === route) &&
          (filter.model === undefined || r.model === filter.model),
      )
      .map((r) => ({ ...r, usage: r.usage ? { ...r.usage } : null }));
  }

  /** Video jobs queued so far (copies), oldest first. */
  listVideoJobs(): SimVideoJob[] {
    return [...this.videoJobs.values()].map(({ record: _record, ...job }) => ({ ...job }));
  }

  /** Sets how many retrieve calls answer PROCESSING before a new job completes. */
  setVideoProcessingPolls(polls: number): void {
    this.videoProcessingPolls = checkVideoCount(polls, "processingPolls");
  }

  /** Sets the render time (ms on the sim clock) of new jobs; retrieve answers PROCESSING until it has elapsed. */
  setVideoRenderMs(ms: number): void {
    this.videoRenderMs = checkVideoCount(ms, "renderMs");
  }

  /** Sets the outcome of new jobs queued without a `[[sim:video=…]]` directive on non-download models. */
  setVideoDefaultOutcome(outcome: SimVideoSelectableOutcome): void {
    if (!isSimVideoSelectableOutcome(outcome)) {
      throw new Error(`defaultOutcome must be one of ${SIM_VIDEO_SELECTABLE_OUTCOMES.join(" | ")}`);
    }
    this.videoDefaultOutcome = outcome;
  }

  /** The video knobs applied to jobs queued from now on. */
  videoConfig(): SimVideoConfig {
    return {
      processingPolls: this.videoProcessingPolls,
      renderMs: this.videoRenderMs,
      defaultOutcome: this.videoDefaultOutcome,
    };
  }

  /** Applies a partial config after validating all of it (nothing changes when one field is bad). */
  setVideoConfig(patch: Partial<SimVideoConfig>): SimVideoConfig {
    const next = { ...this.videoConfig(), ...patch };
    checkVideoCount(next.processingPolls, "processingPolls");
    checkVideoCount(next.renderMs, "renderMs");
    this.setVideoDefaultOutcome(next.defaultOutcome);
    this.videoProcessingPolls = next.processingPolls;
    this.videoRenderMs = next.renderMs;
    return this.videoConfig();
  }

  /**
   * @internal Whether a job is still rendering at the sim clock's now: while polls are left OR its
   * render time has not elapsed since queue (it completes once both are spent). A PROCESSING answer
   * spends one poll.
   */
  takeVideoProcessingPoll(job: SimVideoJob): boolean {
    const rendering = this.nowMs() - job.createdAt.getTime() < job.renderMs;
    if (job.processingPollsLeft > 0) {
      job.processingPollsLeft -= 1;
      return true;
    }
    return rendering;
  }

  /**
   * @internal Gives a failed / content-policy job's quote back to its key, exactly once: the
   * `refunded` flag is claimed before the balance moves (synchronously, so concurrent retrieves of
   * the same job cannot both pass it). The key is credited even when revoked since. Returns the
   * micro-DIEM refunded by this call (0 when already refunded or not refundable).
   */
  refundVideoJob(queueId: string): bigint {
    const job = this.videoJobs.get(queueId);
    if (!job || job.refunded || !SIM_VIDEO_REFUNDED_OUTCOMES.has(job.outcome)) return 0n;
    job.refunded = true;
    const k = this.keys.get(job.key);
    if (k) this.refund(k, job.charged);
    job.record.refundedMicro = job.quoteMicro;
    return job.quoteMicro;
  }

  /**
   * Video money per key (secret) over every job queued since start: Σ quotes charged at queue,
   * Σ refunded by the upstream, the net, and the job count. Keys without jobs are absent. This is
   * what a service's video burn must reconcile with.
   */
  videoBurnByKey(): Map<string, SimVideoBurn> {
    const out = new Map<string, SimVideoBurn>();
    for (const job of this.videoJobs.values()) {
      const burn = out.get(job.key) ?? { chargedMicro: 0n, refundedMicro: 0n, netMicro: 0n, jobs: 0 };
      burn.chargedMicro += job.quoteMicro;
      if (job.refunded) burn.refundedMicro += job.quoteMicro;
      burn.netMicro = burn.chargedMicro - burn.refundedMicro;
      burn.jobs += 1;
      out.set(job.key, burn);
    }
    return out;
  }

  /** Clears the request log and every key's in-flight peak (down to its current in-flight count). */
  resetRequests(): void {
    this.records = [];
    this.withBody = [];
    for (const k of this.keys.values()) k.peakInFlight = k.inFlight;
  }
}

export type SimKeyRecord = KeyRecord;

/** Largest processingPolls / renderMs accepted (render_ms ≈ 11.5 days). */
const MAX_VIDEO_COUNT = 1_000_000_000;

function checkVideoCount(value: number, field: string): number {
  if (!Number.isInteger(value) || value < 0 || value > MAX_VIDEO_COUNT) {
    throw new Error(`${field} must be an integer between 0 and ${MAX_VIDEO_COUNT}`);
  }
  return value;
}

function availableDiem(k: KeyRecord): bigint {
  if (k.diemCapMicro === null) return k.diemMicro;
  const capLeft = k.diemCapMicro - k.spentDiemEpochMicro;
  const clampedCap = capLeft > 0n ? capLeft : 0n;
  return k.diemMicro < clampedCap ? k.diemMicro : clampedCap;
}

/**
 * Admission check for token-priced requests: the key's DIEM cap reached → "spend_limit"; no positive
 * DIEM and no positive USD → "insufficient"; else null.
 */
export function admissionFailure(k: KeyRecord): "spend_limit" | "insufficient" | null {
  if (k.diemCapMicro !== null && k.spentDiemEpochMicro >= k.diemCapMicro) return "spend_limit";
  if (k.diemMicro <= 0n && k.usdMicro <= 0n) return "insufficient";
  return null;
}

export function availableDiemMicro(k: KeyRecord): bigint {
  return availableDiem(k);
}
