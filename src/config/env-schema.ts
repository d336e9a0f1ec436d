import { z } from "zod";
import { displayUrl } from "../lib/url-display.js";
import {
  bool,
  delaysMs,
  intIn,
  optional,
  optionalString,
  parseKey32,
  pattern,
  redisUrl,
  url,
  withDefault,
} from "./env-values.js";

/**
 * Every variable the service reads, with its default: CONTRACT.md "Environment", and the service's
 * own ones marked "not in CONTRACT".
 */

const ADDRESS = /^0x[0-9a-fA-F]{40}$/;
const PRIVATE_KEY = /^0x[0-9a-fA-F]{64}$/;
const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"] as const;

/** The webhook retry schedule: after the first attempt, 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h (27.6 h in all). */
export const DEFAULT_WEBHOOK_RETRY_SCHEDULE_MS = "5000,300000,1800000,7200000,18000000,36000000,36000000";

export const envSchema = z.object({
  PORT: withDefault(intIn(0, 65535), "8080"),
  HOST: withDefault(z.string().min(1), "127.0.0.1"),
  DATABASE_URL: withDefault(
    url(["postgresql:", "postgres:"], { credentials: true }),
    "postgresql://postgres@127.0.0.1:5432/svc",
  ),
  /** not in CONTRACT: a streaming replica of DATABASE_URL for read-only pages (docs/decisions.md "Read replica") */
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
  /** not in CONTRACT: how soon after an ending a router process folds its appended clears into the balances (0 = before answering) */
  ESCROW_FOLD_MS: withDefault(intIn(0, 60_000), "100"),
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
