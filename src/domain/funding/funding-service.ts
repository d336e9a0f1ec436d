import type { Hex } from "viem";
import type { Db } from "../../adapters/db.js";
import type { Facilitator } from "../../adapters/facilitator/types.js";
import type { EventBus } from "../../adapters/pubsub.js";
import type { Fuse } from "../../adapters/redis/fuse.js";
import type { Config } from "../../config.js";
import { Prisma } from "../../generated/prisma/client.js";
import type { Clock } from "../../lib/clock.js";
import { DomainError } from "../../lib/errors.js";
import { logger } from "../../lib/logger.js";
import type { ApiKeyService } from "../keys/api-key-service.js";
import {
  DESCRIPTIONS,
  type FundingKind,
  type FundingOutcome,
  type FundingRequest,
  fundedOutcome,
  type ParsedBody,
  parseFundingBody,
} from "./funding-request.js";
import { type Recorded, recordSettlement } from "./settlement-record.js";
import {
  buildRequirements,
  type DecodedPayment,
  decodePaymentHeader,
  mismatch,
  paymentResponseHeader,
} from "./x402.js";

/** How long a duplicate submission waits for the in-flight one to finish before answering 409. */
const DUPLICATE_WAIT_MS = 15_000;

export interface ReconciliationQueue {
  enqueue(paymentId: string): Promise<void>;
}

type PaymentRow = Prisma.PaymentGetPayload<{ include: { account: true } }>;

/**
 * Prepaid funding through x402 `exact` (SPEC "Funding flow"). Money that moved on chain is credited
 * exactly once: a write-ahead `settling` row (unique authorization nonce) precedes the settlement,
 * the credit commits in one transaction with the settlement hash (unique), and reconciliation
 * finishes whatever a crash or a database failure left behind.
 */
export class FundingService {
  constructor(
    private readonly deps: {
      db: Db;
      config: Config;
      clock: Clock;
      bus: EventBus;
      facilitator: Facilitator;
      apiKeys: ApiKeyService;
      fuse: Fuse;
      reconciliation: ReconciliationQueue;
    },
  ) {}

  /** CONFIRMATION_BLOCKS: depth before pending credit is confirmed. */
  get confirmationBlocks(): number {
    return this.deps.config.chain.confirmationBlocks;
  }

