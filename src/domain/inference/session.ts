import { DEFAULT_CEILING_CENTS, type TextPricing } from "../../lib/money.js";
import type { ImagePricingMicro } from "../catalog/catalog-types.js";
import type { KeyRules } from "../keys/key-period.js";

export type { KeyRules };

import type { Slice } from "./escrow.js";

/**
 * What a request is admitted with: its maximum burn (held on the offer's slice) and its maximum
 * charge (held on the buyer's). A charge can never exceed it: the burn settled is capped at
 * `maxBurnMicroDiem` and the clearing price is at most the ceiling.
 */
export interface AdmissionPlan {
  /** the generous prompt estimate the plan was made with (0 where the price is not per token) */
  promptEstimate: number;
  /** the completion cap sent upstream (0 where the price is not per token) */
  admittedMaxTokens: number;
  maxBurnMicroDiem: bigint;
  /** the most the buyer can be charged: `maxChargeFor(maxBurn, priceCap ?? ceiling)` */
  maxChargeMicroUsdc: bigint;
  /**
   * the highest offer price the request may clear at when the buyer's balance cannot cover the
   * maximum at the ceiling (a flat job: clearing cheaper is what makes it affordable); absent: the ceiling
   */
  priceCapCents?: number;
}

/**
 * A request's price rules, supplied by its modality: tokens × catalog rates for text (`textPricer`),
 * a flat job price for images, a quoted job price for video.
 */
export interface BurnPricer {
  /**
   * The maximum burn and charge for a buyer with `availableMicroUsdc` at `ceilingCents`, or
   * `undefined` when not even the smallest admissible request is affordable (402).
   */
  plan(ceilingCents: number, availableMicroUsdc: bigint): AdmissionPlan | undefined;
  /** The burn of what was delivered (the pipeline caps it at the admitted maximum). */
  burn(usage: Usage): bigint;
}

/** The buyer-facing route a request came in on (recorded with it; `inference_route` in SQL). */
export type RouteKind = "chat" | "responses" | "messages" | "image" | "images_openai" | "video_queue";

/** What the buyer called, for error messages. */
export const ROUTE_LABEL: Record<RouteKind, string> = {
  chat: "chat completions",
  responses: "responses",
  messages: "messages",
  image: "image generation",
  images_openai: "image generations",
  video_queue: "video",
};

export type Modality = "text" | "image" | "video";

/** The pipeline's view of a catalog row (see model-resolver.ts). */
export interface RoutableModel {
  id: string;
  modality: Modality;
  status: "live" | "coming_soon";
  tier: "frontier" | "small";
  /** text rates (zero on other rows) */
  pricing: TextPricing;
  /** per-image prices (live image rows only) */
  imagePricing: ImagePricingMicro | null;
  /** the row's published constraints (image and video rows), keys exactly as published */
  constraints: Record<string, unknown> | null;
  maxCompletionTokens: number | null;
}

/**
 * What funds a request paid per request (docs/decisions.md "Pay per request"): its x402
 * `upto` authorization, never the account's prepaid balance. Admission plans against `maxMicroUsdc`
 * and takes no buyer slice; the ending books the charge against the payment (`svc_end_items`);
 * `settle` settles it once the ending committed, before the answer's body or last frames go out
 * (it throws when the answer must be withheld).
 */
export interface RequestPayment {
  /** the `request_payments` row */
  id: string;
  /** the signed maximum: the most the request may be charged */
  maxMicroUsdc: bigint;
  settle(settled: Settled): Promise<Settled>;
}

/** The ceiling of a request paid per request: the request's own (`svc.maxPriceCentsPerDollar`) lowers it. */
export const PAY_PER_REQUEST_CEILING_CENTS = DEFAULT_CEILING_CENTS;

/**
 * Who is paying: the acting account and the API key it called with (none, "", for a request paid
 * per request: `payment` funds it).
 */
export interface Caller {
  accountId: string;
  apiKeyId: string;
  /** the authorization that funds the request (pay per request); absent: the prepaid balance */
  payment?: RequestPayment;
  /**
   * the transport's id for this call (its `X-Svc-Request-Id`), which becomes the request's id: one
   * id per request on the answer, in error bodies and in its record, so a caller can quote one id for everything; a fresh
   * one when absent
   */
  requestId?: string;
  /** the calling key's rules (its policy); absent: none */
  key?: KeyRules;
  /** the request's own ceiling (`svc.maxPriceCentsPerDollar`); it can only lower the effective one */
  maxPriceCents?: number;
}

