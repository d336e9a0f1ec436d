import { isAbsolute, resolve } from "node:path";
import { DEFAULT_WEBHOOK_RETRY_SCHEDULE_MS, type Env, envSchema } from "./config/env-schema.js";
import { isTrue, parseKey32 } from "./config/env-values.js";
import { appPath } from "./lib/app-root.js";
import { isClusterUrl } from "./lib/redis-url.js";

/**
 * The only module that reads the environment. Mirrors ../shared/CONTRACT.md "Environment":
 * every variable with its default, parsed once at boot. Problems come back as one line per
 * variable (`PORT: expected an integer 1-65535, got "abc"`); main prints them and exits 1.
 * The variables and their defaults are config/env-schema.ts, how each value is read
 * config/env-values.ts; this file builds the typed, frozen Config from them.
 */

export type Role = "all" | "api" | "worker";

export { DEFAULT_WEBHOOK_RETRY_SCHEDULE_MS, type Env };

export interface Config {
  readonly mode: "production" | "local";
  readonly role: Role;
  readonly http: { readonly port: number; readonly host: string };
  readonly urls: { readonly base: string; readonly mcp: string; readonly web: string; readonly docs: string };
  readonly database: {
    readonly url: string;
    /** connections per pool on the API side (Prisma; the router's pg pool) */
    readonly poolSize: number;
    /** connections per pool of the workers' own clients (workers/index.ts) */
    readonly workerPoolSize: number;
    /** DATABASE_URL_READ_REPLICA: read-only pages read here (adapters/read-replica.ts); none: the primary */
    readonly readReplicaUrl: string | undefined;
    /** READ_REPLICA_MAX_LAG_MS */
    readonly readReplicaMaxLagMs: number;
  };
  /** `cluster`: REDIS_URL names a Redis Cluster (keys are hash-tagged so each script's keys share a slot) */
  readonly redis: { readonly url: string; readonly prefix: string; readonly cluster: boolean };
  readonly upstream: { readonly baseUrl: string; readonly catalogSyncKey: string | undefined };
  readonly chain: {
    readonly rpcUrl: string;
    readonly id: number;
    readonly usdcAddress: `0x${string}`;
    readonly usdcName: string;
    readonly usdcVersion: string;
    readonly payTo: `0x${string}` | undefined;
    readonly payoutPrivateKey: `0x${string}` | undefined;
    readonly confirmationBlocks: number;
  };
  readonly facilitator: {
    readonly url: string;
    readonly local: boolean;
    readonly privateKey: `0x${string}` | undefined;
    readonly cdpKeyId: string | undefined;
    readonly cdpKeySecret: string | undefined;
  };
  readonly idp: {
    readonly appId: string | undefined;
    readonly issuer: string;
    readonly verificationKeyPem: string | undefined;
    readonly jwksUrl: string | undefined;
  };
  readonly secrets: { readonly sessionSecret: string; readonly keyEncryptionKey: Buffer };
  /** platform fee on every charge; markup on the upstream's video quote (docs/public/pricing.md) */
  readonly fees: { readonly platformFeeBps: number; readonly videoMarkupBps: number };
  readonly signupFuse: { readonly max: number; readonly windowSeconds: number };
  readonly limits: {
    readonly keyMaxInFlight: number;
    readonly smallModelMaxInFlight: number;
    /** GraphQL cost points per caller per minute (graphql/limits.ts) */
    readonly graphqlCostPerMinute: number;
    /** how long an idle escrow slice stays with its router process (docs/decisions.md "Escrow") */
    readonly escrowLingerMs: number;
    /** how soon after an ending its clear is folded into the hot rows (docs/decisions.md "One append per clear") */
    readonly escrowFoldMs: number;
  };
  readonly webhooks: {
    /** loopback and private targets, and http, are allowed (WEBHOOK_ALLOW_PRIVATE; on in local mode) */
    readonly allowPrivate: boolean;
    /** delay before each retry, ms (WEBHOOK_RETRY_SCHEDULE_MS); attempts in all = its length + 1 */
    readonly retryScheduleMs: readonly number[];
    /** one attempt's deadline, ms (WEBHOOK_TIMEOUT_MS): connect, TLS, the request, the status line and headers */
    readonly timeoutMs: number;
  };
  /**
   * OpenTelemetry tracing (docs/operations.md "Traces"): `tracesUrl` is where spans go, undefined when
   * tracing is off (no endpoint, or OTEL_SDK_DISABLED); the SDK reads the other OTEL_* variables itself
   */
  readonly tracing: { readonly tracesUrl: string | undefined; readonly serviceName: string };
  /**
   * Retention of the monthly partitions (src/domain/maintenance/retention.ts): `months` whole months
   * kept before the current one (undefined: forever); `exportDir` where retired months are written
   */
  readonly retention: { readonly months: number | undefined; readonly exportDir: string };
  readonly logLevel: string;
}

