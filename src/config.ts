import { isAbsolute, resolve } from "node:path";
import { z } from "zod";
import { appPath } from "./lib/app-root.js";
import { isClusterUrl, parseClusterUrl } from "./lib/redis-url.js";
import { displayUrl } from "./lib/url-display.js";

/**
 * The only module that reads the environment. Mirrors ../shared/CONTRACT.md "Environment":
 * every variable with its default, parsed once at boot. Problems come back as one line per
 * variable (`PORT: expected an integer 1-65535, got "abc"`); main prints them and exits 1.
 */

const ADDRESS = /^0x[0-9a-fA-F]{40}$/;
const PRIVATE_KEY = /^0x[0-9a-fA-F]{64}$/;
const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"] as const;

export type Role = "all" | "api" | "worker";

function unset(v: unknown): boolean {
  return v === undefined || v === null || (typeof v === "string" && v.trim() === "");
}

/** Optional string: an empty value counts as unset. */
const optionalString = z.preprocess((v) => (unset(v) ? undefined : v), z.string().optional());

function withDefault<T extends z.ZodTypeAny>(schema: T, fallback: string) {
  return z.preprocess((v) => (unset(v) ? fallback : v), schema);
}

function optional<T extends z.ZodTypeAny>(schema: T) {
  return z.preprocess((v) => (unset(v) ? undefined : v), schema.optional());
}

function intIn(min: number, max: number) {
  return z.string().superRefine((s, ctx) => {
    const ok = /^-?\d+$/.test(s.trim()) && Number(s) >= min && Number(s) <= max;
    if (!ok) ctx.addIssue({ code: z.ZodIssueCode.custom, message: `expected an integer ${min}-${max}, got "${s}"` });
  });
}

/** How to write a password with reserved characters in a connection URL (RFC 3986). */
const PERCENT_ENCODE_HINT =
  "percent-encode reserved characters of the user and password (RFC 3986: / as %2F, + as %2B, = as %3D, @ as %40, : as %3A, # as %23, ? as %3F, % as %25)";

/**
 * A URL of one of `protocols`. Its value is never echoed whole (issue 38): a URL can carry a
 * password (userinfo), an API key (an RPC provider's path) or a token (the query), so an error shows
 * only the scheme or, when it parses, `displayUrl`'s scheme, host and port. With `credentials`, the
 * user and password must percent-decode, as pg and Prisma decode them (a stray `%` would make them
 * throw at the first connection), and a failure says how to encode them.
 */
function url(protocols: string[], opts: { credentials?: boolean } = {}) {
  const expected = `expected a ${protocols.map((p) => p.replace(":", "")).join("/")} URL`;
  return z.string().superRefine((s, ctx) => {
    const fail = (message: string) => ctx.addIssue({ code: z.ZodIssueCode.custom, message });
    let parsed: URL;
    try {
      parsed = new URL(s);
    } catch {
      const hint = opts.credentials ? `; ${PERCENT_ENCODE_HINT}` : "";
      fail(`${expected}; the value does not parse as a URL (not shown: it may hold a password)${hint}`);
      return;
    }
    if (!protocols.includes(parsed.protocol)) {
      fail(`${expected}, got one with scheme ${parsed.protocol} (${displayUrl(s)})`);
      return;
    }
    if (opts.credentials) {
      try {
        decodeURIComponent(parsed.username);
        decodeURIComponent(parsed.password);
      } catch {
        fail(`the user or password has a % that is not a percent-escape (not shown); ${PERCENT_ENCODE_HINT}`);
      }
    }
  });
}

/**
 * `REDIS_URL`: one Redis (`redis://`, `rediss://`) or a Redis Cluster's seed nodes
 * (`redis+cluster://[user:password@]host:port[,host:port…]`, lib/redis-url.ts).
 */
function redisUrl() {
  const single = url(["redis:", "rediss:"], { credentials: true });
  return z.string().superRefine((s, ctx) => {
    if (!isClusterUrl(s)) {
      const r = single.safeParse(s);
      // the single-node message as before (a cluster URL is the documented alternative)
      if (!r.success) ctx.addIssue({ code: z.ZodIssueCode.custom, message: r.error.issues[0]?.message ?? "invalid" });
      return;
    }
    try {
      parseClusterUrl(s);
    } catch (e) {
      ctx.addIssue({ code: z.ZodIssueCode.custom, message: `a redis+cluster URL: ${(e as Error).message}` });
    }
  });
}

function pattern(re: RegExp, what: string) {
  return z.string().superRefine((s, ctx) => {
    if (!re.test(s)) ctx.addIssue({ code: z.ZodIssueCode.custom, message: `expected ${what}` });
  });
}

/** "true"/"false" (also 1/0, yes/no), case-insensitive. */
function bool() {
  return z.string().superRefine((s, ctx) => {
    if (!/^(true|false|1|0|yes|no)$/i.test(s.trim())) {
      ctx.addIssue({ code: z.ZodIssueCode.custom, message: `expected true or false, got "${s}"` });
    }
  });
}

const isTrue = (s: string) => /^(true|1|yes)$/i.test(s.trim());

