import { describe, expect, test } from "vitest";
import { loadConfig } from "../../src/config.js";
import { parseClusterUrl } from "../../src/lib/redis-url.js";

const PROD = {
  PAY_TO: "0x1111111111111111111111111111111111111111",
  SESSION_SECRET: "s".repeat(40),
  KEY_ENCRYPTION_KEY: "ab".repeat(32),
};

describe("loadConfig: defaults (CONTRACT Environment)", () => {
  test("every default", () => {
    const r = loadConfig({ ...PROD });
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    const c = r.config;
    expect(c.http).toEqual({ port: 8080, host: "127.0.0.1" });
    expect(c.database.url).toBe("postgresql://postgres@127.0.0.1:5432/svc");
    expect(c.redis.url).toBe("redis://127.0.0.1:6379");
    expect(c.urls).toEqual({
      base: "http://127.0.0.1:8080",
      mcp: "http://127.0.0.1:8080",
      web: "http://127.0.0.1:8080/app",
      docs: "http://127.0.0.1:8080/docs",
    });
    expect(c.upstream.baseUrl).toBe("https://api.venice.ai/api/v1");
    expect(c.chain).toMatchObject({
      rpcUrl: "https://mainnet.base.org",
      id: 8453,
      usdcAddress: "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913",
      usdcName: "USD Coin",
      usdcVersion: "2",
      confirmationBlocks: 20,
    });
    expect(c.facilitator).toMatchObject({ url: "https://api.cdp.coinbase.com/platform/v2/x402", local: false });
    expect(c.idp.issuer).toBe("privy.io");
    expect(c.fees.platformFeeBps).toBe(1000);
    expect(c.fees.videoMarkupBps).toBe(500);
    expect(c.signupFuse).toEqual({ max: 60, windowSeconds: 60 });
    expect(c.limits.keyMaxInFlight).toBe(8);
    expect(c.logLevel).toBe("info");
    expect(c.secrets.keyEncryptionKey.length).toBe(32);
    expect(Object.isFrozen(c.chain)).toBe(true);
  });

  test("BASE_URL derives MCP/WEB/DOCS and follows PORT", () => {
    const r = loadConfig({ ...PROD, PORT: "9000" });
    expect(r.ok && r.config.urls.base).toBe("http://127.0.0.1:9000");
    const r2 = loadConfig({ ...PROD, BASE_URL: "https://api.example.com/", DOCS_URL: "https://docs.example.com" });
    expect(r2.ok && r2.config.urls).toEqual({
      base: "https://api.example.com",
      mcp: "https://api.example.com",
      web: "https://api.example.com/app",
      docs: "https://docs.example.com",
    });
    const r3 = loadConfig({ ...PROD, BASE_URL: "https://api.example.com" });
    expect(r3.ok && [r3.config.urls.web, r3.config.urls.docs]).toEqual([
      "https://api.example.com/app",
      "https://api.example.com/docs",
    ]);
  });

  test("empty values count as unset", () => {
    const r = loadConfig({ ...PROD, PORT: "", CATALOG_SYNC_KEY: "" });
    expect(r.ok && r.config.http.port).toBe(8080);
    expect(r.ok && r.config.upstream.catalogSyncKey).toBeUndefined();
  });

  test("KEY_ENCRYPTION_KEY accepts hex and base64", () => {
    const b64 = Buffer.alloc(32, 7).toString("base64");
    const r = loadConfig({ ...PROD, KEY_ENCRYPTION_KEY: b64 });
    expect(r.ok && r.config.secrets.keyEncryptionKey.equals(Buffer.alloc(32, 7))).toBe(true);
  });
});

describe("loadConfig: malformed values give one line naming the variable", () => {
  test.each([
    { v: "PORT", value: "abc" },
    { v: "PORT", value: "70000" },
    { v: "PORT", value: "80.5" },
    { v: "DATABASE_URL", value: "not a url" },
    { v: "DATABASE_URL", value: "mysql://x@y/z" },
    { v: "REDIS_URL", value: "http://localhost" },
    { v: "CHAIN_ID", value: "base" },
    { v: "USDC_ADDRESS", value: "0x123" },
    { v: "PAY_TO", value: "nope" },
    { v: "CONFIRMATION_BLOCKS", value: "0" },
    { v: "FACILITATOR_URL", value: "ftp://x" },
    { v: "FACILITATOR_PRIVATE_KEY", value: "0xdead" },
    { v: "IDP_VERIFICATION_KEY", value: "not a pem" },
    { v: "SESSION_SECRET", value: "short" },
    { v: "KEY_ENCRYPTION_KEY", value: "abcd" },
    { v: "PLATFORM_FEE_BPS", value: "10001" },
    { v: "VIDEO_MARKUP_BPS", value: "-1" },
    { v: "SIGNUP_FUSE_MAX", value: "-1" },
    { v: "SIGNUP_FUSE_WINDOW_S", value: "x" },
    { v: "KEY_MAX_IN_FLIGHT", value: "0" },
    { v: "LOG_LEVEL", value: "loud" },
    { v: "OTEL_EXPORTER_OTLP_ENDPOINT", value: "collector:4318" },
    { v: "OTEL_EXPORTER_OTLP_ENDPOINT", value: "grpc://collector:4317" },
    { v: "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", value: "not a url" },
    { v: "OTEL_SDK_DISABLED", value: "maybe" },
  ])("$v=$value", ({ v, value }) => {
    const r = loadConfig({ ...PROD, [v]: value });
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.errors).toHaveLength(1);
    expect(r.errors[0]).toMatch(new RegExp(`^${v}: `));
  });
});

