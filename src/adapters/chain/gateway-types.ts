import type { Address, Chain, Hex, TypedDataDefinition } from "viem";
import type { ChainResult } from "./chain-errors.js";
import type { ChainPublicClient, ChainWalletClient } from "./clients.js";

/**
 * The chain as the service sees it (`ChainGateway`, built by usdc-gateway.ts) and the records it
 * answers: USDC transfers, settlements with their authorization nonce, confirmations, the EIP-3009
 * authorization state.
 */

/** One USDC `Transfer` event. `valueMicroUsdc` is in micro-USDC (6 decimals). */
export interface UsdcTransferLog {
  from: Address;
  to: Address;
  valueMicroUsdc: bigint;
  txHash: Hex;
  blockNumber: bigint;
  logIndex: number;
}

export interface TxConfirmations {
  txHash: Hex;
  /** Block that included the transaction. */
  blockNumber: bigint;
  /** Chain head when asked. */
  headBlockNumber: bigint;
  /** head - inclusion + 1: the inclusion block itself counts as 1 confirmation. */
  confirmations: number;
  status: "success" | "reverted";
}

/**
 * An EIP-3009 settlement as the chain recorded it: the USDC Transfer of one transaction joined
 * with the AuthorizationUsed event of the same transaction (the authorization nonce).
 */
export interface UsdcSettlement extends UsdcTransferLog {
  /** lower-case bytes32 hex, or null for a plain transfer (no authorization) */
  authorizationNonce: Hex | null;
  authorizer: Address | null;
}

/** An authorization's state as the chain holds it at one block. */
export interface AuthorizationStateAt {
  /** true when the nonce was used or canceled by the authorizer at `blockNumber` */
  used: boolean;
  blockNumber: bigint;
  /** the block's timestamp: an authorization whose validBefore is at or before it can never be used after it */
  blockTime: Date;
}

/** One `AuthorizationCanceled` event: the authorizer gave the nonce up on chain. */
export interface AuthorizationCancellation {
  txHash: Hex;
  blockNumber: bigint;
  logIndex: number;
}

export interface UsdcTransferLogQuery {
  to?: Address;
  from?: Address;
  fromBlock: bigint;
  toBlock: bigint | "latest";
}

/**
 * Everything the service reads from or writes to the chain, behind one interface so domain code
 * can be unit-tested with a fake. Every method returns data (`ChainResult`), never throws.
 */
export interface ChainGateway {
  readonly chain: Chain;
  readonly usdcAddress: Address;
  readonly publicClient: ChainPublicClient;
  /** Present when built with a private key (payouts). */
  readonly walletClient: ChainWalletClient | undefined;
  getChainId(): Promise<ChainResult<number>>;
  getBlockNumber(): Promise<ChainResult<bigint>>;
  /** `not_found` until the transaction is mined. */
  getConfirmations(txHash: Hex): Promise<ChainResult<TxConfirmations>>;
  getUsdcTransferLogs(query: UsdcTransferLogQuery): Promise<ChainResult<UsdcTransferLog[]>>;
  /** USDC `Transfer` events emitted by one mined transaction (e.g. a settlement). */
  getUsdcTransfersInTx(txHash: Hex): Promise<ChainResult<UsdcTransferLog[]>>;
  getUsdcBalance(address: Address): Promise<ChainResult<bigint>>;
  /** USDC transfers to `to` in a block range, each with the authorization nonce that moved it. */
  getUsdcSettlements(query: {
    to: Address;
    fromBlock: bigint;
    toBlock: bigint;
  }): Promise<ChainResult<UsdcSettlement[]>>;
  /** The settlements (transfer + authorization) in one mined transaction; `not_found` until mined. */
  getUsdcSettlementsInTx(txHash: Hex): Promise<ChainResult<UsdcSettlement[]>>;
  /** EIP-3009: true when `nonce` was used or canceled by `authorizer`. */
  getAuthorizationState(authorizer: Address, nonce: Hex): Promise<ChainResult<boolean>>;
  /**
   * EIP-3009 state of `nonce` at the block `depth` below the head (so a short reorg cannot undo what
   * it says), with that block's number and timestamp.
   */
  getAuthorizationStateAt(authorizer: Address, nonce: Hex, depth: number): Promise<ChainResult<AuthorizationStateAt>>;
  /** `AuthorizationCanceled(authorizer, nonce)` events in a block range, in chain order. */
  getAuthorizationCancellations(query: {
    authorizer: Address;
    nonce: Hex;
    fromBlock: bigint;
    toBlock: bigint;
  }): Promise<ChainResult<AuthorizationCancellation[]>>;
  /**
   * Is `signature` the signer's over this EIP-712 message? EOA signatures by recovery; a contract
   * wallet's by asking it (ERC-1271, ERC-6492), which is a chain call.
   */
  verifyTypedData(params: {
    address: Address;
    signature: Hex;
    typedData: TypedDataDefinition;
  }): Promise<ChainResult<boolean>>;
  /**
   * Payout: sends `amountMicro` micro-USDC from the adapter's key to `to`. Returns the hash once the
   * node accepted the transaction (not mined yet: follow it with `getConfirmations`). A `reverted`
   * failure (e.g. insufficient balance, caught at gas estimation) means nothing was sent.
   */
  transferUsdc(params: { to: Address; amountMicro: bigint }): Promise<ChainResult<{ txHash: Hex }>>;
}
