/** SPEC "Agent self-service" (Bearer only). The ceiling and key shapes are the account's (account.ts). */
import { historyRow } from "./account.js";
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

export type AgentMeResponse = z.infer<typeof agentMeResponse>;
