import { type Address, getAddress, isAddress } from "viem";
import type { ChainGateway } from "../../adapters/chain/usdc-gateway.js";
import { v2Network } from "../../adapters/facilitator/envelopes.js";
import type { Facilitator, UptoPayment } from "../../adapters/facilitator/types.js";
import type { Config } from "../../config.js";
import { PAY_PER_REQUEST_MAX_MICRO_USDC, type PayPerRequestId, paidRoute } from "../../contract/paid-routes.js";
import type { Clock } from "../../lib/clock.js";
import { DomainError } from "../../lib/errors.js";
import { formatDecimal6 } from "../../lib/money.js";
import { resourceOf, type ServiceMetadata, serviceMetadata } from "../funding/discovery.js";
import {
  type IdentifiedRequest,
  PaymentIdentifiers,
  paymentIdentifierOf,
  requestFingerprint,
} from "../funding/payment-identifier.js";
import type { InferenceEndpoint, ModalityRequest } from "../inference/pipeline/endpoint.js";
import {
  asIdentifierRecord,
  fromIdentifierRecord,
  type PaidCall,
  type PaidOutcome,
  type RecordedPaidAnswer,
  recordedOf,
  replay,
} from "./answers.js";
import {
  decodeUpto,
  type PaidChallenge,
  paidChallenge,
  type UptoChallenge,
  uptoChallenge,
  uptoMismatch,
} from "./challenge.js";
import { PaidRun } from "./paid-run.js";
import type { RequestPaymentRow, RequestPaymentStore } from "./payment-store.js";
import type { PaymentSettler } from "./settle.js";

export type { PaidCall, PaidOutcome };

export interface PayPerRequestDeps {
  config: Config;
  clock: Clock;
  db: ConstructorParameters<typeof PaymentIdentifiers>[0]["db"];
  facilitator: Facilitator;
  /** the payer's USDC balance: what its unsettled payments may pull together */
  chain: Pick<ChainGateway, "getUsdcBalance">;
  store: RequestPaymentStore;
  settler: PaymentSettler;
  // biome-ignore lint/suspicious/noExplicitAny: each route's endpoint has its own request type
  endpoints: Record<PayPerRequestId, InferenceEndpoint<any>>;
}

/** How long the facilitator's `upto` signer address is kept (its `/supported` answer). */
const FACILITATOR_TTL_MS = 10 * 60_000;
const HEADER = "PAYMENT-SIGNATURE";

/**
 * Pay-per-request inference (docs/decisions.md "Pay per request"), transport-free:
 * an unpaid call is a 402 whose `upto` maximum is the request's maximum charge, sized as admission
 * sizes it; a paid one is verified, recorded under the payer's wallet (an account made on first
 * use), run through the same pipeline as its /v1 twin — funded by the authorization, never the
 * prepaid balance — and its exact charge settled before the answer goes out (a stream's after its
 * last content). A payment is used once: a duplicate gets the recorded answer, or 409 while its
 * request runs; the payment-identifier extension makes a call idempotent by id.
 */
export class PayPerRequestService {
  private readonly identifiers: PaymentIdentifiers;
  private readonly service: ServiceMetadata;
  private facilitatorSigner: { address: Address; until: number } | undefined;

  constructor(private readonly deps: PayPerRequestDeps) {
    this.identifiers = new PaymentIdentifiers({ db: deps.db, clock: deps.clock });
    this.service = serviceMetadata(deps.config.urls.docs);
  }

  /**
   * One call. Without a payment: the 402 (nothing written). With one: the answer (buffered), the
   * stream written to `openStream()`'s sink, or a recorded answer.
   * @throws the /v1 twin's errors (400, 404, 429, 502, 503 …; after a payment was taken, with the
   *   `PAYMENT-RESPONSE` of its settle of 0 in `details.paymentResponse`), 402 invalid_payment when
   *   the settle was refused (the answer withheld), 409 payment_unfinished (the payment's request is
   *   in flight), 409 conflict (the payment paid for another request), 409
   *   payment_identifier_conflict, 503 facilitator_unavailable / not_configured
   */
  async serve(call: PaidCall): Promise<PaidOutcome> {
    const route = paidRoute(call.route);
    const endpoint = this.deps.endpoints[call.route];
    const req: ModalityRequest = endpoint.parse(call.body);
    if (req.stream && !call.openStream) {
      throw new DomainError("invalid_request", "This transport does not stream; send stream: false.", {
        field: "stream",
      });
    }
    const { chain, urls } = this.deps.config;
    if (!chain.payTo) throw new DomainError("not_configured", "Payments are not configured (PAY_TO is unset).");
    const max = await endpoint.paidMaximum(req);
    if (max > PAY_PER_REQUEST_MAX_MICRO_USDC) {
      throw new DomainError(
        "invalid_request",
        `This request's maximum charge is ${formatDecimal6(max)} USDC, above the ${formatDecimal6(PAY_PER_REQUEST_MAX_MICRO_USDC)} USDC one payment may be; lower max_tokens (or the images asked for).`,
      );
    }
    const challenge = uptoChallenge({
      maxMicroUsdc: max,
      route,
      resource: resourceOf(route, urls.base, this.service),
      payTo: chain.payTo,
      asset: chain.usdcAddress,
      usdcName: chain.usdcName,
      usdcVersion: chain.usdcVersion,
      chainId: chain.id,
      facilitatorAddress: await this.facilitatorAddress(),
    });
    if (!call.payment) {
      return call.v1Payment
        ? paidChallenge(
            challenge,
            "invalid_payment",
            "X-PAYMENT (x402 v1) cannot pay this route: sign the upto requirement (x402 v2) and send it as PAYMENT-SIGNATURE.",
          )
        : paidChallenge(
            challenge,
            "payment_required",
            "Payment required: sign the upto requirement in `accepts` (at most this request's maximum charge; its exact cost is settled) and send the same request again with PAYMENT-SIGNATURE.",
          );
    }
    const sent = decodeUpto(call.payment);
    if (!sent) return paidChallenge(challenge, "invalid_payment", `${HEADER} is not an x402 v2 upto payment payload.`);
    const wrong = uptoMismatch(sent, challenge, this.deps.clock.now());
    if (wrong) return paidChallenge(challenge, "invalid_payment", `${HEADER} does not match this challenge: ${wrong}.`);

    const payer = getAddress(sent.facts.payer);
    const routeKey = `POST ${route.path}`;
    const fingerprint = requestFingerprint({ route: routeKey, body: call.body, payment: sent.payload });
    const identifier = paymentIdentifierOf(sent.payload, HEADER);
    const identified: IdentifiedRequest | undefined = identifier
      ? { payer: payer.toLowerCase(), identifier, route: routeKey, fingerprint }
      : undefined;
    const upto: UptoPayment = { payload: sent.payload, requirements: challenge.requirements };
    const deadline = sent.facts.deadline;
    const run = new PaidRun({ ...this.deps, endpoint, req, call, max, payer, upto, fingerprint, challenge, deadline });
    return this.identifiers.guard(identified, {
      header: HEADER,
      replay: (r) => replay(fromIdentifierRecord(r)),
      attempt: () => this.paid(run, sent.facts.nonce, challenge),
      verdict: async (o): Promise<"release" | "keep" | { record: ReturnType<typeof asIdentifierRecord> }> => {
        const recorded: RecordedPaidAnswer | undefined = run.recorded ?? ("ok" in o ? recordedOf(o.ok) : undefined);
        if (recorded) return { record: asIdentifierRecord(recorded) };
        return run.claimed ? "keep" : "release";
      },
    });
  }

