import type { IncomingHttpHeaders } from "node:http";
import type { UpstreamClient } from "../../adapters/upstream/client.js";
import type { ModalityRequest } from "../../contract/inference.js";
import { DomainError } from "../../lib/errors.js";
import { NO_PLAN, UNLIMITED_MICRO_USDC } from "./admission.js";
import { costFacts } from "./answer-facts.js";
import { runBuffered } from "./buffered.js";
import { planRequest } from "./escrow-take.js";
import type { InferencePipeline } from "./pipeline.js";
import { eachModel, modelsToTry, passesToNextModel, requestCaps } from "./request-controls.js";
import {
  type AttemptingSession,
  type BurnPricer,
  type Caller,
  type InferenceSession,
  type Modality,
  PAY_PER_REQUEST_CEILING_CENTS,
  type RoutableModel,
  type RouteKind,
  type Settled,
  type Usage,
} from "./session.js";
import type { BufferedResult, StreamSink } from "./sink.js";
import { runStream, type StreamRenderer } from "./streamed.js";

type Json = Record<string, unknown>;

export type { ModalityRequest };

/**
 * What a modality plugs into the pipeline (docs/decisions.md "Inference pipeline"): its request
 * validation, its price rules, its upstream call, and the shape of its answers and in-band errors.
 * Admission, escrow, gates, fall-forward, settlement, records and support references are the
 * pipeline's.
 */
export interface InferenceModality<R extends ModalityRequest> {
  readonly route: RouteKind;
  readonly modality: Modality;
  /** the upstream path (the upstream call) */
  readonly path: string;
  /** the contract's parse of the buyer's body (src/contract/inference.ts); 400 naming the field, nothing changed */
  parse(raw: unknown): R;
  /** the request's price rules given the resolved model (its maximum and actual burn) */
  price(req: R, model: RoutableModel): BurnPricer;
  /** the upstream body for the session's current attempt (admitted caps included) */
  upstreamBody(req: R, session: InferenceSession, stream: boolean): Json;
  /**
   * a buffered answer: what it delivered, why it is no answer (the request falls forward), or why
   * the provider flagged it (answered; charged what the provider burned for it, see `runBuffered`)
   */
  meter(answer: Json, headers: IncomingHttpHeaders): Usage | { refused: string } | { flagged: string };
  /** a buffered answer as the buyer sees it, once settled */
  answer(answer: Json, req: R, session: InferenceSession, settled: Settled): Json;
  /** a streamed answer's renderer (frames, in-band errors); absent when the modality does not stream */
  renderer?(req: R, session: InferenceSession): StreamRenderer;
}

/**
 * One buyer-facing endpoint: a modality on the pipeline, buffered or streamed. The transports parse
 * the body once (`parse`, the contract's) and call `buffered` or `stream` with the typed request
 * (`stream: true` picks the second); everything between the request and the answer is the pipeline's.
 * OpenRouter's request controls on the typed request (`controls`: `models` fallbacks, each model a
 * fresh request until one answers; `provider.max_price`, a ceiling per model) are acted on here for
 * every modality that parses them (request-controls.ts).
 */
export class InferenceEndpoint<R extends ModalityRequest> {
  constructor(
    private readonly pipeline: InferencePipeline,
    private readonly upstream: UpstreamClient,
    private readonly modality: InferenceModality<R>,
  ) {}

  /** Opens the request on `model` (one of `modelsToTry`), with the request's own ceilings. */
  private open(caller: Caller, req: R, stream: boolean, model: string): Promise<AttemptingSession> {
    const m = this.modality;
    const maxPrice = req.controls?.maxPrice;
    return this.pipeline.open({
      ...caller,
      route: m.route,
      modality: m.modality,
      model,
      stream,
      ...(req.maxPriceCents !== undefined ? { maxPriceCents: req.maxPriceCents } : {}),
      ...(maxPrice ? { maxPrice } : {}),
      price: (model) => m.price(req, model),
    });
  }

  /** The buyer's body as the typed request (the contract's parse); 400 naming the field. */
  parse(raw: unknown): R {
    return this.modality.parse(raw);
  }

  /**
   * THE maximum charge of a request paid per request (the amount its 402 asks for), sized as admission
   * sizes it (`planRequest`, no balance to cap it) at PAY_PER_REQUEST_CEILING_CENTS lowered by the
   * request's own ceilings, on each model it may try (`models` fallbacks): the largest, so whichever
   * model answers is admitted within it. A model refused for a reason that passes to the next is
   * left out; none left: the first refusal is thrown (404 model_not_found, 400 …).
   */
  async paidMaximum(req: R): Promise<bigint> {
    const m = this.modality;
    let max: bigint | undefined;
    let first: unknown;
    for (const id of modelsToTry(req)) {
      let model: RoutableModel;
      try {
        model = await this.pipeline.model(id, m.modality, m.route);
      } catch (e) {
        if (!passesToNextModel(e)) throw e;
        first ??= e;
        continue;
      }
      const sized = {
        pricer: m.price(req, model),
        ceilingCents: PAY_PER_REQUEST_CEILING_CENTS,
        ...requestCaps({ maxPriceCents: req.maxPriceCents, maxPrice: req.controls?.maxPrice }, model),
        budgetHold: null,
        plan: NO_PLAN,
        plans: 0,
      };
      if (!planRequest(sized, UNLIMITED_MICRO_USDC)) continue;
      if (max === undefined || sized.plan.maxChargeMicroUsdc > max) max = sized.plan.maxChargeMicroUsdc;
    }
    if (max === undefined) throw first ?? new Error("a request without an admissible plan on any model");
    return max;
  }

  /** Buffered: settles, then returns the answer and its cost facts (the transport renders them). */
  async buffered(caller: Caller, req: R, signal: AbortSignal): Promise<BufferedResult> {
    const m = this.modality;
    return eachModel(
      caller,
      modelsToTry(req),
      async (who, model) => {
        const session = await this.open(who, req, false, model);
        const { answer, settled } = await runBuffered(this.pipeline, this.upstream, session, {
          path: m.path,
          body: () => m.upstreamBody(req, session, false),
          signal,
          meter: (a, h) => m.meter(a, h),
        });
        return { body: m.answer(answer, req, session, settled), cost: costFacts(settled, session) };
      },
      () => signal.aborted,
    );
  }

  /**
   * Streamed: content is relayed as it arrives; the last frames (usage, cost) are withheld until
   * settlement commits. Errors before the stream starts are thrown (the transport answers JSON).
   */
  async stream(caller: Caller, req: R, sink: StreamSink): Promise<void> {
    const m = this.modality;
    const renderer = m.renderer;
    if (!renderer) throw new DomainError("invalid_request", "This route does not stream.", { field: "stream" });
    // a model's failure is thrown only before the buyer's stream started: the next model may still answer
    await eachModel(
      caller,
      modelsToTry(req),
      async (who, model) => {
        const session = await this.open(who, req, true, model);
        await runStream(this.pipeline, this.upstream, session, sink, {
          path: m.path,
          body: () => m.upstreamBody(req, session, true),
          renderer: renderer.call(m, req, session),
        });
      },
      () => sink.closed,
    );
  }
}
