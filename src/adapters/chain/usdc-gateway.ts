import {
  type Address,
  type Chain,
  getAddress,
  type Hex,
  parseEventLogs,
  type TypedDataDefinition,
  type VerifyTypedDataParameters,
} from "viem";
import { type ChainResult, classifyChainError } from "./chain-errors.js";
import { type ChainPublicClient, type ChainWalletClient, createChainClients, createSerialSender } from "./clients.js";
import { usdcAbi } from "./usdc-abi.js";

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

export interface ChainGatewayOptions {
  rpcUrl: string;
  chainId: number;
  usdcAddress: Address;
  privateKey?: Hex;
}

export function createChainGateway(opts: ChainGatewayOptions): ChainGateway {
  const { chain, publicClient, walletClient } = createChainClients(opts);
  const usdcAddress = getAddress(opts.usdcAddress);
  const sendSerially = createSerialSender();

  async function attempt<T>(fn: () => Promise<T>): Promise<ChainResult<T>> {
    try {
      return { ok: true, value: await fn() };
    } catch (error) {
      return { ok: false, failure: classifyChainError(error) };
    }
  }

  return {
    chain,
    usdcAddress,
    publicClient,
    walletClient,

    getChainId: () => attempt(() => publicClient.getChainId()),

    getBlockNumber: () => attempt(() => publicClient.getBlockNumber({ cacheTime: 0 })),

    getConfirmations: (txHash) =>
      attempt(async () => {
        const [receipt, head] = await Promise.all([
          publicClient.getTransactionReceipt({ hash: txHash }),
          publicClient.getBlockNumber({ cacheTime: 0 }),
        ]);
        const confirmations = head >= receipt.blockNumber ? Number(head - receipt.blockNumber + 1n) : 0;
        return {
          txHash,
          blockNumber: receipt.blockNumber,
          headBlockNumber: head,
          confirmations,
          status: receipt.status,
        };
      }),

    getUsdcTransferLogs: (query) =>
      attempt(async () => {
        const logs = await publicClient.getContractEvents({
          address: usdcAddress,
          abi: usdcAbi,
          eventName: "Transfer",
          args: { from: query.from, to: query.to },
          fromBlock: query.fromBlock,
          toBlock: query.toBlock,
          strict: true,
        });
        return inChainOrder(
          logs.flatMap((log) =>
            log.removed || log.blockNumber === null || log.transactionHash === null || log.logIndex === null
              ? []
              : [
                  {
                    from: log.args.from,
                    to: log.args.to,
                    valueMicroUsdc: log.args.value,
                    txHash: log.transactionHash,
                    blockNumber: log.blockNumber,
                    logIndex: log.logIndex,
                  },
                ],
          ),
        );
      }),

    getUsdcTransfersInTx: (txHash) =>
      attempt(async () => {
        const receipt = await publicClient.getTransactionReceipt({ hash: txHash });
        const fromToken = receipt.logs.filter((log) => getAddress(log.address) === usdcAddress);
        return parseEventLogs({ abi: usdcAbi, eventName: "Transfer", logs: fromToken, strict: true }).map((log) => ({
          from: log.args.from,
          to: log.args.to,
          valueMicroUsdc: log.args.value,
          txHash: log.transactionHash,
          blockNumber: log.blockNumber,
          logIndex: log.logIndex,
        }));
      }),

    getUsdcSettlements: (query) =>
      attempt(async () => {
        const [transfers, authorizations] = await Promise.all([
          publicClient.getContractEvents({
            address: usdcAddress,
            abi: usdcAbi,
            eventName: "Transfer",
            args: { to: query.to },
            fromBlock: query.fromBlock,
            toBlock: query.toBlock,
            strict: true,
          }),
          publicClient.getContractEvents({
            address: usdcAddress,
            abi: usdcAbi,
            eventName: "AuthorizationUsed",
            fromBlock: query.fromBlock,
            toBlock: query.toBlock,
            strict: true,
          }),
        ]);
        return joinSettlements(
          // a node may answer a range's logs in any order: the scan reads them in chain order
          inChainOrder(
            transfers.flatMap((l) =>
              l.removed || l.transactionHash === null || l.blockNumber === null || l.logIndex === null
                ? []
                : [
                    {
                      from: l.args.from,
                      to: l.args.to,
                      valueMicroUsdc: l.args.value,
                      txHash: l.transactionHash,
                      blockNumber: l.blockNumber,
                      logIndex: l.logIndex,
                    },
                  ],
            ),
          ),
          authorizations.flatMap((l) =>
            l.removed || l.transactionHash === null || l.logIndex === null
              ? []
              : [
                  {
                    txHash: l.transactionHash,
                    authorizer: l.args.authorizer,
                    nonce: l.args.nonce,
                    logIndex: l.logIndex,
                  },
                ],
          ),
        );
      }),

    getUsdcSettlementsInTx: (txHash) =>
      attempt(async () => {
        const receipt = await publicClient.getTransactionReceipt({ hash: txHash });
        if (receipt.status !== "success") return [];
        const fromToken = receipt.logs.filter((log) => getAddress(log.address) === usdcAddress);
        const transfers = parseEventLogs({ abi: usdcAbi, eventName: "Transfer", logs: fromToken, strict: true }).map(
          (log) => ({
            from: log.args.from,
            to: log.args.to,
            valueMicroUsdc: log.args.value,
            txHash: log.transactionHash,
            blockNumber: log.blockNumber,
            logIndex: log.logIndex,
          }),
        );
        const auths = parseEventLogs({
          abi: usdcAbi,
          eventName: "AuthorizationUsed",
          logs: fromToken,
          strict: true,
        }).map((log) => ({
          txHash: log.transactionHash,
          authorizer: log.args.authorizer,
          nonce: log.args.nonce,
          logIndex: log.logIndex,
        }));
        return joinSettlements(transfers, auths);
      }),

    getUsdcBalance: (address) =>
      attempt(() =>
        publicClient.readContract({ address: usdcAddress, abi: usdcAbi, functionName: "balanceOf", args: [address] }),
      ),

    getAuthorizationState: (authorizer, nonce) =>
      attempt(() =>
        publicClient.readContract({
          address: usdcAddress,
          abi: usdcAbi,
          functionName: "authorizationState",
          args: [authorizer, nonce],
        }),
      ),

    getAuthorizationStateAt: (authorizer, nonce, depth) =>
      attempt(async () => {
        const head = await publicClient.getBlockNumber({ cacheTime: 0 });
        const blockNumber = head > BigInt(depth) ? head - BigInt(depth) : 0n;
        const [block, used] = await Promise.all([
          publicClient.getBlock({ blockNumber }),
          publicClient.readContract({
            address: usdcAddress,
            abi: usdcAbi,
            functionName: "authorizationState",
            args: [authorizer, nonce],
            blockNumber,
          }),
        ]);
        return { used, blockNumber, blockTime: new Date(Number(block.timestamp) * 1000) };
      }),

    getAuthorizationCancellations: (query) =>
      attempt(async () => {
        const logs = await publicClient.getContractEvents({
          address: usdcAddress,
          abi: usdcAbi,
          eventName: "AuthorizationCanceled",
          args: { authorizer: query.authorizer, nonce: query.nonce },
          fromBlock: query.fromBlock,
          toBlock: query.toBlock,
          strict: true,
        });
        return inChainOrder(
          logs.flatMap((l) =>
            l.removed || l.transactionHash === null || l.blockNumber === null || l.logIndex === null
              ? []
              : [{ txHash: l.transactionHash, blockNumber: l.blockNumber, logIndex: l.logIndex }],
          ),
        );
      }),

    verifyTypedData: ({ address, signature, typedData }) =>
      attempt(() =>
        publicClient.verifyTypedData({ address, signature, ...typedData } as unknown as VerifyTypedDataParameters),
      ),

    transferUsdc: async ({ to, amountMicro }) => {
      if (walletClient === undefined) {
        return { ok: false, failure: { kind: "no_wallet", message: "chain gateway has no private key" } };
      }
      if (amountMicro <= 0n) {
        return { ok: false, failure: { kind: "reverted", message: "amountMicro must be positive" } };
      }
      return attempt(async () => {
        const txHash = await sendSerially(() =>
          walletClient.writeContract({
            address: usdcAddress,
            abi: usdcAbi,
            functionName: "transfer",
            args: [to, amountMicro],
          }),
        );
        return { txHash };
      });
    },
  };
}

