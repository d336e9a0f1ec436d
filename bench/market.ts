// The world the latency and throughput sections share: the upstream simulator (in the bench
// process, beside the load client), a database and Redis prefix of its own, supply, a funded buyer,
// the service in its own process (as `npm start` runs it) and the bare pass-through proxy in another.
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import pg from "pg";
import type { UpstreamSimulator } from "../src/local/upstream-sim/index.js";
import { startUpstreamSimulator } from "../src/local/upstream-sim/index.js";
import { assertBooksBalance } from "../testkit/books.js";
import { freePort, isolatedWorld, startTestApp, type TestApp } from "../testkit/harness.js";
import { addSupply, CATALOG_KEY, fundedBuyerKey, simEnv } from "../testkit/market.js";
import { spawnMain, waitForExit, waitForHttp } from "../testkit/spawn.js";

/** 32 offers: 512 attempts in flight at 16 per supplier key, so no saturation level waits for a key. */
const OFFERS = 32;
/** the buyer's in-flight limit: above the sweep's highest concurrency */
const KEY_MAX_IN_FLIGHT = "1024";

export const MODEL = "zai-org-glm-5-1";
/** The buffered chat request every latency figure uses: 16 completion tokens, no upstream delay. */
export const CHAT_BODY = {
  model: MODEL,
  messages: [{ role: "user", content: "Benchmark request [[sim:tokens=16]]" }],
  max_tokens: 32,
};
/**
 * The streamed chat request: 16 tokens in 4 content chunks, each 1 ms apart at the upstream, so the
 * service relays frames one by one as it would a real stream (the upstream then sends the finish
 * and usage chunks at once after the last content chunk).
 */
export const STREAM_BODY = {
  model: MODEL,
  messages: [{ role: "user", content: "Benchmark stream [[sim:tokens=16]][[sim:chunks=4]][[sim:chunk_delay_ms=1]]" }],
  max_tokens: 32,
};
export const RESPONSES_BODY = { model: MODEL, input: "Benchmark request [[sim:tokens=16]]", max_output_tokens: 32 };
export const RESPONSES_STREAM_BODY = {
  model: MODEL,
  input: "Benchmark stream [[sim:tokens=16]][[sim:chunks=4]][[sim:chunk_delay_ms=1]]",
  max_output_tokens: 32,
};
/** One flat-priced image: the cheapest job the catalog has. */
export const IMAGE_BODY = { model: "venice-sd35", prompt: "bench", variants: 1 };
/** wan-2.6 at 720p: 0.6 DIEM upstream, 0.63 with the markup. */
export const VIDEO_BODY = { model: "wan-2.6-text-to-video", prompt: "bench", duration: "5s", resolution: "720p" };

/** The environment of a service process against this world (the bench's own settings included). */
export function serviceEnv(
  app: TestApp,
  sim: UpstreamSimulator,
  world: { databaseUrl: string; prefix: string },
  port: number,
  extra: Record<string, string> = {},
): Record<string, string> {
  return {
    ...simEnv(sim),
    PORT: String(port),
    DATABASE_URL: world.databaseUrl,
    REDIS_PREFIX: world.prefix,
    KEY_MAX_IN_FLIGHT,
    LOG_LEVEL: "error",
    PAY_TO: "0x1111111111111111111111111111111111111111",
    SESSION_SECRET: "bench-session-secret-bench-session-secret",
    KEY_ENCRYPTION_KEY: app.rt.config.secrets.keyEncryptionKey.toString("hex"),
    CHAIN_RPC_URL: "http://127.0.0.1:9",
    // the fold's delay under test (docs/performance.md "One append per clear"); absent: the default
    ...(process.env.BENCH_ESCROW_FOLD_MS ? { ESCROW_FOLD_MS: process.env.BENCH_ESCROW_FOLD_MS } : {}),
    ...extra,
  };
}

const children = new Set<ChildProcess>();

/**
 * Registers a process the bench started, so it dies with the bench: on a normal or crashing exit,
 * and on SIGINT/SIGTERM (which end node without its `exit` event). Only processes started here.
 */
