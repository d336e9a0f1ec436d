import { randomUUID } from "node:crypto";
import type { Db } from "../../adapters/db.js";
import type { EventBus } from "../../adapters/pubsub.js";
import type { Gate } from "../../adapters/redis/gates.js";
import type { RedisKeys } from "../../adapters/redis/keys.js";
import type { Config } from "../../config.js";
import { Prisma } from "../../generated/prisma/client.js";
import type { Clock } from "../../lib/clock.js";
import { DomainError } from "../../lib/errors.js";
import { logger } from "../../lib/logger.js";
import { burnMicroDiem, computeCharge, formatDecimal6, type TextPricing } from "../../lib/money.js";
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
/** A key that answered "out of capacity" (upstream 402) is not routed for this long. */
export const EXHAUSTED_COOLDOWN_MS = 60_000;
const KEY_CACHE_MS = 60_000;

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
  attempt: Attempt | null;
  recorded: boolean;
  buyerLease: string;
  startedAt: Date;
  firstByteAt: Date | null;
  done: boolean;
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

  constructor(private readonly deps: RouterDeps) {}

  /**
   * Admits a request: resolves the model (404/400), takes the buyer key's in-flight slot (429),
   * plans the completion cap and the maximum charge (402), and holds the first offer (503s).
   * The request record (support reference) exists from the first routing decision on.
   */
  async open(input: OpenInput): Promise<RoutingSession> {
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
    try {
      const account = await this.deps.db.account.findUniqueOrThrow({
        where: { id: input.accountId },
        select: { confirmedMicroUsdc: true, reservedMicroUsdc: true, maxPriceCentsPerDollar: true },
      });
      const session: RoutingSession = {
        requestId,
        supportReference: randomUUID(),
        accountId: input.accountId,
        apiKeyId: input.apiKeyId,
        route: input.route,
        model,
        stream: input.stream,
        ceilingCents: account.maxPriceCentsPerDollar,
        plan: {
          promptEstimate: input.promptEstimate,
          admittedMaxTokens: 0,
          maxBurnMicroDiem: 0n,
          maxChargeMicroUsdc: 0n,
        },
        tried: [],
        attempt: null,
        recorded: false,
        buyerLease,
        startedAt: this.deps.clock.now(),
        firstByteAt: null,
        done: false,
      };
      const plan = planAdmission({
        pricing: model.pricing,
        promptEstimate: input.promptEstimate,
        requestedMaxTokens: input.requestedMaxTokens,
        modelMaxCompletionTokens: model.maxCompletionTokens,
        ceilingCents: account.maxPriceCentsPerDollar,
        availableMicroUsdc: account.confirmedMicroUsdc - account.reservedMicroUsdc,
      });
      if (!plan) {
        await this.recordRefusal(session, "insufficient_balance");
        throw this.insufficientBalance(session);
      }
      session.plan = plan;
      await this.nextAttempt(session);
      return session;
    } catch (e) {
      await this.deps.gate.release(gateKey, buyerLease).catch(() => undefined);
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
    for (;;) {
      const now = this.deps.clock.now();
      const candidates = await eligibleOffers(this.deps.db, {
        now,
        maxPriceCents: session.ceilingCents,
        minRoutableMicroDiem: session.plan.maxBurnMicroDiem,
        excludeKeyIds: session.tried,
        limit: 10,
      });
      if (candidates.length === 0) throw await this.fail(session, await this.noSupply(session));
      let busy = 0;
      for (const c of candidates) {
        const leaseId = `${session.requestId}:${session.tried.length}`;
        const keyGate = this.deps.keys.upstreamKeyInFlight(c.upstreamKeyId);
        if (!(await this.deps.gate.tryAcquire(keyGate, leaseId, SUPPLIER_KEY_MAX_IN_FLIGHT, REQUEST_LEASE_MS))) {
          busy++;
          continue;
        }
        let held: { secret: string; balance: bigint | null } | null = null;
        try {
          held = await this.holdOffer(session, c.offerId, c.upstreamKeyId, c.priceCentsPerDollar);
        } catch (e) {
          await this.deps.gate.release(keyGate, leaseId).catch(() => undefined);
          throw e;
        }
        if (!held) {
          await this.deps.gate.release(keyGate, leaseId).catch(() => undefined);
          continue; // raced: another request took that depth
        }
        session.tried.push(c.upstreamKeyId);
        session.attempt = {
          ordinal: session.tried.length,
          offerId: c.offerId,
          upstreamKeyId: c.upstreamKeyId,
          supplierAccountId: c.supplierAccountId,
          priceCentsPerDollar: c.priceCentsPerDollar,
          secret: held.secret,
          keyBalanceMicroDiem: held.balance,
          leaseId,
        };
        return session.attempt;
      }
      if (busy === 0 || Date.now() > deadline) {
        throw await this.fail(
          session,
          busy > 0
            ? new DomainError("key_wait_timeout", "Timed out waiting for a free upstream key; retry.", {
                retryAfterSeconds: 1,
              })
            : await this.noSupply(session),
        );
      }
      await new Promise((r) => setTimeout(r, 25));
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
    const journalId = randomUUID();
    let balance: bigint;
    try {
      balance = await this.deps.db.$transaction(async (tx) => {
        // buyer: release the hold, debit the charge (guarded: confirmed funds only)
        const buyer = await tx.$queryRaw<{ confirmed: bigint }[]>`
          UPDATE accounts
             SET reserved_micro_usdc = reserved_micro_usdc - ${session.plan.maxChargeMicroUsdc},
                 confirmed_micro_usdc = confirmed_micro_usdc - ${charge.grossMicroUsdc},
                 updated_at = ${now}
           WHERE id = ${session.accountId}::uuid
             AND reserved_micro_usdc >= ${session.plan.maxChargeMicroUsdc}
             AND confirmed_micro_usdc - ${charge.grossMicroUsdc} >= reserved_micro_usdc - ${session.plan.maxChargeMicroUsdc}
          RETURNING confirmed_micro_usdc AS confirmed`;
        const b = buyer[0];
        if (!b) throw new Error("buyer hold missing or balance short");
        // offer: release the burn hold, consume the burn; depleted at zero
        const offer = await tx.$executeRaw`
          UPDATE offers
             SET reserved_micro_diem = reserved_micro_diem - ${session.plan.maxBurnMicroDiem},
                 remaining_micro_diem = remaining_micro_diem - ${burn},
                 status = CASE WHEN remaining_micro_diem - ${burn} = 0 AND status IN ('active', 'paused') THEN 'depleted'::offer_status ELSE status END,
                 ended_at = CASE WHEN remaining_micro_diem - ${burn} = 0 AND status IN ('active', 'paused') THEN ${now} ELSE ended_at END,
                 updated_at = ${now}
           WHERE id = ${attempt.offerId}::uuid
             AND reserved_micro_diem >= ${session.plan.maxBurnMicroDiem}
             AND remaining_micro_diem >= ${burn}`;
        if (offer !== 1) throw new Error("offer hold missing");
        await tx.$executeRaw`
          UPDATE upstream_keys SET last_balance_micro_diem = GREATEST(last_balance_micro_diem - ${burn}, 0)
           WHERE id = ${attempt.upstreamKeyId}::uuid AND last_balance_micro_diem IS NOT NULL`;
        if (charge.supplierMicroUsdc > 0n) {
          await tx.$executeRaw`
            UPDATE accounts SET supplier_payable_micro_usdc = supplier_payable_micro_usdc + ${charge.supplierMicroUsdc}, updated_at = ${now}
             WHERE id = ${attempt.supplierAccountId}::uuid`;
        }
        await tx.$executeRaw`
          INSERT INTO clears (id, request_id, buyer_account_id, supplier_account_id, offer_id, upstream_key_id, model, modality,
                              price_cents_per_dollar, ceiling_cents, burn_micro_diem, gross_micro_usdc, fee_micro_usdc, supplier_micro_usdc, created_at)
          VALUES (${clearId}::uuid, ${session.requestId}::uuid, ${session.accountId}::uuid, ${attempt.supplierAccountId}::uuid,
                  ${attempt.offerId}::uuid, ${attempt.upstreamKeyId}::uuid, ${session.model.id}, 'text',
                  ${attempt.priceCentsPerDollar}, ${session.ceilingCents}, ${burn}, ${charge.grossMicroUsdc},
                  ${charge.feeMicroUsdc}, ${charge.supplierMicroUsdc}, ${now})`;
        if (charge.grossMicroUsdc > 0n) {
          await tx.$executeRaw`
            INSERT INTO ledger_transactions (id, kind, clear_id, idempotency_key, created_at)
            VALUES (${journalId}::uuid, 'clear', ${clearId}::uuid, ${`clear:${session.requestId}`}, ${now})`;
          const entries = [
            Prisma.sql`(gen_random_uuid(), ${journalId}::uuid, ${session.accountId}::uuid, 'buyer_confirmed', 'buyer_debit', ${-charge.grossMicroUsdc}, ${now})`,
          ];
          if (charge.supplierMicroUsdc > 0n) {
            entries.push(
              Prisma.sql`(gen_random_uuid(), ${journalId}::uuid, ${attempt.supplierAccountId}::uuid, 'supplier_payable', 'supplier_credit', ${charge.supplierMicroUsdc}, ${now})`,
            );
          }
          if (charge.feeMicroUsdc > 0n) {
            entries.push(
              Prisma.sql`(gen_random_uuid(), ${journalId}::uuid, NULL, 'platform_fee', 'platform_fee', ${charge.feeMicroUsdc}, ${now})`,
            );
          }
          await tx.$executeRaw`
            INSERT INTO ledger_entries (id, transaction_id, account_id, book, kind, amount_micro_usdc, created_at)
            VALUES ${Prisma.join(entries)}`;
        }
        await tx.$executeRaw`
          UPDATE inference_requests
             SET status = ${opts.incomplete ? "incomplete" : "succeeded"}::inference_status,
                 clearing_price_cents = ${attempt.priceCentsPerDollar},
                 prompt_tokens = ${usage.promptTokens}, completion_tokens = ${usage.completionTokens},
                 cached_tokens = ${usage.cachedTokens ?? 0}, burn_micro_diem = ${burn}, cost_micro_usdc = ${charge.grossMicroUsdc},
                 attempt_count = ${attempt.ordinal}, first_byte_at = ${session.firstByteAt}, completed_at = ${now},
                 error_code = ${opts.incomplete ? "stream_incomplete" : null}
           WHERE id = ${session.requestId}::uuid`;
        await tx.$executeRaw`
          UPDATE inference_attempts SET outcome = ${opts.incomplete ? "incomplete" : "succeeded"}::attempt_outcome, ended_at = ${now}
           WHERE request_id = ${session.requestId}::uuid AND ordinal = ${attempt.ordinal}`;
        await tx.$executeRaw`DELETE FROM reservations WHERE id = ${session.requestId}::uuid`;
        return BigInt(b.confirmed);
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
    await this.releaseSlots(session);
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
      await this.deps.db.$transaction(async (tx) => {
        await this.releaseHolds(tx, session);
        if (session.attempt) {
          await tx.$executeRaw`
            UPDATE inference_attempts SET outcome = ${outcome}::attempt_outcome, ended_at = ${now}
             WHERE request_id = ${session.requestId}::uuid AND ordinal = ${session.attempt.ordinal}`;
        }
        await tx.$executeRaw`
          UPDATE inference_requests SET status = 'failed', error_code = ${errorCode}, completed_at = ${now}, attempt_count = ${session.tried.length}
           WHERE id = ${session.requestId}::uuid`;
      });
    } catch (e) {
      logger.error({ err: e, requestId: session.requestId }, "could not release holds; the sweeper will");
    }
    await this.releaseSlots(session);
  }

  /** Marks the first byte sent to the buyer (timings). */
  markFirstByte(session: RoutingSession): void {
    session.firstByteAt ??= this.deps.clock.now();
  }

  /**
   * Sweeper (worker): releases the holds of requests whose process died (expired reservations) and
   * marks those requests failed. Idempotent.
   */
  async releaseExpiredHolds(): Promise<{ released: number }> {
    const now = this.deps.clock.now();
    const expired = await this.deps.db.reservation.findMany({ where: { expiresAt: { lt: now } }, take: 500 });
    let released = 0;
    for (const r of expired) {
      const done = await this.deps.db.$transaction(async (tx) => {
        const gone = await tx.$executeRaw`DELETE FROM reservations WHERE id = ${r.id}::uuid AND expires_at < ${now}`;
        if (gone !== 1) return false;
        await tx.$executeRaw`
          UPDATE accounts SET reserved_micro_usdc = reserved_micro_usdc - ${r.maxChargeMicroUsdc} WHERE id = ${r.accountId}::uuid`;
        if (r.offerId && r.maxBurnMicroDiem > 0n) {
          await tx.$executeRaw`
            UPDATE offers SET reserved_micro_diem = reserved_micro_diem - ${r.maxBurnMicroDiem} WHERE id = ${r.offerId}::uuid`;
        }
        await tx.$executeRaw`
          UPDATE inference_requests SET status = 'failed', error_code = 'aborted', completed_at = ${now}
           WHERE id = ${r.id}::uuid AND status = 'in_progress'`;
        return true;
      });
      if (done) released++;
    }
    return { released };
  }

  // ─────────────────────────────── internals ───────────────────────────────

  /**
   * One transaction: (first time) the request record and the buyer's hold; the offer's burn hold
   * (guarded by the eligibility rule itself, so two processes can never oversell it); the attempt.
   * Returns null when the offer no longer has the depth (lost a race).
   */
  private async holdOffer(
    session: RoutingSession,
    offerId: string,
    upstreamKeyId: string,
    price: number,
  ): Promise<{ secret: string; balance: bigint | null } | null> {
    const now = this.deps.clock.now();
    const expires = new Date(now.getTime() + REQUEST_LEASE_MS);
    const maxBurn = session.plan.maxBurnMicroDiem;
    const ordinal = session.tried.length + 1;
    const key = await this.deps.db.$transaction(async (tx) => {
      if (!session.recorded) {
        const held = await tx.$executeRaw`
          UPDATE accounts SET reserved_micro_usdc = reserved_micro_usdc + ${session.plan.maxChargeMicroUsdc}
           WHERE id = ${session.accountId}::uuid
             AND confirmed_micro_usdc - reserved_micro_usdc >= ${session.plan.maxChargeMicroUsdc}`;
        if (held !== 1) throw this.insufficientBalance(session);
        await this.insertRequest(tx, session, "in_progress", null);
        await tx.$executeRaw`
          INSERT INTO reservations (id, account_id, max_charge_micro_usdc, offer_id, max_burn_micro_diem, expires_at)
          VALUES (${session.requestId}::uuid, ${session.accountId}::uuid, ${session.plan.maxChargeMicroUsdc}, NULL, 0, ${expires})`;
      }
      const took = await tx.$queryRaw<{ balance: bigint | null }[]>`
        UPDATE offers o SET reserved_micro_diem = o.reserved_micro_diem + ${maxBurn}
          FROM upstream_keys k
         WHERE o.id = ${offerId}::uuid AND k.id = o.upstream_key_id
           AND o.status = 'active' AND k.status = 'active' AND o.expires_at > ${now}
           AND (k.cooldown_until IS NULL OR k.cooldown_until <= ${now})
           AND LEAST(o.remaining_micro_diem, COALESCE(k.last_balance_micro_diem, o.remaining_micro_diem)) - o.reserved_micro_diem >= ${maxBurn}
        RETURNING k.last_balance_micro_diem AS balance`;
      if (took.length !== 1) return null;
      await tx.$executeRaw`
        UPDATE reservations SET offer_id = ${offerId}::uuid, max_burn_micro_diem = ${maxBurn} WHERE id = ${session.requestId}::uuid`;
      await tx.$executeRaw`
        INSERT INTO inference_attempts (request_id, ordinal, upstream_key_id, offer_id, price_cents)
        VALUES (${session.requestId}::uuid, ${ordinal}, ${upstreamKeyId}::uuid, ${offerId}::uuid, ${price})`;
      const k = await tx.upstreamKey.findUniqueOrThrow({
        where: { id: upstreamKeyId },
        select: { accountId: true, secretCiphertext: true, secretIv: true, secretTag: true, encryptionKeyId: true },
      });
      return { k, balance: took[0]?.balance ?? null };
    });
    session.recorded = true;
    if (!key) return null;
    return {
      secret: this.openSecret(upstreamKeyId, key.k),
      balance: key.balance === null ? null : BigInt(key.balance),
    };
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

  private async insertRequest(
    tx: Prisma.TransactionClient,
    s: RoutingSession,
    status: "in_progress" | "failed",
    errorCode: string | null,
  ) {
    await tx.$executeRaw`
      INSERT INTO inference_requests (id, support_reference, account_id, api_key_id, route, modality, model, stream, status, error_code,
                                      max_price_cents, admitted_max_tokens, started_at, completed_at)
      VALUES (${s.requestId}::uuid, ${s.supportReference}::uuid, ${s.accountId}::uuid, ${s.apiKeyId}::uuid, ${s.route}::inference_route,
              'text', ${s.model.id}, ${s.stream}, ${status}::inference_status, ${errorCode}, ${s.ceilingCents},
              ${s.plan.admittedMaxTokens || null}, ${s.startedAt}, ${status === "failed" ? this.deps.clock.now() : null})`;
  }

  /** A request refused before any hold: recorded so its support reference resolves. */
  private async recordRefusal(session: RoutingSession, errorCode: string): Promise<void> {
    await this.deps.db.$transaction((tx) => this.insertRequest(tx, session, "failed", errorCode));
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
    const now = this.deps.clock.now();
    const outcome =
      failure === null
        ? "aborted"
        : failure.kind === "retryable"
          ? "retryable_failure"
          : failure.kind === "supplier_exhausted"
            ? "supplier_exhausted"
            : "supplier_auth_failed";
    await this.deps.db.$transaction(async (tx) => {
      await tx.$executeRaw`
        UPDATE offers SET reserved_micro_diem = reserved_micro_diem - ${session.plan.maxBurnMicroDiem}
         WHERE id = ${a.offerId}::uuid AND reserved_micro_diem >= ${session.plan.maxBurnMicroDiem}`;
      await tx.$executeRaw`UPDATE reservations SET offer_id = NULL, max_burn_micro_diem = 0 WHERE id = ${session.requestId}::uuid`;
      await tx.$executeRaw`
        UPDATE inference_attempts SET outcome = ${outcome}::attempt_outcome, upstream_status = ${failure?.status ?? null},
               error_kind = ${failure ? failure.detail.slice(0, 200) : null}, ended_at = ${now}
         WHERE request_id = ${session.requestId}::uuid AND ordinal = ${a.ordinal}`;
      if (failure?.kind === "supplier_exhausted") {
        await tx.$executeRaw`
          UPDATE upstream_keys SET cooldown_until = ${new Date(now.getTime() + EXHAUSTED_COOLDOWN_MS)} WHERE id = ${a.upstreamKeyId}::uuid`;
      }
      if (failure?.kind === "supplier_auth") {
        await tx.$executeRaw`
          UPDATE upstream_keys SET status = 'auth_failed', auth_failed_at = ${now} WHERE id = ${a.upstreamKeyId}::uuid AND status = 'active'`;
      }
    });
    await this.deps.gate.release(this.deps.keys.upstreamKeyInFlight(a.upstreamKeyId), a.leaseId).catch(() => undefined);
    if (failure?.kind === "supplier_exhausted" && this.deps.onKeyExhausted) {
      this.deps.onKeyExhausted(a.upstreamKeyId).catch(() => undefined);
    }
    if (failure?.kind === "supplier_auth") this.keyCache.delete(a.upstreamKeyId);
  }

  private async releaseHolds(tx: Prisma.TransactionClient, session: RoutingSession): Promise<void> {
    if (!session.recorded) return;
    const gone = await tx.$queryRaw<{ offer_id: string | null; max_burn: bigint; max_charge: bigint }[]>`
      DELETE FROM reservations WHERE id = ${session.requestId}::uuid
      RETURNING offer_id, max_burn_micro_diem AS max_burn, max_charge_micro_usdc AS max_charge`;
    const r = gone[0];
    if (!r) return; // already released (by settlement or the sweeper)
    await tx.$executeRaw`
      UPDATE accounts SET reserved_micro_usdc = reserved_micro_usdc - ${BigInt(r.max_charge)} WHERE id = ${session.accountId}::uuid`;
    if (r.offer_id && BigInt(r.max_burn) > 0n) {
      await tx.$executeRaw`
        UPDATE offers SET reserved_micro_diem = reserved_micro_diem - ${BigInt(r.max_burn)} WHERE id = ${r.offer_id}::uuid`;
    }
  }

  private async releaseSlots(session: RoutingSession): Promise<void> {
    const jobs = [this.deps.gate.release(this.deps.keys.apiKeyInFlight(session.apiKeyId), session.buyerLease)];
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
    const atCeiling = await eligibleOffers(this.deps.db, { now, maxPriceCents: session.ceilingCents });
    if (atCeiling.length > 0) {
      const total = atCeiling.reduce((a, o) => a + o.routableMicroDiem, 0n);
      const largest = atCeiling.reduce((a, o) => (o.routableMicroDiem > a ? o.routableMicroDiem : a), 0n);
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
    const all = await eligibleOffers(this.deps.db, { now, maxPriceCents: 80 });
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