  /**
   * One call of a funding route. Without `X-PAYMENT`: the 402 challenge (no facilitator call, no
   * writes). With it: verify, settle, credit pending.
   * @throws invalid_request (400), payer_mismatch (403), payment_unfinished (409), signup_fuse (429),
   *   not_configured (503) when PAY_TO is unset; 402 challenges come back as outcomes.
   */
  async fund(req: FundingRequest): Promise<FundingOutcome> {
    const body = parseFundingBody(req.kind, req.body);
    const payTo = this.deps.config.chain.payTo;
    if (!payTo) throw new DomainError("not_configured", "Funding is not configured (PAY_TO is unset).");
    const requirements = buildRequirements({
      amountMicroUsdc: body.amountMicroUsdc,
      resource: req.resource,
      description: DESCRIPTIONS[req.kind],
      payTo,
      asset: this.deps.config.chain.usdcAddress,
      usdcName: this.deps.config.chain.usdcName,
      usdcVersion: this.deps.config.chain.usdcVersion,
    });
    const challenge = (error: string, code = "payment_required"): FundingOutcome => ({
      type: "challenge",
      status: 402,
      body: {
        x402Version: 1,
        error: { code, message: error },
        accepts: [requirements],
        amountMicroUsdc: Number(body.amountMicroUsdc),
      },
    });
    if (!req.paymentHeader)
      return challenge("Payment required: sign the requirement in `accepts` and retry with X-PAYMENT.");

    const decoded = decodePaymentHeader(req.paymentHeader);
    if (!decoded) return challenge("X-PAYMENT is not a valid x402 exact payment payload.", "invalid_payment");
    const wrong = mismatch(decoded, requirements);
    if (wrong) return challenge(`X-PAYMENT does not match this challenge: ${wrong}.`, "invalid_payment");

    // SPEC rule 5: the payer must be the caller's wallet, checked before settlement
    if (req.caller && decoded.payer !== req.caller.walletAddress.toLowerCase()) {
      throw new DomainError(
        "payer_mismatch",
        req.kind === "top_up"
          ? "The payment is signed by another wallet than the signed-in one."
          : "The payment is signed by another wallet than the one behind this API key.",
      );
    }

    // a settlement already seen: answer from the record, never settle twice
    const existing = await this.findPayment(decoded.nonce);
    if (existing && existing.status !== "failed") {
      return (
        (await this.answerExisting(req.kind, existing, decoded)) ??
        challenge("This payment failed; sign a new one.", "invalid_payment")
      );
    }

    if (req.kind === "signup") {
      const fuse = await this.deps.fuse.take(this.deps.clock.now());
      if (!fuse.ok) {
        throw new DomainError("signup_fuse", "Too many signups right now; retry after the window resets.", {
          retryAfterSeconds: fuse.retryAfterSeconds,
        });
      }
    }

    const verified = await this.deps.facilitator.verify(decoded.payload, requirements);
    if (!verified.ok) {
      if (verified.failure.kind === "invalid" || verified.failure.kind === "rejected") {
        return challenge(
          `Payment verification failed: ${verified.failure.reason ?? verified.failure.message}.`,
          "invalid_payment",
        );
      }
      throw new DomainError("facilitator_unavailable", "The payment facilitator is unavailable; nothing was charged.", {
        retryAfterSeconds: 5,
      });
    }

    // write-ahead intent: the unique nonce makes concurrent duplicates wait for this one
    const intent = await this.claimIntent(req, decoded, body);
    if (!intent.claimed) {
      return (
        (await this.awaitDuplicate(req.kind, decoded)) ??
        challenge("This payment failed; sign a new one.", "invalid_payment")
      );
    }

    const settled = await this.deps.facilitator.settle(decoded.payload, requirements);
    if (!settled.ok) {
      if (settled.failure.kind === "timeout") {
        // the outcome is unknown: money may have moved. Reconciliation decides from the chain.
        const tx = settled.failure.transaction ?? null;
        await this.markReconciling(intent.paymentId, tx).catch(() => undefined);
        const reconciling = await this.enqueueReconciliation(intent.paymentId, tx);
        throw new DomainError("payment_unfinished", "The settlement did not finish in time; do not pay again.", {
          transaction: tx,
          reconciling,
        });
      }
      await this.deps.db.payment.update({
        where: { id: intent.paymentId },
        data: { status: "failed", failureReason: `${settled.failure.kind}: ${settled.failure.message}`.slice(0, 500) },
      });
      if (settled.failure.kind === "unreachable" || settled.failure.kind === "network") {
        throw new DomainError(
          "facilitator_unavailable",
          "The payment facilitator is unavailable; nothing was charged.",
          {
            retryAfterSeconds: 5,
          },
        );
      }
      return challenge(
        `Payment settlement failed: ${settled.failure.reason ?? settled.failure.message}.`,
        "invalid_payment",
      );
    }

    const txHash = settled.value.transaction.toLowerCase() as Hex;
    const paymentResponse = paymentResponseHeader(txHash, decoded.payer);
    let recorded: Recorded;
    try {
      recorded = await recordSettlement(this.deps, intent.paymentId, txHash, { mintKey: req.kind === "signup" });
    } catch (e) {
      // settled but not recorded (SPEC rule 6): queue reconciliation; money must never be lost
      logger.error({ err: e, paymentId: intent.paymentId, transaction: txHash }, "settled payment not recorded");
      await this.markReconciling(intent.paymentId, txHash).catch(() => undefined);
      const reconciling = await this.enqueueReconciliation(intent.paymentId, txHash);
      throw new DomainError(
        "payment_unfinished",
        "The payment settled but could not be recorded; it will be credited from the chain. Do not pay again.",
        { transaction: txHash, reconciling, paymentResponse },
      );
    }
    return this.respond(req.kind, recorded, { paymentResponse, idempotent: false });
  }

  // ─────────────────────────────── internals ───────────────────────────────

  private findPayment(nonce: string): Promise<PaymentRow | null> {
    return this.deps.db.payment.findUnique({ where: { authorizationNonce: nonce }, include: { account: true } });
  }

