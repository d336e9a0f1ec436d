import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process";
import { createRequire } from "node:module";
import { PERMIT2_ADDRESS, x402UptoPermit2ProxyAddress } from "@x402/evm";
import { type Address, createTestClient, getAddress, type Hex, http, maxUint256, numberToHex, parseEther } from "viem";
import { createChainClients, createSerialSender } from "../../adapters/chain/clients.js";
import { logger } from "../../lib/logger.js";
import { compileUsdc } from "./compile.js";
import { localUsdcAbi } from "./usdc-local-abi.js";

export { compileUsdc, DEFAULT_COMPILE_CACHE_DIR, type UsdcArtifact } from "./compile.js";
export { localUsdcAbi } from "./usdc-local-abi.js";

export const LOCAL_CHAIN_ID = 8453;
/** Multicall3's address on Base (and most EVM chains); the local chain has it there too. */
export const MULTICALL3_ADDRESS: Address = "0xcA11bde05977b3631167028862bE2a173976CA11";
/** USDC on Base: the one asset a default `@x402/core` client pays (its spend controls allow default assets only). */
export const BASE_USDC_ADDRESS: Address = "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913";
/** Uniswap Permit2's canonical address; the local chain has its own Permit2.sol there (x402 `upto`). */
export const LOCAL_PERMIT2_ADDRESS: Address = PERMIT2_ADDRESS;
/** @x402/evm's x402UptoPermit2Proxy address; the local chain has X402UptoPermit2Proxy.sol there. */
export const LOCAL_UPTO_PROXY_ADDRESS: Address = x402UptoPermit2ProxyAddress;

export interface DevAccount {
  address: Address;
  privateKey: Hex;
}

export interface StartLocalChainOptions {
  /** RPC port; default 0 = any free port. */
  port?: number;
  /** Interval mining every N seconds; default: automine (one block per transaction). */
  blockTimeSec?: number;
  /** EIP-712 domain name/version of the token (CONTRACT: USDC_EIP712_NAME / USDC_EIP712_VERSION). */
  usdcName?: string;
  usdcVersion?: string;
  /**
   * Place the token at Base's USDC address (`BASE_USDC_ADDRESS`) instead of where the deploy put it,
   * so a default x402 client (spend controls on) pays it as it pays USDC on Base. Default false.
   */
  usdcAtBaseAddress?: boolean;
  /** Where the compiled artifact is cached (default `<repo>/.cache/local-chain`). */
  cacheDir?: string;
  /** Give up if anvil has not printed its listening address after this long (default 15 s). */
  readyTimeoutMs?: number;
}

export interface LocalChain {
  readonly rpcUrl: string;
  readonly chainId: typeof LOCAL_CHAIN_ID;
  readonly usdcAddress: Address;
  /** Dev account 0: deployed the token, owns `mint`. */
  readonly deployer: Address;
  /** anvil's mnemonic accounts (`test test … junk`), 10 000 ETH each. */
  readonly devAccounts: readonly DevAccount[];
  /** Process id of anvil itself (not of its watchdog shell). */
  readonly pid: number;
  /** Mints test USDC (micro-USDC) from the deployer; resolves once mined. Throws on failure (local helper). */
  mintUsdc(to: Address, amountMicro: bigint): Promise<Hex>;
  /** Mines `blocks` empty blocks at once (anvil_mine; chain time moves by ~1 s in total). */
  mine(blocks: number): Promise<void>;
  /** Moves chain time forward by `seconds` (evm_increaseTime): the next block mined carries it. */
  increaseTime(seconds: number): Promise<void>;
  /** Sets an address's ETH balance (e.g. gas for a fresh facilitator or payout key). */
  setEthBalance(address: Address, wei: bigint): Promise<void>;
  /**
   * The wallet of `privateKey` approves Permit2 on the USDC (the one-time step x402 `upto` needs;
   * default: unlimited), after giving it gas when it has none. Resolves once mined.
   */
  approvePermit2(privateKey: Hex, amountMicro?: bigint): Promise<Hex>;
  /** Stops anvil and waits until the process is gone. Idempotent. */
  stop(): Promise<void>;
}

// ------------------------------------------------------------------------------------- process

