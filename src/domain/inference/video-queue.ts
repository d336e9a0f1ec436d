import { randomUUID } from "node:crypto";
import type { EventBus } from "../../adapters/pubsub.js";
import type { UpstreamClient, UpstreamFailure } from "../../adapters/upstream/client.js";
import { documentedBody } from "../../adapters/upstream/reference.js";
import type { Clock } from "../../lib/clock.js";
import { DomainError } from "../../lib/errors.js";
import { videoJobMicroDiem } from "../../lib/money.js";
import { bareModelId } from "../catalog/catalog-service.js";
import { flatJobPricer } from "./admission.js";
import { type CostFacts, costFacts } from "./answer-facts.js";
import { Attempted } from "./attempt-loop.js";
import { answered } from "./lanes.js";
import type { InferencePipeline } from "./pipeline.js";
import type { Caller } from "./session.js";
import { effectiveCeiling } from "./session.js";
import type { EndRows } from "./settlement.js";
import type { VideoQuotes } from "./video-quote.js";
import { checkVideoRequest, type VideoRequest } from "./video-request.js";

/** A queue call gives up after this long; its answer then counts as lost (never re-queued). */
export const VIDEO_QUEUE_TIMEOUT_MS = 60_000;

/** A queued job, as the buyer is told it. */
export interface QueuedVideo {
  queueId: string;
  model: string;
  /** the job's DIEM (upstream quote + markup): the burn of its clear */
  quoteMicroDiem: bigint;
  upstreamQuoteMicroDiem: bigint;
  /** what the queue call cost (the transport renders it: REST's cost headers and `svc` block) */
  cost: CostFacts;
}

export interface VideoQueueDeps {
  pipeline: InferencePipeline;
  upstream: UpstreamClient;
  quotes: VideoQuotes;
  clock: Clock;
  bus: EventBus;
  markupBps: number;
}

/**
 * Whether a failed queue call may have reached the upstream and queued (and charged) the job: a
 * timeout, or a connection that broke after it was made. Only an answer the upstream gave (an HTTP
 * status) or a connection never made proves nothing was queued.
 */
export function mayHaveQueued(f: UpstreamFailure): boolean {
  if (f.kind === "timeout") return true;
  if (f.kind === "network") return !/ECONNREFUSED|ENOTFOUND|EAI_AGAIN|EHOSTUNREACH|ENETUNREACH/.test(f.message);
  return false;
}

/**
 * `POST /v1/video/queue` (SPEC "Video", quote rules 1–4): the video modality on the inference
 * pipeline. The body is checked against the row; the request is opened (its support reference
 * made, so every refusal after this is recorded under it, SPEC "Errors" rule 2) and the upstream's
 * quote asked — a busy key waited for like an attempt's (503 key_wait_timeout) — and the markup
 * added (the job's DIEM); the whole job is admitted as one flat burn on ONE offer that holds it at or
 * below the buyer's ceiling (503 insufficient_routable_at_price otherwise; 402 when confirmed USDC
 * cannot cover its price); the upstream queues it on that offer's key; the charge and the job's
 * row commit in one transaction (`svc_end_items`). An HTTP refusal by the upstream falls forward
 * like chat; an answer that may have been lost (timeout, broken connection, no queue id) is never
 * re-queued — nothing is charged and the request fails (502), so the buyer is never charged twice.
 * The attempts are the pipeline's loop (`InferencePipeline.run`); the job's row is the ending's
 * extra rows (`EndRows`).
 */
export class VideoQueue {
  constructor(private readonly deps: VideoQueueDeps) {}

  /** `req`: the contract's parse of the body (`parseVideoRequest`). */
  async queue(caller: Caller, req: VideoRequest): Promise<QueuedVideo> {
    const { pipeline, upstream } = this.deps;
    const model = await pipeline.model(bareModelId(req.model), "video", "video_queue");
    checkVideoRequest(req, model);
    // only what the reference documents of the queue body (undocumented fields dropped)
    const body = documentedBody("/video/queue", { ...req.body, model: model.id });
    let upstreamQuote = 0n;
    let jobMicroDiem = 0n;
    // the request is open (its support reference made) before the upstream is asked for the quote,
    // so every refusal from here on is recorded and carries the reference (SPEC "Errors" rule 2);
    // every key busy is waited for like an attempt's key (quote rule 5's keys_busy is the quote route's)
    const session = await pipeline.open({
      ...caller,
      route: "video_queue",
      modality: "video",
      model: model.id,
      stream: false,
      ...(req.maxPriceCents !== undefined ? { maxPriceCents: req.maxPriceCents } : {}),
      askPrice: async (s) => {
        upstreamQuote = await this.deps.quotes.askUpstream(effectiveCeiling(s), body, true);
        jobMicroDiem = videoJobMicroDiem(upstreamQuote, this.deps.markupBps);
        return flatJobPricer(jobMicroDiem);
      },
    });
    const { value: queueId, settled } = await pipeline.run(session, async ({ attempt }) => {
      // no buyer signal: a buyer leaving must not cut the call and lose a queued job's id
      const res = await upstream.postJson("/video/queue", attempt.secret, body, {
        timeoutMs: VIDEO_QUEUE_TIMEOUT_MS,
      });
      if (!res.ok && mayHaveQueued(res.failure)) return Attempted.lost(res.failure.message, answerLost());
      if (!res.ok && res.failure.kind !== "invalid_response") return Attempted.failed(res.failure);
      const answer = res.ok ? (res.value.json as Record<string, unknown> | null) : null;
      const upstreamQueueId = typeof answer?.queue_id === "string" ? answer.queue_id : null;
      if (!upstreamQueueId) return Attempted.lost("no queue_id in the upstream's answer", answerLost());
      const queueId = randomUUID();
      // the job's row is written with its charge, in the ending's transaction
      const job: EndRows = {
        table: "video_jobs",
        row: {
          id: randomUUID(),
          queue_id: queueId,
          upstream_queue_id: upstreamQueueId,
          upstream_quote: upstreamQuote.toString(),
          body,
          download_url: typeof answer?.download_url === "string" ? answer.download_url : null,
        },
      };
      return answered({ kind: "settled", usage: { promptTokens: 0, completionTokens: 0 }, extra: job }, queueId);
    });
    this.deps.bus.publish("videoJobUpdated", caller.accountId, {
      accountId: caller.accountId,
      queueId,
      status: "rendering",
      at: this.deps.clock.now().toISOString(),
    });
    return {
      queueId,
      model: model.id,
      quoteMicroDiem: jobMicroDiem,
      upstreamQuoteMicroDiem: upstreamQuote,
      cost: costFacts(settled, session),
    };
  }
}

/** The queue call's answer may be lost: nothing is charged and the job is never re-queued. */
function answerLost(): DomainError {
  return new DomainError(
    "upstream_error",
    "The upstream's answer to the queue call was lost, so the job was not re-queued (that could charge twice). Nothing was charged; quote and queue again.",
  );
}
