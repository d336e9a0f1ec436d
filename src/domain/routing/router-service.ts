import { randomUUID } from "node:crypto";
import type { Db } from "../../adapters/db.js";
import type { EventBus } from "../../adapters/pubsub.js";
import type { Gate } from "../../adapters/redis/gates.js";
import type { RedisKeys } from "../../adapters/redis/keys.js";
import { type Sql, sqlRunner } from "../../adapters/sql.js";
import type { Config } from "../../config.js";
import { Batcher } from "../../lib/batcher.js";
import type { Clock } from "../../lib/clock.js";
import { DomainError } from "../../lib/errors.js";
import { logger } from "../../lib/logger.js";
import { burnMicroDiem, computeCharge, formatDecimal6, maxBig, type TextPricing } from "../../lib/money.js";
import type { SecretBox } from "../../lib/secret-box.js";
import { eligibleOffers } from "../market/eligibility.js";
import { type AdmissionPlan, planAdmission } from "./admission.js";

/** SPEC "What the service does" 4: up to five distinct supplier keys per request. */
export const MAX_ATTEMPTS = 5;
/** In-flight completions per supplier key (a supplier key is one upstream account's rate limits). */
export const SUPPLIER_KEY_MAX_IN_FLIGHT = 16;
/** How long a request waits for a busy supplier key before 503 key_wait_timeout. */
export const KEY_WAIT_MS = 5_000;
/** Lease and reservation lifetime: a request that outlives it is presumed dead and its holds released. */
export const REQUEST_LEASE_MS = 15 * 60_000;
/** A long stream renews its holds and leases this often (so the sweeper never takes a live request's). */
export const RENEW_EVERY_MS = 5 * 60_000;
/** A key that answered "out of capacity" (upstream 402) is not routed for this long. */
export const EXHAUSTED_COOLDOWN_MS = 60_000;
const KEY_CACHE_MS = 60_000;
/** Expired holds the sweeper releases per pass. */
const SWEEP_LIMIT = 500;
/** Holds and settlements per group commit (see Batcher). */
const BATCH = { maxBatch: 64, maxInFlight: 1 };
/** Plans per request: a stale cached ceiling or a balance too short for the uncapped plan re-plans. */
const MAX_PLANS = 4;
/** No balance known yet: plan as if unlimited (svc_clear checks the real one atomically). */
const UNLIMITED = 1n << 62n;

export type RouteKind = "chat" | "responses";

export interface RoutableModel {
  id: string;
  modality: "text" | "image" | "video";
  status: "live" | "coming_soon";
  tier: "frontier" | "small";
  pricing: TextPricing;
  maxCompletionTokens: number | null;
}

export interface OpenInput {
  accountId: string;
  apiKeyId: string;
  route: RouteKind;
  /** the model as the buyer sent it (bare or `svc/`) */
  model: string;
  stream: boolean;
  promptEstimate: number;
  requestedMaxTokens: number | undefined;
}

export interface Attempt {
  ordinal: number;
  offerId: string;
  upstreamKeyId: string;
  supplierAccountId: string;
  priceCentsPerDollar: number;
  /** the supplier's upstream secret (decrypted; never logged) */
  secret: string;
  /** the key's last known balance when the attempt began (caps a stream_incomplete estimate) */
  keyBalanceMicroDiem: bigint | null;
  leaseId: string;
}

/** State of one routed request. */
export interface RoutingSession {
  requestId: string;
  supportReference: string;
  accountId: string;
  apiKeyId: string;
  route: RouteKind;
  model: RoutableModel;
  stream: boolean;
  ceilingCents: number;
  plan: AdmissionPlan;
  /** supplier keys already tried (distinct keys for fall-forward) */
  tried: string[];
  /** attempt rows written so far (a busy key's release counts) */
  ordinals: number;
  attempt: Attempt | null;
  recorded: boolean;
  buyerLease: string;
  startedAt: Date;
  firstByteAt: Date | null;
  done: boolean;
  /** when holds and leases were last renewed (epoch ms) */
  renewedAt?: number;
  /** the buyer's own max_tokens (re-planning needs it) */
  requestedMaxTokens?: number | undefined;
  /** admission plans made so far */
  plans?: number;
  /** where the service's time went, for `Server-Timing` (ms, `performance.now()` based) */
  timing: RequestTiming;
}

/** Milliseconds per phase of one request (see `serverTiming`). */
export interface RequestTiming {
  /** `performance.now()` when admission began */
  start: number;
  /** gate, plan and hold until the first attempt could call the upstream (key waits included) */
  admitMs?: number;
  /** from then until the answer (buffered) or the first content (streamed), fall-forwards included */
  upstreamMs?: number;
  /** the settlement's commit */
  settleMs?: number;
}

