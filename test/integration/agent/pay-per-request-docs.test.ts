// The documents' pay-per-request programs (issue 41 item 5): SKILL.md's and llms.txt's TypeScript
// that wraps the OpenAI SDK's fetch with `@x402/fetch` and `@x402/evm`'s upto scheme, run byte for
// byte (the deployment's URLs substituted by the server, the wallet key in the env var the code
// reads) with `node --import tsx`, each from its own fresh wallet with no account. The USDC sits at
// Base's address so the client's default spend controls apply exactly as on Base. The wallet's
// one-time Permit2 approval is made by the test kit (SKILL.md's approval block talks to Base's RPC).
// A block that does not run as written fails here: fix the document, not this test.
import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdir, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { beforeAll, describe, expect } from "vitest";
import type { LocalChain } from "../../../src/local/chain/index.js";
import { appTest, fileWorld } from "../../../testkit/app-test.js";
import { assertBooksBalance } from "../../../testkit/books.js";
import { fencedBlocks } from "../../../testkit/doc-examples.js";
import { chainEnv, fundedBuyer, startLocalChain, usdcBalance } from "../../../testkit/funding.js";
import { addSupply } from "../../../testkit/market.js";

const REPO_ROOT = fileURLToPath(new URL("../../../", import.meta.url));

// the local chain: a fixture the world's options read, so it starts before the app and stops after it
let chain: LocalChain;
const test = appTest
  // biome-ignore lint/correctness/noEmptyPattern: vitest reads a fixture's dependencies from this pattern
  .extend("chain", { scope: "file" }, async ({}, { onCleanup }) => {
    chain = await startLocalChain({ usdcAtBaseAddress: true });
    onCleanup(() => chain.stop());
    return chain;
  })
  .override("appOptions", ({ chain }) => ({ sim: {}, syncCatalog: true, env: chainEnv(chain) }));
const world = fileWorld(test);

beforeAll(async () => {
  await addSupply(world.app, world.sim, [{ priceCents: 40, quantityMicroDiem: 200_000_000n }]);
  world.app.rt.services.inference.invalidateBook();
});

/** The document's one TypeScript block that pays per request through the OpenAI SDK. */
async function perRequestBlock(path: string): Promise<string> {
  const res = await fetch(`${world.app.baseUrl}${path}`);
  expect(res.status, path).toBe(200);
  const blocks = fencedBlocks(await res.text()).filter(
    (b) => b.lang === "ts" && b.code.includes("/x402/v1") && b.code.includes('from "openai"'),
  );
  expect(blocks, `${path}: one pay-per-request OpenAI block`).toHaveLength(1);
  const code = (blocks[0] as { code: string }).code;
  for (const needle of ["wrapFetchWithPayment", "UptoEvmScheme", '"eip155:8453"', "fetch: paidFetch"])
    expect(code, `${path} uses ${needle}`).toContain(needle);
  return code;
}

function runProgram(file: string, env: Record<string, string>) {
  return new Promise<{ status: number | null; stdout: string; stderr: string }>((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", file], {
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

interface Completion {
  choices: { message: { content: string } }[];
  usage: { cost: number; cost_details: { cost_usdc: string } };
}

/** Printed after each block: the variables it left (the completion, and SKILL.md's receipt). */
const TRAILER = {
  "/SKILL.md": 'console.log("AGENT_RESULT " + JSON.stringify({ completion: data, receipt }));',
  "/llms.txt": 'console.log("AGENT_RESULT " + JSON.stringify({ completion }));',
} as const;

describe("the documents' pay-per-request examples", () => {
  for (const path of ["/SKILL.md", "/llms.txt"] as const) {
    test(`${path}: a fresh wallet with no account pays one chat; the USDC that left it is usage.cost`, async () => {
      const code = await perRequestBlock(path);
      const dir = join(REPO_ROOT, ".cache", "pay-per-request-docs", randomUUID());
      await mkdir(dir, { recursive: true });
      try {
        const file = join(dir, "pay-per-request.mts");
        await writeFile(file, [code, TRAILER[path]].join("\n"));
        const wallet = await fundedBuyer(chain, 2_000_000n, { approvePermit2: true });
        const before = await usdcBalance(chain, wallet.address);
        const { status, stdout, stderr } = await runProgram(file, { WALLET_PRIVATE_KEY: wallet.privateKey });
        const line = stdout.split("\n").find((l) => l.startsWith("AGENT_RESULT "));
        expect(status === 0 && line !== undefined, `${path} exited ${status}:\n${stderr}\n${stdout}`).toBe(true);
        const out = JSON.parse((line as string).slice("AGENT_RESULT ".length)) as {
          completion: Completion;
          receipt?: { success: boolean; amount: string; transaction: string };
        };
        expect(out.completion.choices[0]?.message.content.length).toBeGreaterThan(0);
        const moved = before - (await usdcBalance(chain, wallet.address));
        expect(moved).toBeGreaterThan(0n);
        expect(BigInt(out.completion.usage.cost_details.cost_usdc.replace(".", ""))).toBe(moved);
        expect(Math.round(out.completion.usage.cost * 1_000_000)).toBe(Number(moved));
        if (out.receipt) {
          expect(out.receipt.success).toBe(true);
          expect(BigInt(out.receipt.amount)).toBe(moved);
          expect(out.receipt.transaction).toMatch(/^0x[0-9a-f]{64}$/);
        }
        await assertBooksBalance(world.app.rt.db);
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    });
  }
});