describe("loadConfig: production requirements", () => {
  test("PAY_TO, SESSION_SECRET and KEY_ENCRYPTION_KEY are required in production", () => {
    const r = loadConfig({});
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.errors.map((e) => e.split(":")[0])).toEqual(["PAY_TO", "SESSION_SECRET", "KEY_ENCRYPTION_KEY"]);
  });

  test("local mode needs none of them", () => {
    expect(loadConfig({}, { mode: "local" }).ok).toBe(true);
  });

  test("FACILITATOR_URL=local needs FACILITATOR_PRIVATE_KEY in production", () => {
    const r = loadConfig({ ...PROD, FACILITATOR_URL: "local" });
    expect(!r.ok && r.errors[0]).toMatch(/^FACILITATOR_PRIVATE_KEY: /);
  });

  test("only one of IDP_VERIFICATION_KEY and IDP_JWKS_URL", () => {
    const pem = "-----BEGIN PUBLIC KEY-----\nabc\n-----END PUBLIC KEY-----";
    const r = loadConfig({ ...PROD, IDP_VERIFICATION_KEY: pem, IDP_JWKS_URL: "https://idp.example/jwks" });
    expect(!r.ok && r.errors[0]).toMatch(/^IDP_JWKS_URL: /);
  });

  test("CDP credentials come in pairs", () => {
    const r = loadConfig({ ...PROD, CDP_API_KEY_ID: "id" });
    expect(!r.ok && r.errors[0]).toMatch(/^CDP_API_KEY_SECRET: /);
  });
});

describe("loadConfig: tracing (OTEL_*)", () => {
  test.each([
    { label: "off by default", env: {}, tracesUrl: undefined },
    {
      label: "the endpoint's /v1/traces",
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318" },
      tracesUrl: "http://collector:4318/v1/traces",
    },
    {
      label: "an endpoint with a path and a trailing slash",
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: "https://otel.example/base/" },
      tracesUrl: "https://otel.example/base/v1/traces",
    },
    {
      label: "the per-signal URL as given, over the endpoint",
      env: {
        OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318",
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://traces:9999/custom",
      },
      tracesUrl: "http://traces:9999/custom",
    },
    {
      label: "OTEL_SDK_DISABLED wins",
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318", OTEL_SDK_DISABLED: "true" },
      tracesUrl: undefined,
    },
  ])("$label", ({ env, tracesUrl }) => {
    const r = loadConfig({ ...PROD, ...env });
    expect(r.ok && r.config.tracing.tracesUrl).toBe(tracesUrl);
  });

  test("service.name defaults to svc-inference-market; OTEL_SERVICE_NAME overrides it", () => {
    const r = loadConfig({ ...PROD });
    expect(r.ok && r.config.tracing.serviceName).toBe("svc-inference-market");
    const r2 = loadConfig({ ...PROD, OTEL_SERVICE_NAME: "svc-eu-1" });
    expect(r2.ok && r2.config.tracing.serviceName).toBe("svc-eu-1");
  });
});

