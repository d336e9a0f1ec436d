import { type Address, getAddress, type Hex, parseEventLogs, type VerifyTypedDataParameters } from "viem";
import { type ChainResult, classifyChainError } from "./chain-errors.js";
import { createChainClients, createSerialSender } from "./clients.js";
import type { ChainGateway, UsdcSettlement, UsdcTransferLog } from "./gateway-types.js";
import { usdcAbi } from "./usdc-abi.js";

export type {
  AuthorizationCancellation,
  AuthorizationStateAt,
  ChainGateway,
  TxConfirmations,
  UsdcSettlement,
  UsdcTransferLog,
  UsdcTransferLogQuery,
} from "./gateway-types.js";

export interface ChainGatewayOptions {
  rpcUrl: string;
  chainId: number;
  usdcAddress: Address;
  privateKey?: Hex;
}

/** The ChainGateway (gateway-types.ts) over viem: one public client, and a wallet client with a key. */
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
