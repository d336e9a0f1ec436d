import { PERMIT2_ADDRESS, x402UptoPermit2ProxyABI, x402UptoPermit2ProxyAddress } from "@x402/evm";
import { type Address, decodeFunctionData, getAddress, type Hex, isAddressEqual, parseEventLogs } from "viem";
import { type ChainResult, classifyChainError } from "./chain-errors.js";
import type { ChainPublicClient } from "./clients.js";
import { usdcAbi } from "./usdc-abi.js";
import type { AuthorizationStateAt, ChainGateway } from "./usdc-gateway.js";

/** Permit2's unordered-nonce bitmap (SignatureTransfer): owner => word => bits. */
export const permit2NonceBitmapAbi = [
  {
    type: "function",
    name: "nonceBitmap",
    stateMutability: "view",
    inputs: [
      { name: "owner", type: "address" },
      { name: "wordPos", type: "uint256" },
    ],
    outputs: [{ name: "", type: "uint256" }],
  },
] as const;

/** One x402 `upto` settlement as the chain recorded it. */
export interface UptoSettlement {
  txHash: Hex;
  blockNumber: bigint;
  status: "success" | "reverted";
  /**
   * From the transaction's call to the x402 upto proxy (`settle` / `settleWithPermit`): the payer,
   * the Permit2 nonce it spends, the amount asked and the witness's payTo. Null when the
   * transaction is not a direct call to the proxy (e.g. sent through a smart wallet).
   */
  call: { owner: Address; nonce: bigint; amountMicroUsdc: bigint; payTo: Address } | null;
  /** USDC this transaction moved from `from` to `to` (its Transfer logs; 0 when it reverted). */
  movedMicroUsdc: bigint;
  from: Address;
  to: Address;
}

/**
 * The chain reads that reconcile an x402 `upto` settle whose outcome is unknown: whether the
 * authorization's Permit2 nonce is spent, and what a settlement transaction moved. A Permit2
 * nonce is also spent when the owner invalidates it (`invalidateUnorderedNonces`): "used" with no
 * settlement found means nothing moved for this authorization and it can never move.
 */
export interface UptoChainReads {
  /** Permit2: true when `owner`'s `nonce` is spent (settled or invalidated by the owner). */
  isPermit2NonceUsed(owner: Address, nonce: bigint): Promise<ChainResult<boolean>>;
  /** As `isPermit2NonceUsed`, at the block `depth` below the head, with its number and time. */
  getPermit2NonceStateAt(owner: Address, nonce: bigint, depth: number): Promise<ChainResult<AuthorizationStateAt>>;
  /** What one transaction moved from `from` to `to`; `not_found` until it is mined. */
  getUptoSettlementInTx(txHash: Hex, from: Address, to: Address): Promise<ChainResult<UptoSettlement>>;
  /** Settlements moving USDC from `from` to `to` in a block range, in chain order (one per transaction). */
  findUptoSettlements(query: {
    from: Address;
    to: Address;
    fromBlock: bigint;
    toBlock: bigint;
  }): Promise<ChainResult<UptoSettlement[]>>;
}

/** Permit2's word position and bit of an unordered nonce. */
export function permit2NonceSlot(nonce: bigint): { wordPos: bigint; bit: bigint } {
  return { wordPos: nonce >> 8n, bit: 1n << (nonce & 0xffn) };
}

/** The payer, nonce, amount and payTo of a call to the x402 upto proxy, or null for any other call. */
export function decodeUptoProxyCall(to: Address | null, input: Hex): UptoSettlement["call"] {
  if (to === null || !isAddressEqual(to, x402UptoPermit2ProxyAddress)) return null;
  try {
    const decoded = decodeFunctionData({ abi: x402UptoPermit2ProxyABI, data: input });
    if (decoded.functionName === "settle") {
      const [permit, amount, owner, witness] = decoded.args;
      return { owner: getAddress(owner), nonce: permit.nonce, amountMicroUsdc: amount, payTo: getAddress(witness.to) };
    }
    if (decoded.functionName === "settleWithPermit") {
      const [, permit, amount, owner, witness] = decoded.args;
      return { owner: getAddress(owner), nonce: permit.nonce, amountMicroUsdc: amount, payTo: getAddress(witness.to) };
    }
  } catch {
    // not a proxy call we can read
  }
  return null;
}

