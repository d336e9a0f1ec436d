import { randomBytes, randomUUID } from "node:crypto";
import { Queue } from "bullmq";
import pg from "pg";
import { createPrisma, type Db } from "../../src/adapters/db.js";
import { QUEUES } from "../../src/adapters/queues.js";
import { createRedis, type RedisClient, whenReady } from "../../src/adapters/redis/client.js";
import { type RedisKeys, redisKeys } from "../../src/adapters/redis/keys.js";
import { nextUtcMidnight } from "../../src/lib/clock.js";
import { SecretBox } from "../../src/lib/secret-box.js";
import { type LocalChain, startLocalChain } from "../../src/local/chain/index.js";
import { dbUrl, templateName, withAdmin } from "../db.js";
import { freePort } from "../harness.js";
import { sealedKey } from "../market.js";
import { type RedisCluster, startRedisCluster } from "../redis-cluster.js";
import { type Replica, startReplica } from "../replica.js";
import { migrateTemplate } from "../template.js";
import { type LogTally, ServiceProcess, SimProcess, SoakRedis } from "./processes.js";

/**
 * The soak's world, isolated from everything else on the machine: its own database (cloned from
 * the migrated template, named `svc_soak_*` so the test runs' clean-up never takes it), its own
 * redis-server, its own upstream simulator process, its own anvil chain with the local
 * facilitator in each API process, and the service as N API + M worker processes. Optionally a
 * Redis Cluster of its own instead of the one redis-server (`redisCluster`: 3 masters + 3 replicas
 * on loopback, testkit/redis-cluster.ts), and a streaming read replica of the machine's Postgres
 * that the API processes read from (`readReplica`: testkit/replica.ts).
 */

/** The soak's Redis prefix (every process's REDIS_PREFIX). */
export const SOAK_PREFIX = "soak";

export const CATALOG_KEY = "VENICE_INFERENCE_KEY_soak_catalog";

/** One supplier key: its offer's price and DIEM, and the key's own balance at the simulator. */
export interface SupplySpec {
  priceCents: number;
  quantityMicroDiem: bigint;
  keyBalanceMicroDiem: bigint;
}

export interface SoakWorldOptions {
  apis: number;
  workers: number;
  supply: SupplySpec[];
  /** blocks before pending credit is confirmed */
  confirmationBlocks: number;
  /** one block mined every this many ms (confirmation depth grows with it) */
  blockIntervalMs: number;
  /** a Redis Cluster of the soak's own instead of one redis-server */
  redisCluster?: boolean;
  /** a streaming replica the API processes read from (DATABASE_URL_READ_REPLICA) */
  readReplica?: boolean;
}

export interface SupplierKey {
  secret: string;
  upstreamKeyId: string;
  offerId: string;
  priceCents: number;
}

export class SoakWorld {
  readonly tally: LogTally = new Map();
  readonly apis: ServiceProcess[] = [];
  readonly workers: ServiceProcess[] = [];
  readonly keys: SupplierKey[] = [];
  dbName = "";
  databaseUrl = "";
  /** the one redis-server (without `redisCluster`) */
  redis: SoakRedis | null = null;
  cluster: RedisCluster | null = null;
  replica: Replica | null = null;
  /** the keys the service uses on this Redis (hash-tagged on a cluster) */
  readonly redisKeys: RedisKeys;
  sim!: SimProcess;
  chain!: LocalChain;
  db!: Db;
  payTo = "";
  private miner: NodeJS.Timeout | null = null;
  private admin: pg.Client | null = null;

  constructor(readonly opts: SoakWorldOptions) {
    this.redisKeys = redisKeys(SOAK_PREFIX, { cluster: opts.redisCluster === true });
  }

  /** REDIS_URL of every process: the redis-server, or the cluster's seed list (`redis+cluster://`) */
  get redisUrl(): string {
    if (this.cluster) return this.cluster.url;
    if (this.redis) return this.redis.url;
    throw new Error("soak: Redis not started");
  }

  /** A client of the soak's Redis or cluster, ready; the caller disconnects it. */
  async redisClient(): Promise<RedisClient> {
    const c = createRedis(this.redisUrl, "command");
    c.on("error", () => undefined);
    await whenReady(c, 10_000);
    return c;
  }

  /** Every BullMQ queue of the service, as its own prefixes name them; `close` ends them and their client. */
  async openQueues(): Promise<{ queues: Queue[]; close(): Promise<void> }> {
    const connection = await this.redisClient();
    const queues = Object.values(QUEUES).map((name) => {
      const q = new Queue(name, { connection, prefix: this.redisKeys.queuePrefix(name) });
      q.on("error", () => undefined);
      return q;
    });
    return {
      queues,
      async close() {
        await Promise.all(queues.map((q) => q.close().catch(() => undefined)));
        connection.disconnect();
      },
    };
  }

