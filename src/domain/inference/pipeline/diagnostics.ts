import { DomainError } from "../../../lib/errors.js";
import { formatDecimal6, MAX_OFFER_PRICE_CENTS, maxBig } from "../../../lib/money.js";
import { MAX_ATTEMPTS } from "../routing/clearing.js";
import type { OfferStore } from "../settlement/stores.js";
import { maxPriceFor } from "./request-controls.js";
import type { InferenceSession } from "./session.js";

const refusals = new WeakSet<DomainError>();

/**
 * Marks `err` as a refusal of the request being admitted (no supply, no balance, a key's budget, a
 * price the upstream would not give): the phase that refuses only throws it; whoever runs the
 * request ends it on it, recorded with its code (`InferencePipeline.admit`, the request's lane).
 */
export function refused(err: DomainError): DomainError {
  refusals.add(err);
  return err;
}

/** Whether `e` refuses the request (see `refused`): it ends recorded even when it holds nothing yet. */
export function isRefusal(e: unknown): e is DomainError {
  return e instanceof DomainError && refusals.has(e);
}

/**
 * Why a request could not be admitted or completed: the refusals the pipeline answers with, their
 * bodies and hint details (SPEC "Errors"; `details` become the error body's fields and the hint
 * headers in `http/error-response.ts`). Every refusal carries the request's support reference.
 */

/** 402: the confirmed balance cannot cover even the smallest admissible request. */
export function insufficientBalance(session: InferenceSession): DomainError {
  return new DomainError(
    "insufficient_balance",
    "Confirmed USDC balance is too low for this request (pending top-ups do not count). Fund the account first.",
    { supportReference: session.supportReference },
  );
}

/** 502: fall-forward used up its distinct keys. */
export function fallForwardExhausted(): DomainError {
  return new DomainError(
    "upstream_error",
    `The upstream could not complete the request after ${MAX_ATTEMPTS} supplier keys; safe to retry.`,
  );
}

/** 503: every eligible key stayed at its in-flight limit for the whole wait. */
export function keyWaitTimeout(): DomainError {
  return new DomainError("key_wait_timeout", "Timed out waiting for a free upstream key; retry.", {
    retryAfterSeconds: 1,
  });
}

/** 500: escrow top-ups kept changing under the request (should not happen; nothing was charged). */
export function escrowNotSecured(): DomainError {
  return new DomainError("internal_error", "Could not secure escrow for this request.");
}

/**
 * Why nothing can clear this request (SPEC "Errors" 503 codes), read from the database with the
 * clearing rule: `insufficient_routable_at_price` (offers at the ceiling lack the depth),
 * `upstream_error` (the keys that could hold it were tried), `pool_empty` (nothing posted at any
 * price), or `no_eligible_supply` (everything posted is above the ceiling; says which ceiling clears).
 */
export async function noSupply(offers: OfferStore, session: InferenceSession, now: Date): Promise<DomainError> {
  const ceiling = session.effectiveCeilingCents;
  const atCeiling = await offers.eligible({ now, maxPriceCents: ceiling });
  const cap = session.plan.priceCapCents;
  if (cap !== undefined && cap < ceiling) {
    // a flat job planned below the ceiling because the balance affords no more: an offer that could
    // hold it between the cap and the ceiling means the balance, not the market, is short
    const need = session.plan.maxBurnMicroDiem;
    const holds = atCeiling.filter(
      (o) => o.routableMicroDiem >= need && !session.trail.tried.includes(o.upstreamKeyId),
    );
    if (holds.length > 0 && holds.every((o) => o.priceCentsPerDollar > cap)) return insufficientBalance(session);
  }
  if (atCeiling.length > 0) {
    const total = atCeiling.reduce((a, o) => a + o.routableMicroDiem, 0n);
    const largest = maxBig(0n, ...atCeiling.map((o) => o.routableMicroDiem));
    const untried = atCeiling.filter((o) => !session.trail.tried.includes(o.upstreamKeyId));
    if (session.trail.tried.length > 0 && untried.every((o) => o.routableMicroDiem < session.plan.maxBurnMicroDiem)) {
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
  const all = await offers.eligible({ now, maxPriceCents: MAX_OFFER_PRICE_CENTS });
  if (all.length === 0)
    return new DomainError("pool_empty", "Nothing is posted at any price right now; retry later.", {
      retryAfterSeconds: 30,
    });
  const fits = all.filter((o) => o.routableMicroDiem >= session.plan.maxBurnMicroDiem);
  const cheapest = (fits[0] ?? all[0])?.priceCentsPerDollar ?? null;
  const mapped = session.maxPriceCeilingCents ?? null;
  const details = {
    buyerMaxCents: ceiling,
    cheapestPostedCents: cheapest,
    routableDiemAboveMax: formatDecimal6(all.reduce((a, o) => a + o.routableMicroDiem, 0n)),
    ...(mapped !== null ? { maxPriceCeilingCents: mapped, model: session.model.id } : {}),
  };
  if (mapped !== null && mapped <= ceiling) {
    // provider.max_price binds: say what it maps to for this model and what would clear
    const need = cheapest !== null ? maxPriceFor(cheapest, session.model.pricing) : null;
    const raise = need
      ? `; raise it to at least {"prompt": ${need.prompt}, "completion": ${need.completion}} (USD per million tokens) to clear at ${cheapest}`
      : "";
    return new DomainError(
      "no_eligible_supply",
      `Supply exists but provider.max_price maps to a ceiling of ${mapped} cents per dollar for ${session.model.id}, below every posted price${raise}.`,
      details,
    );
  }
  // which ceiling binds decides the advice: the account's (PATCH /v1/account/max-price), or the
  // key's / the request's own, which only lower it
  const advice =
    ceiling < session.accountCeilingCents
      ? `raise the API key's or this request's maxPriceCentsPerDollar to ${cheapest} (neither can exceed your account's ${session.accountCeilingCents})`
      : `set maxPriceCentsPerDollar to ${cheapest}`;
  return new DomainError(
    "no_eligible_supply",
    `Supply exists but every posted price is above your ceiling of ${ceiling}; ${advice} and retry.`,
    details,
  );
}