/**
 * `Server-Timing` (W3C): where the service spent a request's time, in ms — `admit` (gates, plan,
 * hold), `upstream` (to the answer or first content, fall-forwards included), `settle` (the commit).
 * Phases not reached yet are left out (a stream's headers leave before its settlement).
 */
export function serverTiming(session: RoutingSession): string {
  const t = session.timing;
  const parts: string[] = [];
  for (const [name, ms] of [
    ["admit", t.admitMs],
    ["upstream", t.upstreamMs],
    ["settle", t.settleMs],
  ] as const) {
    if (ms !== undefined) parts.push(`${name};dur=${ms.toFixed(3)}`);
  }
  return parts.join(", ");
}

export type AttemptFailure =
  /** 5xx, 429, timeouts, resets, a stream that closed before its first content: fall forward */
  | { kind: "retryable"; status?: number; detail: string }
  /** upstream 402: the supplier's key is out of capacity: cool it down, fall forward */
  | { kind: "supplier_exhausted"; status?: number; detail: string }
  /** upstream 401/403: the key is bad: mark it, fall forward */
  | { kind: "supplier_auth"; status?: number; detail: string };

export interface Usage {
  promptTokens: number;
  completionTokens: number;
  cachedTokens?: number;
}

export interface Settled {
  costMicroUsdc: bigint;
  clearingPriceCents: number;
  burnMicroDiem: bigint;
  balanceRemainingMicroUsdc: bigint;
  supportReference: string;
  requestId: string;
}

export interface RouterDeps {
  db: Db;
  /** pg pool for the hot path (stored functions; see migration router_functions) */
  sql: Sql;
  config: Config;
  clock: Clock;
  bus: EventBus;
  gate: Gate;
  keys: RedisKeys;
  secrets: SecretBox;
  resolveModel: (id: string) => Promise<RoutableModel>;
  /** after an upstream 402: refresh the key's balance (best effort, async) */
  onKeyExhausted?: (upstreamKeyId: string) => Promise<void>;
}

/**
 * The router (SPEC "What the service does" 3–6): clears each request against the cheapest eligible
 * offer under the buyer's ceiling, holds the buyer's maximum charge and the offer's maximum burn at
 * admission (so concurrent requests can never overdraw a balance or oversell an offer, across every
 * process), falls forward across up to five supplier keys, and settles the exact amount in one
 * transaction. Every hold is released on every path; holds of a dead process expire.
 */
export class RouterService {
  private readonly keyCache = new Map<string, { secret: string; at: number }>();
  /** each account's ceiling as last seen here (svc_clear refuses a stale one) */
  private readonly ceilings = new Map<string, number>();
  private readonly run;
  private readonly clears: Batcher<ClearItem, ClearRow>;
  private readonly settlements: Batcher<SettleItem, bigint>;

  constructor(private readonly deps: RouterDeps) {
    this.run = sqlRunner(deps.sql);
    const clearBatch = async (items: ClearItem[]) => {
      const r = await deps.sql.query<ClearRow & { idx: number }>("SELECT * FROM svc_clear_batch($1::jsonb)", [
        JSON.stringify(items),
      ]);
      return byIndex(r.rows, items.length);
    };
    // alone, a request takes the plain functions (no batch wrapper to pay for)
    const clearOne = async (i: ClearItem) => {
      const r = await deps.sql.query<ClearRow>(
        `SELECT * FROM svc_clear($1::boolean, $2::uuid, $3::uuid, $4::uuid, $5::uuid, $6::inference_route, $7::text,
                                 $8::boolean, $9::int, $10::int, $11::bigint, $12::timestamptz, $13::timestamptz,
                                 $14::bigint, $15::uuid[], $16::int, $17::timestamptz, $18::int)`,
        [
          i.first,
          i.request,
          i.support,
          i.account,
          i.apiKey,
          i.route,
          i.model,
          i.stream,
          i.ceiling,
          i.admitted,
          i.maxCharge,
          i.started,
          i.expires,
          i.maxBurn,
          i.exclude.length > 0 ? i.exclude : null,
          i.ordinal,
          i.now,
          i.keyLimit,
        ],
      );
      const row = r.rows[0];
      if (!row) throw new Error("svc_clear returned nothing");
      return row;
    };
    this.clears = new Batcher(clearBatch, clearOne, BATCH);
    const settleBatch = async (items: SettleItem[]) => {
      const r = await deps.sql.query<{ idx: number; confirmed: bigint }>("SELECT * FROM svc_settle_batch($1::jsonb)", [
        JSON.stringify(items),
      ]);
      return byIndex(r.rows, items.length).map((row) => BigInt(row.confirmed));
    };
    const settleOne = async (i: SettleItem) => {
      const r = await deps.sql.query<{ confirmed: bigint }>(
        `SELECT svc_settle($1::uuid, $2::uuid, $3::bigint, $4::bigint, $5::bigint, $6::bigint, $7::uuid, $8::uuid,
                           $9::uuid, $10::bigint, $11::bigint, $12::uuid, $13::text, $14::int, $15::int, $16::int,
                           $17::int, $18::int, $19::boolean, $20::int, $21::timestamptz, $22::timestamptz) AS confirmed`,
        [
          i.request,
          i.account,
          i.max_charge,
          i.gross,
          i.fee,
          i.share,
          i.offer,
          i.key,
          i.supplier,
          i.max_burn,
          i.burn,
          i.clear,
          i.model,
          i.price,
          i.ceiling,
          i.prompt,
          i.completion,
          i.cached,
          i.incomplete,
          i.ordinal,
          i.first_byte,
          i.now,
        ],
      );
      return BigInt(r.rows[0]?.confirmed ?? 0n);
    };
    this.settlements = new Batcher(settleBatch, settleOne, BATCH);
  }

