// The production install's smoke (CI, issue 31): `node --import tsx scripts/prod-smoke.ts <dir>`, where
// <dir> holds what `scripts/release.sh assemble` puts there (the build output and `npm ci --omit=dev`).
// Starts the outside world from this source tree (an upstream simulator, a local chain, an identity
// provider; Postgres and Redis are the machine's), runs <dir>'s `npm start` command with plain node
// in production mode against them, and checks /readyz and one paid chat: a supplier signs in,
// registers a key and posts an offer; a buyer signs up through x402, and its chat is charged.
// Prints one JSON line per step; exits 1 on any failure, leaving no process behind.
import { type ChildProcess, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import pg from "pg";
import { startLocalChain } from "../src/local/chain/index.js";
import { createLocalIdp } from "../src/local/idp/index.js";
import { startUpstreamSimulator } from "../src/local/upstream-sim/index.js";
import { signIn } from "../testkit/actors.js";
import { dbUrl, PG_ADMIN_URL } from "../testkit/db.js";
import { fundedBuyer, x402Signup } from "../testkit/funding.js";
import { freePort } from "../testkit/harness.js";
import { startOtlpReceiver } from "../testkit/otlp.js";

const dir = resolve(process.argv[2] ?? "");
if (!process.argv[2]) {
  console.error("usage: node --import tsx scripts/prod-smoke.ts <production install dir>");
  process.exit(2);
}
const started = Date.now();
const say = (step: string, extra: Record<string, unknown> = {}) =>
  console.log(JSON.stringify({ smoke: "production-install", step, ms: Date.now() - started, ...extra }));

const cleanups: (() => Promise<unknown>)[] = [];
let child: ChildProcess | undefined;
let output = "";

async function main(): Promise<void> {
  const supplierKey = `VENICE_INFERENCE_KEY_smoke_${randomUUID().replaceAll("-", "")}`;
  const catalogKey = "VENICE_INFERENCE_KEY_smoke_catalog";
  const sim = await startUpstreamSimulator({
    keys: [
      { key: catalogKey, diemMicro: 0n },
      { key: supplierKey, diemMicro: 50_000_000n },
    ],
  });
  cleanups.push(() => sim.close());
  const chain = await startLocalChain();
  cleanups.push(() => chain.stop());
  const miner = setInterval(() => void chain.mine(1).catch(() => undefined), 250);
  cleanups.push(async () => clearInterval(miner));
  const idp = createLocalIdp({ appId: "smoke-app" });
  // tracing on, as an operator turns it on: the install's OpenTelemetry SDK must load and export
  const otlp = await startOtlpReceiver();
  cleanups.push(() => otlp.close());
  const dbName = `svc_smoke_${randomUUID().replaceAll("-", "").slice(0, 12)}`;
  cleanups.push(async () => {
    const admin = new pg.Client({ connectionString: PG_ADMIN_URL });
    await admin.connect();
    await admin.query(`DROP DATABASE IF EXISTS "${dbName}" WITH (FORCE)`);
    await admin.end();
  });
  const [, facilitator, payTo] = chain.devAccounts;
  if (!facilitator || !payTo) throw new Error("anvil dev accounts missing");
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? "",
    HOME: process.env.HOME ?? "/tmp",
    NODE_ENV: "production",
    PORT: String(port),
    DATABASE_URL: dbUrl(dbName), // missing: the service creates and migrates it
    REDIS_URL: process.env.REDIS_URL ?? "redis://127.0.0.1:6379",
    REDIS_PREFIX: `smoke-${port}`,
    UPSTREAM_BASE_URL: sim.baseUrl,
    CATALOG_SYNC_KEY: catalogKey,
    CHAIN_RPC_URL: chain.rpcUrl,
    CHAIN_ID: "8453",
    USDC_ADDRESS: chain.usdcAddress,
    PAY_TO: payTo.address,
    CONFIRMATION_BLOCKS: "2",
    FACILITATOR_URL: "local",
    FACILITATOR_PRIVATE_KEY: facilitator.privateKey,
    IDP_APP_ID: idp.appId,
    IDP_ISSUER: idp.issuer,
    IDP_VERIFICATION_KEY: idp.publicKeyPem,
    SESSION_SECRET: "a-production-session-secret-of-at-least-32-chars",
    KEY_ENCRYPTION_KEY: "22".repeat(32),
    LOG_LEVEL: "warn",
    OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url,
    OTEL_BSP_SCHEDULE_DELAY: "200",
  };

  // exactly the install's `npm start` command, with plain node (no TypeScript loader)
  const start = (JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as { scripts: { start: string } }).scripts
    .start;
  const [bin, ...args] = start.split(/\s+/);
  if (bin !== "node") throw new Error(`npm start is not plain node: ${start}`);
  child = spawn(process.execPath, args, { cwd: dir, env, stdio: ["ignore", "pipe", "pipe"] });
  child.stdout?.on("data", (d) => {
    output = (output + d).slice(-20_000);
  });
  child.stderr?.on("data", (d) => {
    output = (output + d).slice(-20_000);
  });
  say("started", { command: start, cwd: dir });

  await until(async () => (await fetch(`${base}/readyz`).catch(() => undefined))?.status === 200, 90_000, "/readyz");
  say("ready");

  // supply, through the API as a supplier does it
  const supplier = await signIn({ baseUrl: base, idp } as never);
  const key = await json(
    fetch(`${base}/v1/supply/upstream-keys`, {
      method: "POST",
      headers: { "content-type": "application/json", cookie: supplier.cookie },
      body: JSON.stringify({ upstreamApiKey: supplierKey, label: "smoke" }),
    }),
    201,
  );
  await json(
    fetch(`${base}/v1/supply/offers`, {
      method: "POST",
      headers: { "content-type": "application/json", cookie: supplier.cookie },
      body: JSON.stringify({ upstreamKeyId: key.id, priceCentsPerDollar: 50, quantityDiem: "10.000000" }),
    }),
    201,
  );
  const model = "zai-org-glm-5-1";
  await until(
    async () => JSON.stringify(await json(fetch(`${base}/v1/models`), 200)).includes(model),
    60_000,
    "the catalog",
  );
  say("supplied", { model });

  // a buyer pays through x402 and spends the confirmed credit on one chat
  const buyer = await fundedBuyer(chain, 10_000_000n);
  const signup = await x402Signup(base, buyer, 2_000_000);
  if (signup.status !== 200)
    throw new Error(`signup: expected 200, got ${signup.status} ${JSON.stringify(signup.body)}`);
  const apiKey = String(signup.body.apiKey);
  const auth = { authorization: `Bearer ${apiKey}` };
  await until(
    async () => (await json(fetch(`${base}/v1/agent/me`, { headers: auth }), 200)).confirmedUsdc === "2.000000",
    60_000,
    "the credit's confirmation",
  );
  say("funded");
  const chat = await fetch(`${base}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", ...auth },
    body: JSON.stringify({ model, messages: [{ role: "user", content: "hello from the smoke" }] }),
  });
  const body = (await chat.json()) as { choices?: { message?: { content?: string } }[] };
  const cost = chat.headers.get("x-svc-cost-usdc");
  if (chat.status !== 200 || !body.choices?.[0]?.message?.content || !cost || !(Number(cost) > 0)) {
    throw new Error(`the paid chat failed: ${chat.status} cost=${cost} ${JSON.stringify(body).slice(0, 300)}`);
  }
  const me = await json(fetch(`${base}/v1/agent/me`, { headers: auth }), 200);
  const spent = 2_000_000 - Math.round(Number(me.confirmedUsdc) * 1e6);
  if (spent !== Math.round(Number(cost) * 1e6)) throw new Error(`charged ${spent} micro-USDC, reported ${cost}`);
  say("paid chat", { status: chat.status, costUsdc: cost });
  await until(
    async () =>
      ["POST /v1/chat/completions", "admission", "settlement"].every((n) => otlp.spans.some((x) => x.name === n)),
    20_000,
    "the chat's spans at the OTLP receiver",
  );
  say("traced", { spans: otlp.counts.spans });

  child.kill("SIGTERM");
  const code = await new Promise<number | null>((r) => child?.once("exit", (c) => r(c)));
  if (code !== 0) throw new Error(`SIGTERM: exit ${code}`);
  say("stopped", { exitCode: code });
}

async function json(p: Promise<Response>, status: number): Promise<Record<string, unknown>> {
  const r = await p;
  const text = await r.text();
  if (r.status !== status) throw new Error(`${r.url}: expected ${status}, got ${r.status} ${text.slice(0, 300)}`);
  return JSON.parse(text) as Record<string, unknown>;
}

async function until(pred: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    if (child && child.exitCode !== null) throw new Error(`the service exited (${child.exitCode}) waiting for ${what}`);
    if (await pred().catch(() => false)) return;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

let failed = false;
try {
  await main();
} catch (e) {
  failed = true;
  say("failed", { error: (e as Error).message, serviceOutput: output.slice(-4000) });
} finally {
  if (child && child.exitCode === null) child.kill("SIGKILL");
  for (const c of cleanups.reverse()) await c().catch(() => undefined);
}
process.exit(failed ? 1 : 0);
