import type { QueryRunner } from "../../../../adapters/sql.js";
import type { UpstreamClient } from "../../../../adapters/upstream/client.js";
import { documentedBody } from "../../../../adapters/upstream/reference.js";
import type { Clock } from "../../../../lib/clock.js";
import { DomainError } from "../../../../lib/errors.js";
import { grossMicroUsdc, maxBig, upstreamDecimalToMicro, videoJobMicroDiem } from "../../../../lib/money.js";
import { allowModel } from "../../escrow/key-budget.js";
import { Attempted } from "../../pipeline/attempt-loop.js";
import type { InferencePipeline } from "../../pipeline/pipeline.js";
import type { Caller } from "../../pipeline/session.js";
import { capOf, effectiveCeiling } from "../../pipeline/session.js";
import { eligibleOffers } from "../../routing/clearing.js";
import type { KeyMarks } from "../../settlement/stores.js";
import { checkVideoRequest, type VideoRequest } from "./video-request.js";

/** A quote call gives up after this long (then asks the next key). */
const QUOTE_TIMEOUT_MS = 30_000;

/** SPEC "Video quote": what a job would cost now, and whether it clears now. Amounts in micro-units. */
export interface VideoQuote {
  model: string;
  /** the job's DIEM: the upstream quote plus the markup (docs/public/pricing.md "A video job") */
  quoteMicroDiem: bigint;
  /** the charge at the offer the job would clear on now, else at the buyer's ceiling */
  estimatedMicroUsdc: bigint;
  maxPriceCents: number;
  /** the largest single eligible offer at or below the ceiling (a job clears on one offer) */
  maxEligibleOfferMicroDiem: bigint;
  /** all eligible DIEM at or below the ceiling */
  eligibleRoutableMicroDiem: bigint;
  clearsNow: boolean;
  /** the offer price the job would clear at now; null when it does not clear now */
  clearingPriceCents: number | null;
  upstreamQuoteMicroDiem: bigint;
  markupBps: number;
}

export interface VideoQuoteDeps {
  pipeline: InferencePipeline;
  upstream: UpstreamClient;
  run: QueryRunner;
  clock: Clock;
  keyHealth: KeyMarks;
  markupBps: number;
}

/** The most seconds one reference video may run (the reference: "source must be 4–30s"). */
export const REFERENCE_CLIP_MAX_SECONDS = 30;
/** The most seconds of reference video one job takes in all (the reference: "max 150s"). */
export const REFERENCE_TOTAL_MAX_SECONDS = 150;

/**
 * THE body a video job is quoted from, for the quote route and a queue call alike: the buyer's, with
 * the row's id. With reference videos (`reference_video_urls`), their total is quoted at the most the
 * clips can run (30 s each, 150 s in all), whatever `reference_video_total_duration` says: the upstream
 * charges the queued job for the clips it fetches, and a stated total could understate them.
 */
export function videoQuoteBody(body: Record<string, unknown>, modelId: string): Record<string, unknown> {
  const clips = Array.isArray(body.reference_video_urls) ? body.reference_video_urls.length : 0;
  if (clips === 0) return { ...body, model: modelId };
  const most = Math.min(REFERENCE_TOTAL_MAX_SECONDS, clips * REFERENCE_CLIP_MAX_SECONDS);
  return { ...body, model: modelId, reference_video_total_duration: most };
}

/**
 * `POST /v1/video/quote`: the body checked against the row, the upstream's quote asked with a
 * supplier key not at its in-flight limit (503 `keys_busy` when every eligible one is), the markup
 * added, and the market's depth at the buyer's ceiling. No charge, no job, no record.
 */
export class VideoQuotes {
  constructor(private readonly deps: VideoQuoteDeps) {}