export function createUptoChainReads(gateway: Pick<ChainGateway, "publicClient" | "usdcAddress">): UptoChainReads {
  const client: ChainPublicClient = gateway.publicClient;
  const usdc = gateway.usdcAddress;

  async function attempt<T>(fn: () => Promise<T>): Promise<ChainResult<T>> {
    try {
      return { ok: true, value: await fn() };
    } catch (error) {
      return { ok: false, failure: classifyChainError(error) };
    }
  }

  const nonceUsed = async (owner: Address, nonce: bigint, blockNumber?: bigint): Promise<boolean> => {
    const { wordPos, bit } = permit2NonceSlot(nonce);
    const word = await client.readContract({
      address: PERMIT2_ADDRESS,
      abi: permit2NonceBitmapAbi,
      functionName: "nonceBitmap",
      args: [owner, wordPos],
      ...(blockNumber === undefined ? {} : { blockNumber }),
    });
    return (word & bit) !== 0n;
  };

  async function settlementInTx(txHash: Hex, from: Address, to: Address): Promise<UptoSettlement> {
    const [receipt, tx] = await Promise.all([
      client.getTransactionReceipt({ hash: txHash }),
      client.getTransaction({ hash: txHash }),
    ]);
    const moved =
      receipt.status !== "success"
        ? 0n
        : parseEventLogs({
            abi: usdcAbi,
            eventName: "Transfer",
            logs: receipt.logs.filter((log) => isAddressEqual(log.address, usdc)),
            strict: true,
          })
            .filter((log) => isAddressEqual(log.args.from, from) && isAddressEqual(log.args.to, to))
            .reduce((sum, log) => sum + log.args.value, 0n);
    return {
      txHash,
      blockNumber: receipt.blockNumber,
      status: receipt.status,
      call: decodeUptoProxyCall(tx.to, tx.input),
      movedMicroUsdc: moved,
      from: getAddress(from),
      to: getAddress(to),
    };
  }

  return {
    isPermit2NonceUsed: (owner, nonce) => attempt(() => nonceUsed(owner, nonce)),

    getPermit2NonceStateAt: (owner, nonce, depth) =>
      attempt(async () => {
        const head = await client.getBlockNumber({ cacheTime: 0 });
        const blockNumber = head > BigInt(depth) ? head - BigInt(depth) : 0n;
        const [block, used] = await Promise.all([
          client.getBlock({ blockNumber }),
          nonceUsed(owner, nonce, blockNumber),
        ]);
        return { used, blockNumber, blockTime: new Date(Number(block.timestamp) * 1000) };
      }),

    getUptoSettlementInTx: (txHash, from, to) => attempt(() => settlementInTx(txHash, from, to)),

    findUptoSettlements: (query) =>
      attempt(async () => {
        const logs = await client.getContractEvents({
          address: usdc,
          abi: usdcAbi,
          eventName: "Transfer",
          args: { from: query.from, to: query.to },
          fromBlock: query.fromBlock,
          toBlock: query.toBlock,
          strict: true,
        });
        const txs = new Map<Hex, { blockNumber: bigint; logIndex: number }>();
        for (const log of logs) {
          if (log.removed || log.transactionHash === null || log.blockNumber === null || log.logIndex === null)
            continue;
          if (!txs.has(log.transactionHash))
            txs.set(log.transactionHash, { blockNumber: log.blockNumber, logIndex: log.logIndex });
        }
        const ordered = [...txs].sort(([, a], [, b]) =>
          a.blockNumber === b.blockNumber ? a.logIndex - b.logIndex : a.blockNumber < b.blockNumber ? -1 : 1,
        );
        return Promise.all(ordered.map(([hash]) => settlementInTx(hash, query.from, query.to)));
      }),
  };
}