describe("issue 38: a configuration error never prints a secret", () => {
  // each value holds a marker that must not appear in any error; the error still names the variable
  const MARK = "S3cr3tMark";
  test.each([
    {
      label: "a password with / + = not percent-encoded",
      v: "DATABASE_URL",
      value: `postgresql://svc:a/b+${MARK}=d@db:5432/svc`,
    },
    { label: "a password with # not percent-encoded", v: "DATABASE_URL", value: `postgresql://svc:${MARK}#x@db/svc` },
    { label: "a password with a stray %", v: "DATABASE_URL", value: `postgresql://svc:${MARK}%zz@db:5432/svc` },
    { label: "a URL of the wrong scheme with a password", v: "DATABASE_URL", value: `mysql://svc:${MARK}@db/svc` },
    { label: "not a URL at all", v: "DATABASE_URL", value: `svc:${MARK}@db:5432/svc` },
    { label: "a Redis password, wrong scheme", v: "REDIS_URL", value: `http://:${MARK}@redis:6379` },
    { label: "an RPC key in the path, wrong scheme", v: "CHAIN_RPC_URL", value: `ftp://base.example.com/v2/${MARK}` },
    { label: "an RPC key in the query, not a URL", v: "CHAIN_RPC_URL", value: `base.example.com/?key=${MARK}` },
    { label: "facilitator credentials", v: "FACILITATOR_URL", value: `ftp://user:${MARK}@facilitator.example` },
    { label: "an OTLP token", v: "OTEL_EXPORTER_OTLP_ENDPOINT", value: `collector:4318?token=${MARK}` },
    { label: "a short session secret", v: "SESSION_SECRET", value: MARK },
    { label: "a malformed encryption key", v: "KEY_ENCRYPTION_KEY", value: `${MARK}==` },
    { label: "a malformed facilitator key", v: "FACILITATOR_PRIVATE_KEY", value: `0x${MARK}` },
    { label: "a malformed payout key", v: "PAYOUT_PRIVATE_KEY", value: `0x${MARK}` },
  ])("$v: $label", ({ v, value }) => {
    const r = loadConfig({ ...PROD, [v]: value });
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.errors).toHaveLength(1);
    expect(r.errors[0]).toMatch(new RegExp(`^${v}: `));
    expect(r.errors[0]).not.toContain(MARK);
  });

  test("a CDP secret without its id: named, not printed", () => {
    const r = loadConfig({ ...PROD, CDP_API_KEY_SECRET: MARK });
    expect(!r.ok && r.errors.join("\n")).toMatch(/^CDP_API_KEY_SECRET: /);
    expect(!r.ok && r.errors.join("\n")).not.toContain(MARK);
  });

  test("a DATABASE_URL whose password is not percent-encoded says how to write it", () => {
    const r = loadConfig({ ...PROD, DATABASE_URL: "postgresql://svc:a/b+c=d@db:5432/svc" });
    expect(!r.ok && r.errors[0]).toMatch(/percent-encode reserved characters .*\/ as %2F/);
  });

  test("a URL without credentials is still shown, to say what is wrong with it", () => {
    const r = loadConfig({ ...PROD, REDIS_URL: "http://localhost:6379" });
    expect(!r.ok && r.errors[0]).toMatch(
      /^REDIS_URL: expected a redis\/rediss URL, got one with scheme http: \(http:\/\/localhost:6379\)$/,
    );
  });
});

describe("issue 38: a Postgres password with / + = (RFC 3986 percent-encoded)", () => {
  test("DATABASE_URL with the password percent-encoded is taken as it is", () => {
    const url = "postgresql://svc:a%2Fb%2Bc%3Dd@db:5432/svc";
    const r = loadConfig({ ...PROD, DATABASE_URL: url });
    expect(r.ok && r.config.database.url).toBe(url);
    // what pg (and Prisma's pg adapter, and the migration runner) read from it
    expect(r.ok && decodeURIComponent(new URL(r.config.database.url).password)).toBe("a/b+c=d");
  });

  test("DATABASE_PASSWORD, as is, takes the place of the URL's password, percent-encoded", () => {
    for (const url of ["postgresql://svc@db:5432/svc", "postgresql://svc:old@db:5432/svc"]) {
      const r = loadConfig({ ...PROD, DATABASE_URL: url, DATABASE_PASSWORD: "a/b+c=d@:%#?" });
      expect(r.ok && r.config.database.url).toBe("postgresql://svc:a%2Fb%2Bc%3Dd%40%3A%25%23%3F@db:5432/svc");
      expect(r.ok && decodeURIComponent(new URL(r.config.database.url).password)).toBe("a/b+c=d@:%#?");
    }
  });
});