  /** `req`: the contract's parse of the body (`parseVideoRequest`). */
  async quote(caller: Caller, req: VideoRequest): Promise<VideoQuote> {
    const { pipeline } = this.deps;
    const model = await pipeline.model(req.model, "video", "video_queue");
    checkVideoRequest(req, model);
    allowModel(caller.key, model);
    // the effective ceiling: the account's, lowered by the key's and the request's own
    const ceiling = effectiveCeiling(
      await pipeline.ceilingOf(caller.accountId),
      capOf(caller.key?.maxPriceCents, req.maxPriceCents),
    );
    const upstreamQuote = await this.askUpstream(ceiling, videoQuoteBody(req.body, model.id));
    const job = videoJobMicroDiem(upstreamQuote, this.deps.markupBps);
    const offers = await eligibleOffers(this.deps.run, { now: this.deps.clock.now(), maxPriceCents: ceiling });
    const maxOffer = maxBig(0n, ...offers.map((o) => o.routableMicroDiem));
    const eligible = offers.reduce((a, o) => a + o.routableMicroDiem, 0n);
    // cheapest first: the offer the whole job would clear on now
    const clearing = offers.find((o) => o.routableMicroDiem >= job) ?? null;
    return {
      model: model.id,
      quoteMicroDiem: job,
      estimatedMicroUsdc: grossMicroUsdc(job, clearing?.priceCentsPerDollar ?? ceiling),
      maxPriceCents: ceiling,
      maxEligibleOfferMicroDiem: maxOffer,
      eligibleRoutableMicroDiem: eligible,
      clearsNow: clearing !== null,
      clearingPriceCents: clearing?.priceCentsPerDollar ?? null,
      upstreamQuoteMicroDiem: upstreamQuote,
      markupBps: this.deps.markupBps,
    };
  }

  /**
   * The upstream's quote in micro-DIEM for a body already checked against its row, asked of up to
   * MAX_ATTEMPTS keys on the pipeline's attempt loop (`InferencePipeline.runBorrowed`: a key that
   * fails is acted on like an attempt's (`SupplierKeys.mark`); the request's own refusal is
   * relayed; 503 pool_empty). Every eligible key busy:
   * 503 keys_busy at once (the quote route, SPEC quote rule 5), or — with `waitForKey` (a queue
   * call) — waited for as an attempt waits, then 503 key_wait_timeout.
   */
  async askUpstream(ceiling: number, body: Record<string, unknown>, waitForKey = false): Promise<bigint> {
    // the quote request carries only the pricing inputs the reference lists for it: never the prompt
    // or image URLs (a `video_url` goes: the reference prices an upscale job by its source's length)
    const quoteBody = documentedBody("/video/quote", body);
    return this.deps.pipeline.runBorrowed({ ceilingCents: ceiling, waitForKey, refuse: quoteRefusal }, async (key) => {
      const res = await this.deps.upstream.inference("/video/quote", key.secret, quoteBody, {
        stream: false,
        timeoutMs: QUOTE_TIMEOUT_MS,
      });
      if (!res.ok) return Attempted.failed(res.failure);
      // the reference's quote is USD ("Returns the price in USD"); the upstream debits it from the key
      // as DIEM one for one (1 DIEM = 1 USD of inference), so its micro-USD figure is the job's micro-DIEM
      const q = (res.value.json as { quote?: unknown } | null)?.quote;
      if (typeof q === "number" && Number.isFinite(q) && q >= 0) return Attempted.ok(upstreamDecimalToMicro(q));
      return Attempted.retry("unreadable quote"); // ask another key
    });
  }
}

/** Why no quote could be asked (see `InferencePipeline.runBorrowed`). */
function quoteRefusal(why: "busy" | "none" | "exhausted"): DomainError {
  if (why === "busy") {
    return new DomainError("keys_busy", "Every eligible supplier key is in flight; retry shortly.", {
      retryAfterSeconds: 1,
    });
  }
  if (why === "none") {
    return new DomainError("pool_empty", "Nothing is posted at any price; no quote can be asked.", {
      retryAfterSeconds: 30,
    });
  }
  return new DomainError("upstream_error", "The upstream could not quote this job; safe to retry.");
}
