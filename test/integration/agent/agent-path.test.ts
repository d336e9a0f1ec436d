// The agent path (issue 17 item 5): from nothing but `/llms.txt` to a paid completion, acting only on
// what the served documents say. The signup, polling, chat and stream code is SKILL.md's own
// TypeScript, written to a file byte for byte (the deployment's URLs already substituted by the
// server, the wallet key in the env var the code reads) and run with `node --import tsx` — once with
// the v1 client `x402-fetch`, once with the v2 client `@x402/fetch`, each from its own fresh wallet.
// The look-up is the document's curl; the MCP part connects to the `{mcp_url}/mcp` SKILL.md names.
// A block that does not run as written fails here: fix the document, not this test.
import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdir, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { type Address, type Hex, numberToHex } from "viem";
import { afterAll, beforeAll, describe, expect } from "vitest";
import { createChainClients } from "../../../src/adapters/chain/clients.js";
import { formatDecimal6, parseDecimal6 } from "../../../src/lib/money.js";
import { type LocalChain, localUsdcAbi } from "../../../src/local/chain/index.js";
import { appTest, fileWorld } from "../../../testkit/app-test.js";
import { assertBooksBalance } from "../../../testkit/books.js";
import {
  type FencedBlock,
  fencedBlocks,
  isCurlCommand,
  parseCurl,
  shellCommands,
} from "../../../testkit/doc-examples.js";
import { chainEnv, fundedBuyer, startLocalChain, usdcBalance } from "../../../testkit/funding.js";
import { addSupply } from "../../../testkit/market.js";

const REPO_ROOT = fileURLToPath(new URL("../../../", import.meta.url));
/** USDC on Base mainnet: the one asset `@x402/fetch` pays without `allowedAssets`. */
const BASE_USDC: Address = "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913";
/** Each agent's wallet holds this much before it signs up. */
const WALLET_USDC_MICRO = 20_000_000n;

// the local chain: a fixture the world's options read, so it starts before the app and stops after it
let chain: LocalChain;
const test = appTest
  // biome-ignore lint/correctness/noEmptyPattern: vitest reads a fixture's dependencies from this pattern
  .extend("chain", { scope: "file" }, async ({}, { onCleanup }) => {
    chain = await startLocalChain();
    onCleanup(() => chain.stop());
    await placeUsdcAtBaseAddress(chain);
    return chain;
  })
  .override("appOptions", ({ chain }) => ({
    sim: {},
    syncCatalog: true,
    // the service's default depth (SKILL.md: 20 blocks), reached in a few seconds by the ticker below
    env: chainEnv(chain, { USDC_ADDRESS: BASE_USDC, CONFIRMATION_BLOCKS: "20" }),
  }));
const world = fileWorld(test);

/**
 * Blocks keep coming and the confirmations job keeps running, as on Base with the scheduled worker
 * (the test app runs no schedules): a payment is confirmed a few seconds after it settles. A failed
 * tick is retried by the next one (at the end, the chain stops under it).
 */
let ticker: NodeJS.Timeout | undefined;
beforeAll(async () => {
  await addSupply(world.app, world.sim, [
    { priceCents: 40, quantityMicroDiem: 200_000_000n },
    { priceCents: 55, quantityMicroDiem: 100_000_000n },
  ]);
  let busy = false;
  ticker = setInterval(() => {
    if (busy) return;
    busy = true;
    chain
      .mine(1)
      .then(() => world.app.rt.services.payments.confirmPending())
      .catch(() => undefined)
      .finally(() => {
        busy = false;
      });
  }, 100);
});
afterAll(() => {
  clearInterval(ticker);
});

// ------------------------------------------------------------------------------ the local chain

async function rpc<T>(method: string, params: unknown[]): Promise<T> {
  const res = await fetch(chain.rpcUrl, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
  });
  const body = (await res.json()) as { result?: T; error?: { message: string } };
  if (body.error) throw new Error(`${method}: ${body.error.message}`);
  return body.result as T;
}

/**
 * The local USDC, also at Base's USDC address (its code and its name/version/owner slots copied), so
 * the challenge names the asset the v2 client knows and SKILL.md's v2 block runs exactly as an agent
 * on Base runs it, spend cap included. (On `npm run dev`'s chain the document's `allowedAssets` note
 * applies instead.)
 */
