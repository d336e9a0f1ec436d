import { execFileSync } from "node:child_process";
import OpenAI from "openai";
import { createPublicClient, erc20Abi, http } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { formatDecimal6, parseDecimal6 } from "../../../src/lib/money.js";
import { type LocalChain, startLocalChain } from "../../../src/local/chain/index.js";
import { createLocalIdp } from "../../../src/local/idp/index.js";
import { startUpstreamSimulator, type UpstreamSimulator } from "../../../src/local/upstream-sim/index.js";
import { x402Signup } from "../../../testkit/funding.js";
import { freePort, isolatedWorld } from "../../../testkit/harness.js";
import { spawnDev, spawnMain, waitFor, waitForAsync, waitForExit, waitForHttp } from "../../../testkit/spawn.js";

const PROD = {
  PAY_TO: "0x1111111111111111111111111111111111111111",
  SESSION_SECRET: "s".repeat(40),
  KEY_ENCRYPTION_KEY: "ab".repeat(32),
  LOG_LEVEL: "error",
};

// the deadlines below are hang guards, not timings: a 2-core machine under load (15) takes minutes
describe("start-up refuses bad configuration with one clear line", { timeout: 120_000 }, () => {
  test("malformed PORT", async () => {
    const child = spawnMain([], { ...PROD, PORT: "eighty" });
    expect(await waitForExit(child, 90_000)).toBe(1);
    const lines = child.output().stderr.trim().split("\n");
    expect(lines).toEqual(['PORT: expected an integer 0-65535, got "eighty"']);
  });

  test("a DATABASE_URL nobody answers", async () => {
    const port = await freePort();
    const child = spawnMain([], {
      ...PROD,
      PORT: String(await freePort()),
      DATABASE_URL: `postgresql://postgres@127.0.0.1:${port}/svc`,
    });
    expect(await waitForExit(child, 90_000)).toBe(1);
    const lines = child.output().stderr.trim().split("\n");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(new RegExp(`^DATABASE_URL: cannot connect to 127\\.0\\.0\\.1:${port}/svc`));
  });

  test("a malformed DATABASE_URL: one line naming it, never its password (issue 38)", async () => {
    // a password with / not percent-encoded: the URL does not parse, and the value is not echoed
    const child = spawnMain([], { ...PROD, DATABASE_URL: "postgresql://svc:a/b+Secr3t=d@db:5432/svc" });
    expect(await waitForExit(child, 90_000)).toBe(1);
    const lines = child.output().stderr.trim().split("\n");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^DATABASE_URL: expected a postgresql\/postgres URL; the value does not parse as a URL/);
    expect(lines[0]).toMatch(/\/ as %2F, \+ as %2B, = as %3D/);
    expect(lines[0]).not.toContain("Secr3t");
  });

  test("missing production secrets are named", async () => {
    const child = spawnMain([], { LOG_LEVEL: "error" });
    expect(await waitForExit(child, 90_000)).toBe(1);
    expect(
      child
        .output()
        .stderr.trim()
        .split("\n")
        .map((l) => l.split(":")[0]),
    ).toEqual(["PAY_TO", "SESSION_SECRET", "KEY_ENCRYPTION_KEY"]);
  });
});