  /** Group-commit figures (batches, items, fallbacks) for holds and settlements. */
  batchStats() {
    return { clears: { ...this.clears.stats }, settlements: { ...this.settlements.stats } };
  }

  /**
   * Admits a request: resolves the model (404/400), takes the buyer key's in-flight slot (429),
   * plans the completion cap and the maximum charge (402), and holds the first offer (503s).
   * The request record (support reference) exists from the first routing decision on.
   */
  async open(input: OpenInput): Promise<RoutingSession> {
    const start = performance.now();
    const model = await this.deps.resolveModel(input.model);
    if (model.modality !== "text") {
      throw new DomainError(
        "unsupported_modality",
        `${model.id} is a ${model.modality} model; it cannot be called through ${input.route === "chat" ? "chat completions" : "responses"}.`,
      );
    }
    if (model.status !== "live") {
      throw new DomainError(
        "model_not_live",
        `${model.id} is listed but not live yet (coming_soon); pick a live model from /v1/models.`,
      );
    }
    const requestId = randomUUID();
    const buyerLease = requestId;
    const gateKey = this.deps.keys.apiKeyInFlight(input.apiKeyId);
    const admitted = await this.deps.gate.tryAcquire(
      gateKey,
      buyerLease,
      this.deps.config.limits.keyMaxInFlight,
      REQUEST_LEASE_MS,
    );
    if (!admitted) {
      throw new DomainError("key_concurrency_limit", "Too many completions in flight on this API key.", {
        retryAfterSeconds: 1,
      });
    }
    // SPEC 11: frontier models are the promoted tier; small-model volume may be throttled
    const smallLimit = this.deps.config.limits.smallModelMaxInFlight;
    const throttled = model.tier === "small" && smallLimit > 0;
    if (
      throttled &&
      !(await this.deps.gate.tryAcquire(this.deps.keys.smallModelGate(), buyerLease, smallLimit, REQUEST_LEASE_MS))
    ) {
      await this.deps.gate.release(gateKey, buyerLease).catch(() => undefined);
      throw new DomainError(
        "model_throttled",
        `${model.id} is a small model and its volume is throttled right now; retry shortly or use a frontier model.`,
        {
          retryAfterSeconds: 1,
        },
      );
    }
    try {
      // the ceiling as last seen by this process (svc_clear verifies it); the balance is unknown,
      // so the first plan is uncapped and svc_clear checks the real balance atomically
      const ceiling = this.ceilings.get(input.accountId) ?? (await this.readCeiling(input.accountId));
      const session: RoutingSession = {
        requestId,
        supportReference: randomUUID(),
        accountId: input.accountId,
        apiKeyId: input.apiKeyId,
        route: input.route,
        model,
        stream: input.stream,
        ceilingCents: ceiling,
        plan: {
          promptEstimate: input.promptEstimate,
          admittedMaxTokens: 0,
          maxBurnMicroDiem: 0n,
          maxChargeMicroUsdc: 0n,
        },
        tried: [],
        ordinals: 0,
        attempt: null,
        recorded: false,
        buyerLease,
        startedAt: this.deps.clock.now(),
        firstByteAt: null,
        done: false,
        requestedMaxTokens: input.requestedMaxTokens,
        plans: 0,
        timing: { start },
      };
      this.plan(session, UNLIMITED);
      await this.nextAttempt(session);
      session.timing.admitMs = performance.now() - start;
      return session;
    } catch (e) {
      await this.deps.gate.release(gateKey, buyerLease).catch(() => undefined);
      if (throttled) await this.deps.gate.release(this.deps.keys.smallModelGate(), buyerLease).catch(() => undefined);
      throw e;
    }
  }