async function placeUsdcAtBaseAddress(c: LocalChain): Promise<void> {
  const code = await rpc<Hex>("eth_getCode", [c.usdcAddress, "latest"]);
  await rpc("anvil_setCode", [BASE_USDC, code]);
  // Usdc.sol's layout: name, version, totalSupply, owner (the mappings' own slots are empty)
  for (let slot = 0; slot < 4; slot++) {
    const key = numberToHex(slot, { size: 32 });
    await rpc("anvil_setStorageAt", [
      BASE_USDC,
      key,
      await rpc<Hex>("eth_getStorageAt", [c.usdcAddress, key, "latest"]),
    ]);
  }
}

/** A fresh wallet holding `usdcMicro` of the USDC at Base's address. */
async function freshWallet(usdcMicro: bigint) {
  const wallet = await fundedBuyer(chain, 0n);
  const deployer = chain.devAccounts[0];
  if (!deployer) throw new Error("anvil dev accounts missing");
  const { walletClient } = createChainClients({
    rpcUrl: chain.rpcUrl,
    chainId: chain.chainId,
    privateKey: deployer.privateKey,
  });
  if (!walletClient) throw new Error("no wallet client");
  const hash = await walletClient.writeContract({
    address: BASE_USDC,
    abi: localUsdcAbi,
    functionName: "mint",
    args: [wallet.address, usdcMicro],
  });
  const receipt = await walletClient.waitForTransactionReceipt({ hash, pollingInterval: 20 });
  if (receipt.status !== "success") throw new Error("mint reverted");
  return wallet;
}

function baseUsdcOf(address: string): Promise<bigint> {
  return usdcBalance({ ...chain, usdcAddress: BASE_USDC }, address);
}

// ------------------------------------------------------------------------------ the documents

async function getDocument(url: string): Promise<string> {
  const res = await fetch(url);
  expect(res.status, url).toBe(200);
  return res.text();
}

interface Documents {
  skill: string;
  mcp: string;
  /** SKILL.md's TypeScript blocks that sign up, by the package they pay with */
  signup: { "x402-fetch": string; "@x402/fetch": string };
  /** the TypeScript blocks after them, in order (poll, buffered chat, stream, retry helper) */
  rest: string[];
  /** MCP.md's TypeScript client */
  mcpClient: string;
  /** the model SKILL.md's chat examples use */
  model: string;
}

/** What an agent reads: llms.txt, the SKILL.md it points to, and the MCP.md SKILL.md points to. */
async function readDocuments(): Promise<Documents> {
  const llms = await getDocument(`${world.app.baseUrl}/llms.txt`);
  const skillUrl = /\[Agent skill\]\((\S+\/SKILL\.md)\)/.exec(llms)?.[1];
  expect(skillUrl, "llms.txt links SKILL.md").toBe(`${world.app.baseUrl}/SKILL.md`);
  const skill = await getDocument(skillUrl as string);
  const mcpUrl = /\[MCP\.md\]\((\S+\/MCP\.md)\)/.exec(skill)?.[1];
  expect(mcpUrl, "SKILL.md links MCP.md").toBe(`${world.app.baseUrl}/MCP.md`);
  const mcp = await getDocument(mcpUrl as string);

  // the agent's program: every TypeScript block but those marked as programs of their own (a
  // webhook receiver runs on the agent's server, not in its client)
  const ts = fencedBlocks(skill).filter(
    (b) => (b.lang === "ts" || b.lang === "typescript") && b.annotation !== "standalone",
  );
  const imports = (code: string) => [...code.matchAll(/^import .* from "([^"]+)";$/gm)].map((m) => m[1]);
  const v1 = ts.filter((b) => imports(b.code).includes("x402-fetch"));
  const v2 = ts.filter((b) => imports(b.code).includes("@x402/fetch"));
  expect(v1, "one x402-fetch signup block").toHaveLength(1);
  expect(v2, "one @x402/fetch signup block").toHaveLength(1);
  const [v1Block, v2Block] = [v1[0] as FencedBlock, v2[0] as FencedBlock];
  const rest = ts.slice(Math.max(ts.indexOf(v1Block), ts.indexOf(v2Block)) + 1).map((b) => b.code);
  // the blocks after the signups continue the same program: no imports of their own
  for (const code of rest) expect(imports(code)).toEqual([]);
  expect(rest.join("\n")).toContain("/v1/agent/me");
  expect(rest.join("\n")).toContain("stream: true");
  const mcpTs = fencedBlocks(mcp).filter((b) => b.lang === "ts" || b.lang === "typescript");
  expect(mcpTs, "MCP.md's TypeScript client").toHaveLength(1);
  return {
    skill,
    mcp,
    signup: { "x402-fetch": v1Block.code, "@x402/fetch": v2Block.code },
    rest,
    mcpClient: (mcpTs[0] as FencedBlock).code,
    model: /model: "([^"]+)"/.exec(rest.join("\n"))?.[1] ?? "",
  };
}

