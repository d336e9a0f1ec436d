import type { Hex } from "viem";
import { createHttpFacilitator } from "./http.js";
import { createLocalFacilitator } from "./local.js";
import type { Facilitator } from "./types.js";

export interface CreateFacilitatorOptions {
  /** FACILITATOR_URL: `local` for the in-process facilitator, else an x402 facilitator base URL (v2 or v1). */
  url: string;
  /** FACILITATOR_PRIVATE_KEY: required when `url` is `local`. */
  privateKey?: Hex;
  /** CHAIN_RPC_URL / CHAIN_ID: the chain the local facilitator settles on. */
  rpcUrl: string;
  chainId: number;
  /** CDP_API_KEY_ID / CDP_API_KEY_SECRET: CDP JWT auth for the HTTP facilitator. */
  cdpKeyId?: string;
  cdpKeySecret?: string;
}

/**
 * The facilitator named by the configuration. Throws only for configuration errors (local without
 * a key, an unusable CDP secret), so `main.ts` fails at start rather than on the first payment.
 */
export function createFacilitator(opts: CreateFacilitatorOptions): Facilitator {
  if (opts.url === "local") {
    if (opts.privateKey === undefined) {
      throw new Error("FACILITATOR_URL=local needs FACILITATOR_PRIVATE_KEY");
    }
    return createLocalFacilitator({ rpcUrl: opts.rpcUrl, chainId: opts.chainId, privateKey: opts.privateKey });
  }
  return createHttpFacilitator({ url: opts.url, cdpKeyId: opts.cdpKeyId, cdpKeySecret: opts.cdpKeySecret });
}