  /** Everything up, in dependency order: database, Redis, chain, simulator, supply, workers, APIs. */
  async start(): Promise<void> {
    await migrateTemplate();
    await dropAbandonedSoakDatabases();
    // the creation time in the name lets a later run drop it if this run is interrupted
    this.dbName = `svc_soak_${Math.floor(Date.now() / 1000)}_${randomUUID().replaceAll("-", "").slice(0, 8)}`;
    const template = templateName();
    await withAdmin(async (c) => {
      for (let attempt = 0; ; attempt++) {
        try {
          await c.query(`CREATE DATABASE "${this.dbName}" TEMPLATE "${template}"`);
          return;
        } catch (e) {
          // a test file is cloning the same template right now
          if ((e as { code?: string }).code === "55006" && attempt < 100) {
            await new Promise((r) => setTimeout(r, 50 + Math.random() * 100));
            continue;
          }
          throw e;
        }
      }
    });
    this.databaseUrl = dbUrl(this.dbName);
    this.db = createPrisma(this.databaseUrl, { max: 4 });

    if (this.opts.redisCluster) {
      this.cluster = await startRedisCluster();
    } else {
      this.redis = new SoakRedis(await freePort());
      await this.redis.start();
    }
    // started after the soak's database exists; a standby serves every database of the primary
    if (this.opts.readReplica) this.replica = await startReplica();

    this.chain = await startLocalChain();
    const mine = () => {
      this.chain.mine(1).catch(() => undefined);
    };
    this.miner = setInterval(mine, this.opts.blockIntervalMs);
    const accounts = this.chain.devAccounts;
    // 0 deploys and mints; 1..apis settle payments (one facilitator key per API process, so no two
    // processes race for one key's nonces); the last one receives the payments
    const payTo = accounts[accounts.length - 1];
    if (!payTo || accounts.length < this.opts.apis + 3) throw new Error("not enough anvil dev accounts");
    this.payTo = payTo.address;

    const keyEncryptionKey = randomBytes(32);
    const secrets = this.opts.supply.map(() => `VENICE_INFERENCE_KEY_soak_${randomUUID().replaceAll("-", "")}`);
    this.sim = new SimProcess(await freePort());
    await this.sim.start([
      { key: CATALOG_KEY, diem: "0" },
      ...secrets.map((key, i) => ({ key, diem: formatMicro(this.opts.supply[i]?.keyBalanceMicroDiem ?? 0n) })),
    ]);
    await this.seedSupply(keyEncryptionKey, secrets);

    const env = (facilitatorKey: string, level: string): Record<string, string> => ({
      DATABASE_URL: this.databaseUrl,
      ...(this.replica ? { DATABASE_URL_READ_REPLICA: this.replica.url(this.dbName) } : {}),
      REDIS_URL: this.redisUrl,
      REDIS_PREFIX: SOAK_PREFIX,
      HOST: "127.0.0.1",
      UPSTREAM_BASE_URL: this.sim.baseUrl,
      CATALOG_SYNC_KEY: CATALOG_KEY,
      CHAIN_RPC_URL: this.chain.rpcUrl,
      CHAIN_ID: String(this.chain.chainId),
      USDC_ADDRESS: this.chain.usdcAddress,
      PAY_TO: payTo.address,
      FACILITATOR_URL: "local",
      FACILITATOR_PRIVATE_KEY: facilitatorKey,
      CONFIRMATION_BLOCKS: String(this.opts.confirmationBlocks),
      SESSION_SECRET: randomBytes(24).toString("hex"),
      KEY_ENCRYPTION_KEY: keyEncryptionKey.toString("hex"),
      // every buyer signs up through x402 at the start: the global signup fuse is not under test
      SIGNUP_FUSE_MAX: "1000000",
      LOG_LEVEL: level,
    });
    const workerKey = accounts[this.opts.apis + 1]?.privateKey ?? "";
    for (let i = 0; i < this.opts.workers; i++) {
      // info: the worker announces "ready" at info level
      this.workers.push(new ServiceProcess(`worker-${i + 1}`, "worker", env(workerKey, "info"), this.tally));
    }
    for (let i = 0; i < this.opts.apis; i++) {
      const key = accounts[i + 1]?.privateKey ?? "";
      this.apis.push(new ServiceProcess(`api-${i + 1}`, "api", env(key, "warn"), this.tally, await freePort()));
    }
    // all at once (an API caches only the models it found, so it may start before the workers'
    // first catalog sync); the load starts once the catalog is there
    await Promise.all([...this.workers, ...this.apis].map((p) => p.start({ timeoutMs: 120_000 })));
    await this.waitForCatalog();
  }