  private async claimIntent(
    req: FundingRequest,
    d: DecodedPayment,
    body: ParsedBody,
  ): Promise<{ claimed: true; paymentId: string } | { claimed: false }> {
    const data = {
      kind: req.kind,
      status: "settling" as const,
      accountId: req.caller?.accountId ?? null,
      payerAddress: d.payer,
      payToAddress: d.payTo,
      assetAddress: this.deps.config.chain.usdcAddress.toLowerCase(),
      amountMicroUsdc: d.valueMicroUsdc,
      authorizationNonce: d.nonce,
      validBefore: d.validBefore,
      requestMeta:
        req.kind === "signup"
          ? { keyName: body.keyName, maxPriceCentsPerDollar: body.maxPriceCentsPerDollar }
          : Prisma.JsonNull,
    };
    try {
      const p = await this.deps.db.payment.create({ data });
      return { claimed: true, paymentId: p.id };
    } catch (e) {
      if (!(e instanceof Prisma.PrismaClientKnownRequestError && e.code === "P2002")) throw e;
    }
    // a failed earlier attempt may be retried with the same authorization
    const retried = await this.deps.db.payment.updateMany({
      where: { authorizationNonce: d.nonce, status: "failed" },
      data: { ...data, failureReason: null },
    });
    if (retried.count === 1) {
      const p = await this.deps.db.payment.findUniqueOrThrow({ where: { authorizationNonce: d.nonce } });
      return { claimed: true, paymentId: p.id };
    }
    return { claimed: false };
  }

  /**
   * A concurrent duplicate: wait for the in-flight submission, then answer like a replay.
   * `null` when that submission failed (no money moved: the caller answers 402).
   */
  private async awaitDuplicate(kind: FundingKind, d: DecodedPayment): Promise<FundingOutcome | null> {
    const deadline = Date.now() + DUPLICATE_WAIT_MS;
    for (;;) {
      const p = await this.findPayment(d.nonce);
      if (p && p.status !== "settling") return this.answerExisting(kind, p, d);
      if (Date.now() > deadline) {
        throw new DomainError("payment_unfinished", "This payment is still being settled; do not pay again.", {
          transaction: p?.settlementTxHash ?? null,
          reconciling: true,
        });
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  private async answerExisting(kind: FundingKind, p: PaymentRow, d: DecodedPayment): Promise<FundingOutcome | null> {
    if (p.status === "settling" || p.status === "reconciling") {
      if (p.status === "settling") return this.awaitDuplicate(kind, d);
      throw new DomainError("payment_unfinished", "This payment settled and is being reconciled; do not pay again.", {
        transaction: p.settlementTxHash,
        reconciling: true,
        ...(p.settlementTxHash ? { paymentResponse: paymentResponseHeader(p.settlementTxHash, p.payerAddress) } : {}),
      });
    }
    if (p.status === "failed") return null;
    if (p.kind !== kind) {
      throw new DomainError("conflict", `This payment was already used for ${p.kind.replace("_", "-")}.`, {
        transaction: p.settlementTxHash,
      });
    }
    const account = p.account ?? (await this.deps.db.account.findUniqueOrThrow({ where: { id: p.accountId ?? "" } }));
    const paymentResponse = paymentResponseHeader(p.settlementTxHash ?? "", p.payerAddress);
    return this.respond(
      kind,
      { payment: p, account, key: null, keyCapReached: false, fresh: false },
      { paymentResponse, idempotent: true },
    );
  }

  private respond(kind: FundingKind, r: Recorded, o: { paymentResponse: string; idempotent: boolean }): FundingOutcome {
    return fundedOutcome(kind, r, { ...o, confirmationBlocks: this.deps.config.chain.confirmationBlocks });
  }

  private async markReconciling(paymentId: string, txHash: string | null): Promise<void> {
    await this.deps.db.payment.updateMany({
      where: { id: paymentId, status: "settling" },
      data: { status: "reconciling", ...(txHash ? { settlementTxHash: txHash } : {}) },
    });
  }

  /** Queues reconciliation; `false` (and an operator-facing error log) when even that fails. */
  private async enqueueReconciliation(paymentId: string, txHash: string | null): Promise<boolean> {
    try {
      await this.deps.reconciliation.enqueue(paymentId);
      return true;
    } catch (e) {
      logger.error(
        { err: e, paymentId, transaction: txHash, action: "manual recovery: credit this settlement" },
        "PAYMENT NEEDS MANUAL RECOVERY: settled on chain, not recorded, reconciliation could not be queued",
      );
      return false;
    }
  }
}