export interface LoadOptions {
  mode?: "production" | "local";
  role?: Role;
  /** Redis key and queue prefix; tests give each file its own. Not an environment variable. */
  redisPrefix?: string;
}

export type LoadResult = { ok: true; config: Config } | { ok: false; errors: string[] };

/** Development-only secrets used in local mode when none are given. Never valid in production. */
export const LOCAL_SESSION_SECRET = "local-mode-session-secret-not-for-production-use";
export const LOCAL_KEY_ENCRYPTION_KEY = "0000000000000000000000000000000000000000000000000000000000000001";

function deepFreeze<T>(o: T): T {
  if (o && typeof o === "object" && !Buffer.isBuffer(o)) {
    for (const v of Object.values(o)) deepFreeze(v);
    Object.freeze(o);
  }
  return o;
}

/** Parses and validates the environment. Pure: reads only the `env` record it is given. */
export function loadConfig(env: Record<string, string | undefined>, opts: LoadOptions = {}): LoadResult {
  const mode = opts.mode ?? "production";
  const parsed = envSchema.safeParse(env);
  const errors: string[] = [];
  if (!parsed.success) {
    for (const issue of parsed.error.issues) {
      errors.push(`${issue.path.join(".")}: ${issue.message}`);
    }
    return { ok: false, errors };
  }
  const e = parsed.data;
  if (mode === "production") {
    if (!e.PAY_TO) errors.push("PAY_TO: required in production (the x402 settlement address)");
    if (!e.SESSION_SECRET) errors.push("SESSION_SECRET: required in production (signs svc_session)");
    if (!e.KEY_ENCRYPTION_KEY) errors.push("KEY_ENCRYPTION_KEY: required in production (32 bytes, hex or base64)");
    if (e.FACILITATOR_URL === "local" && !e.FACILITATOR_PRIVATE_KEY) {
      errors.push('FACILITATOR_PRIVATE_KEY: required when FACILITATOR_URL is "local"');
    }
  }
  if (e.IDP_VERIFICATION_KEY && e.IDP_JWKS_URL) {
    errors.push("IDP_JWKS_URL: set either IDP_VERIFICATION_KEY or IDP_JWKS_URL, not both");
  }
  if ((e.CDP_API_KEY_ID === undefined) !== (e.CDP_API_KEY_SECRET === undefined)) {
    errors.push("CDP_API_KEY_SECRET: CDP_API_KEY_ID and CDP_API_KEY_SECRET must be set together");
  }
  if (errors.length > 0) return { ok: false, errors };

  const port = Number(e.PORT);
  const base = stripSlash(e.BASE_URL ?? `http://${hostForUrl(e.HOST)}:${port}`);
  const keyEncryptionKey = parseKey32(e.KEY_ENCRYPTION_KEY ?? LOCAL_KEY_ENCRYPTION_KEY);
  if (!keyEncryptionKey) return { ok: false, errors: ["KEY_ENCRYPTION_KEY: expected 32 bytes"] };

  const config: Config = {
    mode,
    role: opts.role ?? "all",
    http: { port, host: e.HOST },
    urls: {
      base,
      mcp: stripSlash(e.MCP_URL ?? base),
      // served by this process at the URL's path (docs/decisions.md "Documents, OpenAPI, MCP")
      web: stripSlash(e.WEB_URL ?? `${base}/app`),
      docs: stripSlash(e.DOCS_URL ?? `${base}/docs`),
    },
    database: {
      url: withPassword(e.DATABASE_URL, e.DATABASE_PASSWORD),
      poolSize: Number(e.DB_POOL_SIZE),
      workerPoolSize: Number(e.WORKER_DB_POOL_SIZE),
      readReplicaUrl: e.DATABASE_URL_READ_REPLICA,
      readReplicaMaxLagMs: Number(e.READ_REPLICA_MAX_LAG_MS),
    },
    redis: { url: e.REDIS_URL, prefix: opts.redisPrefix ?? e.REDIS_PREFIX, cluster: isClusterUrl(e.REDIS_URL) },
    upstream: { baseUrl: stripSlash(e.UPSTREAM_BASE_URL), catalogSyncKey: e.CATALOG_SYNC_KEY },
    chain: {
      rpcUrl: e.CHAIN_RPC_URL,
      id: Number(e.CHAIN_ID),
      usdcAddress: e.USDC_ADDRESS as `0x${string}`,
      usdcName: e.USDC_EIP712_NAME,
      usdcVersion: e.USDC_EIP712_VERSION,
      payTo: e.PAY_TO as `0x${string}` | undefined,
      payoutPrivateKey: e.PAYOUT_PRIVATE_KEY as `0x${string}` | undefined,
      confirmationBlocks: Number(e.CONFIRMATION_BLOCKS),
    },
    facilitator: {
      url: e.FACILITATOR_URL,
      local: e.FACILITATOR_URL === "local",
      privateKey: e.FACILITATOR_PRIVATE_KEY as `0x${string}` | undefined,
      cdpKeyId: e.CDP_API_KEY_ID,
      cdpKeySecret: e.CDP_API_KEY_SECRET,
    },
    idp: {
      appId: e.IDP_APP_ID,
      issuer: e.IDP_ISSUER,
      verificationKeyPem: e.IDP_VERIFICATION_KEY,
      jwksUrl: e.IDP_JWKS_URL,
    },
    secrets: { sessionSecret: e.SESSION_SECRET ?? LOCAL_SESSION_SECRET, keyEncryptionKey },
    fees: { platformFeeBps: Number(e.PLATFORM_FEE_BPS), videoMarkupBps: Number(e.VIDEO_MARKUP_BPS) },
    signupFuse: { max: Number(e.SIGNUP_FUSE_MAX), windowSeconds: Number(e.SIGNUP_FUSE_WINDOW_S) },
    limits: {
      keyMaxInFlight: Number(e.KEY_MAX_IN_FLIGHT),
      smallModelMaxInFlight: Number(e.SMALL_MODEL_MAX_IN_FLIGHT),
      graphqlCostPerMinute: Number(e.GRAPHQL_COST_PER_MINUTE),
      escrowLingerMs: Number(e.ESCROW_LINGER_MS),
      escrowFoldMs: Number(e.ESCROW_FOLD_MS),
    },
    webhooks: {
      allowPrivate: e.WEBHOOK_ALLOW_PRIVATE === undefined ? mode === "local" : isTrue(e.WEBHOOK_ALLOW_PRIVATE),
      retryScheduleMs: e.WEBHOOK_RETRY_SCHEDULE_MS.split(",").map((p) => Number(p.trim())),
      timeoutMs: Number(e.WEBHOOK_TIMEOUT_MS),
    },
    tracing: {
      tracesUrl:
        e.OTEL_SDK_DISABLED !== undefined && isTrue(e.OTEL_SDK_DISABLED)
          ? undefined
          : (e.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? signalUrl(e.OTEL_EXPORTER_OTLP_ENDPOINT, "v1/traces")),
      serviceName: e.OTEL_SERVICE_NAME,
    },
    retention: {
      months: e.RETENTION_MONTHS === undefined ? undefined : Number(e.RETENTION_MONTHS),
      exportDir: retentionDir(e.RETENTION_EXPORT_DIR),
    },
    logLevel: e.LOG_LEVEL,
  };
  return { ok: true, config: deepFreeze(config) };
}

