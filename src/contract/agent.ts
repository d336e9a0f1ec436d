/** SPEC "Agent self-service" (Bearer only). The ceiling and key shapes are the account's (account.ts). */
import { apiKeyMetadata, historyQuery, historyResponse, historyRow } from "./account.js";
import { decimal6, timestamp, uuid, walletAddress, z } from "./common.js";

// the ceiling is the same rule on the session and the agent route; MCP imports it from here
export { maxPriceBody, maxPriceResponse } from "./account.js";

/** `GET /v1/agent/me`: wallet, balances, max price, confirmation depth. */
export const agentMeResponse = z
  .object({
    accountId: uuid,
    walletAddress,
    confirmedUsdc: decimal6.openapi({ description: "funds inference" }),
    pendingUsdc: decimal6.openapi({ description: "awaiting confirmation; does not fund inference" }),
    availableUsdc: decimal6.openapi({ description: "confirmed minus what in-flight requests hold" }),
    maxPriceCentsPerDollar: z.number().int(),
    confirmationBlocks: z.number().int(),
    hasEverFunded: z.boolean(),
    firstFundedAt: timestamp.nullable(),
  })
  .openapi("AgentMe");
/** `GET /v1/agent/requests/{support_reference}`: the stored attempt, cost and clearing price included. */
export const agentRequestResponse = historyRow;

/**
 * `GET /v1/agent/key`: the calling key as listings show it: id, name, prefix, creation, policy and
 * this period's spend (what OpenRouter's `GET /api/v1/key` answers, so an agent can read its budget).
 */
export const agentKeyResponse = apiKeyMetadata;

/** `GET /v1/agent/requests`: the account's requests, the same pages and filters as the session history. */
export const agentRequestsQuery = historyQuery;
export const agentRequestsResponse = historyResponse;

export type AgentMeResponse = z.infer<typeof agentMeResponse>;
