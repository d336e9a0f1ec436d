import type { createKeyBody, updateKeyBody } from "../contract/account.js";
import type { z } from "../contract/common.js";
import type { KeyUpdate } from "../domain/keys/api-key-service.js";

/**
 * A parsed create or update body (REST and MCP) as the key service takes it: only the fields sent,
 * `null` kept (it removes a setting); `limitUsdc` is already micro-USDC (the contract parsed it).
 */
export function keyChangeOf(body: z.infer<typeof createKeyBody> | z.infer<typeof updateKeyBody>): KeyUpdate {
  const out: KeyUpdate = {};
  if (body.name !== undefined) out.name = body.name;
  if (body.limitUsdc !== undefined) out.limitMicroUsdc = body.limitUsdc;
  if (body.limitReset !== undefined) out.limitReset = body.limitReset;
  if (body.maxPriceCentsPerDollar !== undefined) out.maxPriceCentsPerDollar = body.maxPriceCentsPerDollar;
  if (body.models !== undefined) out.models = body.models;
  if (body.expiresAt !== undefined) out.expiresAt = body.expiresAt;
  return out;
}