export function track<T extends ChildProcess>(child: T): T {
  if (children.size === 0 && process.listenerCount("exit") === 0) {
    const killAll = () => {
      for (const c of children) c.kill("SIGKILL");
    };
    process.on("exit", killAll);
    for (const sig of ["SIGINT", "SIGTERM"] as const) {
      process.once(sig, () => {
        killAll();
        process.exit(128 + (sig === "SIGINT" ? 2 : 15));
      });
    }
  }
  children.add(child);
  child.once("exit", () => children.delete(child));
  return child;
}

/** e.g. BENCH_SERVICE_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof" to profile the service */
export function serviceNodeArgs(): string[] {
  return (process.env.BENCH_SERVICE_NODE_ARGS ?? "").split(" ").filter(Boolean);
}

/**
 * What the bench runs as the service: `compiled` (the default), the production build as `npm run
 * start:api` runs it, built first when it is not current (its prestart, scripts/ensure-build.mjs); or `source`
 * (`BENCH_SERVICE_BUILD=source`), `src/main.ts` through tsx, as the bench did before (for A/B runs
 * against commits whose bench knows only that).
 */
export function serviceBuild(): "compiled" | "source" {
  const v = (process.env.BENCH_SERVICE_BUILD ?? "compiled").trim().toLowerCase();
  if (v !== "compiled" && v !== "source") throw new Error(`BENCH_SERVICE_BUILD: compiled or source, not ${v}`);
  return v;
}

let built = false;

/** How an API process of the service is run (`--role=api`), as `serviceBuild` says; the build made first. */
export function serviceCommand(): { args: string[]; nodeArgs: string[]; opts: { compiled: boolean } } {
  const compiled = serviceBuild() === "compiled";
  if (compiled && !built) {
    // what `npm run start:api` runs first (its prestart): builds this tree unless its build is current
    execFileSync(process.execPath, ["scripts/ensure-build.mjs"], { stdio: ["ignore", "ignore", "inherit"] });
    built = true;
  }
  return { args: ["--role=api"], nodeArgs: serviceNodeArgs(), opts: { compiled } };
}

/** One API process of the service with exactly `env` (see `serviceCommand`). */
export function spawnService(env: Record<string, string>): ReturnType<typeof spawnMain> {
  const c = serviceCommand();
  return spawnMain(c.args, env, c.nodeArgs, c.opts);
}

/** The bare pass-through proxy (bench/passthrough.ts) in its own process; resolves once it listens. */
export async function startPassthrough(upstreamBaseUrl: string): Promise<{ url: string; child: ChildProcess }> {
  const port = await freePort();
  const child = track(
    spawn(process.execPath, ["--import", "tsx", "bench/passthrough.ts"], {
      env: { PATH: process.env.PATH ?? "", PORT: String(port), UPSTREAM_BASE_URL: upstreamBaseUrl },
      stdio: ["ignore", "pipe", "inherit"],
    }),
  );
  await new Promise<void>((resolve, reject) => {
    child.stdout?.on("data", (d: Buffer) => d.toString().includes("ready") && resolve());
    child.once("exit", (code) => reject(new Error(`passthrough exited (${code})`)));
  });
  return { url: `http://127.0.0.1:${port}`, child };
}

/**
 * `isolatedWorld()` with one connection held open on its database until `drop`: a test run starting
 * elsewhere on this machine drops every test database nobody is connected to (testkit/template.ts),
 * and the app's pools connect lazily, so an unpinned bench database can vanish while it starts.
 */
export async function pinnedWorld(): Promise<Awaited<ReturnType<typeof isolatedWorld>>> {
  for (let attempt = 1; ; attempt++) {
    const world = await isolatedWorld();
    const pin = new pg.Client({ connectionString: world.databaseUrl });
    try {
      await pin.connect();
    } catch (e) {
      if (attempt < 5) continue; // dropped before we got there: take another
      throw e;
    }
    return {
      ...world,
      async drop() {
        await pin.end().catch(() => undefined);
        await world.drop();
      },
    };
  }
}

/** VmRSS or VmHWM of a process in bytes (Linux), null elsewhere or once it has exited. */
export function memoryOf(pid: number | undefined, field: "VmRSS" | "VmHWM"): number | null {
  if (!pid) return null;
  try {
    const m = new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m?.[1] ? Number(m[1]) * 1024 : null;
  } catch {
    return null;
  }
}

