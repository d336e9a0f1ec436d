import { createHash, randomUUID } from "node:crypto";
import type { PaymentPayload } from "@x402/core/types";
import {
  declarePaymentIdentifierExtension,
  extractPaymentIdentifier,
  isValidPaymentId,
  PAYMENT_IDENTIFIER,
} from "@x402/extensions/payment-identifier";
import type { Db } from "../../adapters/db.js";
import type { Prisma } from "../../generated/prisma/client.js";
import type { Clock } from "../../lib/clock.js";
import { DomainError, type HeaderField } from "../../lib/errors.js";

/**
 * x402's `payment-identifier` extension (docs/decisions.md "x402 discovery for indexers",
 * "Idempotent payments"), the rules once for every paid route:
 * - a 402 declares it (`PAYMENT_IDENTIFIER_EXTENSION`, not required);
 * - a v2 payment may carry an id (`paymentIdentifierOf`; a malformed one is 400, nothing charged);
 * - the id is the payer's, bound to the first request that claims it (`fingerprint`: route, body,
 *   payment payload). The same id with the same fingerprint answers the recorded response; with
 *   another fingerprint it is 409 `payment_identifier_conflict` (`identifierConflict`), whether the
 *   first request finished or is still running — so a re-signed payment for a request already paid,
 *   or in flight, never pays twice;
 * - the claiming request records its final answer, or frees the id when it ends with nothing moved.
 *
 * `PaymentIdentifiers.guard` runs one request under these rules; the funding routes use it and the
 * pay-per-request routes are meant to.
 */

/** The `extensions` entry a 402 declares: clients may send an id; none is required. */
export const PAYMENT_IDENTIFIER_EXTENSION = { [PAYMENT_IDENTIFIER]: declarePaymentIdentifierExtension(false) };

/**
 * The id a v2 payment payload carries in `extensions["payment-identifier"].info.id`, or undefined
 * (no extension, or the 402's declaration echoed without an id).
 * @throws invalid_request (400) for an id that is not 16-128 of letters, digits, `-` and `_`
 */
export function paymentIdentifierOf(
  payload: { extensions?: Record<string, unknown> | null },
  header: string,
): string | undefined {
  const id = extractPaymentIdentifier(payload as PaymentPayload, false);
  if (id === null) {
    const info = (payload.extensions?.[PAYMENT_IDENTIFIER] as { info?: { id?: unknown } } | undefined)?.info;
    if (info?.id === undefined) return undefined;
  } else if (isValidPaymentId(id)) {
    return id;
  }
  throw new DomainError(
    "invalid_request",
    `${header}'s payment-identifier id must be 16-128 characters of letters, digits, - and _; nothing was charged.`,
  );
}

/** JSON with object keys sorted at every depth: equal values, equal text. */
function canonical(value: unknown): string {
  return JSON.stringify(value, (_k, v: unknown) =>
    v !== null && typeof v === "object" && !Array.isArray(v)
      ? Object.fromEntries(
          Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)),
        )
      : v,
  );
}

/** What makes two requests "the same" for an id: the route, the JSON body and the payment payload. */
export function requestFingerprint(parts: { route: string; body: unknown; payment: unknown }): string {
  return createHash("sha256")
    .update(canonical([parts.route, parts.body ?? null, parts.payment]))
    .digest("hex");
}

/** One request's claim on an id. */
export interface IdentifiedRequest {
  /** lower-case payer address: ids are per payer (the wallet that signs the payment) */
  payer: string;
  identifier: string;
  /** `"POST /v1/x402/signup"` */
  route: string;
  fingerprint: string;
}

/** A recorded answer: what the same request gets again. */
export interface RecordedResponse {
  status: number;
  body: Record<string, unknown>;
  /** the receipt header, as sent */
  headers: HeaderField[];
}

export type IdentifierClaim =
  /** this request holds the id now */
  | { kind: "claimed"; token: string }
  /** the same request is running under the id: go on (the payment's own dedupe answers it) */
  | { kind: "joined" }
  /** the same request finished: answer its recorded response */
  | { kind: "replay"; response: RecordedResponse }
  /** another payment or request holds the id */
  | { kind: "conflict" };

/** 409: the id belongs to another payment or request of this payer. */
export function identifierConflict(header: string): DomainError {
  return new DomainError(
    "payment_identifier_conflict",
    `This payment-identifier was already used with another payment or request; nothing was charged for this one. Send a new id in ${header}, or the same payment and request to get the recorded answer.`,
  );
}

/** How a guarded request ended: record this answer, free the id (nothing moved), or keep the claim. */
export type GuardVerdict = { record: RecordedResponse } | "release" | "keep";

export class PaymentIdentifiers {
  constructor(private readonly deps: { db: Db; clock: Clock }) {}

