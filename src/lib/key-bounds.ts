/**
 * The bounds of a key's policy, declared once: the domain enforces them
 * (domain/keys/key-policy.ts) and the API contract describes them (contract/account.ts).
 */

/** The highest per-period limit a key may carry: 1,000,000,000 USDC (keeps every sum in BIGINT). */
export const MAX_KEY_LIMIT_MICRO_USDC = 1_000_000_000_000_000n;

/** The most model ids one key's allow-list holds. */
export const MAX_KEY_MODELS = 100;

/** The longest model id accepted in an allow-list (catalog slugs are far shorter). */
export const MAX_KEY_MODEL_ID_LENGTH = 128;
