import type { ResultOf } from "../../lib/tada";
import type { WebhookRowFragment } from "./webhooks.gql";

/** A `WebhookEventType` value as GraphQL spells it (`CREDIT_CONFIRMED`). */
export type WebhookEvent = ResultOf<typeof WebhookRowFragment>["events"][number];

/** Whose dashboard: the buyer view offers buyer events, the supplier view supplier events. */
export type WebhookSide = "buyer" | "supplier";

export interface EventInfo {
  value: WebhookEvent;
  /** the `type` of the delivered body */
  name: string;
  about: string;
}

/**
 * Which events each side of an account may take, as the service splits them (src/contract/webhooks.ts:
 * supplier events need a session, which the web app always has). `webhook.disabled` is the account's:
 * both views offer it.
 */
export const SIDE_EVENTS: Record<WebhookSide, readonly EventInfo[]> = {
  buyer: [
    { value: "CREDIT_CONFIRMED", name: "credit.confirmed", about: "a top-up's credit is confirmed (spendable)" },
    { value: "BALANCE_LOW", name: "balance.low", about: "a charge takes your confirmed balance below a threshold" },
    { value: "KEY_BUDGET_EXHAUSTED", name: "key.budget_exhausted", about: "an API key reached its spending limit" },
    { value: "VIDEO_COMPLETED", name: "video.completed", about: "a video job finished rendering" },
    { value: "VIDEO_REFUNDED", name: "video.refunded", about: "a video job's charge went back to your balance" },
  ],
  supplier: [
    { value: "OFFER_DEPLETED", name: "offer.depleted", about: "an offer sold out" },
    { value: "OFFER_EXPIRED", name: "offer.expired", about: "an offer expired at UTC midnight" },
    { value: "OFFER_REPOSTED", name: "offer.reposted", about: "a standing offer was posted again for the new day" },
    { value: "OFFER_PRICE_STEPPED", name: "offer.price_stepped", about: "an offer's price schedule took a step" },
    { value: "UPSTREAM_KEY_UNHEALTHY", name: "upstream_key.unhealthy", about: "the upstream refused one of your keys" },
    { value: "PAYOUT_SENT", name: "payout.sent", about: "a payout was sent to your wallet" },
  ],
};

export const ACCOUNT_EVENTS: readonly EventInfo[] = [
  { value: "WEBHOOK_DISABLED", name: "webhook.disabled", about: "another of your endpoints was disabled" },
];

const NAMES = new Map<string, string>(
  [...SIDE_EVENTS.buyer, ...SIDE_EVENTS.supplier, ...ACCOUNT_EVENTS].map((e) => [e.value, e.name]),
);

/** `CREDIT_CONFIRMED` → `credit.confirmed`. */
export function eventName(value: WebhookEvent): string {
  return NAMES.get(value) ?? value.toLowerCase();
}

/**
 * Whether a view shows an endpoint: it takes one of the side's events, or only the account's
 * (`webhook.disabled`). An endpoint made through REST with both sides' events shows in both views.
 */
export function shownTo(side: WebhookSide, events: readonly WebhookEvent[]): boolean {
  const own = (e: WebhookEvent) => SIDE_EVENTS[side].some((i) => i.value === e);
  const account = (e: WebhookEvent) => ACCOUNT_EVENTS.some((i) => i.value === e);
  return events.some(own) || events.every(account);
}
