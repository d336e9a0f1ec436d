import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { QUEUES } from "../../src/adapters/queues.js";
import { GATE_HOLDER_TTL_MS } from "../../src/adapters/redis/gate-leases.js";
import { createSql } from "../../src/adapters/sql.js";
import { HOLDER_LEASE_MS, releaseExpiredHolders } from "../../src/domain/inference/escrow/holder-lease.js";
import { sqlEscrowStore } from "../../src/domain/inference/settlement/sql-stores.js";
import { checkInvariants, type Invariant, volumeFigures } from "./checks.js";
import { type Kind, SoakLoad } from "./load.js";
import { SoakWorld, type SupplySpec } from "./world.js";

/**
 * `npm run soak` and its short CI version (test/soak): the service as 3 API + 2 worker processes
 * on one Postgres database and one Redis of its own, buyers funded through real x402 payments,
 * a mixed load with upstream faults injected, and mid-run a SIGKILLed API (streams open), a
 * SIGKILLed worker (a job running), a Redis restart that loses everything and Postgres connections
 * terminated. Then the invariants. Every figure goes out through `emit` as one JSON object.
 * With `redisCluster` the Redis is a cluster of the soak's own (its restart becomes a graceful
 * failover of the gates' master: killing a master outright is not supported yet); with
 * `readReplica` the APIs read from a streaming replica, and every paid buffered request is read
 * back by its support reference from another API at once (read-your-writes across processes).
 */

export interface SoakOptions {
  buyers: number;
  requests: number;
  concurrency: number;
  apis: number;
  workers: number;
  /** USDC each buyer pays at signup (micro-USDC) */
  signupMicroUsdc: number;
  /** USDC minted to each buyer's wallet (signup plus refills) */
  walletMicroUsdc: bigint;
  supply: SupplySpec[];
  clientTimeoutMs: number;
  /** load pacing (0 = unpaced): the short run is paced so its disruptions fall inside the load */
  maxRps: number;
  longStreamShare: number;
  faultIntervalMs: number;
  /** `timeout` faults in the whole run (each holds a request until the client or the service gives up) */
  maxTimeoutFaults: number;
  /** progress (share of requests done) at which each disruption happens */
  chaosAt: { apiKill: number; redisRestart: number; workerKill: number; pgTerminate: number[] };
  /** true: let the worker's sweeper release the killed API's escrow when its lease ends (up to ~100 s);
   *  false: run the sweeper's function as of the lease's end once everything stopped */
  waitForLeases: boolean;
  /** how long to keep retrieving queued videos after the load */
  videoDrainMs: number;
  seed: number;
  /** a Redis Cluster (3 masters + 3 replicas) instead of one redis-server */
  redisCluster: boolean;
  /** the API processes read from a streaming replica (DATABASE_URL_READ_REPLICA) */
  readReplica: boolean;
}

export const FULL_SOAK: SoakOptions = {
  buyers: 200,
  requests: 10_000,
  concurrency: 48,
  apis: 3,
  workers: 2,
  signupMicroUsdc: 5_000_000,
  walletMicroUsdc: 20_000_000n,
  supply: [
    // the cheapest offer is small: it depletes during the run
    { priceCents: 30, quantityMicroDiem: 3_000_000n, keyBalanceMicroDiem: 500_000_000n },
    { priceCents: 35, quantityMicroDiem: 150_000_000n, keyBalanceMicroDiem: 500_000_000n },
    { priceCents: 40, quantityMicroDiem: 150_000_000n, keyBalanceMicroDiem: 500_000_000n },
    { priceCents: 45, quantityMicroDiem: 150_000_000n, keyBalanceMicroDiem: 500_000_000n },
    { priceCents: 55, quantityMicroDiem: 150_000_000n, keyBalanceMicroDiem: 500_000_000n },
    { priceCents: 70, quantityMicroDiem: 150_000_000n, keyBalanceMicroDiem: 500_000_000n },
  ],
  clientTimeoutMs: 150_000,
  maxRps: 0,
  longStreamShare: 0.1,
  faultIntervalMs: 1_000,
  maxTimeoutFaults: 4,
  chaosAt: { apiKill: 0.2, redisRestart: 0.4, workerKill: 0.6, pgTerminate: [0.8, 0.9] },
  waitForLeases: true,
  videoDrainMs: 60_000,
  seed: 18,
  redisCluster: false,
  readReplica: false,
};

