import { createHash, randomUUID } from "node:crypto";
import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { Hex } from "viem";

const require = createRequire(import.meta.url);

/** Repository root (this file lives in src/local/chain/). */
const REPO_ROOT = fileURLToPath(new URL("../../../", import.meta.url));
const SOURCE_PATH = fileURLToPath(new URL("./Usdc.sol", import.meta.url));
const MULTICALL3_SOURCE_PATH = fileURLToPath(new URL("./Multicall3.sol", import.meta.url));
const PERMIT2_SOURCE_PATH = fileURLToPath(new URL("./Permit2.sol", import.meta.url));
const UPTO_PROXY_SOURCE_PATH = fileURLToPath(new URL("./X402UptoPermit2Proxy.sol", import.meta.url));
export const DEFAULT_COMPILE_CACHE_DIR = path.join(REPO_ROOT, ".cache", "local-chain");

const SOLC_SETTINGS = {
  optimizer: { enabled: true, runs: 200 },
  // solc 0.8.37 defaults to osaka; anvil and Base run cancun-level EVMs.
  evmVersion: "cancun",
  outputSelection: {
    "Usdc.sol": { Usdc: ["abi", "evm.bytecode.object"] },
    "Multicall3.sol": { Multicall3: ["evm.deployedBytecode.object"] },
    "Permit2.sol": { Permit2: ["abi", "evm.deployedBytecode.object"] },
    "X402UptoPermit2Proxy.sol": { X402UptoPermit2Proxy: ["abi", "evm.deployedBytecode.object"] },
  },
} as const;

export interface UsdcArtifact {
  /** Compiler ABI (untyped JSON). For typed calls use `localUsdcAbi`. */
  abi: unknown[];
  bytecode: Hex;
  /** Runtime code of src/local/chain/Multicall3.sol, placed at Multicall3's canonical address. */
  multicall3Code: Hex;
  /** Runtime code of src/local/chain/Permit2.sol, placed at Permit2's canonical address. */
  permit2Code: Hex;
  /** Runtime code of src/local/chain/X402UptoPermit2Proxy.sol, placed at @x402/evm's `x402UptoPermit2ProxyAddress`. */
  uptoProxyCode: Hex;
  /** Compiler ABIs of the two (untyped JSON; tests compare them with what @x402/evm calls). */
  permit2Abi: unknown[];
  uptoProxyAbi: unknown[];
  solcVersion: string;
  /** sha256 over source + solc version + settings; the cache key. */
  sourceHash: string;
  fromCache: boolean;
}

interface SolcOutput {
  errors?: { severity: string; formattedMessage: string }[];
  contracts?: Record<
    string,
    Record<string, { abi: unknown[]; evm: { bytecode: { object: string }; deployedBytecode: { object: string } } }>
  >;
}

function solcPackageVersion(): string {
  const pkg = require("solc/package.json") as { version: string };
  return pkg.version;
}

/**
 * Compiles src/local/chain/Usdc.sol (and Multicall3.sol, Permit2.sol, X402UptoPermit2Proxy.sol) with solc-js, caching the artifact under
 * `<repo>/.cache/local-chain/usdc-<hash>.json`. The wasm compiler costs ~1-2 s to load, so it is only
 * imported on a cache miss; a warm start reads one small JSON file.
 */
export async function compileUsdc(opts: { cacheDir?: string } = {}): Promise<UsdcArtifact> {
  const cacheDir = opts.cacheDir ?? DEFAULT_COMPILE_CACHE_DIR;
  const source = await readFile(SOURCE_PATH, "utf8");
  const multicall3Source = await readFile(MULTICALL3_SOURCE_PATH, "utf8");
  const permit2Source = await readFile(PERMIT2_SOURCE_PATH, "utf8");
  const uptoProxySource = await readFile(UPTO_PROXY_SOURCE_PATH, "utf8");
  const solcVersion = solcPackageVersion();
  const sourceHash = createHash("sha256")
    .update(
      JSON.stringify({
        source,
        multicall3Source,
        permit2Source,
        uptoProxySource,
        solcVersion,
        settings: SOLC_SETTINGS,
      }),
    )
    .digest("hex");
  const cacheFile = path.join(cacheDir, `usdc-${sourceHash.slice(0, 24)}.json`);

  try {
    const cached = JSON.parse(await readFile(cacheFile, "utf8")) as Omit<UsdcArtifact, "fromCache">;
    const codes = [cached.bytecode, cached.multicall3Code, cached.permit2Code, cached.uptoProxyCode];
    if (cached.sourceHash === sourceHash && codes.every((code) => code?.startsWith("0x")))
      return { ...cached, fromCache: true };
  } catch {
    // miss or unreadable: compile below
  }

  const solc = (await import("solc")).default;
  const input = {
    language: "Solidity",
    sources: {
      "Usdc.sol": { content: source },
      "Multicall3.sol": { content: multicall3Source },
      "Permit2.sol": { content: permit2Source },
      "X402UptoPermit2Proxy.sol": { content: uptoProxySource },
    },
    settings: SOLC_SETTINGS,
  };
  const output = JSON.parse(solc.compile(JSON.stringify(input)) as string) as SolcOutput;
  const errors = (output.errors ?? []).filter((e) => e.severity === "error");
  if (errors.length > 0) {
    throw new Error(
      `the local chain's contracts failed to compile:\n${errors.map((e) => e.formattedMessage).join("\n")}`,
    );
  }
  const contract = output.contracts?.["Usdc.sol"]?.Usdc;
  if (contract === undefined) throw new Error("Usdc.sol: compiler output has no Usdc contract");
  const multicall3 = output.contracts?.["Multicall3.sol"]?.Multicall3;
  if (multicall3 === undefined) throw new Error("Multicall3.sol: compiler output has no Multicall3 contract");
  const permit2 = output.contracts?.["Permit2.sol"]?.Permit2;
  if (permit2 === undefined) throw new Error("Permit2.sol: compiler output has no Permit2 contract");
  const uptoProxy = output.contracts?.["X402UptoPermit2Proxy.sol"]?.X402UptoPermit2Proxy;
  if (uptoProxy === undefined) throw new Error("X402UptoPermit2Proxy.sol: compiler output has no proxy contract");

  const artifact: Omit<UsdcArtifact, "fromCache"> = {
    abi: contract.abi,
    bytecode: `0x${contract.evm.bytecode.object}`,
    multicall3Code: `0x${multicall3.evm.deployedBytecode.object}`,
    permit2Code: `0x${permit2.evm.deployedBytecode.object}`,
    uptoProxyCode: `0x${uptoProxy.evm.deployedBytecode.object}`,
    permit2Abi: permit2.abi,
    uptoProxyAbi: uptoProxy.abi,
    solcVersion: solc.version() as string,
    sourceHash,
  };
  // Write-then-rename: parallel test workers may compile at the same time; readers never see half a file.
  await mkdir(cacheDir, { recursive: true });
  const tmp = `${cacheFile}.${process.pid}.${randomUUID()}.tmp`;
  await writeFile(tmp, JSON.stringify(artifact));
  await rename(tmp, cacheFile);
  return { ...artifact, fromCache: false };
}