  /** A paid call: the payment's record answers a duplicate; a new payment is verified, claimed and run. */
  private async paid(run: PaidRun, nonce: bigint, challenge: UptoChallenge): Promise<PaidOutcome> {
    const { store, facilitator } = this.deps;
    const existing = await store.find(run.payer, nonce);
    if (existing) return duplicate(existing, run.fingerprint);
    const verified = await facilitator.verifyUpto(run.upto);
    if (!verified.ok) {
      // a duplicate sent at once may hold the payment now: its record answers
      const since = await store.find(run.payer, nonce);
      if (since) return duplicate(since, run.fingerprint);
      const f = verified.failure;
      if (f.kind === "invalid" || (f.kind === "rejected" && (f.status === 400 || f.status === 422))) {
        return refused(challenge, `Payment verification failed: ${f.reason ?? f.message}.`);
      }
      throw facilitatorUnavailable();
    }
    const cover = await this.deps.chain.getUsdcBalance(run.payer);
    if (!cover.ok) throw facilitatorUnavailable();
    const row = await run.claim(nonce, cover.value);
    if (row && "refused" in row) return refused(challenge, `This payment cannot be taken: ${row.refused}.`);
    if (!row) {
      const dup = await store.find(run.payer, nonce);
      if (!dup) throw new DomainError("service_unavailable", "The payment could not be recorded; retry.");
      return duplicate(dup, run.fingerprint);
    }
    return run.execute(row);
  }

  /** The facilitator's `upto` signer, which the witness must name (its `/supported`, kept a while). */
  private async facilitatorAddress(): Promise<Address> {
    const now = this.deps.clock.now().getTime();
    if (this.facilitatorSigner && this.facilitatorSigner.until > now) return this.facilitatorSigner.address;
    const s = await this.deps.facilitator.supported();
    if (!s.ok) throw facilitatorUnavailable();
    const network = v2Network(this.deps.config.chain.id);
    const kind = s.value.kinds.find((k) => k.x402Version === 2 && k.scheme === "upto" && k.network === network);
    const address = kind?.extra?.facilitatorAddress;
    if (typeof address !== "string" || !isAddress(address)) {
      throw new DomainError(
        "not_configured",
        `The payment facilitator does not settle x402 upto on ${network}: pay per request is unavailable; use a prepaid key.`,
      );
    }
    this.facilitatorSigner = { address: getAddress(address), until: now + FACILITATOR_TTL_MS };
    return this.facilitatorSigner.address;
  }
}

/** A 402 for a payment that cannot pay (nothing moved). */
function refused(challenge: UptoChallenge, message: string): PaidChallenge {
  return paidChallenge(challenge, "invalid_payment", message);
}

/**
 * A payment already recorded: for the same request (route, body and payload), its recorded answer,
 * or 409 while its request runs; for another request, 409 — a payment pays for one request.
 */
function duplicate(p: RequestPaymentRow, fingerprint: string): PaidOutcome {
  if (p.fingerprint !== fingerprint) {
    throw new DomainError(
      "conflict",
      "This payment already paid for another request; nothing was charged for this one. Sign a new payment for it.",
    );
  }
  if (p.response) return replay(p.response as unknown as RecordedPaidAnswer);
  throw new DomainError(
    "payment_unfinished",
    "This payment is paying for a request still in flight; send it again once that request ended for its answer. Do not pay again.",
    { inFlight: true },
  );
}

function facilitatorUnavailable(): DomainError {
  return new DomainError(
    "facilitator_unavailable",
    `The payment facilitator is unavailable; nothing was charged. Retry the same request, with the same ${HEADER}, after Retry-After seconds.`,
    { retryAfterSeconds: 5 },
  );
}