export const SHORT_SOAK: SoakOptions = {
  ...FULL_SOAK,
  buyers: 24,
  requests: 420,
  concurrency: 16,
  signupMicroUsdc: 3_000_000,
  walletMicroUsdc: 6_000_000n,
  supply: FULL_SOAK.supply.slice(0, 4).map((s, i) => (i === 0 ? { ...s, quantityMicroDiem: 300_000n } : s)),
  clientTimeoutMs: 8_000,
  maxRps: 15,
  longStreamShare: 0.15,
  faultIntervalMs: 300,
  maxTimeoutFaults: 2,
  chaosAt: { apiKill: 0.15, redisRestart: 0.35, workerKill: 0.55, pgTerminate: [0.75] },
  waitForLeases: false,
  videoDrainMs: 5_000,
};

export interface SoakReport {
  ok: boolean;
  invariants: Invariant[];
  requests: number;
  errors: number;
}

type Emit = (line: Record<string, unknown>) => void;

const FAULT_WEIGHTS: [string, number][] = [
  ["http_500", 20],
  ["http_503", 14],
  ["http_504", 5],
  ["http_429", 8],
  ["drop", 12],
  ["truncate_stream", 12],
  ["close_before_content", 6],
  ["midstream_error", 8],
  ["latency", 6],
  ["http_402_balance", 1],
];
const MEDIA_ROUTES = ["/image/generate", "/video/queue", "/video/retrieve", "/video/quote"];

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return Math.round(s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? 0);
}

/**
 * Is this status key an error the client saw? Anything but a whole 2xx answer, a video job's own
 * status, or the 410 of a job whose media is gone (the expected end of every retrieved job).
 */
function isError(status: string): boolean {
  return !/^(200(:(mp4|failed|[A-Z_]+))?|410:gone)$/.test(status);
}

