/**
 * What the supply side keeps of an upstream secret. The input rules (price, quantity, label,
 * secret) are the contract's (src/contract/supply.ts), checked by every transport before a
 * service is called.
 */

/** Secrets shorter than this show no characters in the masked display. */
const MIN_SECRET_LENGTH_FOR_LAST4 = 12;

/** What the masked display may show of a secret: its last four characters, only when long enough. */
export function secretLast4(secret: string): string {
  return secret.length >= MIN_SECRET_LENGTH_FOR_LAST4 ? secret.slice(-4) : "";
}