/** The webhook retry delays: 1-20 comma-separated integers of milliseconds, each 1 ms to 1 day. */
function delaysMs() {
  return z.string().superRefine((s, ctx) => {
    const parts = s.split(",").map((p) => p.trim());
    const ok =
      parts.length >= 1 &&
      parts.length <= 20 &&
      parts.every((p) => /^\d+$/.test(p) && Number(p) >= 1 && Number(p) <= 86_400_000);
    if (!ok) {
      ctx.addIssue({
        code: z.ZodIssueCode.custom,
        message: `expected 1-20 comma-separated delays in ms (each 1-86400000), got "${s}"`,
      });
    }
  });
}

/** The webhook retry schedule: after the first attempt, 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h (27.6 h in all). */
export const DEFAULT_WEBHOOK_RETRY_SCHEDULE_MS = "5000,300000,1800000,7200000,18000000,36000000,36000000";

/** 32 bytes as 64 hex characters or base64. */
function parseKey32(s: string): Buffer | undefined {
  const t = s.trim();
  if (/^(0x)?[0-9a-fA-F]{64}$/.test(t)) return Buffer.from(t.replace(/^0x/, ""), "hex");
  if (/^[A-Za-z0-9+/_-]{43}=?$/.test(t)) {
    const b = Buffer.from(t.replace(/-/g, "+").replace(/_/g, "/"), "base64");
    if (b.length === 32) return b;
  }
  return undefined;
}