/** The first curl of SKILL.md's ```sh blocks that addresses `pathPart`, read with these variables. */
function documentCurl(skill: string, pathPart: string, env: Record<string, string>) {
  const commands = fencedBlocks(skill)
    .filter((b) => b.lang === "sh")
    .flatMap((b) => shellCommands(b.code).filter(isCurlCommand));
  const matching = commands.filter((c) => c.includes(pathPart));
  expect(matching.length, `a curl for ${pathPart}`).toBeGreaterThan(0);
  return parseCurl(matching[0] as string, env);
}

// ------------------------------------------------------------------------------ running a block

/** What the agent's program knows at its end (its own variables, printed by the trailer). */
interface AgentResult {
  signup: {
    apiKey: string;
    walletAddress: string;
    pendingUsdc: string;
    confirmationBlocks: number;
    transaction: string;
  };
  status: number;
  completion: { object: string; choices: { message: { content: string } }[] };
  costUsdc: string | null;
  supportReference: string | null;
  balanceRemaining: string | null;
  clearingPriceCents: string | null;
  text: string;
  cost: { costUsdc: string; clearingPriceCents: number; supportReference: string } | undefined;
  /** the signup's receipt headers: the version each client paid in */
  receipts: { v1: string | null; v2: string | null };
}

/** Printed after SKILL.md's code: the variables it left, nothing more. */
const SKILL_TRAILER = `
console.log("AGENT_RESULT " + JSON.stringify({
  signup, status: r.status, completion, costUsdc, supportReference,
  receipts: { v1: res.headers.get("x-payment-response"), v2: res.headers.get("payment-response") },
  balanceRemaining: r.headers.get("x-balance-remaining"),
  clearingPriceCents: r.headers.get("x-svc-clearing-price-cents"),
  text, cost,
}));
`;

/** Printed after MCP.md's code: what its `agent_me` call answered; then the client is closed. */
const MCP_TRAILER = `
console.log("AGENT_RESULT " + JSON.stringify(me.structuredContent));
await client.close();
`;