  /**
   * Holds the next cheapest eligible offer on a key not tried yet. Waits up to KEY_WAIT_MS for a busy
   * supplier key. On the first call it also writes the request record and the buyer's hold.
   * @throws 503 pool_empty / no_eligible_supply / insufficient_routable_at_price / key_wait_timeout,
   *   402 insufficient_balance, 502 upstream_error when fall-forward is exhausted
   */
  async nextAttempt(session: RoutingSession): Promise<Attempt> {
    if (session.tried.length >= MAX_ATTEMPTS) {
      throw await this.fail(
        session,
        new DomainError(
          "upstream_error",
          `The upstream could not complete the request after ${MAX_ATTEMPTS} supplier keys; safe to retry.`,
        ),
      );
    }
    const deadline = Date.now() + KEY_WAIT_MS;
    let busy: string[] = [];
    for (;;) {
      const now = this.deps.clock.now();
      const ordinal = session.ordinals + 1;
      const r = await this.clearOffer(session, [...session.tried, ...busy], ordinal, now);
      if (r.outcome === "key_inactive") {
        throw new DomainError("authentication_failed", "Invalid or revoked API key.");
      }
      if (r.outcome === "stale_ceiling" || r.outcome === "insufficient_balance") {
        // planned with a stale ceiling or more than the balance affords: plan again with the
        // account's values as svc_clear just read them
        if (r.ceiling !== null) {
          this.ceilings.set(session.accountId, Number(r.ceiling));
          session.ceilingCents = Number(r.ceiling);
        }
        if ((session.plans ?? 0) >= MAX_PLANS || !this.plan(session, BigInt(r.available ?? 0n))) {
          throw await this.fail(session, this.insufficientBalance(session));
        }
        continue;
      }
      if (r.outcome !== "ok" || !r.offer_id || !r.upstream_key_id || !r.supplier_id || r.price === null) {
        if (busy.length === 0 && r.outcome !== "keys_busy") {
          throw await this.fail(session, await this.noSupply(session));
        }
        if (Date.now() > deadline) {
          throw await this.fail(
            session,
            new DomainError("key_wait_timeout", "Timed out waiting for a free upstream key; retry.", {
              retryAfterSeconds: 1,
            }),
          );
        }
        busy = [];
        await new Promise((res) => setTimeout(res, 25));
        continue;
      }
      session.ordinals = ordinal;
      const leaseId = `${session.requestId}:${ordinal}`;
      const keyGate = this.deps.keys.upstreamKeyInFlight(r.upstream_key_id);
      if (!(await this.deps.gate.tryAcquire(keyGate, leaseId, SUPPLIER_KEY_MAX_IN_FLIGHT, REQUEST_LEASE_MS))) {
        // the key is at its in-flight limit: give the hold back and look at the next offer
        await this.releaseAttemptRow(session, r.offer_id, r.upstream_key_id, ordinal, null, "key_busy");
        busy.push(r.upstream_key_id);
        continue;
      }
      const secret = this.openSecret(r.upstream_key_id, {
        accountId: r.supplier_id,
        secretCiphertext: r.ciphertext ?? new Uint8Array(),
        secretIv: r.iv ?? new Uint8Array(),
        secretTag: r.tag ?? new Uint8Array(),
        encryptionKeyId: r.enc_key_id ?? "",
      });
      session.tried.push(r.upstream_key_id);
      session.attempt = {
        ordinal,
        offerId: r.offer_id,
        upstreamKeyId: r.upstream_key_id,
        supplierAccountId: r.supplier_id,
        priceCentsPerDollar: Number(r.price),
        secret,
        keyBalanceMicroDiem: r.key_balance === null ? null : BigInt(r.key_balance),
        leaseId,
      };
      return session.attempt;
    }
  }

  /**
   * The current attempt failed before anything reached the buyer: release its offer hold and key
   * slot, record why, act on the key (cooldown, auth mark), and hold the next offer.
   */
  async fallForward(session: RoutingSession, failure: AttemptFailure): Promise<Attempt> {
    await this.endAttempt(session, failure);
    return this.nextAttempt(session);
  }