/** Logs by block number, then log index: the chain's own order, whatever order a node answered in. */
function inChainOrder<T extends { blockNumber: bigint; logIndex: number }>(logs: T[]): T[] {
  return [...logs].sort((a, b) =>
    a.blockNumber === b.blockNumber ? a.logIndex - b.logIndex : a.blockNumber < b.blockNumber ? -1 : 1,
  );
}

/**
 * Pairs each Transfer with the AuthorizationUsed emitted just before it in the same transaction
 * (EIP-3009 tokens emit AuthorizationUsed, then Transfer). Plain transfers get a null nonce.
 */
function joinSettlements(
  transfers: UsdcTransferLog[],
  auths: { txHash: Hex; authorizer: Address; nonce: Hex; logIndex: number }[],
): UsdcSettlement[] {
  const byTx = new Map<string, { authorizer: Address; nonce: Hex; logIndex: number }[]>();
  for (const a of auths) {
    const list = byTx.get(a.txHash) ?? [];
    list.push(a);
    byTx.set(a.txHash, list);
  }
  return transfers.map((t) => {
    const candidates = (byTx.get(t.txHash) ?? []).filter((a) => a.logIndex < t.logIndex);
    const auth = candidates.sort((x, y) => y.logIndex - x.logIndex)[0];
    return {
      ...t,
      authorizationNonce: auth ? (auth.nonce.toLowerCase() as Hex) : null,
      authorizer: auth ? auth.authorizer : null,
    };
  });
}