const envSchema = z.object({
  PORT: withDefault(intIn(0, 65535), "8080"),
  HOST: withDefault(z.string().min(1), "127.0.0.1"),
  DATABASE_URL: withDefault(
    url(["postgresql:", "postgres:"], { credentials: true }),
    "postgresql://postgres@127.0.0.1:5432/svc",
  ),
  /** not in CONTRACT: a streaming replica of DATABASE_URL for read-only pages (docs/decisions.md "Read replica (issue 42)") */
  DATABASE_URL_READ_REPLICA: optional(url(["postgresql:", "postgres:"], { credentials: true })),
  /** not in CONTRACT: beyond this replay lag (ms) every read goes to the primary */
  READ_REPLICA_MAX_LAG_MS: withDefault(intIn(100, 600_000), "10000"),
  /** not in CONTRACT: DATABASE_URL's password as it is (any characters); when set, it replaces the URL's, percent-encoded */
  DATABASE_PASSWORD: optionalString,
  /** one Redis, or a Redis Cluster: `redis+cluster://host:port[,host:port…]` (docs/configuration.md) */
  REDIS_URL: withDefault(redisUrl(), "redis://127.0.0.1:6379"),
  BASE_URL: optional(url(["http:", "https:"])),
  MCP_URL: optional(url(["http:", "https:"])),
  WEB_URL: optional(url(["http:", "https:"])),
  DOCS_URL: optional(url(["http:", "https:"])),
  UPSTREAM_BASE_URL: withDefault(url(["http:", "https:"]), "https://api.venice.ai/api/v1"),
  CATALOG_SYNC_KEY: optionalString,
  CHAIN_RPC_URL: withDefault(url(["http:", "https:", "ws:", "wss:"]), "https://mainnet.base.org"),
  CHAIN_ID: withDefault(intIn(1, 2 ** 31 - 1), "8453"),
  USDC_ADDRESS: withDefault(pattern(ADDRESS, "an address (0x + 40 hex)"), "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913"),
  USDC_EIP712_NAME: withDefault(z.string().min(1), "USD Coin"),
  USDC_EIP712_VERSION: withDefault(z.string().min(1), "2"),
  PAY_TO: optional(pattern(ADDRESS, "an address (0x + 40 hex)")),
  CONFIRMATION_BLOCKS: withDefault(intIn(1, 10_000), "20"),
  FACILITATOR_URL: withDefault(
    z.string().superRefine((s, ctx) => {
      if (s === "local") return;
      try {
        const u = new URL(s);
        if (u.protocol === "http:" || u.protocol === "https:") return;
      } catch {}
      ctx.addIssue({
        code: z.ZodIssueCode.custom,
        message: `expected "local" or an http(s) URL, got ${displayUrl(s)}`,
      });
    }),
    "https://api.cdp.coinbase.com/platform/v2/x402",
  ),
  CDP_API_KEY_ID: optionalString,
  CDP_API_KEY_SECRET: optionalString,
  FACILITATOR_PRIVATE_KEY: optional(pattern(PRIVATE_KEY, "a private key (0x + 64 hex)")),
  IDP_APP_ID: optionalString,
  IDP_ISSUER: withDefault(z.string().min(1), "privy.io"),
  IDP_VERIFICATION_KEY: optional(
    z.string().superRefine((s, ctx) => {
      if (!s.includes("-----BEGIN PUBLIC KEY-----")) {
        ctx.addIssue({ code: z.ZodIssueCode.custom, message: "expected an ES256 public key in PEM (SPKI) form" });
      }
    }),
  ),
  IDP_JWKS_URL: optional(url(["http:", "https:"])),
  SESSION_SECRET: optional(
    z.string().superRefine((s, ctx) => {
      if (s.length < 32) ctx.addIssue({ code: z.ZodIssueCode.custom, message: "expected at least 32 characters" });
    }),
  ),
  KEY_ENCRYPTION_KEY: optional(
    z.string().superRefine((s, ctx) => {
      if (!parseKey32(s)) {
        ctx.addIssue({ code: z.ZodIssueCode.custom, message: "expected 32 bytes as 64 hex characters or base64" });
      }
    }),
  ),
  PLATFORM_FEE_BPS: withDefault(intIn(0, 10_000), "1000"),
  VIDEO_MARKUP_BPS: withDefault(intIn(0, 10_000), "500"),
  SIGNUP_FUSE_MAX: withDefault(intIn(1, 1_000_000), "60"),
  SIGNUP_FUSE_WINDOW_S: withDefault(intIn(1, 86_400), "60"),
  KEY_MAX_IN_FLIGHT: withDefault(intIn(1, 10_000), "8"),
  /** not in CONTRACT: the treasury key (normally PAY_TO's) that sends supplier payouts; unset = payouts are not sent */
  PAYOUT_PRIVATE_KEY: optional(pattern(PRIVATE_KEY, "a private key (0x + 64 hex)")),
  /** not in CONTRACT: global in-flight cap on small-tier models (0 = unthrottled); frontier models are never throttled */
  SMALL_MODEL_MAX_IN_FLIGHT: withDefault(intIn(0, 1_000_000), "0"),
  /** not in CONTRACT: connections of each Postgres pool the API side of a process opens (Prisma, and pg for the router) */
  DB_POOL_SIZE: withDefault(intIn(1, 1_000), "20"),
  /** not in CONTRACT: connections of each Postgres pool the workers of a process open (their own: the API cannot starve them) */
  WORKER_DB_POOL_SIZE: withDefault(intIn(1, 1_000), "5"),
  /** not in CONTRACT: how long a router process keeps an idle escrow slice for the buyer's or offer's next request (0 = give it back at once) */
  ESCROW_LINGER_MS: withDefault(intIn(0, 30_000), "1000"),
  /** not in CONTRACT: GraphQL cost points one caller (account, or IP when anonymous) may spend per minute */
  GRAPHQL_COST_PER_MINUTE: withDefault(intIn(1, 1_000_000_000), "100000"),
  /** when true, webhook targets may be loopback or private addresses, and http (development and tests only) */
  WEBHOOK_ALLOW_PRIVATE: optional(bool()),
  /** not in CONTRACT: the delays between a webhook's delivery attempts (its length + 1 attempts in all) */
  WEBHOOK_RETRY_SCHEDULE_MS: withDefault(delaysMs(), DEFAULT_WEBHOOK_RETRY_SCHEDULE_MS),
  /** not in CONTRACT: one delivery attempt's deadline, ms (connect, TLS, the request, the status line and headers) */
  WEBHOOK_TIMEOUT_MS: withDefault(intIn(100, 60_000), "10000"),
  /** not in CONTRACT: lets deployments (and test runs) share one Redis without colliding; the usual trailing ':' (`svc:`) is the same prefix (the service adds the separator itself) */
  REDIS_PREFIX: withDefault(
    z.preprocess(
      (v) => (typeof v === "string" ? v.replace(/:$/, "") : v),
      pattern(/^[A-Za-z0-9_.-]{1,64}$/, "1-64 letters, digits, '_', '.' or '-' (and an optional trailing ':')"),
    ),
    "svc",
  ),
  /**
   * not in CONTRACT: whole months of requests and clears kept before the current one; older month
   * partitions are closed, exported and dropped (docs/operations.md "Retention"). Unset: kept forever.
   * At least 2: the 30-day model statistics read that far back.
   */
  RETENTION_MONTHS: optional(intIn(2, 1200)),
  /** not in CONTRACT: where retention writes each retired month's CSV files (default `data/retention` in the app's folder) */
  RETENTION_EXPORT_DIR: optionalString,
  /** when set, traces go to this OTLP/HTTP endpoint (`<endpoint>/v1/traces`); unset: no tracing, no SDK loaded */
  OTEL_EXPORTER_OTLP_ENDPOINT: optional(url(["http:", "https:"])),
  /** the standard per-signal override: the full URL traces are sent to (tracing is on when either is set) */
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: optional(url(["http:", "https:"])),
  /** `service.name` of every span */
  OTEL_SERVICE_NAME: withDefault(z.string().min(1), "svc-inference-market"),
  /** the standard kill switch: tracing off whatever the endpoint says */
  OTEL_SDK_DISABLED: optional(bool()),
  LOG_LEVEL: withDefault(
    z.string().superRefine((s, ctx) => {
      if (!(LOG_LEVELS as readonly string[]).includes(s)) {
        ctx.addIssue({ code: z.ZodIssueCode.custom, message: `expected one of ${LOG_LEVELS.join(", ")}, got "${s}"` });
      }
    }),
    "info",
  ),
});

export type Env = z.infer<typeof envSchema>;

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
