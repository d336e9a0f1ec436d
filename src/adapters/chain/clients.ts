import {
  type Chain,
  createPublicClient,
  createWalletClient,
  defineChain,
  type Hex,
  http,
  type PrivateKeyAccount,
  type PublicClient,
  publicActions,
  type Transport,
  webSocket,
} from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { base, baseSepolia } from "viem/chains";
import { createNonceManager, jsonRpc } from "viem/nonce";

/**
 * Poll every 250 ms (viem's default follows the chain's block time: 4 s for Base).
 * Settlement and receipt waits use it, so it bounds how long a local settle takes.
 */
export const CHAIN_POLLING_INTERVAL_MS = 250;

/**
 * The viem chain for `chainId`, talking ONLY to `rpcUrl` (http(s) or ws(s)).
 *
 * Base mainnet (8453) and Base Sepolia (84532) keep their viem definitions (OP-stack formatters,
 * multicall3) with the RPC URLs replaced, so nothing ever falls back to a public RPC. Any other id
 * (a custom local chain) gets Base's definition under that id.
 */
export function defineLocalOrBaseChain(rpcUrl: string, chainId: number): Chain {
  const template = chainId === baseSepolia.id ? baseSepolia : base;
  const rpcUrls = isWebSocketUrl(rpcUrl) ? { http: [], webSocket: [rpcUrl] } : { http: [rpcUrl] };
  return defineChain({ ...template, id: chainId, rpcUrls: { default: rpcUrls } });
}

function isWebSocketUrl(rpcUrl: string): boolean {
  return rpcUrl.startsWith("ws://") || rpcUrl.startsWith("wss://");
}

export interface ChainClientsOptions {
  rpcUrl: string;
  chainId: number;
  /** When given, a wallet client signing locally with this key is created as well. */
  privateKey?: Hex;
  /** HTTP request timeout per RPC call (default 10 s). */
  requestTimeoutMs?: number;
}

function buildWalletClient(chain: Chain, transport: Transport, account: PrivateKeyAccount) {
  return createWalletClient({ chain, transport, account, pollingInterval: CHAIN_POLLING_INTERVAL_MS }).extend(
    publicActions,
  );
}

/** A wallet client with public actions: what x402's `settle()` expects as its signer. */
export type ChainWalletClient = ReturnType<typeof buildWalletClient>;
export type ChainPublicClient = PublicClient<Transport, Chain>;

export interface ChainClients {
  chain: Chain;
  publicClient: ChainPublicClient;
  /** Present when a private key was given. */
  walletClient: ChainWalletClient | undefined;
}

/**
 * Public client (and optional wallet client) on the configured RPC.
 *
 * - `cacheTime: 0`: viem otherwise caches `eth_blockNumber` for 4 s, which makes confirmation
 *   counts stale (STACK_NOTES gotcha 6).
 * - The wallet's account gets its own viem nonce manager (not viem's global one, which is keyed by
 *   address + chain id and would mix up two local chains that both use id 8453), so sends in this
 *   process get distinct nonces even when the RPC's pending count lags; `createSerialSender` adds
 *   ordering on top.
 */
export function createChainClients(opts: ChainClientsOptions): ChainClients {
  const chain = defineLocalOrBaseChain(opts.rpcUrl, opts.chainId);
  const timeout = opts.requestTimeoutMs ?? 10_000;
  const transport = isWebSocketUrl(opts.rpcUrl)
    ? webSocket(opts.rpcUrl, { timeout, retryCount: 1 })
    : http(opts.rpcUrl, { timeout, retryCount: 1 });
  const publicClient: ChainPublicClient = createPublicClient({
    chain,
    transport,
    cacheTime: 0,
    pollingInterval: CHAIN_POLLING_INTERVAL_MS,
  });
  const walletClient =
    opts.privateKey === undefined
      ? undefined
      : buildWalletClient(
          chain,
          transport,
          privateKeyToAccount(opts.privateKey, { nonceManager: createNonceManager({ source: jsonRpc() }) }),
        );
  return { chain, publicClient, walletClient };
}

/**
 * Runs async jobs one at a time, in call order. Used around transaction *broadcasts* (not receipt
 * waits) so two sends from the same key never race for a nonce.
 */
export function createSerialSender(): <T>(job: () => Promise<T>) => Promise<T> {
  let tail: Promise<unknown> = Promise.resolve();
  return <T>(job: () => Promise<T>): Promise<T> => {
    const run = tail.then(job, job);
    tail = run.catch(() => undefined);
    return run;
  };
}
