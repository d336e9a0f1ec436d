import type { IncomingHttpHeaders } from "node:http";
import type { UpstreamClient } from "../../../adapters/upstream/client.js";
import type { ModalityRequest } from "../../../contract/inference.js";
import { bareModelId } from "../../../contract/model-id.js";
import type { RequestControls } from "../../../contract/request-controls.js";
import { DomainError, type ErrorCode } from "../../../lib/errors.js";
import { planRequest } from "../escrow/escrow-take.js";
import type { EndRows } from "../settlement/end-item.js";
import { NO_PLAN, UNLIMITED_MICRO_USDC } from "./admission.js";
import { costFacts } from "./answer-facts.js";
import { BUFFERED_CALL, type Buffered, type CallRules, type Metered, runCall, type Streamed } from "./call.js";
import type { InferencePipeline } from "./pipeline.js";
import { requestCaps } from "./request-controls.js";
import {
  type AttemptingSession,
  type BurnPricer,
  type Caller,
  effectiveCeiling,
  type InferenceSession,
  type Modality,
  PAY_PER_REQUEST_CEILING_CENTS,
  type RoutableModel,
  type RouteKind,
  type Settled,
} from "./session.js";
import type { BufferedResult, StreamSink } from "./sink.js";
import type { StreamRenderer } from "./stream-relay.js";

type Json = Record<string, unknown>;

export type { ModalityRequest };

/**
 * What a modality plugs into the pipeline (docs/decisions.md "Inference pipeline"): its request
 * validation, its price rules (`price`, or `askPrice` of the upstream), its upstream call, and the
 * shape of its answers and in-band errors. Admission, escrow, gates, fall-forward, settlement,
 * records and support references are the pipeline's. `A` is the buffered answer as the modality
 * shapes it (a JSON body, or data a transport presents); `P` its price rules, in its own type.
 */
export type InferenceModality<R extends ModalityRequest, A = Json, P extends BurnPricer = BurnPricer> = ModalityParts<
  R,
  A,
  P
> &
  Pricing<R, P>;

/** Where a modality's price rules come from: the resolved model (`price`), or the upstream (`askPrice`). */
export type Pricing<R, P extends BurnPricer> = PricedModality<R, P> | AskedModality<R, P>;

/** Price rules the modality knows from the resolved model. */
export interface PricedModality<R, P extends BurnPricer> {
  /** the request's price rules given the resolved model (its maximum and actual burn); a 400 holds nothing */
  price(req: R, model: RoutableModel): P;
}

/**
 * Price rules that must be asked of the upstream (a video job's quote, on a borrowed key): asked
 * once the request is open (`OpenInput.askPrice`: its gate slots taken, its support reference made),
 * so a refusal ends the request recorded under that reference like any other.
 */
export interface AskedModality<R, P extends BurnPricer> {
  askPrice(req: R, session: InferenceSession): Promise<P>;
}

/** The request as a modality's later hooks see it: the typed request, its session, the price rules it was given. */
export interface Priced<R, P extends BurnPricer> {
  req: R;
  session: InferenceSession;
  pricer: P;
}

export interface ModalityParts<R extends ModalityRequest, A, P extends BurnPricer> {
  readonly route: RouteKind;
  readonly modality: Modality;
  /** the upstream path (the upstream call) */
  readonly path: string;
  /** how the buffered upstream call is made and what its failures mean; absent parts: `BUFFERED_CALL`'s */
  readonly call?: Partial<CallRules>;
  /** the contract's parse of the buyer's body (src/contract/inference.ts); 400 naming the field, nothing changed */
  parse(raw: unknown): R;
  /**
   * the request checked against the resolved model's row before it is opened (a 400 naming the
   * field: nothing held, no record); the endpoint then hands admission the row (`resolvedModel`)
   */
  checkModel?(req: R, model: RoutableModel): void;
  /** the upstream body for the session's current attempt (admitted caps included) */
  upstreamBody(req: R, session: InferenceSession, stream: boolean): Json;
  /** a buffered answer: what it delivered (and the rows written with its charge), or why it is none (`Metered`) */
  meter(answer: Json, headers: IncomingHttpHeaders, priced: Priced<R, P>): Metered;
  /** a buffered answer as the buyer sees it, once settled (`rows`: what its `meter` wrote with the charge) */
  answer(answer: Json, req: R, session: InferenceSession, settled: Settled, ended: { pricer: P; rows: EndRows }): A;
  /** a streamed answer's renderer (frames, in-band errors); absent when the modality does not stream */
  renderer?(req: R, session: InferenceSession): StreamRenderer;
}