function spawnNode(args: string[], env: Record<string, string> = {}) {
  return new Promise<{ status: number | null; stdout: string; stderr: string }>((resolve, reject) => {
    const child = spawn(process.execPath, args, {
      cwd: REPO_ROOT,
      env: { ...process.env, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => {
      stdout += d.toString();
    });
    child.stderr.on("data", (d: Buffer) => {
      stderr += d.toString();
    });
    const timer = setTimeout(() => child.kill("SIGKILL"), 40_000);
    child.on("error", reject);
    child.on("close", (status) => {
      clearTimeout(timer);
      resolve({ status, stdout, stderr });
    });
  });
}

/** Runs a program with tsx, as the documents' readers do; returns what its trailer printed. */
async function runProgram<T>(file: string, env: Record<string, string>): Promise<T> {
  const { status, stdout, stderr } = await spawnNode(["--import", "tsx", file], env);
  const line = stdout.split("\n").find((l) => l.startsWith("AGENT_RESULT "));
  expect(status === 0 && line !== undefined, `${file} exited ${status}:\n${stderr}\n${stdout}`).toBe(true);
  return JSON.parse((line as string).slice("AGENT_RESULT ".length)) as T;
}

/** The programs also compile as strict TypeScript (a reader's `tsc --strict`, Node's module rules). */
async function typecheck(files: string[]): Promise<void> {
  const tsc = join(REPO_ROOT, "node_modules", "typescript", "bin", "tsc");
  const flags = ["--noEmit", "--strict", "--module", "nodenext", "--target", "es2022", "--skipLibCheck"];
  const { status, stdout, stderr } = await spawnNode([tsc, ...flags, "--types", "node", ...files]);
  expect(status, `tsc --strict:\n${stdout}${stderr}`).toBe(0);
}

// ------------------------------------------------------------------------------ MCP

async function tool(client: Client, name: string, args: Record<string, unknown>): Promise<Record<string, unknown>> {
  const r = (await client.callTool({ name, arguments: args })) as CallToolResult;
  expect(r.isError, `${name}: ${JSON.stringify(r.content)}`).toBeFalsy();
  return r.structuredContent as Record<string, unknown>;
}

// ------------------------------------------------------------------------------ the test

/** A six-decimal USDC string as the service renders it, in micro-USDC. */
function micro(usdc: unknown): bigint {
  expect(usdc).toMatch(/^\d+\.\d{6}$/);
  const value = parseDecimal6(usdc as string);
  if (value === undefined) throw new Error(`not a USDC amount: ${String(usdc)}`);
  return value;
}

/** The documented look-up; "a request still running is not recorded yet (404 until it ends)". */
async function lookUp(skill: string, apiKey: string, ref: string): Promise<Record<string, unknown>> {
  const call = documentCurl(skill, "/v1/agent/requests/", { SVC_API_KEY: apiKey, SUPPORT_REFERENCE: ref });
  for (let i = 0; ; i++) {
    const res = await fetch(call.url, { method: call.method, headers: call.headers, body: call.body });
    if (res.status === 404 && i < 50) {
      await new Promise((r) => setTimeout(r, 100));
      continue;
    }
    expect(res.status, `look-up of ${ref}`).toBe(200);
    return (await res.json()) as Record<string, unknown>;
  }
}

async function agentMe(skill: string, apiKey: string): Promise<Record<string, unknown>> {
  const call = documentCurl(skill, "/v1/agent/me", { SVC_API_KEY: apiKey });
  const res = await fetch(call.url, { method: call.method, headers: call.headers });
  expect(res.status).toBe(200);
  return (await res.json()) as Record<string, unknown>;
}

describe("an agent with only the documents and an x402 wallet", () => {
  test("signs up with each official x402 client, waits for confirmation, pays for buffered, streamed and MCP completions, and looks them up", async () => {
    const docs = await readDocuments();
    const payTo = world.app.rt.config.chain.payTo as string;
    const payToBefore = await baseUsdcOf(payTo);
    const dir = join(REPO_ROOT, ".cache", "agent-path", randomUUID());
    await mkdir(dir, { recursive: true });
    try {
      const clients = ["x402-fetch", "@x402/fetch"] as const;
      const files = {
        "x402-fetch": join(dir, "signup-v1-x402-fetch.mts"),
        "@x402/fetch": join(dir, "signup-v2-x402-fetch.mts"),
      };
      const mcpFile = join(dir, "mcp-client.mts");
      // each program is a signup block and the blocks after it, as the document lays them out
      for (const pkg of clients)
        await writeFile(files[pkg], [docs.signup[pkg], ...docs.rest, SKILL_TRAILER].join("\n"));
      await writeFile(mcpFile, [docs.mcpClient, MCP_TRAILER].join("\n"));
      const typechecked = typecheck([...Object.values(files), mcpFile]);
      // one after the other: the mints share the deployer's nonce
      const wallets = [await freshWallet(WALLET_USDC_MICRO), await freshWallet(WALLET_USDC_MICRO)];
      // both agents at once, each with its own wallet
      const results = await Promise.all(
        clients.map((pkg, i) =>
          runProgram<AgentResult>(files[pkg], {
            WALLET_PRIVATE_KEY: (wallets[i] as { privateKey: string }).privateKey,
          }),
        ),
      );
      await typechecked;

      let paidIn = 0n;
      for (const [i, pkg] of clients.entries()) {
        const wallet = wallets[i] as { address: string };
        const r = results[i] as AgentResult;
        const where = `${pkg}:`;
        // the signup: a key for this wallet, the whole amount pending, and the USDC moved on chain
        expect(r.signup.apiKey, where).toMatch(/^svc_/);
        expect(r.signup.walletAddress, where).toBe(wallet.address.toLowerCase());
        expect(r.signup.confirmationBlocks, where).toBe(20);
        const fundedMicro = micro(r.signup.pendingUsdc);
        expect(fundedMicro, where).toBeGreaterThanOrEqual(1_000_000n);
        paidIn += fundedMicro;
        expect(await baseUsdcOf(wallet.address), where).toBe(WALLET_USDC_MICRO - fundedMicro);
        // x402-fetch pays the v1 body with X-PAYMENT; @x402/fetch, as it comes, the v2 header
        // with PAYMENT-SIGNATURE: each receipt comes back in its own version's header only
        const paidIn402 = pkg === "x402-fetch" ? r.receipts.v1 : r.receipts.v2;
        expect(paidIn402, where).toEqual(expect.any(String));
        expect(pkg === "x402-fetch" ? r.receipts.v2 : r.receipts.v1, where).toBeNull();
        expect(JSON.parse(Buffer.from(paidIn402 ?? "", "base64").toString())).toMatchObject({
          success: true,
          transaction: r.signup.transaction,
        });

        // the buffered completion: the document's headers, and the balance after it
        expect(r.status, where).toBe(200);
        expect(r.completion.object, where).toBe("chat.completion");
        expect(r.completion.choices[0]?.message.content.length, where).toBeGreaterThan(0);
        const bufferedMicro = micro(r.costUsdc);
        expect(bufferedMicro, where).toBeGreaterThan(0n);
        expect(r.balanceRemaining, where).toBe(formatDecimal6(fundedMicro - bufferedMicro));
        expect(r.clearingPriceCents, where).toBe("40");

        // the stream: text, then the svc.cost frame read by the document's loop
        expect(r.text.length, where).toBeGreaterThan(0);
        expect(r.cost, where).toMatchObject({
          clearingPriceCents: 40,
          costUsdc: expect.stringMatching(/^\d+\.\d{6}$/),
        });
        const cost = r.cost as NonNullable<AgentResult["cost"]>;
        const streamedMicro = micro(cost.costUsdc);
        expect(streamedMicro, where).toBeGreaterThan(0n);
        expect(cost.supportReference, where).not.toBe(r.supportReference);

        // both look-ups (the document's curl) say what the answers said
        const apiKey = r.signup.apiKey;
        expect(await lookUp(docs.skill, apiKey, r.supportReference as string), where).toMatchObject({
          status: "succeeded",
          costUsdc: r.costUsdc,
          clearingPriceCents: 40,
        });
        expect(await lookUp(docs.skill, apiKey, cost.supportReference), where).toMatchObject({
          status: "succeeded",
          costUsdc: cost.costUsdc,
          clearingPriceCents: 40,
        });
        const afterRest = await agentMe(docs.skill, apiKey);
        expect(afterRest, where).toMatchObject({
          confirmedUsdc: formatDecimal6(fundedMicro - bufferedMicro - streamedMicro),
          pendingUsdc: "0.000000",
        });

        // MCP.md's client, run as written with the key in SVC_API_KEY
        const viaSnippet = await runProgram<Record<string, unknown>>(mcpFile, { SVC_API_KEY: apiKey });
        expect(viaSnippet, where).toMatchObject({
          walletAddress: r.signup.walletAddress,
          confirmedUsdc: afterRest.confirmedUsdc,
        });

        // the same through MCP, at the URL SKILL.md names, with the same key
        const mcpUrl = /hosted MCP server at `(\S+\/mcp)`/.exec(docs.skill)?.[1];
        expect(mcpUrl).toBe(`${world.app.rt.config.urls.mcp}/mcp`);
        for (const name of ["agent_me", "chat_completion", "request_lookup"]) {
          expect(docs.skill, `SKILL.md lists ${name}`).toContain(`\`${name}\``);
          expect(docs.mcp, `MCP.md describes ${name}`).toContain(`| \`${name}\``);
        }
        const client = new Client({ name: "agent-path", version: "1.0.0" });
        await client.connect(
          new StreamableHTTPClientTransport(new URL(mcpUrl as string), {
            requestInit: { headers: { Authorization: `Bearer ${apiKey}` } },
          }),
        );
        try {
          const me = await tool(client, "agent_me", {});
          expect(me, where).toMatchObject({
            confirmedUsdc: afterRest.confirmedUsdc,
            walletAddress: r.signup.walletAddress,
          });
          const chat = await tool(client, "chat_completion", {
            model: docs.model,
            messages: [{ role: "user", content: "Say hi" }],
            max_tokens: 200,
          });
          const mcpMicro = micro(chat.costUsdc);
          expect(mcpMicro, where).toBeGreaterThan(0n);
          const remaining = fundedMicro - bufferedMicro - streamedMicro - mcpMicro;
          expect(chat, where).toMatchObject({
            clearingPriceCents: 40,
            balanceRemainingUsdc: formatDecimal6(remaining),
          });
          expect(
            await tool(client, "request_lookup", { support_reference: chat.supportReference }),
            where,
          ).toMatchObject({
            status: "succeeded",
            costUsdc: chat.costUsdc,
          });
          expect(await tool(client, "agent_me", {}), where).toMatchObject({ confirmedUsdc: formatDecimal6(remaining) });
        } finally {
          await client.close();
        }
      }
      // what the wallets paid is what the service's address received
      expect(await baseUsdcOf(payTo)).toBe(payToBefore + paidIn);
      await assertBooksBalance(world.app.rt.db);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