/** Tokens the upstream reported (or the pipeline estimated) for a request. */
export interface Usage {
  promptTokens: number;
  completionTokens: number;
  /** cache reads, part of promptTokens */
  cachedTokens?: number;
  /** cache writes (`cache_creation_input_tokens`), part of promptTokens */
  cacheWriteTokens?: number;
}

/** A settled request, as the buyer is told it. */
export interface Settled {
  costMicroUsdc: bigint;
  /** why the provider did not charge for a delivered answer (nothing charged, no clear) */
  uncharged?: string;
  /** why the provider flagged a delivered answer it charged for (e.g. `content_violation`) */
  flagged?: string;
  clearingPriceCents: number;
  burnMicroDiem: bigint;
  /** the prompt tokens the burn priced at the cache-read rate (0 where none) */
  cachedTokens?: number;
  /** the prompt tokens the burn priced at the cache-write rate (0 where none) */
  cacheWriteTokens?: number;
  balanceRemainingMicroUsdc: bigint;
  supportReference: string;
  requestId: string;
  /** a request paid per request: how its charge was settled (set by `RequestPayment.settle`) */
  payment?: PaymentReceipt;
}

/** How a pay-per-request charge was settled, as the answer tells it (the cost frame, the receipt header). */
export interface PaymentReceipt {
  /** settled: the charge moved (nothing to move when 0); reconciling: the outcome is unknown, the chain decides */
  status: "settled" | "reconciling";
  amountMicroUsdc: bigint;
  /** the settlement transaction; null when none (a charge of 0) or not known yet */
  transaction: string | null;
  /** the x402 `PAYMENT-RESPONSE` header: its name and encoded value */
  header: { name: string; value: string };
}

/**
 * What the supplier's key could still burn for an attempt when its call began (SPEC "Events" Chat
 * SSE 6: "the supplier's pre-call balance"), as known when the upstream answered the attempt.
 */
export interface PreCallBalance {
  /** the key's balance before the call as the upstream reported it on the attempt (`x-venice-balance-diem`); null when not reported */
  reportedMicroDiem: bigint | null;
  /** the key's last known balance (synced every 30 s, lowered by each settlement; the fallback); null when unknown */
  knownMicroDiem: bigint | null;
  /** the admitted maxima of the other requests in flight on the key then (none of it debited upstream yet) */
  othersInFlightMicroDiem: bigint;
}

/** The attempt in flight: one supplier key, one offer, its maximum burn admitted on the offer's slice. */
export interface Attempt {
  ordinal: number;
  offerId: string;
  upstreamKeyId: string;
  supplierAccountId: string;
  priceCentsPerDollar: number;
  /** the supplier's upstream secret (decrypted; never logged) */
  secret: string;
  /** the key's last known balance when the attempt began (the fallback of `preCallBalance`) */
  keyBalanceMicroDiem: bigint | null;
  /**
   * the supplier's pre-call balance as known when the upstream answered this attempt (caps an
   * incomplete stream's burn; see `billIncomplete`); null until it answered
   */
  preCallBalance: PreCallBalance | null;
  /** whether it still holds its slot of the supplier key's gate (given back exactly once) */
  keyHeld: boolean;
  /** the slice of the offer this attempt's maximum burn is admitted against */
  offerSlice: Slice;
  startedAt: Date;
}

export type AttemptOutcome =
  | "succeeded"
  | "incomplete"
  | "retryable_failure"
  | "supplier_exhausted"
  | "supplier_auth_failed"
  | "aborted"
  | "request_rejected";

/** One ended attempt as it is recorded when the request ends (fields of the SQL `attempts` json). */
export interface AttemptRecord {
  ordinal: number;
  key: string;
  offer: string;
  price: number;
  outcome: AttemptOutcome;
  status: number | null;
  detail: string | null;
  started: string;
  ended: string;
}

/** Milliseconds per phase of one request (`PhaseTimings`; REST renders them as `Server-Timing`). */
export interface RequestTiming {
  /** `performance.now()` when admission began */
  start: number;
  /** gates, plan and escrow until the first attempt could call the upstream (key waits included) */
  admitMs?: number;
  /** from then until the answer (buffered) or the first content (streamed), fall-forwards included */
  upstreamMs?: number;
  /** the settlement's commit */
  settleMs?: number;
}

/**
 * One paid request on its way through the pipeline, in three phases: admitted (`InferenceSession`:
 * gates, plan and slices; no attempt yet) → attempting (`AttemptingSession`: an attempt in flight,
 * what `open` answers and `run` drives) → ended (`done`: settled on an `Ending` or aborted, once).
 */