export async function runSoak(opts: SoakOptions, emit: Emit): Promise<SoakReport> {
  const t0 = Date.now();
  const phase = (name: string, extra: Record<string, unknown> = {}) =>
    emit({ soak: "phase", phase: name, atMs: Date.now() - t0, ...extra });
  emit({
    soak: "config",
    buyers: opts.buyers,
    requests: opts.requests,
    concurrency: opts.concurrency,
    apis: opts.apis,
    workers: opts.workers,
    offers: opts.supply.map((s) => ({ price: s.priceCents, quantityMicroDiem: s.quantityMicroDiem.toString() })),
    chaosAt: opts.chaosAt,
    seed: opts.seed,
    redis: opts.redisCluster ? "cluster" : "one redis-server",
    readReplica: opts.readReplica,
  });
  const world = new SoakWorld({
    apis: opts.apis,
    workers: opts.workers,
    supply: opts.supply,
    confirmationBlocks: 5,
    blockIntervalMs: 400,
    redisCluster: opts.redisCluster,
    readReplica: opts.readReplica,
  });
  try {
    await world.start();
    phase("started", {
      database: world.dbName,
      redis: world.redisUrl,
      readReplicaPort: world.replica?.port ?? null,
      apis: world.apis.map((a) => a.baseUrl),
      simulator: world.sim.adminUrl,
    });

    // buyers: fresh wallets with USDC on the local chain, signed up through x402 on every API
    const wallets = Array.from({ length: opts.buyers }, () => privateKeyToAccount(generatePrivateKey()));
    for (const w of wallets) await world.chain.mintUsdc(w.address, opts.walletMicroUsdc);
    const load = new SoakLoad({
      apis: world.apis.map((a) => a.baseUrl),
      requests: opts.requests,
      concurrency: opts.concurrency,
      clientTimeoutMs: opts.clientTimeoutMs,
      maxRps: opts.maxRps,
      longStreamShare: opts.longStreamShare,
      seed: opts.seed,
      readBack: opts.readReplica,
    });
    await load.signUp(wallets, opts.signupMicroUsdc, 12);
    phase("signed_up", { buyers: load.buyers.length });
    // pending credit funds nothing: wait for the confirmations worker to confirm it
    await waitUntil(
      async () => (await world.db.account.count({ where: { confirmedMicroUsdc: { gt: 0 } } })) >= load.buyers.length,
      90_000,
      "signup credit confirmed",
    );
    phase("funded");

    // the load, with faults and the disruptions at their points of progress
    let loading = true;
    const injected = new Map<string, number>();
    let timeouts = 0;
    const faults = (async () => {
      const rand = Math.random;
      while (loading) {
        await sleep(opts.faultIntervalMs);
        if (!loading) break;
        let kind = weighted(FAULT_WEIGHTS, rand());
        if (kind === "latency" && timeouts < opts.maxTimeoutFaults && rand() < 0.25) kind = "timeout";
        if (kind === "timeout") timeouts++;
        const key = rand() < 0.3 ? (world.keys[Math.floor(rand() * world.keys.length)]?.secret ?? "*") : "*";
        const fault: Record<string, unknown> = { kind, count: 1 + Math.floor(rand() * 3) };
        if (kind === "latency") fault.ms = 200 + Math.floor(rand() * 1300);
        if (kind === "timeout") fault.count = 1;
        if (rand() < 0.15 && ["http_500", "http_503", "drop"].includes(kind)) {
          fault.route = MEDIA_ROUTES[Math.floor(rand() * MEDIA_ROUTES.length)];
        }
        try {
          await world.sim.admin("POST", "/faults", { key, fault });
          injected.set(kind, (injected.get(kind) ?? 0) + 1);
        } catch {}
      }
    })();
    const chaosLog: Record<string, unknown>[] = [];
    const findings: Invariant[] = [];
    const chaos = runChaos(
      world,
      load,
      opts,
      (e) => {
        chaosLog.push(e);
        emit({ soak: "chaos", atMs: Date.now() - t0, done: load.done, ...e });
      },
      findings,
    );
    const progress = setInterval(() => {
      emit({ soak: "progress", atMs: Date.now() - t0, done: load.done, openStreams: load.openStreams });
    }, 15_000);
    const loadStart = Date.now();
    await load.run();
    const loadMs = Date.now() - loadStart;
    clearInterval(progress);
    loading = false;
    await faults;
    await chaos.done;
    await world.sim.admin("DELETE", "/faults");
    phase("load_done", { loadMs, requestsPerSecond: Math.round((opts.requests / loadMs) * 1000) });

    // settle what is still moving: queued videos, pending credit, the chain scan
    await load.drainVideo(Date.now() + opts.videoDrainMs);
    await world.queue(QUEUES.reconciliation, "scan-chain").catch(() => undefined);
    await waitUntil(
      async () =>
        (await world.db.payment.count({ where: { status: { in: ["pending", "settling", "reconciling"] } } })) === 0,
      90_000,
      "payments confirmed",
    ).catch((e: Error) => phase("payments_not_settled", { error: e.message }));
    phase("settled", { videoJobsStillPolled: load.videoPending });

    // while the APIs idle: what they still hold (nothing, once each request has ended)
    await sleep(3_000);
    const idle = await world.db.$queryRawUnsafe<{ be: bigint; oe: bigint; live: bigint; expired: bigint }[]>(
      `SELECT (SELECT count(*) FROM buyer_escrows) AS be, (SELECT count(*) FROM offer_escrows) AS oe,
              (SELECT count(*) FROM escrow_holders WHERE expires_at >= now()) AS live,
              (SELECT count(*) FROM escrow_holders WHERE expires_at < now()) AS expired`,
    );
    emit({
      soak: "idle_escrow",
      buyerSlices: Number(idle[0]?.be ?? 0),
      offerSlices: Number(idle[0]?.oe ?? 0),
      liveHolders: Number(idle[0]?.live ?? 0),
      expiredHolders: Number(idle[0]?.expired ?? 0),
    });

    // the SIGKILLed API's escrow: back through the sweeper once its lease ends
    const killedAt = Number(chaosLog.find((c) => c.action === "api_sigkill")?.killedAt ?? t0);
    const sql = createSql(world.databaseUrl, 2);
    try {
      if (opts.waitForLeases) {
        const sweptBy = killedAt + HOLDER_LEASE_MS + 60_000;
        await waitUntil(
          async () =>
            Number(
              (
                await sql.query<{ n: string }>(
                  `SELECT count(*) AS n FROM escrow_holders h WHERE h.expires_at < now()
                      AND (EXISTS (SELECT 1 FROM buyer_escrows e WHERE e.holder = h.id)
                           OR EXISTS (SELECT 1 FROM offer_escrows e WHERE e.holder = h.id))`,
                )
              ).rows[0]?.n ?? 0,
            ) === 0,
          Math.max(1_000, sweptBy - Date.now()),
          "the sweeper releasing expired holders",
        ).then(
          () =>
            findings.push({
              invariant: "escrow_swept_within_lease",
              ok: true,
              checkedAfterKillMs: Date.now() - killedAt,
            }),
          () =>
            findings.push({
              invariant: "escrow_swept_within_lease",
              ok: false,
              checkedAfterKillMs: Date.now() - killedAt,
            }),
        );
      }
      await world.stopServices();
      phase("services_stopped");
      // whatever a killed process held, released as of its lease's end (the sweeper's own function)
      const asOf = new Date(Math.max(Date.now(), killedAt + HOLDER_LEASE_MS + 1_000));
      const released = await releaseExpiredHolders(sqlEscrowStore(sql), asOf);
      phase("swept", { releasedHolders: released.released, asOf: asOf.toISOString() });
    } finally {
      await sql.end();
    }

    // figures
    let total = 0;
    let errors = 0;
    for (const [kind, m] of [...load.counts].sort()) {
      const n = [...m.values()].reduce((a, b) => a + b, 0);
      const e = [...m].filter(([s]) => isError(s)).reduce((a, [, c]) => a + c, 0);
      if (kind !== "funding_signup") total += n;
      errors += e;
      const lat = load.latencies.get(kind as Kind) ?? [];
      emit({
        soak: "requests",
        kind,
        total: n,
        errors: e,
        p50Ms: pct(lat, 50),
        p99Ms: pct(lat, 99),
        byStatus: Object.fromEntries([...m].sort((a, b) => b[1] - a[1])),
      });
    }
    emit({ soak: "requests_total", requests: total, signups: load.buyers.length, errors });
    const refusals = load.balanceRefusals;
    emit({
      soak: "insufficient_balance_refusals",
      total: refusals.length,
      // the buyer still had at least 1 USDC confirmed right after the refusal (every request in the
      // mix costs less than 0.30 USDC at the ceiling)
      withOver1UsdcConfirmed: refusals.filter((r) => (r.confirmedMicroUsdc ?? 0n) >= 1_000_000n).length,
      samples: refusals.slice(0, 8).map((r) => ({
        kind: r.kind,
        confirmedMicroUsdc: r.confirmedMicroUsdc?.toString() ?? null,
        availableMicroUsdc: r.availableMicroUsdc?.toString() ?? null,
      })),
    });
    if (opts.readReplica) {
      // read-your-writes across processes, with the APIs reading a replica: every paid buffered
      // request read back at once from another API must be found (and some must have been read back)
      const byStatus = Object.fromEntries([...load.readBacks].sort((a, b) => b[1] - a[1]));
      emit({ soak: "read_back", byStatus });
      findings.push({
        invariant: "own_writes_read_back",
        ok: load.readBackMissing.length === 0 && (load.readBacks.get("200") ?? 0) > 0,
        found: load.readBacks.get("200") ?? 0,
        notFound: load.readBackMissing.length,
        notFoundSample: load.readBackMissing.slice(0, 5),
        byStatus,
      });
    }
    emit({ soak: "faults_injected", ...Object.fromEntries(injected) });
    emit({ soak: "upstream", ...(await upstreamFigures(world)) });
    emit({ soak: "volume", ...(await volumeFigures(world.db)) });
    const logs = [...world.tally].filter(([k]) => !k.includes(":30:")).sort((a, b) => b[1].count - a[1].count);
    emit({ soak: "service_logs", ...Object.fromEntries(logs.map(([k, v]) => [k, v.count])) });
    for (const [k, v] of logs) if (v.sample) emit({ soak: "service_error_sample", kind: k, line: v.sample });

    // a SIGKILLed process's gate slots are back once its holder lease has run out (the gates' rule)
    const lastKill = Math.max(
      t0,
      ...chaosLog
        .flatMap((c) => [
          c.killedAt,
          ...((c.killed as { killedAt?: number }[] | undefined) ?? []).map((k) => k.killedAt),
        ])
        .map(Number)
        .filter(Number.isFinite),
    );
    const invariants = await checkInvariants(world.db, {
      load,
      redis: () => world.redisClient(),
      redisKeys: world.redisKeys,
      gateLeasesAsOfMs: lastKill + GATE_HOLDER_TTL_MS + 1_000,
      chain: {
        rpcUrl: world.chain.rpcUrl,
        usdcAddress: world.chain.usdcAddress,
        payTo: world.payTo as `0x${string}`,
      },
    });
    // the service rides out every disruption: no process exits unless the soak kills or stops it,
    // and every SIGTERM ends in a clean shutdown (escrow and gate slots given back)
    const procs = [...world.apis, ...world.workers];
    findings.push({
      invariant: "processes_survive",
      ok: procs.every((p) => p.crashes.length === 0 && p.stops.every((c) => c === 0)),
      crashes: procs.flatMap((p) =>
        p.crashes.map((c) => ({
          process: p.name,
          atMs: c.atMs - t0,
          code: c.code,
          signal: c.signal,
          tail: c.tail.slice(-1500),
        })),
      ),
      uncleanStops: procs.filter((p) => p.stops.some((c) => c !== 0)).map((p) => ({ process: p.name, codes: p.stops })),
      startFailures: procs.flatMap((p) => p.startFailures.map((f) => ({ process: p.name, reason: f }))),
      starts: Object.fromEntries(procs.map((p) => [p.name, p.starts])),
    });
    invariants.push(...findings);
    for (const inv of invariants) emit({ soak: "invariant", ...inv });
    const ok = invariants.every((i) => i.ok);
    emit({ soak: "result", ok, requests: total, errors, elapsedMs: Date.now() - t0 });
    return { ok, invariants, requests: total, errors };
  } catch (e) {
    emit({
      soak: "aborted",
      error: (e as Error).stack ?? String(e),
      logs: [...world.apis, ...world.workers].map((p) => ({ name: p.name, tail: p.output().slice(-1500) })),
    });
    throw e;
  } finally {
    await world.close();
  }
}