/**
 * One buyer-facing endpoint: a modality on the pipeline, buffered or streamed. The transports parse
 * the body once (`parse`, the contract's) and call `serve` with the typed request and where its
 * answer goes (an SSE sink for `stream: true`, else the buyer's abort signal); everything between
 * the request and the answer is the pipeline's.
 * OpenRouter's request controls on the typed request (`controls`: `models` fallbacks, each model a
 * fresh request until one answers; `provider.max_price`, a ceiling per model) are acted on here for
 * every modality that parses them (request-controls.ts).
 */
export class InferenceEndpoint<R extends ModalityRequest, A = Json, P extends BurnPricer = BurnPricer> {
  private readonly call: CallRules;

  constructor(
    private readonly pipeline: InferencePipeline,
    private readonly upstream: UpstreamClient,
    private readonly modality: InferenceModality<R, A, P>,
  ) {
    this.call = { ...BUFFERED_CALL, ...modality.call };
  }

  /**
   * Opens the request on `model` (one of `modelsToTry`), with the request's own ceilings; a modality
   * that checks the request against the row has it resolved (and checked) first. Answers the
   * session and the price rules the modality gave it.
   */
  private async open(
    caller: Caller,
    req: R,
    stream: boolean,
    model: string,
  ): Promise<Priced<R, P> & { session: AttemptingSession }> {
    const m = this.modality;
    const maxPrice = req.controls?.maxPrice;
    let resolvedModel: RoutableModel | undefined;
    if (m.checkModel) {
      resolvedModel = await this.pipeline.model(model, m.modality, m.route);
      m.checkModel(req, resolvedModel);
    }
    let pricer: P | undefined;
    const input = {
      ...caller,
      route: m.route,
      modality: m.modality,
      model: resolvedModel?.id ?? model,
      ...(resolvedModel ? { resolvedModel } : {}),
      stream,
      ...(req.maxPriceCents !== undefined ? { maxPriceCents: req.maxPriceCents } : {}),
      ...(maxPrice ? { maxPrice } : {}),
    };
    const session = await this.pipeline.open(
      "askPrice" in m
        ? { ...input, askPrice: async (s) => (pricer = await m.askPrice(req, s)) }
        : { ...input, price: (model) => (pricer = m.price(req, model)) },
    );
    if (pricer === undefined) throw new Error("a request admitted without its price rules");
    return { req, session, pricer };
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
    // an asked price is known only once the request is open: such a modality is not paid per request
    if (!("price" in m)) throw new Error(`${m.route} has no maximum before its price is asked`);
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
      const { capCents } = requestCaps({ maxPriceCents: req.maxPriceCents, maxPrice: req.controls?.maxPrice }, model);
      const sized = {
        pricer: m.price(req, model),
        effectiveCeilingCents: effectiveCeiling(PAY_PER_REQUEST_CEILING_CENTS, capCents),
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

  /**
   * Serves the request in the shape the transport asks for: into its SSE sink (`{ sink }`: content
   * relayed as it arrives, the last frames (usage, cost) withheld until settlement commits; errors
   * before the stream starts are thrown, the transport answers JSON), or buffered (`{ signal }`, the
   * buyer's: settles, then returns the answer and its cost facts for the transport to render). One
   * call path for both (`runCall`), on each model in turn (`eachModel`).
   */
  serve(caller: Caller, req: R, to: { sink: StreamSink }): Promise<undefined>;
  serve(caller: Caller, req: R, to: { signal: AbortSignal }): Promise<BufferedResult<A>>;
  serve(caller: Caller, req: R, to: AnswerTo): Promise<BufferedResult<A> | undefined>;
  async serve(caller: Caller, req: R, to: AnswerTo): Promise<BufferedResult<A> | undefined> {
    const m = this.modality;
    const call = this.call;
    const stream = "sink" in to;
    // a route that does not stream refuses `stream: true` before anything is opened
    const answering = "sink" in to ? { sink: to.sink, render: this.renderer() } : to;
    // a model's failure is thrown only before the buyer's stream started: the next model may still answer
    return eachModel(
      caller,
      modelsToTry(req),
      async (who, model) => {
        const priced = await this.open(who, req, stream, model);
        const { session, pricer } = priced;
        const shape: Streamed | Buffered =
          "sink" in answering
            ? { stream: true, sink: answering.sink, renderer: answering.render(req, session) }
            : { stream: false, signal: answering.signal, call, meter: (a, h) => m.meter(a, h, priced) };
        const done = await runCall(this.pipeline, this.upstream, session, {
          path: m.path,
          body: () => m.upstreamBody(req, session, stream),
          shape,
        });
        if (!done) return undefined;
        const { answer, settled, rows } = done;
        return { body: m.answer(answer, req, session, settled, { pricer, rows }), cost: costFacts(settled, session) };
      },
      () => ("sink" in to ? to.sink.closed : call.buyerCuts && to.signal.aborted),
    );
  }

  /** The modality's stream renderer; 400 on a route that does not stream. */
  private renderer(): (req: R, session: InferenceSession) => StreamRenderer {
    const m = this.modality;
    const renderer = m.renderer;
    if (!renderer) throw new DomainError("invalid_request", "This route does not stream.", { field: "stream" });
    return (req, session) => renderer.call(m, req, session);
  }
}

/** Where a request's answer goes: a stream into the transport's SSE sink, or buffered (the buyer's abort signal). */
export type AnswerTo = { sink: StreamSink } | { signal: AbortSignal };

// ─────────────────────────── the `models` fallbacks ───────────────────────────

/** The models a request tries, in order: `model`, then `models` (the contract's: catalog ids, each once). */
export function modelsToTry(req: { model: string; controls?: RequestControls | undefined }): string[] {
  const first = bareModelId(req.model);
  return req.controls ? [first, ...req.controls.models] : [first];
}

/**
 * Why the next model is tried: the model cannot be served to this buyer now and nothing reached
 * them — unknown (here or upstream), not live, of another modality, outside the key's models, no
 * offer at the ceiling (max_price mapped for it included) or none deep enough, or every key failed
 * before the first byte. Not: the buyer's own errors, budgets and balance, concurrency limits, a
 * market with nothing posted, a key wait, anything after the first byte.
 */
const NEXT_MODEL: ReadonlySet<ErrorCode> = new Set<ErrorCode>([
  "model_not_found",
  "model_not_live",
  "unsupported_modality",
  "model_not_allowed",
  "no_eligible_supply",
  "insufficient_routable_at_price",
  "upstream_error",
]);

/** Whether a model's refusal passes the request to its next model (`NEXT_MODEL`). */
export function passesToNextModel(e: unknown): boolean {
  return e instanceof DomainError && NEXT_MODEL.has(e.code);
}

/**
 * Serves a request on each model in turn (`models` fallbacks) until one answers: each is a fresh
 * request (`serve` opens, runs and ends it: everything it held is released before the next model
 * is tried). A model refused for a NEXT_MODEL reason, with the buyer still there, passes to the
 * next; the last model's error (or any other) is thrown, naming the models passed over in
 * `fallbacks`. The request id names one record: the first model that opened one takes the
 * caller's, later ones a fresh id.
 */
export async function eachModel<T>(
  caller: Caller,
  models: readonly string[],
  serve: (caller: Caller, model: string) => Promise<T>,
  buyerGone: () => boolean,
): Promise<T> {
  const passed: { model: string; code: ErrorCode; supportReference?: string }[] = [];
  let who = caller;
  for (let i = 0; ; i++) {
    const model = models[i] as string;
    try {
      return await serve(who, model);
    } catch (e) {
      const next = e instanceof DomainError && NEXT_MODEL.has(e.code) && i + 1 < models.length && !buyerGone();
      if (!(e instanceof DomainError)) throw e;
      const ref = e.details.supportReference;
      if (!next) {
        if (passed.length > 0) e.details.fallbacks = passed;
        throw e;
      }
      passed.push({ model, code: e.code, ...(typeof ref === "string" ? { supportReference: ref } : {}) });
      if (ref !== undefined && who.requestId !== undefined) {
        const { requestId: _taken, ...rest } = who;
        who = rest;
      }
    }
  }
}