  /** One supplier with one sealed key and one live offer per spec (as the supply routes would store them). */
  private async seedSupply(keyEncryptionKey: Buffer, secrets: string[]): Promise<void> {
    const box = new SecretBox(keyEncryptionKey);
    const wallet = `0x${randomBytes(20).toString("hex")}`;
    const supplier = await this.db.account.create({ data: { walletAddress: wallet, authProvider: "siwe" } });
    for (const [i, spec] of this.opts.supply.entries()) {
      const secret = secrets[i] ?? "";
      const k = await this.db.upstreamKey.create({
        data: {
          ...sealedKey(box, supplier.id, secret),
          label: `soak key ${i + 1} (${spec.priceCents}¢)`,
          lastBalanceMicroDiem: spec.keyBalanceMicroDiem,
          lastBalanceAt: new Date(),
        },
      });
      const offer = await this.db.offer.create({
        data: {
          accountId: supplier.id,
          upstreamKeyId: k.id,
          priceCentsPerDollar: spec.priceCents,
          quantityMicroDiem: spec.quantityMicroDiem,
          remainingMicroDiem: spec.quantityMicroDiem,
          expiresAt: nextUtcMidnight(new Date()),
        },
      });
      this.keys.push({ secret, upstreamKeyId: k.id, offerId: offer.id, priceCents: spec.priceCents });
    }
  }

  private async waitForCatalog(): Promise<void> {
    const end = Date.now() + 60_000;
    while ((await this.db.catalogModel.count()) === 0) {
      if (Date.now() > end) throw new Error("the workers did not sync the catalog within 60 s");
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  /**
   * `pg_terminate_backend` on every connection to the soak's database (and no other), on the primary
   * and, with a replica, on the standby too.
   */
  async terminateBackends(): Promise<number> {
    if (!this.admin) {
      this.admin = new pg.Client({ connectionString: dbUrl("postgres") });
      await this.admin.connect();
    }
    const sql =
      "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) AS n FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()";
    const r = await this.admin.query<{ n: string }>(sql, [this.dbName]);
    let n = Number(r.rows[0]?.n ?? 0);
    if (this.replica) {
      const standby = new pg.Client({ connectionString: this.replica.url("postgres") });
      await standby.connect();
      try {
        n += Number((await standby.query<{ n: string }>(sql, [this.dbName])).rows[0]?.n ?? 0);
      } finally {
        await standby.end();
      }
    }
    return n;
  }

  /** Adds one job to a queue, as its scheduler would (e.g. the reconciliation's `scan-chain`). */
  async queue(queue: string, job: string): Promise<void> {
    const connection = await this.redisClient();
    const q = new Queue(queue, { connection, prefix: this.redisKeys.queuePrefix(queue) });
    try {
      await q.add(job, {}, { removeOnComplete: true, removeOnFail: true });
    } finally {
      await q.close();
      connection.disconnect();
    }
  }

  /** How many job schedulers (the workers' periodic jobs) the soak's Redis holds now. */
  async schedulerCount(): Promise<number> {
    const q = await this.openQueues();
    try {
      let total = 0;
      for (const queue of q.queues) total += await queue.getJobSchedulersCount();
      return total;
    } finally {
      await q.close();
    }
  }

  /** Stops every process (SIGTERM, so the APIs give their escrow and gate slots back), keeps the data. */
  async stopServices(): Promise<void> {
    await Promise.all(this.apis.map((a) => a.stop()));
    await Promise.all(this.workers.map((w) => w.stop()));
  }

  /** Everything down and the database dropped. */
  async close(): Promise<void> {
    if (this.miner) clearInterval(this.miner);
    await Promise.allSettled([...this.apis, ...this.workers].map((p) => p.kill()));
    await this.sim?.stop().catch(() => undefined);
    await this.chain?.stop().catch(() => undefined);
    await this.redis?.stop().catch(() => undefined);
    await this.cluster?.stop().catch(() => undefined);
    await this.replica?.stop().catch(() => undefined);
    await this.db?.$disconnect().catch(() => undefined);
    await this.admin?.end().catch(() => undefined);
    if (this.dbName) {
      await withAdmin(async (c) => void (await c.query(`DROP DATABASE IF EXISTS "${this.dbName}" WITH (FORCE)`)));
    }
  }
}

/** A soak database older than this with nobody connected was left by an interrupted run. */
const ABANDONED_AFTER_S = 3 * 3600;

/** Drops the databases of soak runs that were interrupted (a run drops its own at the end). */
async function dropAbandonedSoakDatabases(): Promise<void> {
  await withAdmin(async (c) => {
    const rows = await c.query<{ datname: string }>(
      `SELECT datname FROM pg_database d WHERE datname LIKE 'svc\\_soak\\_%'
          AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.datname = d.datname)`,
    );
    const now = Math.floor(Date.now() / 1000);
    for (const { datname } of rows.rows) {
      const created = Number(/^svc_soak_(\d+)_/.exec(datname)?.[1] ?? Number.NaN);
      if (!(now - created > ABANDONED_AFTER_S)) continue;
      await c.query(`DROP DATABASE IF EXISTS "${datname}" WITH (FORCE)`).catch(() => undefined);
    }
  });
}

/** micro-units as the simulator CLI's decimal. */
function formatMicro(v: bigint): string {
  return `${v / 1_000_000n}.${(v % 1_000_000n).toString().padStart(6, "0")}`;
}