export interface Market {
  sim: UpstreamSimulator;
  app: TestApp;
  /** a supplier key of the simulator, for the direct requests */
  directKey: string;
  buyer: { apiKey: string; accountId: string };
  /** one buyer (wallet) per lane: a wallet may have one image job in flight */
  imageBuyers: { apiKey: string; accountId: string }[];
  /** the bench world's database (the durable-commit floor writes a table of its own there) */
  databaseUrl: string;
  svcUrl: string;
  svcPid: number | undefined;
  proxyUrl: string;
  proxyPid: number | undefined;
  /** the service's output, checked for noise at the end */
  close(emit: (f: Record<string, unknown>) => void): Promise<void>;
}

/**
 * The world without any service process: the simulator, a pinned database and Redis prefix, the
 * in-process app the fixtures go through, the catalog, supply (OFFERS offers of one supplier at
 * 40¢) and `buyers` funded buyers with an API key each. `env` goes to the in-process app (e.g. REDIS_URL).
 */
export async function marketWorld(
  buyers = 1,
  env: Record<string, string> = {},
): Promise<{
  sim: UpstreamSimulator;
  world: Awaited<ReturnType<typeof pinnedWorld>>;
  app: TestApp;
  directKey: string;
  buyers: { apiKey: string; accountId: string }[];
}> {
  const sim = await startUpstreamSimulator({ keys: [{ key: CATALOG_KEY, diemMicro: 0n }] });
  const world = await pinnedWorld();
  const app = await startTestApp({
    databaseUrl: world.databaseUrl,
    prefix: world.prefix,
    env: { ...simEnv(sim), KEY_MAX_IN_FLIGHT, LOG_LEVEL: "silent", ...env },
  });
  await app.rt.services.catalog.sync();
  const supply = await addSupply(
    app,
    sim,
    Array.from({ length: OFFERS }, () => ({
      priceCents: 40,
      quantityMicroDiem: 5_000_000_000n,
      keyBalanceMicroDiem: 10_000_000_000n,
    })),
  );
  const funded: { apiKey: string; accountId: string }[] = [];
  for (let i = 0; i < buyers; i++) funded.push(await fundedBuyerKey(app, 900_000_000n));
  return { sim, world, app, directKey: supply.keys[0]?.secret ?? "", buyers: funded };
}

export async function startMarket(): Promise<Market> {
  const { sim, world, app, directKey, buyers } = await marketWorld();
  const buyer = buyers[0] as { apiKey: string; accountId: string };
  const imageBuyers: Market["imageBuyers"] = [];
  for (let i = 0; i < 16; i++) imageBuyers.push(await fundedBuyerKey(app, 100_000_000n));
  const port = await freePort();
  const svc = track(spawnService(serviceEnv(app, sim, world, port)));
  const svcUrl = `http://127.0.0.1:${port}`;
  await waitForHttp(`${svcUrl}/healthz`, 60_000, svc);
  const proxy = await startPassthrough(sim.baseUrl);
  return {
    sim,
    app,
    directKey,
    buyer,
    imageBuyers,
    databaseUrl: world.databaseUrl,
    svcUrl,
    svcPid: svc.pid,
    proxyUrl: proxy.url,
    proxyPid: proxy.child.pid,
    async close(emit) {
      try {
        proxy.child.kill("SIGTERM");
        const out = svc.output();
        if (out.stdout.length + out.stderr.length > 10_000) {
          emit({
            bench: "router.service_output",
            stdoutBytes: out.stdout.length,
            stderrBytes: out.stderr.length,
            sample: (out.stdout || out.stderr).slice(0, 600),
          });
        }
        svc.kill("SIGTERM");
        await waitForExit(svc, 20_000).catch(() => svc.kill("SIGKILL"));
        const clears = await app.rt.db.clear.count();
        let balanced = true;
        try {
          await assertBooksBalance(app.rt.db);
        } catch {
          balanced = false;
        }
        const b = await app.rt.db.account.findUniqueOrThrow({ where: { id: buyer.accountId } });
        emit({
          bench: "router.books",
          clears,
          balanced,
          buyer: { confirmedMicroUsdc: String(b.confirmedMicroUsdc), reservedMicroUsdc: String(b.reservedMicroUsdc) },
        });
      } finally {
        await app.close();
        await world.drop();
        await sim.close();
      }
    },
  };
}
