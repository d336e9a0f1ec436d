import type { RedisKeys } from "../../../adapters/redis/keys.js";
import type { Config } from "../../../config.js";
import { DomainError } from "../../../lib/errors.js";
import type { InFlightGates } from "../settlement/stores.js";
import type { RoutableModel } from "./session.js";

/** SPEC "Limits": image jobs in flight per wallet (account), across every API process. */
export const IMAGE_JOBS_PER_WALLET = 1;

/**
 * The request's own in-flight slots, taken before anything is admitted, in this order: the buyer
 * key's (`key_concurrency_limit`; paid per request, without a key: the wallet's, at the same limit); for an image, the wallet's one image job (`buyer_concurrency_limit`);
 * for a small model, the small tier's (SPEC 11: small-model volume may be throttled). Returns the
 * gates held; on a refusal nothing is held.
 */
export async function takeRequestGates(
  deps: { gates: InFlightGates; keys: RedisKeys; config: Config },
  model: Pick<RoutableModel, "id" | "tier" | "modality">,
  caller: { accountId: string; apiKeyId: string },
): Promise<string[]> {
  const { gates, keys, config } = deps;
  const wanted: { gate: string; limit: number; refusal: () => DomainError }[] = [
    {
      gate: caller.apiKeyId ? keys.apiKeyInFlight(caller.apiKeyId) : keys.walletInFlight(caller.accountId),
      limit: config.limits.keyMaxInFlight,
      refusal: () =>
        new DomainError(
          "key_concurrency_limit",
          caller.apiKeyId
            ? "Too many completions in flight on this API key."
            : "Too many completions in flight paid by this wallet.",
          { retryAfterSeconds: 1 },
        ),
    },
  ];
  if (model.modality === "image") {
    wanted.push({
      gate: keys.walletImageGate(caller.accountId),
      limit: IMAGE_JOBS_PER_WALLET,
      refusal: () =>
        new DomainError(
          "buyer_concurrency_limit",
          "This wallet already has an image job in flight (one at a time); retry when it finishes.",
          { retryAfterSeconds: 1 },
        ),
    });
  }
  const smallLimit = config.limits.smallModelMaxInFlight;
  if (model.tier === "small" && smallLimit > 0) {
    wanted.push({
      gate: keys.smallModelGate(),
      limit: smallLimit,
      refusal: () =>
        new DomainError(
          "model_throttled",
          `${model.id} is a small model and its volume is throttled right now; retry shortly or use a frontier model.`,
          { retryAfterSeconds: 1 },
        ),
    });
  }
  const held: string[] = [];
  for (const w of wanted) {
    let ok = false;
    try {
      // in memory while this process holds a spare slot (see GateLeases)
      ok = await gates.acquire(w.gate, w.limit);
    } finally {
      // refused or failed: what was taken goes back
      if (!ok) for (const g of held) gates.release(g);
    }
    if (!ok) throw w.refusal();
    held.push(w.gate);
  }
  return held;
}
