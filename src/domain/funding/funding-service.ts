import type { Hex } from "viem";
import type { ChainGateway } from "../../adapters/chain/usdc-gateway.js";
import type { Db } from "../../adapters/db.js";
import { type Facilitator, settleVerdict } from "../../adapters/facilitator/types.js";
import type { EventBus } from "../../adapters/pubsub.js";
import type { Fuse } from "../../adapters/redis/fuse.js";
import type { Config } from "../../config.js";
import { parseFundingRequest } from "../../contract/funding.js";
import type { Clock } from "../../lib/clock.js";
import { DomainError, type HeaderField } from "../../lib/errors.js";
import { logger } from "../../lib/logger.js";
import type { ApiKeyService } from "../keys/api-key-service.js";
import { type ServiceMetadata, serviceMetadata } from "./discovery.js";
import { facilitatorUnavailable, fundingChallenge, sentPayment } from "./funding-challenge.js";
import {
  DESCRIPTIONS,
  type FundingKind,
  type FundingOutcome,
  type FundingRequest,
  fundedOutcome,
  identifiedRequest,
  recordedAnswer,
  replayedOutcome,
} from "./funding-request.js";
import { type GuardVerdict, PaymentIdentifiers } from "./payment-identifier.js";
import { PaymentRecords, type PaymentRow } from "./payment-records.js";
import { type Recorded, recordSettlement } from "./settlement-record.js";
import {
  buildBothRequirements,
  type DecodedPayment,
  decodePayment,
  exactPaymentOf,
  mismatch,
  PAYMENT_HEADER,
  paymentResponseHeader,
} from "./x402.js";

/** `failureReason` of a `reconciling` payment: what is known of its settlement. */
const SETTLED_NOT_RECORDED = "settled, not recorded";
const OUTCOME_UNKNOWN = "settlement outcome unknown";
/** How long a duplicate submission waits for the in-flight one to finish before answering 409. */
const DUPLICATE_WAIT_MS = 15_000;

export interface ReconciliationQueue {
  enqueue(paymentId: string): Promise<void>;
}

