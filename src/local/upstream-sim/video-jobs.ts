import { type KeyRecord, refundCharge } from "./keys.js";
import type { SimRequestRecord } from "./request-log.js";

/**
 * The simulator's video jobs (video.ts queues and serves them): how a job ends, what it holds, and
 * the knobs of the jobs queued from now on.
 */

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

/** Largest processingPolls / renderMs accepted (render_ms ≈ 11.5 days). */
const MAX_VIDEO_COUNT = 1_000_000_000;

export function checkVideoCount(value: number, field: string): number {
  if (!Number.isInteger(value) || value < 0 || value > MAX_VIDEO_COUNT) {
    throw new Error(`${field} must be an integer between 0 and ${MAX_VIDEO_COUNT}`);
  }
  return value;
}

/** The video jobs queued so far, by queue id, and the knobs applied to the next ones. */
export class SimVideoJobs {
  readonly jobs = new Map<string, SimVideoJob & { record: SimRequestRecord }>();
  /** retrieve calls answering PROCESSING before a job completes (default 1; per-job `[[sim:polls=N]]`) */
  processingPolls = 1;
  /** render time of a new job on the sim clock, ms (default 0; per-job `[[sim:render_ms=N]]`) */
  renderMs = 0;
  /** outcome of a new job without a `[[sim:video=…]]` directive on a non-download model */
  defaultOutcome: SimVideoSelectableOutcome = "mp4";

  /** Video jobs queued so far (copies), oldest first. */
  list(): SimVideoJob[] {
    return [...this.jobs.values()].map(({ record: _record, ...job }) => ({ ...job }));
  }

  /** Sets how many retrieve calls answer PROCESSING before a new job completes. */
  setProcessingPolls(polls: number): void {
    this.processingPolls = checkVideoCount(polls, "processingPolls");
  }

  /** Sets the render time (ms on the sim clock) of new jobs; retrieve answers PROCESSING until it has elapsed. */
  setRenderMs(ms: number): void {
    this.renderMs = checkVideoCount(ms, "renderMs");
  }

  /** Sets the outcome of new jobs queued without a `[[sim:video=…]]` directive on non-download models. */
  setDefaultOutcome(outcome: SimVideoSelectableOutcome): void {
    if (!isSimVideoSelectableOutcome(outcome)) {
      throw new Error(`defaultOutcome must be one of ${SIM_VIDEO_SELECTABLE_OUTCOMES.join(" | ")}`);
    }
    this.defaultOutcome = outcome;
  }

  /** The video knobs applied to jobs queued from now on. */
  config(): SimVideoConfig {
    return {
      processingPolls: this.processingPolls,
      renderMs: this.renderMs,
      defaultOutcome: this.defaultOutcome,
    };
  }

  /** Applies a partial config after validating all of it (nothing changes when one field is bad). */
  setConfig(patch: Partial<SimVideoConfig>): SimVideoConfig {
    const next = { ...this.config(), ...patch };
    checkVideoCount(next.processingPolls, "processingPolls");
    checkVideoCount(next.renderMs, "renderMs");
    this.setDefaultOutcome(next.defaultOutcome);
    this.processingPolls = next.processingPolls;
    this.renderMs = next.renderMs;
    return this.config();
  }

  /**
   * Whether a job is still rendering at the sim clock's now: while polls are left OR its
   * render time has not elapsed since queue (it completes once both are spent). A PROCESSING answer
   * spends one poll.
   */
  takeProcessingPoll(job: SimVideoJob, nowMs: number): boolean {
    const rendering = nowMs - job.createdAt.getTime() < job.renderMs;
    if (job.processingPollsLeft > 0) {
      job.processingPollsLeft -= 1;
      return true;
    }
    return rendering;
  }

  /**
   * Gives a failed / content-policy job's quote back to its key, exactly once: the
   * `refunded` flag is claimed before the balance moves (synchronously, so concurrent retrieves of
   * the same job cannot both pass it). The key is credited even when revoked since. Returns the
   * micro-DIEM refunded by this call (0 when already refunded or not refundable).
   */
  refund(queueId: string, keyOf: (key: string) => KeyRecord | undefined): bigint {
    const job = this.jobs.get(queueId);
    if (!job || job.refunded || !SIM_VIDEO_REFUNDED_OUTCOMES.has(job.outcome)) return 0n;
    job.refunded = true;
    const k = keyOf(job.key);
    if (k) refundCharge(k, job.charged);
    job.record.refundedMicro = job.quoteMicro;
    return job.quoteMicro;
  }

  /**
   * Video money per key (secret) over every job queued since start: Σ quotes charged at queue,
   * Σ refunded by the upstream, the net, and the job count. Keys without jobs are absent. This is
   * what a service's video burn must reconcile with.
   */
  burnByKey(): Map<string, SimVideoBurn> {
    const out = new Map<string, SimVideoBurn>();
    for (const job of this.jobs.values()) {
      const burn = out.get(job.key) ?? { chargedMicro: 0n, refundedMicro: 0n, netMicro: 0n, jobs: 0 };
      burn.chargedMicro += job.quoteMicro;
      if (job.refunded) burn.refundedMicro += job.quoteMicro;
      burn.netMicro = burn.chargedMicro - burn.refundedMicro;
      burn.jobs += 1;
      out.set(job.key, burn);
    }
    return out;
  }
}
