import { type Address, type Chain, getAddress, type Hex, parseEventLogs } from "viem";
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
  /** EIP-3009: true when `nonce` was used or canceled by `authorizer`. */
  getAuthorizationState(authorizer: Address, nonce: Hex): Promise<ChainResult<boolean>>;
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
        return logs.flatMap((log) =>
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