function weighted(table: [string, number][], x: number): string {
  const total = table.reduce((s, [, w]) => s + w, 0);
  let y = x * total;
  for (const [k, w] of table) {
    y -= w;
    if (y < 0) return k;
  }
  return table[0]?.[0] ?? "http_500";
}

async function waitUntil(pred: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    try {
      if (await pred()) return;
    } catch {
      // a terminated connection mid-poll: ask again
    }
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(250);
  }
}

/** What the simulator saw: requests by route and status, faults applied, and what it burned. */
async function upstreamFigures(world: SoakWorld): Promise<Record<string, unknown>> {
  const log = await world.sim.admin<{ data?: SimRecord[] } | SimRecord[]>("GET", "/requests");
  const records = Array.isArray(log) ? log : (log.data ?? []);
  const byRoute: Record<string, number> = {};
  const faults: Record<string, number> = {};
  let burn = 0n;
  let aborted = 0;
  for (const r of records) {
    const k = `${r.route}:${r.status}`;
    byRoute[k] = (byRoute[k] ?? 0) + 1;
    if (r.fault) faults[r.fault] = (faults[r.fault] ?? 0) + 1;
    if (r.aborted) aborted++;
    burn += BigInt(r.burnMicroDiem ?? 0) - BigInt(r.refundedMicro ?? 0);
  }
  return {
    requests: records.length,
    byRoute,
    faultsApplied: faults,
    abortedByClient: aborted,
    netBurnMicroDiem: burn.toString(),
  };
}