/**
 * anvil runs under a tiny `sh` watchdog so it can never outlive this process, even on SIGKILL:
 * the watchdog reads its stdin (a pipe from us) and kills anvil when the pipe hits EOF, which the
 * kernel guarantees when we die. The exit/signal hooks below cover orderly shutdowns faster.
 * `$@` is the anvil command line; the first stdout line reports anvil's own pid.
 */
const WATCHDOG_SCRIPT = [
  "exec 3<&0",
  '"$@" </dev/null 3<&- &',
  "child=$!",
  'echo "svc-anvil-pid $child"',
  '( while read -r _; do :; done <&3; kill -TERM "$child" 2>/dev/null ) &',
  "watcher=$!",
  'wait "$child"; code=$?',
  'kill "$watcher" 2>/dev/null',
  'exit "$code"',
].join("\n");

function anvilBinary(): string {
  const os = process.platform;
  const arch = process.arch === "x64" ? "amd64" : process.arch;
  const require = createRequire(import.meta.url);
  return require.resolve(`@foundry-rs/anvil-${os}-${arch}/bin/anvil`);
}

interface LiveAnvil {
  pid: number;
  proc: ChildProcessWithoutNullStreams;
}

/** Every anvil started by this process and not yet stopped; the process hooks kill them. */
const live = new Set<LiveAnvil>();
const HOOK_SIGNALS = ["SIGINT", "SIGTERM", "SIGHUP"] as const;

function killQuietly(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch {
    // already gone
  }
}

function killAllLive(): void {
  for (const anvil of live) {
    killQuietly(anvil.pid, "SIGTERM");
    anvil.proc.stdin.destroy();
  }
}

function onSignal(signal: NodeJS.Signals): void {
  // Someone else (main.ts) owns shutdown: let it drain and call stop(); the exit hook and the
  // watchdog still guarantee anvil dies with us.
  if (process.listeners(signal).some((listener) => listener !== onSignal)) return;
  killAllLive();
  uninstallHooks();
  // Listening replaced Node's default "terminate" disposition; re-raise so we still die of it.
  process.kill(process.pid, signal);
}

let hooksInstalled = false;
function installHooks(): void {
  if (hooksInstalled) return;
  hooksInstalled = true;
  process.on("exit", killAllLive);
  for (const signal of HOOK_SIGNALS) process.on(signal, onSignal);
}

function uninstallHooks(): void {
  if (!hooksInstalled) return;
  hooksInstalled = false;
  process.off("exit", killAllLive);
  for (const signal of HOOK_SIGNALS) process.off(signal, onSignal);
}

interface AnvilBoot {
  pid: number;
  port: number;
  devAccounts: DevAccount[];
}