describe("issue 42: REDIS_URL may name a Redis Cluster", () => {
  test("redis+cluster:// with seed nodes and credentials", () => {
    const url = "redis+cluster://svc:p%40ss@10.0.0.1:7000,10.0.0.2:7001,[::1]:7002/";
    const r = loadConfig({ ...PROD, REDIS_URL: url });
    expect(r.ok && r.config.redis).toEqual({ url, prefix: "svc", cluster: true });
    expect(parseClusterUrl(url)).toEqual({
      nodes: [
        { host: "10.0.0.1", port: 7000 },
        { host: "10.0.0.2", port: 7001 },
        { host: "::1", port: 7002 },
      ],
      username: "svc",
      password: "p@ss",
      tls: false,
    });
    expect(parseClusterUrl("rediss+cluster://redis-0:6379").tls).toBe(true);
    const single = loadConfig({ ...PROD, REDIS_URL: "redis://127.0.0.1:6379" });
    expect(single.ok && single.config.redis.cluster).toBe(false);
  });

  test.each([
    { label: "a seed without a port", value: "redis+cluster://:SECRET-MARK@10.0.0.1:7000,10.0.0.2", want: /host:port/ },
    { label: "a database number", value: "redis+cluster://:SECRET-MARK@10.0.0.1:7000/2", want: /database 0/ },
    { label: "a stray %", value: "redis+cluster://:SECRET-MARK%zz@10.0.0.1:7000", want: /percent-escape/ },
    { label: "a port out of range", value: "redis+cluster://10.0.0.1:70000", want: /host:port/ },
  ])("refused, never showing the password: $label", ({ value, want }) => {
    const r = loadConfig({ ...PROD, REDIS_URL: value });
    expect(r.ok).toBe(false);
    const line = !r.ok ? (r.errors[0] ?? "") : "";
    expect(line).toMatch(/^REDIS_URL: a redis\+cluster URL: /);
    expect(line).toMatch(want);
    expect(line).not.toContain("SECRET-MARK");
  });
});

describe("issue 42: compose's password and prefix as an operator writes them", () => {
  test("DATABASE_PASSWORD: every printable ASCII character, a space and non-ASCII reach pg exactly", async () => {
    const { default: pg } = await import("pg");
    const ascii = Array.from({ length: 95 }, (_, i) => String.fromCharCode(32 + i)).join("");
    for (const password of [ascii, "pässwörd €🙂", "%41%2F", "a b", "!'()*~"]) {
      const r = loadConfig({
        ...PROD,
        DATABASE_URL: "postgresql://svc@postgres:5432/svc",
        DATABASE_PASSWORD: password,
      });
      expect(r.ok).toBe(true);
      if (!r.ok) continue;
      const url = r.config.database.url;
      // nothing in the URL's userinfo is left raw that a URL parser reads as a delimiter
      expect(new URL(url).host).toBe("postgres:5432");
      expect(new URL(url).pathname).toBe("/svc");
      expect(new URL(url).username).toBe("svc");
      // what pg takes from the URL (pg's own parser; Prisma's pg adapter hands the URL to pg)
      const client = new pg.Client({ connectionString: url });
      expect(client.password).toBe(password);
      expect(client.user).toBe("svc");
      expect(client.database).toBe("svc");
    }
  });

  test("REDIS_PREFIX with the usual trailing colon is the same prefix", () => {
    const with_ = loadConfig({ ...PROD, REDIS_PREFIX: "svc-eu:" });
    const without = loadConfig({ ...PROD, REDIS_PREFIX: "svc-eu" });
    expect(with_.ok && with_.config.redis.prefix).toBe("svc-eu");
    expect(without.ok && without.config.redis.prefix).toBe("svc-eu");
    expect(loadConfig({ ...PROD, REDIS_PREFIX: "a.b_c-1:" }).ok).toBe(true);
    // still refused: a colon alone, two trailing colons, a colon inside, a space
    for (const bad of [":", "svc::", "a:b", "svc eu"]) {
      const r = loadConfig({ ...PROD, REDIS_PREFIX: bad });
      expect(r.ok, bad).toBe(false);
      if (!r.ok) expect(JSON.stringify(r)).toContain("REDIS_PREFIX");
    }
  });
});

describe("loadConfig: retention (docs/operations.md Retention)", () => {
  test("unset: every month kept; the files' folder defaults under the app", () => {
    const r = loadConfig({ ...PROD });
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.config.retention.months).toBeUndefined();
    expect(r.config.retention.exportDir).toMatch(/[/\\]data[/\\]retention$/);
  });

  test("RETENTION_MONTHS 2 or more; a relative RETENTION_EXPORT_DIR resolves against the working directory", () => {
    const r = loadConfig({ ...PROD, RETENTION_MONTHS: "24", RETENTION_EXPORT_DIR: "exports" });
    expect(r.ok && r.config.retention).toEqual({ months: 24, exportDir: `${process.cwd()}/exports` });
    const abs = loadConfig({ ...PROD, RETENTION_MONTHS: "2", RETENTION_EXPORT_DIR: "/var/lib/svc/retention" });
    expect(abs.ok && abs.config.retention).toEqual({ months: 2, exportDir: "/var/lib/svc/retention" });
    // one month would drop what the 30-day statistics read; not a number is refused with its name
    for (const bad of ["1", "0", "-3", "twelve", "1.5"]) {
      const e = loadConfig({ ...PROD, RETENTION_MONTHS: bad });
      expect(e.ok, bad).toBe(false);
      if (!e.ok) expect(e.errors.join("\n")).toMatch(/^RETENTION_MONTHS: expected an integer 2-1200/m);
    }
  });
});
