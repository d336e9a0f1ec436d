import { z } from "zod";
import { isClusterUrl, parseClusterUrl } from "../lib/redis-url.js";
import { displayUrl } from "../lib/url-display.js";

/**
 * How one environment variable's value is read (config.ts; env-schema.ts lists the variables): an
 * empty value counts as unset, integers in a range, URLs that never echo a secret, booleans, the
 * webhook delays, a 32-byte key. Each failure is one line naming what was expected.
 */

function unset(v: unknown): boolean {
  return v === undefined || v === null || (typeof v === "string" && v.trim() === "");
}

/** Optional string: an empty value counts as unset. */
export const optionalString = z.preprocess((v) => (unset(v) ? undefined : v), z.string().optional());

export function withDefault<T extends z.ZodTypeAny>(schema: T, fallback: string) {
  return z.preprocess((v) => (unset(v) ? fallback : v), schema);
}

export function optional<T extends z.ZodTypeAny>(schema: T) {
  return z.preprocess((v) => (unset(v) ? undefined : v), schema.optional());
}

export function intIn(min: number, max: number) {
  return z.string().superRefine((s, ctx) => {
    const ok = /^-?\d+$/.test(s.trim()) && Number(s) >= min && Number(s) <= max;
    if (!ok) ctx.addIssue({ code: z.ZodIssueCode.custom, message: `expected an integer ${min}-${max}, got "${s}"` });
  });
}

/** How to write a password with reserved characters in a connection URL (RFC 3986). */
const PERCENT_ENCODE_HINT =
  "percent-encode reserved characters of the user and password (RFC 3986: / as %2F, + as %2B, = as %3D, @ as %40, : as %3A, # as %23, ? as %3F, % as %25)";

/**
 * A URL of one of `protocols`. Its value is never echoed whole: a URL can carry a
 * password (userinfo), an API key (an RPC provider's path) or a token (the query), so an error shows
 * only the scheme or, when it parses, `displayUrl`'s scheme, host and port. With `credentials`, the
 * user and password must percent-decode, as pg and Prisma decode them (a stray `%` would make them
 * throw at the first connection), and a failure says how to encode them.
 */
export function url(protocols: string[], opts: { credentials?: boolean } = {}) {
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
export function redisUrl() {
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

export function pattern(re: RegExp, what: string) {
  return z.string().superRefine((s, ctx) => {
    if (!re.test(s)) ctx.addIssue({ code: z.ZodIssueCode.custom, message: `expected ${what}` });
  });
}

/** "true"/"false" (also 1/0, yes/no), case-insensitive. */
export function bool() {
  return z.string().superRefine((s, ctx) => {
    if (!/^(true|false|1|0|yes|no)$/i.test(s.trim())) {
      ctx.addIssue({ code: z.ZodIssueCode.custom, message: `expected true or false, got "${s}"` });
    }
  });
}

export const isTrue = (s: string) => /^(true|1|yes)$/i.test(s.trim());

/** The webhook retry delays: 1-20 comma-separated integers of milliseconds, each 1 ms to 1 day. */
export function delaysMs() {
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

/** 32 bytes as 64 hex characters or base64. */
export function parseKey32(s: string): Buffer | undefined {
  const t = s.trim();
  if (/^(0x)?[0-9a-fA-F]{64}$/.test(t)) return Buffer.from(t.replace(/^0x/, ""), "hex");
  if (/^[A-Za-z0-9+/_-]{43}=?$/.test(t)) {
    const b = Buffer.from(t.replace(/-/g, "+").replace(/_/g, "/"), "base64");
    if (b.length === 32) return b;
  }
  return undefined;
}