  private key(r: IdentifiedRequest) {
    return { payerAddress_identifier: { payerAddress: r.payer, identifier: r.identifier } };
  }

  /** Claims the id for this request, or says who holds it (one insert; a lost race reads the winner). */
  async claim(r: IdentifiedRequest): Promise<IdentifierClaim> {
    for (let attempt = 0; attempt < 3; attempt++) {
      const token = randomUUID();
      const inserted = await this.deps.db.paymentIdentifier.createMany({
        data: [
          {
            payerAddress: r.payer,
            identifier: r.identifier,
            route: r.route,
            fingerprint: r.fingerprint,
            claimToken: token,
          },
        ],
        skipDuplicates: true,
      });
      if (inserted.count === 1) return { kind: "claimed", token };
      const held = await this.deps.db.paymentIdentifier.findUnique({ where: this.key(r) });
      if (!held) continue; // freed meanwhile: claim again
      if (held.fingerprint !== r.fingerprint) return { kind: "conflict" };
      const recorded = recordedOf(held);
      return recorded ? { kind: "replay", response: recorded } : { kind: "joined" };
    }
    throw new DomainError("service_unavailable", "The payment-identifier could not be claimed; retry.");
  }

  /**
   * Records the final answer of the id's request (the first one recorded stays) and returns what is
   * recorded. A request that joined a claim freed meanwhile records under a new claim of its own.
   */
  async record(r: IdentifiedRequest, response: RecordedResponse): Promise<RecordedResponse> {
    const data = {
      responseStatus: response.status,
      responseBody: response.body as Prisma.InputJsonValue,
      responseHeaders: response.headers as unknown as Prisma.InputJsonValue,
      completedAt: this.deps.clock.now(),
    };
    const done = await this.deps.db.paymentIdentifier.updateMany({
      where: { payerAddress: r.payer, identifier: r.identifier, fingerprint: r.fingerprint, completedAt: null },
      data,
    });
    if (done.count === 0) {
      await this.deps.db.paymentIdentifier.createMany({
        data: [
          {
            payerAddress: r.payer,
            identifier: r.identifier,
            route: r.route,
            fingerprint: r.fingerprint,
            claimToken: randomUUID(),
            ...data,
          },
        ],
        skipDuplicates: true,
      });
    }
    const held = await this.deps.db.paymentIdentifier.findUnique({ where: this.key(r) });
    return (held?.fingerprint === r.fingerprint && recordedOf(held)) || response;
  }

  /** Frees the id, when `token`'s claim still holds it unrecorded (nothing moved for this request). */
  async release(r: IdentifiedRequest, token: string): Promise<void> {
    await this.deps.db.paymentIdentifier.deleteMany({
      where: { payerAddress: r.payer, identifier: r.identifier, claimToken: token, completedAt: null },
    });
  }

  /**
   * Runs one paid request under its id (`r`; undefined: no id, `attempt` runs as it is). A recorded
   * answer is returned as `replay` makes it, another request's id is the conflict error; else the
   * request runs and `verdict` says what its answer (or error) means for the id: record it, free the
   * id (only the claiming request does, and only for nothing moved), or keep the claim (money may
   * have moved: the id stays bound to this payment, so a re-signed one is refused).
   */
  async guard<T>(
    r: IdentifiedRequest | undefined,
    o: {
      header: string;
      attempt: () => Promise<T>;
      replay: (recorded: RecordedResponse) => T;
      verdict: (outcome: { ok: T } | { error: unknown }) => Promise<GuardVerdict>;
    },
  ): Promise<T> {
    if (!r) return o.attempt();
    const claim = await this.claim(r);
    if (claim.kind === "conflict") throw identifierConflict(o.header);
    if (claim.kind === "replay") return o.replay(claim.response);
    const token = claim.kind === "claimed" ? claim.token : undefined;
    let outcome: { ok: T } | { error: unknown };
    try {
      outcome = { ok: await o.attempt() };
    } catch (error) {
      outcome = { error };
    }
    const verdict = await o.verdict(outcome);
    if (verdict === "release") {
      if (token) await this.release(r, token);
    } else if (verdict !== "keep") {
      await this.record(r, verdict.record);
    }
    if ("error" in outcome) throw outcome.error;
    return outcome.ok;
  }
}

function recordedOf(row: {
  responseStatus: number | null;
  responseBody: unknown;
  responseHeaders: unknown;
}): RecordedResponse | undefined {
  if (row.responseStatus === null) return undefined;
  return {
    status: row.responseStatus,
    body: (row.responseBody ?? {}) as Record<string, unknown>,
    headers: (row.responseHeaders ?? []) as HeaderField[],
  };
}
