/**
 * In-memory state of the upstream simulator: keys and balances, the epoch clock, injected faults,
 * the request log and the video jobs. Shared by the HTTP handlers and the admin API; tests may drive
 * it directly. The rules live by concern: keys and billing (keys.ts), faults (faults.ts), the log
 * (request-log.ts), the video job's shape and knobs (video-jobs.ts).
 */

import { type SimFault, type SimFaultEntry, SimFaults } from "./faults.js";
import {
  admissionFailure,
  availableDiemMicro,
  DEFAULT_RPM_LIMIT,
  DEFAULT_TPM_LIMIT,
  type KeyRecord,
  type RateWindow,
  type SimBalancePatch,
  type SimKeyInit,
  type SimKeySnapshot,
} from "./keys.js";
import { type SimRequestFilter, SimRequestLog, type SimRequestRecord } from "./request-log.js";
import {
  type SimVideoBurn,
  type SimVideoConfig,
  type SimVideoJob,
  SimVideoJobs,
  type SimVideoSelectableOutcome,
} from "./video-jobs.js";

const DAY_MS = 86_400_000;
const MINUTE_MS = 60_000;

export class SimState {
  private readonly keys = new Map<string, KeyRecord>();
  private readonly faults = new SimFaults();
  private readonly log = new SimRequestLog();
  private readonly baseNow: () => Date;
  private offsetMs = 0;
  private epochDay: number;
  /** @internal the video jobs and the knobs of the next ones (video.ts queues and serves them) */
  readonly video = new SimVideoJobs();
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
      availableDiemMicro: availableDiemMicro(k),
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

  // ---------------------------------------------------------------- faults (faults.ts)

  /** Attaches a fault to a key, or to every key with "*". Returns the fault id. */
  injectFault(target: string, fault: SimFault): string {
    return this.faults.inject(target, fault);
  }

  /** Removes faults: all, those of one target ("*" or a key), or the one with this id. Returns how many. */
  clearFaults(targetOrId?: string): number {
    return this.faults.clear(targetOrId);
  }

  listFaults(): SimFaultEntry[] {
    return this.faults.list();
  }

  /** @internal Consumes the faults that apply to one request (`SimFaults.take`). */
  takeFaults(req: { key: string; route: string; model: string | null; stream: boolean; inference: boolean }): {
    latencyMs: number;
    fault: SimFaultEntry | null;
  } {
    return this.faults.take(req);
  }

  // ---------------------------------------------------------------- request log (request-log.ts)

  /** @internal Starts a log entry (visible immediately, `endedAt` null until finished). */
  startRecord(init: {
    method: string;
    route: string;
    key: string | null;
    traceparent?: string | null;
    query?: string;
  }): SimRequestRecord {
    return this.log.start(init, this.now());
  }

  /** @internal Keeps the parsed body on its record (dropping the oldest kept body past MAX_BODIES). */
  recordBody(record: SimRequestRecord, body: unknown): void {
    this.log.keepBody(record, body);
  }

  /** Request log, oldest first, optionally filtered (copies; `route` accepts "/chat/completions"). */
  listRequests(filter: SimRequestFilter = {}): SimRequestRecord[] {
    return this.log.list(filter);
  }

  // ---------------------------------------------------------------- video jobs (video-jobs.ts)

  /** Video jobs queued so far (copies), oldest first. */
  listVideoJobs(): SimVideoJob[] {
    return this.video.list();
  }

  /** Sets how many retrieve calls answer PROCESSING before a new job completes. */
  setVideoProcessingPolls(polls: number): void {
    this.video.setProcessingPolls(polls);
  }

  /** Sets the render time (ms on the sim clock) of new jobs; retrieve answers PROCESSING until it has elapsed. */
  setVideoRenderMs(ms: number): void {
    this.video.setRenderMs(ms);
  }

  /** Sets the outcome of new jobs queued without a `[[sim:video=…]]` directive on non-download models. */
  setVideoDefaultOutcome(outcome: SimVideoSelectableOutcome): void {
    this.video.setDefaultOutcome(outcome);
  }

  /** The video knobs applied to jobs queued from now on. */
  videoConfig(): SimVideoConfig {
    return this.video.config();
  }

  /** Applies a partial config after validating all of it (nothing changes when one field is bad). */
  setVideoConfig(patch: Partial<SimVideoConfig>): SimVideoConfig {
    return this.video.setConfig(patch);
  }

  /** @internal Whether a job is still rendering at the sim clock's now (`SimVideoJobs.takeProcessingPoll`). */
  takeVideoProcessingPoll(job: SimVideoJob): boolean {
    return this.video.takeProcessingPoll(job, this.nowMs());
  }

  /** @internal Gives a failed / content-policy job's quote back to its key, exactly once (`SimVideoJobs.refund`). */
  refundVideoJob(queueId: string): bigint {
    return this.video.refund(queueId, (key) => this.keys.get(key));
  }

  /** Video money per key (secret) over every job queued since start (`SimVideoJobs.burnByKey`). */
  videoBurnByKey(): Map<string, SimVideoBurn> {
    return this.video.burnByKey();
  }

  /** Clears the request log and every key's in-flight peak (down to its current in-flight count). */
  resetRequests(): void {
    this.log.clear();
    for (const k of this.keys.values()) k.peakInFlight = k.inFlight;
  }
}
