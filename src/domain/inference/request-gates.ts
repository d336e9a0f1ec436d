import type { GateLeases } from "../../adapters/redis/gate-leases.js";
import type { RedisKeys } from "../../adapters/redis/keys.js";
import type { Config } from "../../config.js";
import { DomainError } from "../../lib/errors.js";
import type { RoutableModel } from "./session.js";

/**
 * The request's own in-flight slots, taken before anything is admitted: the buyer key's
 * (`key_concurrency_limit`) and, for a small model, the small tier's (SPEC 11: frontier models are
 * the promoted tier; small-model volume may be throttled). Returns the gates held; on a refusal
 * nothing is held.
 */
export async function takeRequestGates(
  deps: { gates: GateLeases; keys: RedisKeys; config: Config },
  model: Pick<RoutableModel, "id" | "tier">,
  apiKeyId: string,
): Promise<string[]> {
  const { gates, keys, config } = deps;
  const buyerGate = keys.apiKeyInFlight(apiKeyId);
  // in memory while this process holds a spare slot (see GateLeases)
  if (!(await gates.acquire(buyerGate, config.limits.keyMaxInFlight))) {
    throw new DomainError("key_concurrency_limit", "Too many completions in flight on this API key.", {
      retryAfterSeconds: 1,
    });
  }
  const smallLimit = config.limits.smallModelMaxInFlight;
  if (model.tier !== "small" || smallLimit <= 0) return [buyerGate];
  const smallGate = keys.smallModelGate();
  let ok = false;
  try {
    ok = await gates.acquire(smallGate, smallLimit);
  } finally {
    // refused or failed: the buyer key's slot goes back
    if (!ok) gates.release(buyerGate);
  }
  if (!ok) {
    throw new DomainError(
      "model_throttled",
      `${model.id} is a small model and its volume is throttled right now; retry shortly or use a frontier model.`,
      { retryAfterSeconds: 1 },
    );
  }
  return [buyerGate, smallGate];
}