/**
 * DATABASE_URL with DATABASE_PASSWORD in place of its password, percent-encoded (RFC 3986), so a
 * password with `/`, `+`, `=` or any other character needs no encoding by whoever sets it (compose
 * passes the Postgres container's own password this way). pg, Prisma's pg adapter and the migration
 * runner all read the URL and decode it back.
 */
function withPassword(databaseUrl: string, password: string | undefined): string {
  if (password === undefined) return databaseUrl;
  const u = new URL(databaseUrl);
  u.password = encodeURIComponent(password);
  return u.toString();
}

/** An OTLP base endpoint's URL for one signal (the OTLP exporter specification: `<endpoint>/v1/traces`). */
function signalUrl(endpoint: string | undefined, path: string): string | undefined {
  if (endpoint === undefined) return undefined;
  return `${endpoint.endsWith("/") ? endpoint : `${endpoint}/`}${path}`;
}

/** RETENTION_EXPORT_DIR as an absolute path (relative: to the working directory); default `<app>/data/retention`. */
function retentionDir(dir: string | undefined): string {
  if (dir === undefined) return appPath("data", "retention");
  return isAbsolute(dir) ? dir : resolve(dir);
}

function stripSlash(u: string): string {
  return u.replace(/\/+$/, "");
}

function hostForUrl(host: string): string {
  if (host === "0.0.0.0" || host === "::") return "127.0.0.1";
  return host.includes(":") ? `[${host}]` : host;
}

/** The process environment, for main.ts only. */
export function processEnv(): Record<string, string | undefined> {
  return process.env;
}
