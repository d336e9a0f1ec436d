import { randomBytes, randomUUID } from "node:crypto";
import { Queue } from "bullmq";
import pg from "pg";
import { createPrisma, type Db } from "../../src/adapters/db.js";
import { QUEUES } from "../../src/adapters/queues.js";
import { nextUtcMidnight } from "../../src/lib/clock.js";
import { SecretBox } from "../../src/lib/secret-box.js";
import { type LocalChain, startLocalChain } from "../../src/local/chain/index.js";
import { dbUrl, templateName, withAdmin } from "../db.js";
import { freePort } from "../harness.js";
import { sealedKey } from "../market.js";
import { migrateTemplate } from "../template.js";
import { type LogTally, ServiceProcess, SimProcess, SoakRedis } from "./processes.js";

/**
 * The soak's world, isolated from everything else on the machine: its own database (cloned from
 * the migrated template, named `svc_soak_*` so the test runs' clean-up never takes it), its own
 * redis-server, its own upstream simulator process, its own anvil chain with the local
 * facilitator in each API process, and the service as N API + M worker processes.
 */

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
  redis!: SoakRedis;
  sim!: SimProcess;
  chain!: LocalChain;
  db!: Db;
  payTo = "";
  private miner: NodeJS.Timeout | null = null;
  private admin: pg.Client | null = null;

  constructor(readonly opts: SoakWorldOptions) {}

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

    this.redis = new SoakRedis(await freePort());
    await this.redis.start();

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
      REDIS_URL: this.redis.url,
      REDIS_PREFIX: "soak",
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

  /** `pg_terminate_backend` on every connection to the soak's database (and no other). */
  async terminateBackends(): Promise<number> {
    if (!this.admin) {
      this.admin = new pg.Client({ connectionString: dbUrl("postgres") });
      await this.admin.connect();
    }
    const r = await this.admin.query<{ n: string }>(
      "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) AS n FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()",
      [this.dbName],
    );
    return Number(r.rows[0]?.n ?? 0);
  }

  /** Adds one job to a queue, as its scheduler would (e.g. the reconciliation's `scan-chain`). */
  async queue(queue: string, job: string): Promise<void> {
    const q = new Queue(queue, {
      connection: { host: "127.0.0.1", port: this.redis.port, maxRetriesPerRequest: 1 },
      prefix: "soak:bull",
    });
    try {
      await q.add(job, {}, { removeOnComplete: true, removeOnFail: true });
    } finally {
      await q.close();
    }
  }

  /** How many job schedulers (the workers' periodic jobs) the soak's Redis holds now. */
  async schedulerCount(): Promise<number> {
    let total = 0;
    for (const name of Object.values(QUEUES)) {
      const q = new Queue(name, {
        connection: { host: "127.0.0.1", port: this.redis.port, maxRetriesPerRequest: 1 },
        prefix: "soak:bull",
      });
      try {
        total += await q.getJobSchedulersCount();
      } finally {
        await q.close();
      }
    }
    return total;
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