  /**
   * Settles a completion in one transaction: buyer debit from confirmed funds (holds released),
   * supplier credit (share), platform fee, offer remaining decreased (depleted at zero), the clear,
   * the request and attempt records. Burn = usage × the catalog's pricing, never above the admitted
   * maximum. If it does not commit: every hold is released, nothing is charged, 500 settle_failed.
   */
  async settle(session: RoutingSession, usage: Usage, opts: { incomplete?: boolean } = {}): Promise<Settled> {
    const attempt = session.attempt;
    if (!attempt || session.done) throw new DomainError("internal_error", "settle without an attempt");
    let burn = burnMicroDiem(session.model.pricing, usage);
    if (burn > session.plan.maxBurnMicroDiem) burn = session.plan.maxBurnMicroDiem;
    if (opts.incomplete && attempt.keyBalanceMicroDiem !== null && burn > attempt.keyBalanceMicroDiem) {
      burn = attempt.keyBalanceMicroDiem; // SPEC Events 6: capped at the supplier's pre-call balance
    }
    const charge = computeCharge(burn, attempt.priceCentsPerDollar, this.deps.config.fees.platformFeeBps);
    const now = this.deps.clock.now();
    const clearId = randomUUID();
    const settleStart = performance.now();
    let balance: bigint;
    try {
      balance = await this.settlements.submit({
        request: session.requestId,
        account: session.accountId,
        max_charge: session.plan.maxChargeMicroUsdc.toString(),
        gross: charge.grossMicroUsdc.toString(),
        fee: charge.feeMicroUsdc.toString(),
        share: charge.supplierMicroUsdc.toString(),
        offer: attempt.offerId,
        key: attempt.upstreamKeyId,
        supplier: attempt.supplierAccountId,
        max_burn: session.plan.maxBurnMicroDiem.toString(),
        burn: burn.toString(),
        clear: clearId,
        journal: randomUUID(),
        model: session.model.id,
        price: attempt.priceCentsPerDollar,
        ceiling: session.ceilingCents,
        prompt: usage.promptTokens,
        completion: usage.completionTokens,
        cached: usage.cachedTokens ?? 0,
        incomplete: opts.incomplete === true,
        ordinal: attempt.ordinal,
        first_byte: session.firstByteAt?.toISOString() ?? null,
        now: now.toISOString(),
      });
    } catch (e) {
      logger.error({ err: e, requestId: session.requestId }, "settlement did not commit");
      throw await this.fail(
        session,
        new DomainError("settle_failed", "Settlement did not commit; nothing was charged. Safe to retry.", {
          supportReference: session.supportReference,
        }),
      );
    }
    session.done = true;
    session.timing.settleMs = performance.now() - settleStart;
    void this.releaseSlots(session); // leases expire anyway: never make the buyer wait on Redis
    this.deps.bus.publish("clearRecorded", {
      at: now.toISOString(),
      model: session.model.id,
      modality: "text",
      priceCentsPerDollar: attempt.priceCentsPerDollar,
      burnMicroDiem: burn,
      grossMicroUsdc: charge.grossMicroUsdc,
    });
    this.deps.bus.publish("balanceChanged", session.accountId, {
      accountId: session.accountId,
      kind: "clear",
      at: now.toISOString(),
    });
    this.deps.bus.publish("earningsChanged", attempt.supplierAccountId, {
      accountId: attempt.supplierAccountId,
      kind: "clear",
      at: now.toISOString(),
    });
    return {
      costMicroUsdc: charge.grossMicroUsdc,
      clearingPriceCents: attempt.priceCentsPerDollar,
      burnMicroDiem: burn,
      balanceRemainingMicroUsdc: balance,
      supportReference: session.supportReference,
      requestId: session.requestId,
    };
  }

  /**
   * Ends a request without a charge (the buyer's 4xx relayed from the upstream, a client abort before
   * any content, an unexpected error): every hold and slot is released; the record says why.
   */
  async abort(
    session: RoutingSession,
    errorCode: string,
    outcome: "request_rejected" | "aborted" = "aborted",
  ): Promise<void> {
    if (session.done) return;
    session.done = true;
    const now = this.deps.clock.now();
    try {
      await this.deps.sql.query(
        "SELECT svc_abort($1::uuid, $2::uuid, $3::int, $4::attempt_outcome, $5::text, $6::int, $7::timestamptz)",
        [
          session.requestId,
          session.accountId,
          session.attempt?.ordinal ?? null,
          outcome,
          errorCode,
          session.tried.length,
          now,
        ],
      );
    } catch (e) {
      logger.error({ err: e, requestId: session.requestId }, "could not release holds; the sweeper will");
    }
    await this.releaseSlots(session);
  }