function parseDevAccounts(banner: string): DevAccount[] {
  const addresses = new Map<number, Address>();
  const keys = new Map<number, Hex>();
  for (const m of banner.matchAll(/\((\d+)\) (0x[0-9a-fA-F]{40}) \(/g)) {
    addresses.set(Number(m[1]), getAddress(m[2] as Address));
  }
  for (const m of banner.matchAll(/\((\d+)\) (0x[0-9a-fA-F]{64})\b/g)) {
    keys.set(Number(m[1]), m[2] as Hex);
  }
  const accounts: DevAccount[] = [];
  for (const [index, address] of [...addresses].sort((a, b) => a[0] - b[0])) {
    const privateKey = keys.get(index);
    if (privateKey !== undefined) accounts.push({ address, privateKey });
  }
  return accounts;
}

function waitForBoot(proc: ChildProcessWithoutNullStreams, timeoutMs: number): Promise<AnvilBoot> {
  return new Promise((resolve, reject) => {
    let stdout = "";
    let stderr = "";
    const cleanup = () => {
      clearTimeout(timer);
      proc.stdout.off("data", onStdout);
      proc.stderr.off("data", onStderr);
      proc.off("exit", onExit);
      // Keep draining: anvil logs every RPC call, and a full pipe would block it.
      proc.stdout.resume();
      proc.stderr.resume();
    };
    const onStdout = (chunk: Buffer) => {
      stdout += chunk.toString("utf8");
      const pid = /svc-anvil-pid (\d+)/.exec(stdout);
      const listening = /Listening on [\d.]+:(\d+)/.exec(stdout);
      if (pid !== null && listening !== null) {
        cleanup();
        resolve({ pid: Number(pid[1]), port: Number(listening[1]), devAccounts: parseDevAccounts(stdout) });
      }
    };
    const onStderr = (chunk: Buffer) => {
      stderr = (stderr + chunk.toString("utf8")).slice(-4000);
    };
    const onExit = (code: number | null, signal: NodeJS.Signals | null) => {
      cleanup();
      reject(new Error(`anvil exited before listening (code ${code}, signal ${signal}): ${stderr.trim()}`));
    };
    const timer = setTimeout(() => {
      cleanup();
      reject(new Error(`anvil did not start within ${timeoutMs} ms: ${stderr.trim()}`));
    }, timeoutMs);
    proc.stdout.on("data", onStdout);
    proc.stderr.on("data", onStderr);
    proc.on("exit", onExit);
  });
}

// ------------------------------------------------------------------------------------- chain

/**
 * Starts anvil (chain id 8453) on 127.0.0.1, deploys the local USDC from dev account 0, places
 * Multicall3, Permit2 and the x402 upto proxy at their canonical addresses (as on Base) and
 * returns handles to drive it. Typical cost: anvil ready in < 100 ms, deploy ~20 ms (compile is cached).
 */
export async function startLocalChain(opts: StartLocalChainOptions = {}): Promise<LocalChain> {
  const artifactPromise = compileUsdc({ cacheDir: opts.cacheDir });
  const args = ["--chain-id", String(LOCAL_CHAIN_ID), "--host", "127.0.0.1", "--port", String(opts.port ?? 0)];
  if (opts.blockTimeSec !== undefined) args.push("--block-time", String(opts.blockTimeSec));

  const proc = spawn("/bin/sh", ["-c", WATCHDOG_SCRIPT, "anvil-watchdog", anvilBinary(), ...args], {
    stdio: ["pipe", "pipe", "pipe"],
  });
  // Writing to / closing the watchdog's stdin after it died raises EPIPE; that is expected.
  proc.stdin.on("error", () => undefined);
  let exited = false;
  const exitPromise = new Promise<void>((resolve) => {
    proc.once("exit", () => {
      exited = true;
      resolve();
    });
  });

  let boot: AnvilBoot;
  try {
    boot = await waitForBoot(proc, opts.readyTimeoutMs ?? 15_000);
  } catch (error) {
    proc.stdin.destroy();
    proc.kill("SIGKILL");
    await artifactPromise.catch(() => undefined);
    throw error;
  }

  const handle: LiveAnvil = { pid: boot.pid, proc };
  live.add(handle);
  installHooks();

  let stopping = false;
  proc.once("exit", (code, signal) => {
    live.delete(handle);
    if (live.size === 0) uninstallHooks();
    if (!stopping) logger.error({ code, signal, pid: boot.pid }, "local chain: anvil exited unexpectedly");
  });

  const stop = async (): Promise<void> => {
    stopping = true;
    if (!exited) {
      killQuietly(boot.pid, "SIGTERM");
      proc.stdin.end();
      const timedOut = await Promise.race([
        exitPromise.then(() => false),
        new Promise<boolean>((resolve) => setTimeout(() => resolve(true), 3_000).unref()),
      ]);
      if (timedOut) {
        killQuietly(boot.pid, "SIGKILL");
        proc.kill("SIGKILL");
        await exitPromise;
      }
    }
    live.delete(handle);
    if (live.size === 0) uninstallHooks();
  };

  try {
    const deployerAccount = boot.devAccounts[0];
    if (deployerAccount === undefined) throw new Error("local chain: could not read anvil's dev accounts");
    const rpcUrl = `http://127.0.0.1:${boot.port}`;
    const { chain, walletClient } = createChainClients({
      rpcUrl,
      chainId: LOCAL_CHAIN_ID,
      privateKey: deployerAccount.privateKey,
    });
    if (walletClient === undefined) throw new Error("unreachable: wallet client requested");
    const testClient = createTestClient({ mode: "anvil", chain, transport: http(rpcUrl) });
    const fastPoll = opts.blockTimeSec === undefined ? 20 : 250;

    const artifact = await artifactPromise;
    const deployHash = await walletClient.deployContract({
      abi: localUsdcAbi,
      bytecode: artifact.bytecode,
      args: [opts.usdcName ?? "USD Coin", opts.usdcVersion ?? "2"],
    });
    const deployReceipt = await walletClient.waitForTransactionReceipt({ hash: deployHash, pollingInterval: fastPoll });
    const deployedAt = deployReceipt.contractAddress;
    if (deployReceipt.status !== "success" || deployedAt === null || deployedAt === undefined) {
      throw new Error(`local chain: USDC deployment failed (tx ${deployHash})`);
    }
    let usdcAddress: Address = deployedAt;
    if (opts.usdcAtBaseAddress) {
      // the runtime code and Usdc.sol's constructor-set slots (0 name, 1 version, 2 totalSupply,
      // 3 owner; short strings are stored in their slot), copied to Base's address
      const [code, ...slots] = await Promise.all([
        walletClient.getCode({ address: deployedAt }),
        ...[0, 1, 2, 3].map((slot) =>
          walletClient.getStorageAt({ address: deployedAt, slot: numberToHex(slot, { size: 32 }) }),
        ),
      ]);
      if (code === undefined) throw new Error("local chain: deployed USDC has no code");
      await testClient.setCode({ address: BASE_USDC_ADDRESS, bytecode: code });
      for (const [slot, value] of slots.entries()) {
        if ((slot === 0 || slot === 1) && value !== undefined && (BigInt(value) & 1n) === 1n)
          throw new Error("local chain: usdcAtBaseAddress needs a token name and version under 32 bytes");
        await testClient.setStorageAt({
          address: BASE_USDC_ADDRESS,
          index: slot,
          value: value ?? numberToHex(0, { size: 32 }),
        });
      }
      usdcAddress = BASE_USDC_ADDRESS;
    }

    // Base has Multicall3; @x402/evm's facilitator reads through it (the local chain's own subset)
    await testClient.setCode({ address: MULTICALL3_ADDRESS, bytecode: artifact.multicall3Code });
    // x402 `upto`: Permit2 and the upto proxy at the addresses @x402/evm signs for (own minimal code)
    await testClient.setCode({ address: LOCAL_PERMIT2_ADDRESS, bytecode: artifact.permit2Code });
    await testClient.setCode({ address: LOCAL_UPTO_PROXY_ADDRESS, bytecode: artifact.uptoProxyCode });

    // Mints go out one at a time so parallel callers never race for the deployer's nonce.
    const mintSerially = createSerialSender();
    const mintUsdc = (to: Address, amountMicro: bigint): Promise<Hex> =>
      mintSerially(async () => {
        const hash = await walletClient.writeContract({
          address: usdcAddress,
          abi: localUsdcAbi,
          functionName: "mint",
          args: [to, amountMicro],
        });
        const receipt = await walletClient.waitForTransactionReceipt({ hash, pollingInterval: fastPoll });
        if (receipt.status !== "success") throw new Error(`local chain: mint reverted (tx ${hash})`);
        return hash;
      });

    const approvePermit2 = async (privateKey: Hex, amountMicro: bigint = maxUint256): Promise<Hex> => {
      const { walletClient: owner } = createChainClients({ rpcUrl, chainId: LOCAL_CHAIN_ID, privateKey });
      if (owner === undefined) throw new Error("unreachable: wallet client requested");
      const eth = await owner.getBalance({ address: owner.account.address });
      if (eth === 0n) await testClient.setBalance({ address: owner.account.address, value: parseEther("1") });
      const hash = await owner.writeContract({
        address: usdcAddress,
        abi: localUsdcAbi,
        functionName: "approve",
        args: [LOCAL_PERMIT2_ADDRESS, amountMicro],
      });
      const receipt = await owner.waitForTransactionReceipt({ hash, pollingInterval: fastPoll });
      if (receipt.status !== "success") throw new Error(`local chain: Permit2 approval reverted (tx ${hash})`);
      return hash;
    };

    logger.debug({ rpcUrl, usdcAddress, pid: boot.pid }, "local chain ready");
    return {
      rpcUrl,
      chainId: LOCAL_CHAIN_ID,
      usdcAddress: getAddress(usdcAddress),
      deployer: deployerAccount.address,
      devAccounts: boot.devAccounts,
      pid: boot.pid,
      mintUsdc,
      mine: (blocks: number) => testClient.mine({ blocks }),
      increaseTime: async (seconds: number) => {
        await testClient.increaseTime({ seconds });
      },
      setEthBalance: (address: Address, wei: bigint) => testClient.setBalance({ address, value: wei }),
      approvePermit2,
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}
