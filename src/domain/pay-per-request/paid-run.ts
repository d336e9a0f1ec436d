import type { Address } from "viem";
import type { UptoPayment } from "../../adapters/facilitator/types.js";
import type { PayPerRequestId } from "../../contract/paid-routes.js";
import { DomainError } from "../../lib/errors.js";
import { logger } from "../../lib/logger.js";
import type { InferenceEndpoint, ModalityRequest } from "../inference/pipeline/endpoint.js";
import type { Caller, PaymentReceipt, RouteKind } from "../inference/pipeline/session.js";
import {
  capturingSink,
  type PaidCall,
  type PaidOutcome,
  type RecordedPaidAnswer,
  recordedError,
  recordedOf,
} from "./answers.js";
import type { UptoChallenge } from "./challenge.js";
import { type RequestPaymentRow, type RequestPaymentStore, storedRequirements } from "./payment-store.js";
import type { PaidPayment, PaymentSettler } from "./settle.js";

/** The route each pay-per-request route records its requests under (its /v1 twin's). */
/** The latest time a timestamp holds, in seconds (9999-12-31T23:59:59Z). */
const LATEST_S = 253_402_300_799n;

const ROUTE_KIND: Record<PayPerRequestId, RouteKind> = {
  chat_completions: "chat",
  responses: "responses",
  messages: "messages",
  image_generate: "image",
  images_generations: "images_openai",
};

/**
 * One paid call once its payment is verified (ppr-service.ts): the payment claimed under the
 * payer's account, the request run on its /v1 twin's endpoint funded by it (`Caller.payment`: the
 * pipeline plans against its maximum, takes no balance, books the charge against it and calls
 * `settle` before the answer goes out), and the answer recorded for the payment's duplicates. A
 * request that ends without a charge settles 0 (nothing is sent) and its error carries that receipt.
 */
export class PaidRun {
  /** the answer recorded on the payment (what a duplicate gets) */
  recorded: RecordedPaidAnswer | undefined;
  /** this call holds the payment's row */
  claimed = false;

  constructor(
    private readonly o: {
      store: RequestPaymentStore;
      settler: PaymentSettler;
      // biome-ignore lint/suspicious/noExplicitAny: each route's endpoint has its own request type
      endpoint: InferenceEndpoint<any>;
      req: ModalityRequest;
      call: PaidCall;
      max: bigint;
      payer: Address;
      upto: UptoPayment;
      fingerprint: string;
      challenge: UptoChallenge;
      /** the authorization's deadline (seconds): after it, it can never settle */
      deadline: bigint;
    },
  ) {}

  get payer(): Address {
    return this.o.payer;
  }

  get upto(): UptoPayment {
    return this.o.upto;
  }

  get fingerprint(): string {
    return this.o.fingerprint;
  }

  /** The payment's row under the payer's account; null when the authorization is recorded already. */
  async claim(nonce: bigint, coverMicroUsdc: bigint): Promise<RequestPaymentRow | null | { refused: string }> {
    const { upto, challenge, call } = this.o;
    const facts = challenge.requirements;
    const row = await this.o.store.claim(
      {
        payer: this.o.payer,
        route: ROUTE_KIND[call.route],
        payTo: facts.payTo,
        asset: facts.asset,
        facilitator: String(facts.extra.facilitatorAddress),
        nonce,
        maxMicroUsdc: this.o.max,
        // recorded as a timestamp: none needs a later bound than 9999-12-31
        deadline: new Date(Number(this.o.deadline < LATEST_S ? this.o.deadline : LATEST_S) * 1000),
        fingerprint: this.o.fingerprint,
        payload: upto.payload,
        requirements: storedRequirements(facts),
      },
      coverMicroUsdc,
    );
    if (row && !("refused" in row)) this.claimed = true;
    return row;
  }

  /** Runs the request on the claimed payment and records its answer. */
  async execute(row: RequestPaymentRow): Promise<PaidOutcome> {
    const { endpoint, req, call, settler, store } = this.o;
    const paid: PaidPayment = { id: row.id, payer: this.o.payer, upto: this.o.upto };
    let receipt: PaymentReceipt | undefined;
    const caller: Caller = {
      accountId: row.accountId,
      apiKeyId: "",
      ...(call.requestId ? { requestId: call.requestId } : {}),
      payment: {
        id: row.id,
        maxMicroUsdc: this.o.max,
        settle: async (s) => {
          const out = await settler.settleCharge(paid, s);
          receipt = out.payment;
          return out;
        },
      },
    };
    try {
      if (req.stream && call.openStream) {
        const { sink, capture, release } = capturingSink(call.openStream());
        try {
          await endpoint.serve(caller, req, { sink });
          // a stream that ended without a charge (the buyer gone before content, a failed ending)
          await settler.settleUnused(paid);
          return await this.finish(row.id, { type: "streamed" }, recordedOf({ type: "streamed" }, capture));
        } finally {
          release();
        }
      }
      const out = await endpoint.serve(caller, req, { signal: call.signal });
      if (!receipt) throw new DomainError("internal_error", "A paid answer without its settlement.");
      // no balance left to tell: the payment, not a prepaid balance, paid for it
      const outcome: PaidOutcome = {
        type: "answer",
        status: 200,
        cost: { ...out.cost, balanceRemainingMicroUsdc: null },
        receipt: receipt.header,
        body: out.body,
      };
      return await this.finish(row.id, outcome, recordedOf(outcome));
    } catch (e) {
      if (!(e instanceof DomainError)) logger.error({ err: e, paymentId: row.id }, "a paid request failed");
      const err = e instanceof DomainError ? e : new DomainError("internal_error", "Internal error.");
      // ended without a charge: nothing is owed; the answer says a settle of 0
      if (!err.details.paymentResponse) {
        const zero = await settler.settleUnused(paid);
        if (zero) err.details.paymentResponse = zero;
      }
      this.recorded = recordedError(err);
      await store.recordAnswer(row.id, this.recorded).catch((failure: unknown) => {
        logger.error({ err: failure, paymentId: row.id }, "a paid request's answer could not be recorded");
      });
      throw err;
    }
  }

  private async finish(id: string, outcome: PaidOutcome, recorded: RecordedPaidAnswer | undefined) {
    this.recorded = recorded;
    if (recorded) {
      await this.o.store.recordAnswer(id, recorded).catch((e: unknown) => {
        logger.error({ err: e, paymentId: id }, "a paid request's answer could not be recorded");
      });
    }
    return outcome;
  }
}
