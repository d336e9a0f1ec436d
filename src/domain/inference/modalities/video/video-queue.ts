import { randomUUID } from "node:crypto";
import type { EventBus } from "../../../../adapters/pubsub.js";
import type { UpstreamFailure } from "../../../../adapters/upstream/client.js";
import { documentedBody } from "../../../../adapters/upstream/reference.js";
import { parseVideoRequest } from "../../../../contract/inference.js";
import type { Clock } from "../../../../lib/clock.js";
import { DomainError } from "../../../../lib/errors.js";
import { videoJobMicroDiem } from "../../../../lib/money.js";
import { flatJobPricer } from "../../pipeline/admission.js";
import type { CostFacts } from "../../pipeline/answer-facts.js";
import type { InferenceEndpoint, InferenceModality } from "../../pipeline/endpoint.js";
import type { BurnPricer, Caller, RoutableModel } from "../../pipeline/session.js";
import { type VideoQuotes, videoQuoteBody } from "./video-quote.js";
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

/** A queued job's price rules: the flat burn of its DIEM, and the upstream's quote it was made from. */
export interface VideoJobPricer extends BurnPricer {
  upstreamQuoteMicroDiem: bigint;
  jobMicroDiem: bigint;
}

/** The queue call's answer; the façade adds what it cost (`QueuedVideo`). */
export type VideoQueueAnswer = Omit<QueuedVideo, "cost">;

/** The video modality's endpoint (`videoQueueModality` on the pipeline). */
export type VideoQueueEndpoint = InferenceEndpoint<VideoRequest, VideoQueueAnswer, VideoJobPricer>;

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

/** What the upstream is sent to queue the job: only the fields its reference documents, with the row's id. */
function queueBody(req: VideoRequest, model: RoutableModel): Record<string, unknown> {
  return documentedBody("/video/queue", { ...req.body, model: model.id });
}

/**
 * `POST /v1/video/queue` (SPEC "Video", quote rules 1–4): the video modality on the inference
 * pipeline, run by its `InferenceEndpoint` like the others. The body is checked against the row
 * (`checkModel`, before anything is held); the request is opened (its support reference made, so
 * every refusal after this is recorded under it, SPEC "Errors" rule 2) and the upstream's quote
 * asked (`askPrice`) — a busy key waited for like an attempt's (503 key_wait_timeout) — and the
 * markup added (the job's DIEM); the whole job is admitted as one flat burn on ONE offer that holds
 * it at or below the buyer's ceiling (503 insufficient_routable_at_price otherwise; 402 when
 * confirmed USDC cannot cover its price); the upstream queues it on that offer's key; the charge
 * and the job's row (`EndRows.videoJob`, from `meter`) commit in one transaction (`svc_end_items`).
 * An HTTP refusal by the upstream falls forward like chat; an answer that may have been lost
 * (timeout, broken connection, an unreadable answer or one without `queue_id`: `call.mayBeLost`,
 * `meter`'s `lost`) is never re-queued — nothing is charged and the request fails (502), so the
 * buyer is never charged twice. The buyer leaving does not cut the call (`buyerCuts: false`): a
 * job the upstream queued is charged and kept, its id never lost.
 */
export function videoQueueModality(deps: {
  quotes: VideoQuotes;
  markupBps: number;
}): InferenceModality<VideoRequest, VideoQueueAnswer, VideoJobPricer> {
  return {
    route: "video_queue",
    modality: "video",
    path: "/video/queue",
    call: {
      timeoutMs: VIDEO_QUEUE_TIMEOUT_MS,
      buyerCuts: false,
      // a 2xx that cannot be read queued a job whose id we cannot read
      mayBeLost: (f) => mayHaveQueued(f) || f.kind === "invalid_response",
      lostError: answerLost,
    },
    parse: parseVideoRequest,
    checkModel: checkVideoRequest,
    askPrice: async (req, session) => {
      // the quote route's body (`videoQuoteBody`), not the queue's: the quote's own fields (the
      // reference videos' total) are not queue fields
      const upstreamQuoteMicroDiem = await deps.quotes.askUpstream(
        session.effectiveCeilingCents,
        videoQuoteBody(req.body, session.model.id),
        true,
      );
      const jobMicroDiem = videoJobMicroDiem(upstreamQuoteMicroDiem, deps.markupBps);
      return { ...flatJobPricer(jobMicroDiem), upstreamQuoteMicroDiem, jobMicroDiem };
    },
    upstreamBody: (req, session) => queueBody(req, session.model),
    meter: (answer, _headers, { req, session, pricer }) => {
      const upstreamQueueId = typeof answer.queue_id === "string" ? answer.queue_id : "";
      if (!upstreamQueueId) return { lost: "no queue_id in the upstream's answer" };
      return {
        usage: { promptTokens: 0, completionTokens: 0 },
        // the job's row is written with its charge, in the ending's transaction
        rows: {
          videoJob: {
            id: randomUUID(),
            queueId: randomUUID(),
            upstreamQueueId,
            upstreamQuoteMicroDiem: pricer.upstreamQuoteMicroDiem,
            body: queueBody(req, session.model),
            downloadUrl: typeof answer.download_url === "string" ? answer.download_url : null,
          },
        },
      };
    },
    answer: (_answer, _req, session, _settled, { pricer, rows }) => {
      const job = rows.videoJob;
      if (!job) throw new Error("a queued job settled without its row");
      return {
        queueId: job.queueId,
        model: session.model.id,
        quoteMicroDiem: pricer.jobMicroDiem,
        upstreamQuoteMicroDiem: pricer.upstreamQuoteMicroDiem,
      };
    },
  };
}

/**
 * The queue call as the transports make it: the video endpoint's buffered call, then the job's
 * `videoJobUpdated` (rendering) published and its cost attached.
 */
export class VideoQueue {
  constructor(private readonly deps: { endpoint: VideoQueueEndpoint; clock: Clock; bus: EventBus }) {}

  /** `req`: the contract's parse of the body (`parseVideoRequest`). */
  async queue(caller: Caller, req: VideoRequest): Promise<QueuedVideo> {
    // the buyer leaving does not cut a queue call (`buyerCuts: false`): there is no signal to give
    const { body, cost } = await this.deps.endpoint.serve(caller, req, { signal: new AbortController().signal });
    this.deps.bus.publish("videoJobUpdated", caller.accountId, {
      accountId: caller.accountId,
      queueId: body.queueId,
      status: "rendering",
      at: this.deps.clock.now().toISOString(),
    });
    return { ...body, cost };
  }
}

/** The queue call's answer may be lost: nothing is charged and the job is never re-queued. */
function answerLost(): DomainError {
  return new DomainError(
    "upstream_error",
    "The upstream's answer to the queue call was lost, so the job was not re-queued (that could charge twice). Nothing was charged; quote and queue again.",
  );
}