  private async readCeiling(accountId: string): Promise<number> {
    const rows = await this.deps.sql.query<{ ceiling: number }>(
      "SELECT max_price_cents_per_dollar AS ceiling FROM accounts WHERE id = $1",
      [accountId],
    );
    const row = rows.rows[0];
    if (!row) throw new DomainError("authentication_failed", "Account not found.");
    if (this.ceilings.size >= 100_000) this.ceilings.clear();
    this.ceilings.set(accountId, Number(row.ceiling));
    return Number(row.ceiling);
  }

  /** (Re-)plans the completion cap and the maximum charge; false when even the minimum is unaffordable. */
  private plan(session: RoutingSession, availableMicroUsdc: bigint): boolean {
    session.plans = (session.plans ?? 0) + 1;
    const plan = planAdmission({
      pricing: session.model.pricing,
      promptEstimate: session.plan.promptEstimate,
      requestedMaxTokens: session.requestedMaxTokens,
      modelMaxCompletionTokens: session.model.maxCompletionTokens,
      ceilingCents: session.ceilingCents,
      availableMicroUsdc,
    });
    if (!plan) return false;
    session.plan = plan;
    return true;
  }

  /**
   * Keeps a long-running request's holds and slots alive: pushes its reservation's expiry and its
   * gate leases REQUEST_LEASE_MS ahead. Cheap to call often; does work at most every RENEW_EVERY_MS.
   */
  async renew(session: RoutingSession, force = false): Promise<void> {
    const now = Date.now();
    if (session.done || (!force && now - (session.renewedAt ?? session.startedAt.getTime()) < RENEW_EVERY_MS)) return;
    session.renewedAt = now;
    const expires = new Date(this.deps.clock.now().getTime() + REQUEST_LEASE_MS);
    await this.deps.sql.query("UPDATE reservations SET expires_at = $2 WHERE id = $1", [session.requestId, expires]);
    await this.deps.gate.renew(this.deps.keys.apiKeyInFlight(session.apiKeyId), session.buyerLease, REQUEST_LEASE_MS);
    if (session.attempt) {
      await this.deps.gate.renew(
        this.deps.keys.upstreamKeyInFlight(session.attempt.upstreamKeyId),
        session.attempt.leaseId,
        REQUEST_LEASE_MS,
      );
    }
  }

  /** Marks the first byte sent to the buyer (timings). */
  markFirstByte(session: RoutingSession): void {
    session.firstByteAt ??= this.deps.clock.now();
    const t = session.timing;
    if (t.upstreamMs === undefined) t.upstreamMs = performance.now() - t.start - (t.admitMs ?? 0);
  }

  /**
   * Sweeper (worker): releases the holds of requests whose process died (expired reservations) and
   * marks those requests failed. Idempotent.
   */
  async releaseExpiredHolds(): Promise<{ released: number }> {
    const r = await this.deps.sql.query<{ released: number }>(
      "SELECT svc_release_expired($1::timestamptz, $2::int) AS released",
      [this.deps.clock.now(), SWEEP_LIMIT],
    );
    return { released: Number(r.rows[0]?.released ?? 0) };
  }

  // ─────────────────────────────── internals ───────────────────────────────

  /**
   * One hold (`svc_clear`, group-committed with the other requests waiting): on the first attempt,
   * check the Bearer key is still active, record the request and hold the buyer's maximum charge;
   * then select the cheapest eligible offer deep enough for this request on a key not excluded,
   * lock it and hold its maximum burn; record the attempt.
   */
  private async clearOffer(session: RoutingSession, exclude: string[], ordinal: number, now: Date): Promise<ClearRow> {
    const row = await this.clears.submit({
      first: !session.recorded,
      request: session.requestId,
      support: session.supportReference,
      account: session.accountId,
      apiKey: session.apiKeyId,
      route: session.route,
      model: session.model.id,
      stream: session.stream,
      ceiling: session.ceilingCents,
      admitted: session.plan.admittedMaxTokens,
      maxCharge: session.plan.maxChargeMicroUsdc.toString(),
      started: session.startedAt.toISOString(),
      expires: new Date(now.getTime() + REQUEST_LEASE_MS).toISOString(),
      maxBurn: session.plan.maxBurnMicroDiem.toString(),
      exclude,
      ordinal,
      now: now.toISOString(),
      keyLimit: SUPPLIER_KEY_MAX_IN_FLIGHT,
    });
    if (row.outcome === "ok" || row.outcome === "no_offer" || row.outcome === "keys_busy") session.recorded = true;
    return row;
  }