describe("npm run dev (local mode)", { timeout: 240_000 }, () => {
  let databaseUrl: string;
  let drop: () => Promise<void>;
  beforeAll(async () => {
    const w = await isolatedWorld();
    databaseUrl = w.databaseUrl;
    drop = w.drop;
  });
  afterAll(async () => {
    await drop();
  });

  test("prints its URLs, answers /healthz and GraphQL, and Ctrl-C stops everything", async () => {
    const port = await freePort();
    const child = spawnDev({
      PORT: String(port),
      DATABASE_URL: databaseUrl,
      REDIS_PREFIX: `test-dev-${port}`,
    });
    try {
      // generous: a loaded two-core machine starts the chain, the simulator and the app slowly
      await waitFor(() => child.output().stdout.includes("Ctrl-C stops"), 60_000, "the banner");
      const out = child.output().stdout;
      const base = `http://127.0.0.1:${port}`;
      expect(out).toContain(`${base}/v1`);
      expect(out).toContain(`${base}/graphql`);
      expect(out).toContain(`${base}/healthz`);
      const rpc = /Chain RPC\s+(http:\/\/127\.0\.0\.1:(\d+))/.exec(out);
      expect(rpc).not.toBeNull();

      const health = await fetch(`${base}/healthz`);
      expect(health.status).toBe(200);
      const gql = await fetch(`${base}/graphql`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ query: "{ market { cheapestPostedCents prices { priceCentsPerDollar } } }" }),
      });
      const body = (await gql.json()) as {
        data: { market: { cheapestPostedCents: number; prices: { priceCentsPerDollar: number }[] } };
      };
      // the seed data: one supplier, offers at 40, 55 and 70 cents
      expect(body.data.market.cheapestPostedCents).toBe(40);
      expect(body.data.market.prices.map((p) => p.priceCentsPerDollar)).toEqual([40, 55, 70]);

      // a real x402 buyer client signs up with a dev wallet: the USDC moves on the local chain
      const buyerKey = /\n\s+(0x[0-9a-fA-F]{40})\s+(0x[0-9a-f]{64})/.exec(out);
      expect(buyerKey).not.toBeNull();
      const buyer = privateKeyToAccount((buyerKey?.[2] ?? "0x") as `0x${string}`);
      const usdc = /USDC\s+(0x[0-9a-fA-F]{40})/.exec(out)?.[1] as `0x${string}`;
      const chainClient = createPublicClient({ transport: http(rpc?.[1]) });
      const balance = () =>
        chainClient.readContract({ address: usdc, abi: erc20Abi, functionName: "balanceOf", args: [buyer.address] });
      const before = await balance();
      const signup = await x402Signup(base, buyer, 2_000_000);
      expect(signup.status).toBe(200);
      const apiKey = String(signup.body.apiKey);
      expect(apiKey).toMatch(/^svc_/);
      expect(await balance()).toBe(before - 2_000_000n);

      // the credit confirms (2 blocks in this run; the dev chain mines one a second), then the
      // official OpenAI SDK buys chat and Responses, and the cost it reports is the balance change
      const agentMe = async () =>
        (await (await fetch(`${base}/v1/agent/me`, { headers: { authorization: `Bearer ${apiKey}` } })).json()) as {
          confirmedUsdc: string;
        };
      await waitForAsync(async () => (await agentMe()).confirmedUsdc === "2.000000", 60_000, "confirmation");
      const client = new OpenAI({ baseURL: `${base}/v1`, apiKey });
      const chat = await client.chat.completions
        .create({ model: "zai-org-glm-5-1", messages: [{ role: "user", content: "hi" }] })
        .withResponse();
      expect(chat.data.choices[0]?.message.content).toBeTruthy();
      const afterChat = (await agentMe()).confirmedUsdc;
      expect(chat.response.headers.get("x-svc-cost-usdc")).toBe(usdcDiff("2.000000", afterChat));
      const stream = await client.responses.create({ model: "zai-org-glm-5-1", input: "hello", stream: true });
      let cost: string | undefined;
      for await (const ev of stream) {
        if (ev.type === "response.completed") cost = (ev as unknown as { costUsdc: string }).costUsdc;
      }
      expect(cost).toBe(usdcDiff(afterChat, (await agentMe()).confirmedUsdc));

      child.kill("SIGINT");
      expect(await waitForExit(child, 45_000)).toBe(0);
      // no orphans: the chain's RPC port is closed and no anvil listens on it
      const rpcPort = rpc?.[2] ?? "";
      await expect(fetch(`http://127.0.0.1:${rpcPort}`, { method: "POST", body: "{}" })).rejects.toThrow();
      const ps = execFileSync("ps", ["-eo", "args"], { encoding: "utf8" });
      expect(ps).not.toMatch(new RegExp(`anvil.*--port ${rpcPort}\\b`));
    } finally {
      if (child.exitCode === null) child.kill("SIGKILL");
    }
  }, 240_000);
});

