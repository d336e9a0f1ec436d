import { DEFAULT_CEILING_CENTS, type TextPricing } from "../../../lib/money.js";
import type { ImagePricingMicro } from "../../catalog/catalog-types.js";
import type { KeyRules } from "../../keys/key-period.js";

export type { KeyRules };

import type { Hold } from "../escrow/escrow.js";
import type { Attempt, AttemptOutcome } from "./attempt.js";
import type { Trail } from "./trail.js";

export type { Attempt, AttemptOutcome, AttemptRecord, PreCallBalance } from "./attempt.js";

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
  /** how long the settlement's commit took, in ms (the answer's `Server-Timing`) */
  settleMs?: number;
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
 * A request as every phase reads it: what admission decided (immutable once admitted) and its
 * trail (what the attempts appended). The phases: admit (`InferencePipeline.open` → `Admitted`,
 * planned on an `AdmissionDraft`), attempt (`InferencePipeline.run`: each attempt answers or fails,
 * appended to the trail), end (`Endings`: the request's `EndItem` and `EscrowPlan`, committed once by
 * the settlement; how it ended is `Ended`, kept by the end phase, never a flag on the request).
 */
export interface InferenceSession {
  readonly requestId: string;
  readonly supportReference: string;
  readonly accountId: string;
  readonly apiKeyId: string;
  readonly route: RouteKind;
  readonly model: RoutableModel;
  readonly stream: boolean;
  /** the account's own ceiling as admission last saw it (a top-up verifies it) */
  readonly accountCeilingCents: number;
  /** the lowest of the calling key's and the request's own ceilings (null: neither sets one) */
  readonly capCents: number | null;
  /**
   * THE ceiling the request is planned, cleared and recorded at: `effectiveCeiling` of the two above,
   * computed at admission and again only when a top-up reads a new account ceiling
   */
  readonly effectiveCeilingCents: number;
  /**
   * the ceiling the request's `provider.max_price` maps to for its model (part of `capCents`; named
   * in a 503 it causes); absent or null: none sent
   */
  readonly maxPriceCeilingCents?: number | null;
  /** what the calling key's budget holds for the request (`KeyBudgets`); null when the key has no limit */
  readonly budgetHold: bigint | null;
  /** the modality's price rules (maximum and actual burn) */
  readonly pricer: BurnPricer;
  /** the admitted maximum: what the buyer's and the offer's slices hold for this request */
  readonly plan: AdmissionPlan;
  /** the buyer's maximum charge held on this process's slice of the balance (null: not yet, or paid per request) */
  readonly buyerHold: Hold | null;
  /** the authorization that funds the request instead of the balance (pay per request); null: the balance */
  readonly payment: RequestPayment | null;
  /** the gate slots it holds besides its attempts' supplier keys (the buyer key's, the small-model tier's) */
  readonly gates: readonly string[];
  readonly startedAt: Date;
  /** `performance.now()` when admission began (phase timings) */
  readonly timingStart: number;
  /** admission's milliseconds: gates, plan and escrow until the first attempt could call the upstream */
  readonly admitMs?: number;
  /** what happened while it was attempted, appended by the attempt phase alone */
  readonly trail: Trail;
}

/**
 * Admission's working copy of a request: the one place its plan, its ceilings, its key-budget hold
 * and the buyer's hold are set (`planRequest`, `KeyBudgets.hold`, `TopUps`, the first attempt's
 * buyer admission). Once its first attempt is admitted it is frozen into `Admitted`.
 */
export type AdmissionDraft = { -readonly [K in keyof InferenceSession]: InferenceSession[K] } & {
  /** admission plans made so far (a stale ceiling or a short balance re-plans) */
  plans: number;
};

/** An admitted request: admission's decisions, frozen. */
export type Admitted = InferenceSession;

/** An admitted request with the attempt it was admitted with (what `open` answers and `run` starts from). */
export type AttemptingSession = Admitted & { readonly attempt: Attempt };

/** What a modality's call is given for one attempt (see `InferencePipeline.run`). */
export interface AttemptScope {
  readonly session: InferenceSession;
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
 * the request's own (`svc.maxPriceCentsPerDollar`; the last two are `capCents`). Computed once at
 * admission and carried as `effectiveCeilingCents`; a top-up verifies only the account's part
 * (`stale_ceiling`) and computes it again.
 */
export function effectiveCeiling(accountCeilingCents: number, capCents: number | null): number {
  return capCents !== null && capCents < accountCeilingCents ? capCents : accountCeilingCents;
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

/**
 * A request's attempts as the view `inference_request_attempts` reads them, typed (the settlement
 * casts every field on the way in; a lone successful attempt is read from its clear).
 */
export function storedAttempts(json: unknown): StoredAttempt[] {
  if (!Array.isArray(json)) throw new Error("a request's attempts must be a JSON array");
  return json as StoredAttempt[];
}
