import { resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { StartupError } from "../../adapters/db.js";
import { isClusterUrl, parseClusterUrl } from "../../lib/redis-url.js";
import { type EmbeddedPostgres, reclaimLeftover, startEmbeddedPostgres } from "./postgres.js";
import { findOnPath, isLoopback, socketHost, tcpAnswers } from "./process.js";
import { type LocalRedis, startRedisServer } from "./redis.js";

export { type EmbeddedPostgres, postgresDataDir } from "./postgres.js";
export type { LocalRedis } from "./redis.js";

/**
 * Node alone for development (docs/decisions.md "Node alone for development"): `npm run dev`
 * needs no PostgreSQL or Redis of its own. When nothing answers at DATABASE_URL it runs an
 * embedded PostgreSQL there (data under DEV_STATE_DIR); when nothing answers at REDIS_URL it
 * runs `redis-server` there, if the machine has one. Both listen exactly where the URLs point,
 * so the service's configuration does not change, and both stop with the local world.
 */
export interface DevServices {
  /** set when this process runs the embedded PostgreSQL */
  readonly postgres?: EmbeddedPostgres;
  /** set when this process runs a redis-server */
  readonly redis?: LocalRedis;
  /** rows for the local-mode banner (none when both services were already there) */
  readonly bannerLines: string[];
  /** Stops what was started (PostgreSQL: fast shutdown). Idempotent. */
  stop(): Promise<void>;
}

/** Where local mode keeps what survives restarts (DEV_STATE_DIR overrides; gitignored). */
export const DEFAULT_STATE_DIR = fileURLToPath(new URL("../../../.dev-state/", import.meta.url));

/** Local mode's state directory for an environment: DEV_STATE_DIR, else `.dev-state/`, absolute. */
export function stateDirOf(env: Record<string, string | undefined>): string {
  return resolve(env.DEV_STATE_DIR || DEFAULT_STATE_DIR);
}

/** CONTRACT defaults (src/config.ts). */
const DEFAULT_DATABASE_URL = "postgresql://postgres@127.0.0.1:5432/svc";
const DEFAULT_REDIS_URL = "redis://127.0.0.1:6379";
/** "answers" = accepts a TCP connection this fast; on loopback it takes well under a millisecond */
const PROBE_TIMEOUT_MS = 1_500;

export async function startDevServices(opts: {
  env: Record<string, string | undefined>;
  /** DEV_STATE_DIR: the embedded PostgreSQL keeps its data in `<stateDir>/postgres` */
  stateDir: string;
  /** where the one-line notices go (default: stdout) */
  say?: (line: string) => void;
}): Promise<DevServices> {
  const say = opts.say ?? ((line: string) => void process.stdout.write(`${line}\n`));
  const stateDir = resolve(opts.stateDir);
  const dbUrl = new URL(opts.env.DATABASE_URL || DEFAULT_DATABASE_URL);
  const redisRaw = opts.env.REDIS_URL || DEFAULT_REDIS_URL;
  // a Redis Cluster (`redis+cluster://seed,…`) is probed at its first seed and never started here
  const clusterSeed = isClusterUrl(redisRaw) ? parseClusterUrl(redisRaw).nodes[0] : undefined;
  const redisUrl = new URL(
    clusterSeed
      ? `redis://${clusterSeed.host.includes(":") ? `[${clusterSeed.host}]` : clusterSeed.host}:${clusterSeed.port}`
      : redisRaw,
  );
  const dbHost = socketHost(dbUrl);
  const dbPort = Number(dbUrl.port || 5432);
  const redisHost = socketHost(redisUrl);
  const redisPort = Number(redisUrl.port || 6379);

  // our own cluster, orphaned by a killed dev process, must not pass for "a PostgreSQL answers"
  await reclaimLeftover(stateDir, say);
  // A port that accepts connections cannot take an embedded server either, so a TCP answer
  // decides; if it is no PostgreSQL this URL can use, start-up names DATABASE_URL with the reason.
  const [dbAnswers, redisAnswers] = await Promise.all([
    tcpAnswers(dbHost, dbPort, PROBE_TIMEOUT_MS),
    tcpAnswers(redisHost, redisPort, PROBE_TIMEOUT_MS),
  ]);

  // everything that can fail for want of something is checked before anything starts
  if (!dbAnswers && !isLoopback(dbHost)) {
    throw new StartupError(
      `DATABASE_URL: no PostgreSQL answers at ${dbHost}:${dbPort}, and an embedded one is only started on a loopback host (127.0.0.1, ::1, localhost)`,
    );
  }
  let redisBinary: string | undefined;
  if (!redisAnswers) {
    const where = `${redisHost}:${redisPort}`;
    if (!isLoopback(redisHost)) {
      throw new StartupError(
        `REDIS_URL: no Redis answers at ${where}, and a redis-server is only started on a loopback host (127.0.0.1, ::1, localhost)`,
      );
    }
    if (clusterSeed || redisUrl.protocol !== "redis:") {
      throw new StartupError(
        `REDIS_URL: no Redis answers at ${where}; a redis-server is only started for a redis:// URL (never a cluster)`,
      );
    }
    redisBinary = findOnPath("redis-server", opts.env.PATH ?? process.env.PATH);
    if (!redisBinary) {
      throw new StartupError(
        `REDIS_URL: no Redis answers at ${where} and there is no redis-server on PATH: run \`docker compose up -d redis\` (this repository's docker-compose.yml) or install your OS's package (apt install redis-server, brew install redis)`,
      );
    }
  }

  const [pgResult, redisResult] = await Promise.allSettled([
    dbAnswers ? Promise.resolve(undefined) : startEmbeddedPostgres({ url: dbUrl, stateDir }),
    redisBinary ? startRedisServer({ url: redisUrl, binary: redisBinary }) : Promise.resolve(undefined),
  ]);
  const postgres = pgResult.status === "fulfilled" ? pgResult.value : undefined;
  const redis = redisResult.status === "fulfilled" ? redisResult.value : undefined;
  const failed = [pgResult, redisResult].find((r) => r.status === "rejected");
  if (failed) {
    await Promise.allSettled([postgres?.stop(), redis?.stop()]);
    throw failed.reason;
  }

  const bannerLines: string[] = [];
  if (postgres) {
    say(
      `PostgreSQL: nothing answered at ${dbHost}:${dbPort}, so an embedded PostgreSQL ${postgres.version} runs there; its data is in ${postgres.dataDir}${postgres.initialised ? " (initialised now)" : ""}`,
    );
    bannerLines.push(
      `  PostgreSQL   ${dbHost}:${dbPort}   (embedded ${postgres.version}; data in ${postgres.dataDir}; stops with this process)`,
    );
  }
  if (redis) {
    say(`Redis: nothing answered at ${redisHost}:${redisPort}, so ${redis.binary} runs there (nothing kept on disk)`);
    bannerLines.push(
      `  Redis        ${redisHost}:${redisPort}   (${redis.binary}, nothing kept on disk; stops with this process)`,
    );
  }

  let stopping: Promise<void> | undefined;
  return {
    postgres,
    redis,
    bannerLines,
    stop() {
      stopping ??= Promise.allSettled([postgres?.stop(), redis?.stop()]).then(() => undefined);
      return stopping;
    },
  };
}
