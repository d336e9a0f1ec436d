// The outside world of the production smokes (scripts/prod-smoke.ts, the native install;
// scripts/image-check.ts, the image), started from this source tree: an upstream simulator, a local
// chain with blocks every 250 ms, an identity provider and an OTLP receiver (Postgres and Redis are
// the machine's). Every server listens on 127.0.0.1, so a container on the host's network reaches
// them as the native process does. Then the one paid flow both smokes check: a supplier signs in,
// registers a key and posts an offer; a buyer signs up through x402, and its chat is charged.
import { randomUUID } from "node:crypto";
import pg from "pg";
import { startLocalChain } from "../src/local/chain/index.js";
import { createLocalIdp } from "../src/local/idp/index.js";
import { startUpstreamSimulator } from "../src/local/upstream-sim/index.js";
import { signIn } from "../testkit/actors.js";
import { dbUrl, PG_ADMIN_URL } from "../testkit/db.js";
import { fundedBuyer, x402Signup } from "../testkit/funding.js";
import { startOtlpReceiver } from "../testkit/otlp.js";

export interface SmokeWorld {
  readonly supplierKey: string;
  readonly model: string;
  readonly idp: ReturnType<typeof createLocalIdp>;
  readonly chain: Awaited<ReturnType<typeof startLocalChain>>;
  /** the production environment of one service process on `port` (its own Redis prefix, one database for all) */
  env(port: number): Record<string, string>;
  readonly spans: () => string[];
  readonly spanCount: () => number;
  close(): Promise<void>;
}

const MODEL = "zai-org-glm-5-1";

/** Starts the world; `close()` stops it and drops the smoke's database. */
export async function startSmokeWorld(name: string): Promise<SmokeWorld> {
  const cleanups: (() => Promise<unknown>)[] = [];
  const close = async () => {
    for (const c of cleanups.reverse()) await c().catch(() => undefined);
  };
  try {
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
    const dbName = `svc_${name}_${randomUUID().replaceAll("-", "").slice(0, 12)}`;
    cleanups.push(async () => {
      const admin = new pg.Client({ connectionString: PG_ADMIN_URL });
      await admin.connect();
      await admin.query(`DROP DATABASE IF EXISTS "${dbName}" WITH (FORCE)`);
      await admin.end();
    });
    const [, facilitator, payTo] = chain.devAccounts;
    if (!facilitator || !payTo) throw new Error("anvil dev accounts missing");
    return {
      supplierKey,
      model: MODEL,
      idp,
      chain,
      env: (port) => ({
        NODE_ENV: "production",
        PORT: String(port),
        DATABASE_URL: dbUrl(dbName), // missing: the service creates and migrates it
        REDIS_URL: process.env.REDIS_URL ?? "redis://127.0.0.1:6379",
        REDIS_PREFIX: `${name}-${port}`,
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
      }),
      spans: () => otlp.spans.map((s) => s.name),
      spanCount: () => otlp.counts.spans,
      close,
    };
  } catch (e) {
    await close();
    throw e;
  }
}

/**
 * The paid flow against the service at `base`, through its public API; `alive` throws when the
 * service is gone (so a wait does not outlive it). Returns the chat's cost as the service reported it.
 */
export async function paidChat(
  base: string,
  world: SmokeWorld,
  alive: () => void,
  say: (step: string, extra?: Record<string, unknown>) => void,
): Promise<string> {
  const w = world;
  const wait = (pred: () => Promise<boolean>, ms: number, what: string) => until(pred, ms, what, alive);
  // supply, through the API as a supplier does it
  const supplier = await signIn({ baseUrl: base, idp: w.idp } as never);
  const key = await json(
    fetch(`${base}/v1/supply/upstream-keys`, {
      method: "POST",
      headers: { "content-type": "application/json", cookie: supplier.cookie },
      body: JSON.stringify({ upstreamApiKey: world.supplierKey, label: "smoke" }),
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
  await wait(
    async () => JSON.stringify(await json(fetch(`${base}/v1/models`), 200)).includes(world.model),
    60_000,
    "the catalog",
  );
  say("supplied", { model: world.model });

  // a buyer pays through x402 and spends the confirmed credit on one chat
  const buyer = await fundedBuyer(w.chain, 10_000_000n);
  const signup = await x402Signup(base, buyer, 2_000_000);
  if (signup.status !== 200)
    throw new Error(`signup: expected 200, got ${signup.status} ${JSON.stringify(signup.body)}`);
  const auth = { authorization: `Bearer ${String(signup.body.apiKey)}` };
  await wait(
    async () => (await json(fetch(`${base}/v1/agent/me`, { headers: auth }), 200)).confirmedUsdc === "2.000000",
    60_000,
    "the credit's confirmation",
  );
  say("funded");
  const chat = await fetch(`${base}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", ...auth },
    body: JSON.stringify({ model: world.model, messages: [{ role: "user", content: "hello from the smoke" }] }),
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
  await wait(
    async () => ["POST /v1/chat/completions", "admission", "settlement"].every((n) => world.spans().includes(n)),
    20_000,
    "the chat's spans at the OTLP receiver",
  );
  say("traced", { spans: world.spanCount() });
  return cost;
}

export async function json(p: Promise<Response>, status: number): Promise<Record<string, unknown>> {
  const r = await p;
  const text = await r.text();
  if (r.status !== status) throw new Error(`${r.url}: expected ${status}, got ${r.status} ${text.slice(0, 300)}`);
  return JSON.parse(text) as Record<string, unknown>;
}

/** Polls `pred` every 250 ms until it holds; `alive` throws when what is waited on has died. */
export async function until(
  pred: () => Promise<boolean>,
  timeoutMs: number,
  what: string,
  alive: () => void = () => undefined,
): Promise<void> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    alive();
    if (await pred().catch(() => false)) return;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}