/**
 * Prepaid funding through x402 `exact` (SPEC "Funding flow"). Money that moved on chain is credited
 * exactly once: a write-ahead `settling` row (unique by payer and authorization nonce) precedes the settlement,
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
      /** checks a contract wallet's signature of a replayed payment (ERC-1271); EOAs are checked here */
      chain: Pick<ChainGateway, "verifyTypedData">;
    },
  ) {
    this.records = new PaymentRecords(deps);
    this.identifiers = new PaymentIdentifiers(deps);
    this.service = serviceMetadata(deps.config.urls.docs);
  }

  /** the payments table: look-ups, the write-ahead claim, the replay check */
  private readonly records: PaymentRecords;
  /** x402 payment-identifier ids and their recorded answers */
  private readonly identifiers: PaymentIdentifiers;
  /** the Bazaar's service metadata on every v2 `resource` */
  private readonly service: ServiceMetadata;

  /** CONFIRMATION_BLOCKS: depth before pending credit is confirmed. */
  get confirmationBlocks(): number {
    return this.deps.config.chain.confirmationBlocks;
  }

  /**
   * One call of a funding route. Without a payment: the 402 challenge, v1 in the body and v2 in
   * `PAYMENT-REQUIRED` (no facilitator call, no writes). With `X-PAYMENT` (v1) or
   * `PAYMENT-SIGNATURE` (v2): verify, settle, credit pending, and the receipt in the payment's
   * version. One authorization is one payment in either envelope.
   * @throws invalid_request (400; also both payment headers at once), payer_mismatch (403),
   *   payment_unfinished (409), signup_fuse (429), not_configured (503) when PAY_TO is unset;
   *   402 challenges come back as outcomes.
   */
  async fund(req: FundingRequest): Promise<FundingOutcome> {
    const body = parseFundingRequest(req.kind, req.body);
    const payTo = this.deps.config.chain.payTo;
    if (!payTo) throw new DomainError("not_configured", "Funding is not configured (PAY_TO is unset).");
    const requirements = buildBothRequirements({
      amountMicroUsdc: body.amountMicroUsdc,
      resource: req.resource,
      description: DESCRIPTIONS[req.kind],
      payTo,
      asset: this.deps.config.chain.usdcAddress,
      usdcName: this.deps.config.chain.usdcName,
      usdcVersion: this.deps.config.chain.usdcVersion,
      chainId: this.deps.config.chain.id,
    });
    const challenge = fundingChallenge({
      kind: req.kind,
      amountMicroUsdc: body.amountMicroUsdc,
      requirements,
      service: this.service,
    });
    const sent = sentPayment(req.payment);
    if (!sent) {
      return challenge({
        1: "Payment required: sign the requirement in `accepts` and retry with X-PAYMENT.",
        2: "Payment required: sign the requirement in `accepts` and retry with PAYMENT-SIGNATURE.",
      });
    }
    const headerName = PAYMENT_HEADER[sent.version];

    const decoded = decodePayment(sent);
    if (!decoded) return challenge(`${headerName} is not a valid x402 exact payment payload.`, "invalid_payment");
    const wrong = mismatch(decoded, requirements);
    if (wrong) return challenge(`${headerName} does not match this challenge: ${wrong}.`, "invalid_payment");

    // SPEC rule 5: the payer must be the caller's wallet, checked before settlement
    if (req.caller && decoded.payer !== req.caller.walletAddress.toLowerCase()) {
      throw new DomainError(
        "payer_mismatch",
        req.kind === "top_up"
          ? "The payment is signed by another wallet than the signed-in one."
          : "The payment is signed by another wallet than the one behind this API key.",
      );
    }

    // the payment-identifier (x402 v2): the same id answers the same request once recorded, and
    // another payment under it is 409 (payment-identifier.ts); without one, the rules below alone
    return this.identifiers.guard(identifiedRequest(req, decoded, headerName), {
      header: headerName,
      replay: replayedOutcome,
      verdict: (o) => this.identifierVerdict(decoded, o),
      attempt: async (): Promise<FundingOutcome> => {
        // a settlement already seen: answer from the record, never settle twice — but only to the
        // payer's own signature of the recorded authorization (the nonce, or the authorization, alone
        // reads nothing: both are public once it settled)
        const notRecorded = () =>
          challenge(
            `${headerName} is not the recorded authorization signed by its payer; nothing was charged.`,
            "invalid_payment",
          );
        const fromRecord = async (): Promise<FundingOutcome | undefined> => {
          const existing = await this.records.find(decoded.payer, decoded.nonce);
          if (!existing || existing.status === "failed") return undefined;
          if (!(await this.records.isRecordedAuthorization(decoded, existing))) return notRecorded();
          return (
            (await this.answerExisting(req.kind, existing, decoded)) ??
            challenge("This payment failed; sign a new one.", "invalid_payment")
          );
        };
        const replayed = await fromRecord();
        if (replayed) return replayed;

        if (req.kind === "signup") {
          const fuse = await this.deps.fuse.take(this.deps.clock.now());
          if (!fuse.ok) {
            throw new DomainError("signup_fuse", "Too many signups right now; retry after the window resets.", {
              retryAfterSeconds: fuse.retryAfterSeconds,
            });
          }
        }

        const verified = await this.deps.facilitator.verify(exactPaymentOf(decoded, requirements));
        if (!verified.ok) {
          // a duplicate sent at once may have been settled and recorded since the look-up above (its
          // nonce is used now, so the facilitator refuses it): its record answers, never "nothing moved"
          const since = await fromRecord();
          if (since) return since;
          const f = verified.failure;
          // a verdict on the payment itself is 402; a facilitator that cannot give one (down, 5xx, an
          // answer we cannot read, our own credentials refused) is 503: nothing moved, retry as sent
          if (f.kind === "invalid" || (f.kind === "rejected" && (f.status === 400 || f.status === 422))) {
            return challenge(`Payment verification failed: ${f.reason ?? f.message}.`, "invalid_payment");
          }
          throw facilitatorUnavailable(headerName);
        }

        // write-ahead intent: the unique nonce makes concurrent duplicates wait for this one
        const intent = await this.records.claimIntent(req, decoded, body);
        if (!intent.claimed) {
          // the facilitator verified this signature, but the payer may have signed another authorization
          // with the same nonce: the record answers only its own
          const row = await this.records.find(decoded.payer, decoded.nonce);
          if (row && !(await this.records.isRecordedAuthorization(decoded, row))) return notRecorded();
          return (
            (await this.awaitDuplicate(req.kind, decoded)) ??
            challenge("This payment failed; sign a new one.", "invalid_payment")
          );
        }

        const settled = await this.deps.facilitator.settle(exactPaymentOf(decoded, requirements));
        if (!settled.ok) {
          const f = settled.failure;
          const verdict = settleVerdict(f);
          if (verdict === "unknown") {
            // money may have moved: the chain decides (the authorization's nonce), never a second settle
            const tx = f.transaction ? (f.transaction.toLowerCase() as Hex) : null;
            logger.warn(
              { paymentId: intent.paymentId, transaction: tx, failure: f.message },
              "settlement outcome unknown",
            );
            return this.reconcileLater(intent.paymentId, decoded, {
              transaction: tx,
              settled: false,
              note: `${OUTCOME_UNKNOWN}: ${f.message}`,
              message:
                "The payment facilitator did not say whether the payment settled; it may have moved. It will be credited from the chain if it did. Do not pay again.",
            });
          }
          // conditional: the chain scan may have found the transfer and credited the row meanwhile (a
          // facilitator's verdict can be wrong); what the chain credited is never overwritten
          const failed = await this.deps.db.payment.updateMany({
            where: { id: intent.paymentId, status: "settling" },
            data: { status: "failed", failureReason: `${f.kind}: ${f.message}`.slice(0, 500) },
          });
          if (failed.count !== 1) {
            logger.warn({ paymentId: intent.paymentId, failure: f.message }, "settle failed, but the payment moved on");
            const moved = await this.deps.db.payment.findUniqueOrThrow({
              where: { id: intent.paymentId },
              include: { account: true },
            });
            return (
              (await this.answerExisting(req.kind, moved, decoded)) ??
              challenge("This payment failed; sign a new one.", "invalid_payment")
            );
          }
          if (verdict === "not_sent") throw facilitatorUnavailable(headerName);
          return challenge(`Payment settlement failed: ${f.reason ?? f.message}.`, "invalid_payment");
        }

        const txHash = settled.value.transaction.toLowerCase() as Hex;
        const paymentResponse = paymentResponseHeader(decoded, txHash, decoded.payer);
        let recorded: Recorded;
        try {
          recorded = await recordSettlement(this.deps, intent.paymentId, txHash, { mintKey: req.kind === "signup" });
        } catch (e) {
          // settled but not recorded (SPEC rule 6): queue reconciliation; money must never be lost
          logger.error({ err: e, paymentId: intent.paymentId, transaction: txHash }, "settled payment not recorded");
          return this.reconcileLater(intent.paymentId, decoded, {
            transaction: txHash,
            settled: true,
            note: SETTLED_NOT_RECORDED,
            message:
              "The payment settled but could not be recorded; it will be credited from the chain. Do not pay again.",
          });
        }
        return this.respond(req.kind, recorded, { paymentResponse, idempotent: false });
      },
    });
  }

  // ─────────────────────────────── internals ───────────────────────────────

  /**
   * What a request's end means for its payment-identifier: a 200 is recorded (as a replay answers
   * it: no key); anything else frees the id only when this payment moved nothing — the payments
   * table holds no live row of its authorization, or the live row is another signature's (a forged
   * or re-signed header) — and keeps the claim otherwise (a 409, a duplicate still settling, a crash
   * mid-settle), so a re-signed payment under the id cannot pay a second time. In doubt: keep.
   */
  private async identifierVerdict(
    d: DecodedPayment,
    o: { ok: FundingOutcome } | { error: unknown },
  ): Promise<GuardVerdict> {
    if ("ok" in o && o.ok.type === "funded") return { record: recordedAnswer(o.ok) };
    try {
      const row = await this.records.find(d.payer, d.nonce);
      if (row === null || row.status === "failed") return "release";
      return (await this.records.isRecordedAuthorization(d, row)) ? "keep" : "release";
    } catch {
      return "keep";
    }
  }

  /**
   * A concurrent duplicate: wait for the in-flight submission, then answer like a replay.
   * `null` when that submission failed (no money moved: the caller answers 402).
   */
  private async awaitDuplicate(kind: FundingKind, d: DecodedPayment): Promise<FundingOutcome | null> {
    const deadline = Date.now() + DUPLICATE_WAIT_MS;
    for (;;) {
      const p = await this.records.find(d.payer, d.nonce);
      if (p && p.status !== "settling") return this.answerExisting(kind, p, d);
      if (Date.now() > deadline) {
        throw new DomainError("payment_unfinished", "This payment is still being settled; do not pay again.", {
          transaction: p?.settlementTxHash ?? null,
          reconciling: true,
          paymentResponse: paymentResponseHeader(d, p?.settlementTxHash ?? null, d.payer, { settled: false }),
        });
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /**
   * The answer of a recorded payment. Only for `d` checked against `p` (`isRecordedAuthorization`,
   * or `p` being the row this very request wrote): the account it shows is the payer's own (signup
   * credits the payer's wallet, top-up and refill a caller the payer was checked to be).
   */
  private async answerExisting(kind: FundingKind, p: PaymentRow, d: DecodedPayment): Promise<FundingOutcome | null> {
    if (p.status === "settling") return this.awaitDuplicate(kind, d);
    if (p.status === "reconciling") {
      throw new DomainError(
        "payment_unfinished",
        "This payment is being reconciled from the chain; do not pay again.",
        {
          transaction: p.settlementTxHash,
          reconciling: true,
          paymentResponse: paymentResponseHeader(d, p.settlementTxHash, p.payerAddress, {
            settled: p.failureReason === SETTLED_NOT_RECORDED,
          }),
        },
      );
    }
    if (p.status === "failed") return null;
    if (p.kind !== kind) {
      // the money moved and was credited to this wallet's account, by the route it was signed for
      throw new DomainError(
        "payment_unfinished",
        `This payment was already used for ${p.kind.replace("_", "-")} and credited to this wallet's account; it cannot fund this request too. Do not pay again.`,
        {
          transaction: p.settlementTxHash,
          credited: true,
          paymentResponse: paymentResponseHeader(d, p.settlementTxHash, p.payerAddress),
        },
      );
    }
    const account = p.account ?? (await this.deps.db.account.findUniqueOrThrow({ where: { id: p.accountId ?? "" } }));
    const paymentResponse = paymentResponseHeader(d, p.settlementTxHash, p.payerAddress);
    return this.respond(
      kind,
      { payment: p, account, key: null, keyCapReached: false, fresh: false },
      { paymentResponse, idempotent: true },
    );
  }

  private respond(
    kind: FundingKind,
    r: Recorded,
    o: { paymentResponse: HeaderField; idempotent: boolean },
  ): FundingOutcome {
    return fundedOutcome(kind, r, { ...o, confirmationBlocks: this.deps.config.chain.confirmationBlocks });
  }

  /**
   * Money moved, or may have, and is not credited (SPEC funding rule 6): the payment is marked for
   * reconciliation and queued; 409 `reconciling: true` when either was recorded (the chain scan
   * covers a marked row even without the job), `false` only when neither was — a human must look.
   */
  private async reconcileLater(
    paymentId: string,
    d: DecodedPayment,
    o: { transaction: Hex | null; settled: boolean; note: string; message: string },
  ): Promise<never> {
    const marked = await this.deps.db.payment
      .updateMany({
        where: { id: paymentId, status: "settling" },
        data: {
          status: "reconciling",
          failureReason: o.note.slice(0, 500),
          ...(o.transaction ? { settlementTxHash: o.transaction } : {}),
        },
      })
      .then(
        (r) => r.count === 1,
        () => false,
      );
    let queued = false;
    try {
      await this.deps.reconciliation.enqueue(paymentId);
      queued = true;
    } catch (e) {
      logger.error({ err: e, paymentId }, "reconciliation could not be queued");
    }
    const reconciling = marked || queued;
    if (!reconciling) {
      logger.error(
        { paymentId, transaction: o.transaction, action: "manual recovery: credit this payment if it settled" },
        "PAYMENT NEEDS MANUAL RECOVERY: money may have moved, not recorded, reconciliation could not be queued",
      );
    }
    throw new DomainError("payment_unfinished", o.message, {
      transaction: o.transaction,
      reconciling,
      paymentResponse: paymentResponseHeader(d, o.transaction, d.payer, { settled: o.settled }),
    });
  }
}