interface SimRecord {
  route: string;
  status: number;
  fault: string | null;
  aborted: boolean;
  burnMicroDiem: string;
  refundedMicro: string;
}

/** The disruptions, each once its point of progress is reached. */
function runChaos(
  world: SoakWorld,
  load: SoakLoad,
  opts: SoakOptions,
  log: (e: Record<string, unknown>) => void,
  findings: Invariant[],
): { done: Promise<void> } {
  const at = (share: number) => waitUntil(async () => load.done >= share * opts.requests, 24 * 3600_000, "progress");
  const steps: Promise<void>[] = [];

  // an API SIGKILLed while streams are open on it, then started again on its port
  steps.push(
    (async () => {
      await at(opts.chaosAt.apiKill);
      const end = Date.now() + 20_000;
      while (Math.max(...load.openStreams) < 2 && Date.now() < end) await sleep(20);
      const i = load.openStreams.indexOf(Math.max(...load.openStreams));
      const api = world.apis[i];
      if (!api) return;
      const open = load.openStreams[i];
      const killedAt = Date.now();
      load.down.add(i);
      await api.kill();
      log({ action: "api_sigkill", api: api.name, openStreamsOnIt: open, killedAt });
      await sleep(1_000);
      await api.start({ attempts: 10 });
      load.down.delete(i);
      log({ action: "api_restarted", api: api.name, downMs: Date.now() - killedAt });
    })(),
  );

  // the soak's Redis killed and started empty (gates, queues, schedulers, caches all gone); the
  // periodic jobs must come back without a restart of the workers (none restarts meanwhile: the
  // worker kill below waits for this step)
  const redisStep = (async () => {
    await at(opts.chaosAt.redisRestart);
    const before = await world.schedulerCount().catch(() => -1);
    const starts = world.workers.map((w) => w.starts);
    if (world.cluster) {
      // a cluster keeps its data through a failover: a replica of the gates' master takes over
      // gracefully (CLUSTER FAILOVER) under the load, and every scheduler must still be there
      const cluster = world.cluster;
      const master = await cluster.masterOf(world.redisKeys.gateHolders());
      const t = Date.now();
      const { newMaster } = await cluster.failover(master);
      const after = await world.schedulerCount().catch(() => 0);
      log({ action: "redis_cluster_failover", master, newMaster, tookMs: Date.now() - t });
      findings.push({
        invariant: "periodic_jobs_kept_through_failover",
        ok: before > 0 && after >= before && world.workers.every((w, i) => w.starts === starts[i]),
        jobSchedulersBefore: before,
        jobSchedulersAfter: after,
      });
      return;
    }
    const redis = world.redis;
    if (!redis) throw new Error("soak: no redis-server to restart");
    const downMs = await redis.restart(1_000);
    log({ action: "redis_restarted", downMs, jobSchedulersBefore: before });
    const t = Date.now();
    let after = 0;
    while (Date.now() - t < 30_000) {
      after = await world.schedulerCount().catch(() => 0);
      if (after >= before) break;
      await sleep(500);
    }
    findings.push({
      invariant: "periodic_jobs_back_after_redis_restart",
      ok: before > 0 && after >= before && world.workers.every((w, i) => w.starts === starts[i]),
      jobSchedulersBefore: before,
      jobSchedulersAfter: after,
      backAfterMs: after >= before ? Date.now() - t : null,
    });
  })();
  steps.push(redisStep);

  // a worker SIGKILLed while it runs a job; then, with it down, the other one (surely mid-job)
  steps.push(
    (async () => {
      await at(opts.chaosAt.workerKill);
      await redisStep.catch(() => undefined);
      const open = await world.openQueues();
      const queues = open.queues;
      try {
        const activeSince = async (since: number) => {
          for (const q of queues) {
            for (const j of await q.getActive()) if ((j.processedOn ?? 0) >= since) return { queue: q.name, job: j };
          }
          return null;
        };
        const killed: Record<string, unknown>[] = [];
        let since = 0;
        for (const w of world.workers) {
          const end = Date.now() + 30_000;
          let hit = await activeSince(since).catch(() => null);
          while (!hit && Date.now() < end) {
            await sleep(5);
            hit = await activeSince(since).catch(() => null);
          }
          since = Date.now();
          await w.kill();
          killed.push({
            worker: w.name,
            activeJob: hit ? `${hit.queue}/${hit.job.name}#${hit.job.id}` : null,
            killedAt: Date.now(),
          });
        }
        // the last one was the only worker left: a job it had started was surely running in it
        log({ action: "workers_sigkill", killed, lastKilledMidJob: killed.at(-1)?.activeJob !== null });
        await Promise.all(world.workers.map((w) => w.start({ attempts: 10 })));
        log({ action: "workers_restarted" });
      } finally {
        await open.close();
      }
    })(),
  );

  // every Postgres connection of the soak's database terminated
  for (const share of opts.chaosAt.pgTerminate) {
    steps.push(
      (async () => {
        await at(share);
        const terminated = await world.terminateBackends();
        log({ action: "pg_terminate_backend", terminated });
      })(),
    );
  }
  // a disruption that could not be carried out (a process that would not come back) fails the run
  const guarded = steps.map((p) =>
    p.catch((e: unknown) => {
      log({ action: "chaos_failed", error: String((e as Error)?.message ?? e).slice(0, 3000) });
      findings.push({ invariant: "disruptions_carried_out", ok: false, error: String(e).slice(0, 500) });
    }),
  );
  return { done: Promise.all(guarded).then(() => undefined) };
}