describe("npm start (production mode) against outside servers, as a black-box harness wires it", {
  timeout: 240_000,
}, () => {
  let chain: LocalChain;
  let sim: UpstreamSimulator;
  let databaseUrl: string;
  let drop: () => Promise<void>;
  beforeAll(async () => {
    chain = await startLocalChain();
    sim = await startUpstreamSimulator();
    const w = await isolatedWorld();
    databaseUrl = w.databaseUrl;
    drop = w.drop;
  });
  afterAll(async () => {
    await chain?.stop();
    await sim?.close();
    await drop?.();
  });

  function wiring(port: number): Record<string, string> {
    const idp = createLocalIdp({ appId: "black-box-app" });
    const [, facilitator, payTo] = chain.devAccounts;
    return {
      ...PROD,
      PORT: String(port),
      DATABASE_URL: databaseUrl,
      REDIS_PREFIX: `test-prod-${port}`,
      UPSTREAM_BASE_URL: sim.baseUrl,
      CHAIN_RPC_URL: chain.rpcUrl,
      CHAIN_ID: "8453",
      USDC_ADDRESS: chain.usdcAddress,
      PAY_TO: payTo?.address ?? "",
      FACILITATOR_URL: "local",
      FACILITATOR_PRIVATE_KEY: facilitator?.privateKey ?? "",
      IDP_APP_ID: idp.appId,
      IDP_ISSUER: idp.issuer,
      IDP_VERIFICATION_KEY: idp.publicKeyPem,
    };
  }

  test("starts, migrates a fresh database, serves /healthz, and stops on SIGTERM", async () => {
    const port = await freePort();
    const child = spawnMain([], wiring(port));
    try {
      await waitForHttp(`http://127.0.0.1:${port}/healthz`, 90_000, child);
      // the fresh database was migrated by start-up
      const gql = await fetch(`http://127.0.0.1:${port}/graphql`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ query: "{ market { cheapestPostedCents } }" }),
      });
      expect(await gql.json()).toEqual({ data: { market: { cheapestPostedCents: null } } });
      child.kill("SIGTERM");
      expect(await waitForExit(child, 45_000), JSON.stringify(child.output()).slice(-3000)).toBe(0);
    } finally {
      if (child.exitCode === null) child.kill("SIGKILL");
    }
  });

  test("a SIGTERM the moment /healthz answers (the workers still starting) waits for start-up, then exits 0", async () => {
    const port = await freePort();
    const child = spawnMain([], wiring(port));
    try {
      await waitForHttp(`http://127.0.0.1:${port}/healthz`, 90_000, child);
      child.kill("SIGTERM");
      expect(await waitForExit(child, 45_000), JSON.stringify(child.output()).slice(-3000)).toBe(0);
      expect(child.output().stderr).not.toContain("fatal");
    } finally {
      if (child.exitCode === null) child.kill("SIGKILL");
    }
  });

  test("a worker-only process serves the probes and /metrics on PORT, nothing else, and stops on SIGTERM", async () => {
    const port = await freePort();
    const child = spawnMain(["--role=worker"], wiring(port));
    try {
      await waitForHttp(`http://127.0.0.1:${port}/healthz`, 90_000, child);
      expect((await fetch(`http://127.0.0.1:${port}/readyz`)).status).toBe(200);
      const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      expect(metrics).toContain("svc_queue_depth");
      const other = await fetch(`http://127.0.0.1:${port}/v1/models`);
      expect(other.status).toBe(404);
      expect(((await other.json()) as { error: { code: string } }).error.code).toBe("not_found");
      child.kill("SIGTERM");
      expect(await waitForExit(child, 45_000), JSON.stringify(child.output()).slice(-3000)).toBe(0);
    } finally {
      if (child.exitCode === null) child.kill("SIGKILL");
    }
  });

  test("a CHAIN_ID that differs from the RPC's stops start-up with one line", async () => {
    const port = await freePort();
    const child = spawnMain([], { ...wiring(port), CHAIN_ID: "1" });
    expect(await waitForExit(child, 30_000)).toBe(1);
    expect(child.output().stderr.trim().split("\n")).toEqual([
      `CHAIN_ID: the RPC at ${chain.rpcUrl} reports chain 8453, expected 1`,
    ]);
  });
});

function usdcDiff(before: string, after: string): string {
  return formatDecimal6((parseDecimal6(before) ?? 0n) - (parseDecimal6(after) ?? 0n));
}