  private openSecret(
    upstreamKeyId: string,
    k: {
      accountId: string;
      secretCiphertext: Uint8Array;
      secretIv: Uint8Array;
      secretTag: Uint8Array;
      encryptionKeyId: string;
    },
  ): string {
    const hit = this.keyCache.get(upstreamKeyId);
    if (hit && Date.now() - hit.at < KEY_CACHE_MS) return hit.secret;
    const secret = this.deps.secrets.open(
      {
        ciphertext: new Uint8Array(k.secretCiphertext),
        iv: new Uint8Array(k.secretIv),
        tag: new Uint8Array(k.secretTag),
        keyId: k.encryptionKeyId,
      },
      k.accountId,
    );
    this.keyCache.set(upstreamKeyId, { secret, at: Date.now() });
    return secret;
  }

  /** A request refused before any hold: recorded so its support reference resolves. */
  private async recordRefusal(session: RoutingSession, errorCode: string): Promise<void> {
    const now = this.deps.clock.now();
    await this.deps.sql.query(
      `INSERT INTO inference_requests (id, support_reference, account_id, api_key_id, route, modality, model, stream, status,
                                       error_code, max_price_cents, admitted_max_tokens, started_at, completed_at)
       VALUES ($1, $2, $3, $4, $5::inference_route, 'text', $6, $7, 'failed', $8, $9, $10, $11, $12)`,
      [
        session.requestId,
        session.supportReference,
        session.accountId,
        session.apiKeyId,
        session.route,
        session.model.id,
        session.stream,
        errorCode,
        session.ceilingCents,
        session.plan.admittedMaxTokens || null,
        session.startedAt,
        now,
      ],
    );
    session.recorded = true;
    session.done = true;
  }

  /** Records the failure of the whole request (releasing holds) and returns the error to throw. */
  private async fail(session: RoutingSession, err: DomainError): Promise<DomainError> {
    if (!session.recorded) {
      await this.recordRefusal(session, err.code).catch((e) => logger.error({ err: e }, "could not record a refusal"));
    } else if (!session.done) {
      if (session.attempt) await this.endAttempt(session, null).catch(() => undefined);
      await this.abort(session, err.code);
    }
    err.details.supportReference ??= session.supportReference;
    return err;
  }

  /** Releases the current attempt's offer hold and key slot; records its outcome; acts on the key. */
  private async endAttempt(session: RoutingSession, failure: AttemptFailure | null): Promise<void> {
    const a = session.attempt;
    if (!a) return;
    session.attempt = null;
    await this.releaseAttemptRow(session, a.offerId, a.upstreamKeyId, a.ordinal, failure, null);
    await this.deps.gate.release(this.deps.keys.upstreamKeyInFlight(a.upstreamKeyId), a.leaseId).catch(() => undefined);
    if (failure?.kind === "supplier_exhausted" && this.deps.onKeyExhausted) {
      this.deps.onKeyExhausted(a.upstreamKeyId).catch(() => undefined);
    }
    if (failure?.kind === "supplier_auth") this.keyCache.delete(a.upstreamKeyId);
  }

  /** `svc_end_attempt`: the attempt's offer hold back, its outcome recorded, the key acted on. */
  private async releaseAttemptRow(
    session: RoutingSession,
    offerId: string,
    upstreamKeyId: string,
    ordinal: number,
    failure: AttemptFailure | null,
    note: string | null,
  ): Promise<void> {
    const now = this.deps.clock.now();
    const outcome =
      failure === null
        ? "aborted"
        : failure.kind === "retryable"
          ? "retryable_failure"
          : failure.kind === "supplier_exhausted"
            ? "supplier_exhausted"
            : "supplier_auth_failed";
    await this.deps.sql.query(
      `SELECT svc_end_attempt($1::uuid, $2::uuid, $3::bigint, $4::int, $5::attempt_outcome, $6::int, $7::text, $8::uuid,
                              $9::timestamptz, $10::boolean, $11::timestamptz)`,
      [
        session.requestId,
        offerId,
        session.plan.maxBurnMicroDiem.toString(),
        ordinal,
        outcome,
        failure?.status ?? null,
        failure ? failure.detail.slice(0, 200) : note,
        upstreamKeyId,
        failure?.kind === "supplier_exhausted" ? new Date(now.getTime() + EXHAUSTED_COOLDOWN_MS) : null,
        failure?.kind === "supplier_auth",
        now,
      ],
    );
  }