export interface InferenceSession {
  requestId: string;
  supportReference: string;
  accountId: string;
  apiKeyId: string;
  route: RouteKind;
  model: RoutableModel;
  stream: boolean;
  /** the account's ceiling as this process last saw it (a top-up verifies it) */
  ceilingCents: number;
  /**
   * the lowest of the calling key's and the request's own ceilings (null: neither sets one); the
   * ceiling a request is planned and cleared at is `effectiveCeiling`
   */
  capCents: number | null;
  /**
   * the ceiling the request's `provider.max_price` maps to for its model (part of `capCents`; named
   * in a 503 it causes); absent or null: none sent
   */
  maxPriceCeilingCents?: number | null;
  /** what the calling key's budget holds for the request (`KeyBudgets`); null when the key has no limit */
  budgetHold: bigint | null;
  /** the modality's price rules (maximum and actual burn) */
  pricer: BurnPricer;
  /** the admitted maximum: what the buyer's and the offer's slices hold for this request */
  plan: AdmissionPlan;
  /** admission plans made so far (a stale ceiling or a short balance re-plans) */
  plans: number;
  /** supplier keys already tried (distinct keys for fall-forward) */
  tried: string[];
  /** attempts so far (a busy key's release counts) */
  ordinals: number;
  attempt: Attempt | null;
  /** ended attempts, recorded with the request when it ends */
  attempts: AttemptRecord[];
  /** the buyer slice the maximum charge is admitted against (null until admitted; always null when paid per request) */
  buyerSlice: Slice | null;
  /** the authorization that funds the request instead of the balance (pay per request); null: the balance */
  payment: RequestPayment | null;
  /** slices this request took into or drew on: each is looked at for a give-back when it ends */
  touched: Set<Slice>;
  /** the gate slots it holds besides its attempt's supplier key (the buyer key's, the small-model tier's) */
  gates: string[];
  startedAt: Date;
  firstByteAt: Date | null;
  done: boolean;
  /** when its in-flight record was last renewed (epoch ms, from the clock) */
  renewedAt?: number;
  timing: RequestTiming;
  /** a stream's in-flight record being stored (see InFlightRegistry) */
  bridged?: Promise<void>;
}

/** A request with its attempt in flight: the only kind an ending can charge (see `InferencePipeline.run`). */
export type AttemptingSession = InferenceSession & { readonly attempt: Attempt };

/** What a modality's call is given for one attempt (see `InferencePipeline.run`). */
export interface AttemptScope {
  readonly session: AttemptingSession;
  readonly attempt: Attempt;
  /** the first byte reached the buyer (timings; the ending marks it too) */
  firstByte(): void;
  /**
   * the upstream answered, reporting the key's balance before the call (null when it did not):
   * noted as the attempt's pre-call balance (caps an incomplete stream's burn)
   */
  preCallBalance(reportedMicroDiem: bigint | null): void;
  /** keeps a long stream's in-flight record alive (see InFlightBridge) */
  renew(): Promise<void>;
}

/**
 * THE effective ceiling of a request: the lowest of the account's, the calling key's and
 * the request's own (`svc.maxPriceCentsPerDollar`). A request is planned, cleared and recorded at it;
 * a top-up verifies only the account's part (`stale_ceiling`).
 */
export function effectiveCeiling(session: { ceilingCents: number; capCents: number | null }): number {
  return session.capCents !== null && session.capCents < session.ceilingCents ? session.capCents : session.ceilingCents;
}

/** The lower of a key's and a request's own ceilings (null when neither sets one). */
export function capOf(keyCents: number | null | undefined, requestCents: number | null | undefined): number | null {
  const k = keyCents ?? null;
  const r = requestCents ?? null;
  if (k === null) return r;
  if (r === null) return k;
  return Math.min(k, r);
}

/**
 * One attempt as the request's record keeps it (`inference_requests.attempts`, a JSON array in
 * ordinal order written by the settlement: one column instead of a row per attempt). The outcome is one of `attempt_outcome`'s
 * values (`in_progress` only in records written before the settlement wrote attempts whole).
 */
export interface StoredAttempt {
  ordinal: number;
  upstreamKeyId: string;
  offerId: string;
  priceCents: number;
  outcome: AttemptOutcome | "in_progress";
  upstreamStatus: number | null;
  errorKind: string | null;
  startedAt: string;
  endedAt: string | null;
}

/** A request record's `attempts` column, typed (the settlement casts every field on the way in). */
export function storedAttempts(json: unknown): StoredAttempt[] {
  if (!Array.isArray(json)) throw new Error("a request's attempts must be a JSON array");
  return json as StoredAttempt[];
}