  private async releaseSlots(session: RoutingSession): Promise<void> {
    const jobs = [this.deps.gate.release(this.deps.keys.apiKeyInFlight(session.apiKeyId), session.buyerLease)];
    if (session.model.tier === "small" && this.deps.config.limits.smallModelMaxInFlight > 0) {
      jobs.push(this.deps.gate.release(this.deps.keys.smallModelGate(), session.buyerLease));
    }
    if (session.attempt) {
      jobs.push(
        this.deps.gate.release(
          this.deps.keys.upstreamKeyInFlight(session.attempt.upstreamKeyId),
          session.attempt.leaseId,
        ),
      );
    }
    await Promise.allSettled(jobs);
  }

  private insufficientBalance(session: RoutingSession): DomainError {
    return new DomainError(
      "insufficient_balance",
      "Confirmed USDC balance is too low for this request (pending top-ups do not count). Fund the account first.",
      { supportReference: session.supportReference },
    );
  }

  /** Why nothing can clear this request (SPEC "Errors" 503 codes). */
  private async noSupply(session: RoutingSession): Promise<DomainError> {
    const now = this.deps.clock.now();
    const atCeiling = await eligibleOffers(this.run, { now, maxPriceCents: session.ceilingCents });
    if (atCeiling.length > 0) {
      const total = atCeiling.reduce((a, o) => a + o.routableMicroDiem, 0n);
      const largest = maxBig(0n, ...atCeiling.map((o) => o.routableMicroDiem));
      const untried = atCeiling.filter((o) => !session.tried.includes(o.upstreamKeyId));
      if (session.tried.length > 0 && untried.every((o) => o.routableMicroDiem < session.plan.maxBurnMicroDiem)) {
        return new DomainError(
          "upstream_error",
          "The upstream could not complete the request on any eligible key; safe to retry.",
        );
      }
      return new DomainError(
        "insufficient_routable_at_price",
        "Offers at or below your ceiling lack the routable DIEM for this request; send a smaller request or retry later.",
        { eligibleRoutableDiem: formatDecimal6(total), maxEligibleOfferDiem: formatDecimal6(largest) },
      );
    }
    const all = await eligibleOffers(this.run, { now, maxPriceCents: 80 });
    if (all.length === 0)
      return new DomainError("pool_empty", "Nothing is posted at any price right now; retry later.", {
        retryAfterSeconds: 30,
      });
    const fits = all.filter((o) => o.routableMicroDiem >= session.plan.maxBurnMicroDiem);
    const cheapest = (fits[0] ?? all[0])?.priceCentsPerDollar ?? null;
    return new DomainError(
      "no_eligible_supply",
      `Supply exists but every posted price is above your ceiling of ${session.ceilingCents}; set maxPriceCentsPerDollar to ${cheapest} and retry.`,
      {
        buyerMaxCents: session.ceilingCents,
        cheapestPostedCents: cheapest,
        routableDiemAboveMax: formatDecimal6(all.reduce((a, o) => a + o.routableMicroDiem, 0n)),
      },
    );
  }
}

/** The arguments of one `svc_clear` (JSON: bigints as strings, times as ISO strings). */
interface ClearItem {
  first: boolean;
  request: string;
  support: string;
  account: string;
  apiKey: string;
  route: RouteKind;
  model: string;
  stream: boolean;
  ceiling: number;
  admitted: number;
  maxCharge: string;
  started: string;
  expires: string;
  maxBurn: string;
  exclude: string[];
  ordinal: number;
  now: string;
  keyLimit: number;
}

interface ClearRow {
  outcome: "ok" | "insufficient_balance" | "stale_ceiling" | "key_inactive" | "keys_busy" | "no_offer";
  offer_id: string | null;
  upstream_key_id: string | null;
  supplier_id: string | null;
  price: number | null;
  key_balance: bigint | null;
  ciphertext: Buffer | null;
  iv: Buffer | null;
  tag: Buffer | null;
  enc_key_id: string | null;
  available: bigint | null;
  ceiling: number | null;
}

/** One completion to settle (fields of the SQL type `svc_settle_item`). */
interface SettleItem {
  request: string;
  account: string;
  max_charge: string;
  gross: string;
  fee: string;
  share: string;
  offer: string;
  key: string;
  supplier: string;
  max_burn: string;
  burn: string;
  clear: string;
  journal: string;
  model: string;
  price: number;
  ceiling: number;
  prompt: number;
  completion: number;
  cached: number;
  incomplete: boolean;
  ordinal: number;
  first_byte: string | null;
  now: string;
}

/** Batch rows back in item order; exactly one per item. */
function byIndex<T extends { idx: number }>(rows: T[], n: number): T[] {
  const out = new Array<T>(n);
  for (const row of rows) out[Number(row.idx)] = row;
  for (let i = 0; i < n; i++) if (!out[i]) throw new Error(`batch row ${i} missing`);
  return out;
}
