// Issue 31 deliverable 3: compose.prod.yml and deploy/prometheus/. No container engine or promtool
// runs here, so the files are checked for shape: deploy/prometheus/alerts.yml has exactly the rules
// of docs/operations.md "What to alert on" (alert, expression, duration) and names only exported
// metrics and scraped jobs; the compose file runs the roles from the compiled entry, mounts files
// that exist, and its service environment passes the service's own configuration parser.
import { existsSync, readFileSync } from "node:fs";
import { describe, expect, test } from "vitest";
import { parse } from "yaml";
import { loadConfig } from "../../../src/config.js";
import { exportedMetrics, metricNames, OUTSIDE_METRICS, unknownMetrics } from "../../../testkit/promql.js";

const ROOT = new URL("../../../", import.meta.url);
const read = (path: string) => readFileSync(new URL(path, ROOT), "utf8");

interface Rule {
  alert: string;
  expr: string;
  for?: string;
  labels: { severity: string };
  annotations: { summary: string; description: string };
}
interface ScrapeConfig {
  job_name: string;
  metrics_path?: string;
  dns_sd_configs?: { names: string[]; type: string; port: number }[];
  static_configs?: { targets: string[] }[];
}
interface ComposeService {
  image?: string;
  build?: { context: string; dockerfile: string };
  command?: string[];
  environment?: Record<string, string>;
  deploy?: { replicas: number };
  volumes?: string[];
  healthcheck?: { disable?: boolean };
}

const alerts = parse(read("deploy/prometheus/alerts.yml")) as { groups: { name: string; rules: Rule[] }[] };
const rules = alerts.groups.flatMap((g) => g.rules);
const prometheus = parse(read("deploy/prometheus/prometheus.yml")) as {
  rule_files: string[];
  scrape_configs: ScrapeConfig[];
};
const composeText = read("compose.prod.yml");
const compose = parse(composeText, { merge: true }) as { services: Record<string, ComposeService> };
const service = (name: string): ComposeService => {
  const s = compose.services[name];
  if (!s) throw new Error(`compose.prod.yml has no service ${name}`);
  return s;
};

/** The rows of docs/operations.md's "What to alert on" table: alert, PromQL, `for` (undefined for —). */
function alertTable(): { alert: string; expr: string; for: string | undefined }[] {
  const doc = read("docs/operations.md");
  const section = doc.slice(
    doc.indexOf("## What to alert on"),
    doc.indexOf("\n## ", doc.indexOf("## What to alert on") + 3),
  );
  return section
    .split("\n")
    .filter((l) => l.startsWith("| `"))
    .map((l) => {
      const cells = l.split(" | ").map((c) => c.replace(/^\|?\s*|\s*\|?$/g, ""));
      const code = (c: string | undefined) => /^`(.*)`$/.exec(c ?? "")?.[1];
      return { alert: code(cells[0]) ?? "", expr: code(cells[1]) ?? `not code: ${cells[1]}`, for: code(cells[2]) };
    });
}

const squash = (s: string) => s.replace(/\s+/g, " ").trim();

describe("deploy/prometheus/alerts.yml", () => {
  test("has exactly the rules of docs/operations.md's table: the same alerts, expressions and durations", () => {
    const table = alertTable();
    expect(table.length).toBeGreaterThanOrEqual(9);
    expect(rules.map((r) => ({ alert: r.alert, expr: squash(r.expr), for: r.for }))).toEqual(
      table.map((r) => ({ ...r, expr: squash(r.expr) })),
    );
    // the conditions the table has always named are among them
    const exprs = rules.map((r) => r.expr).join("\n");
    for (const m of [
      "svc_settlement_failures_total",
      "svc_reconciliation_backlog",
      "svc_http_request_duration_seconds_count",
      "svc_fall_forwards_total",
      "svc_queue_depth",
      "svc_escrow_held",
      "svc_escrow_holders_expired",
      'svc_video_jobs_open{status="completed_no_media"}',
      "svc_nodejs_eventloop_lag_p99_seconds",
      'probe_success{job="svc-readyz"}',
    ])
      expect(exprs).toContain(m);
  });

  test("every rule is well formed: a unique name, a severity, a summary, a Prometheus duration", () => {
    expect(alerts.groups.map((g) => g.name)).toEqual(["svc"]);
    expect(new Set(rules.map((r) => r.alert)).size).toBe(rules.length);
    for (const r of rules) {
      expect(r.alert, r.alert).toMatch(/^Svc[A-Z]\w+$/);
      expect(["page", "ticket"], r.alert).toContain(r.labels.severity);
      expect(r.annotations.summary.length, r.alert).toBeGreaterThan(10);
      expect(r.annotations.description, r.alert).toMatch(/First look/);
      if (r.for !== undefined) expect(r.for, r.alert).toMatch(/^\d+[smh]$/);
      // balanced brackets: a cut expression would not load
      for (const [open, close] of [
        ["(", ")"],
        ["[", "]"],
        ["{", "}"],
      ] as const) {
        expect(r.expr.split(open).length, `${r.alert} ${open}${close}`).toBe(r.expr.split(close).length);
      }
    }
  });

  test("the expressions name only exported metrics, and only jobs prometheus.yml scrapes", async () => {
    const exported = await exportedMetrics();
    expect(
      unknownMetrics(
        rules.map((r) => r.expr),
        exported,
      ),
    ).toEqual([]);
    expect(rules.flatMap((r) => metricNames(r.expr)).filter((n) => n in OUTSIDE_METRICS)).toEqual([
      "up",
      "probe_success",
    ]);
    const jobs = prometheus.scrape_configs.map((c) => c.job_name);
    for (const r of rules) for (const m of r.expr.matchAll(/job="([^"]+)"/g)) expect(jobs, r.alert).toContain(m[1]);
    // and a rule naming a metric that does not exist would be caught
    expect(unknownMetrics(["sum(rate(svc_settlement_failure_total[5m])) > 0"], exported)).toHaveLength(1);
  });
});

describe("deploy/prometheus/prometheus.yml", () => {
  test("scrapes /metrics of every API and worker replica, probes /readyz of the APIs, loads the alert rules", () => {
    expect(prometheus.rule_files).toEqual(["/etc/prometheus/alerts.yml"]);
    const job = (name: string) => prometheus.scrape_configs.find((c) => c.job_name === name);
    expect(job("svc-api")).toMatchObject({
      metrics_path: "/metrics",
      dns_sd_configs: [{ names: ["api"], type: "A", port: 8080 }],
    });
    expect(job("svc-readyz")).toMatchObject({
      metrics_path: "/probe",
      dns_sd_configs: [{ names: ["api"], port: 8080 }],
    });
    // biome-ignore lint/suspicious/noTemplateCurlyInString: Prometheus' own ${1}, not a template
    expect(read("deploy/prometheus/prometheus.yml")).toContain("replacement: http://${1}/readyz");
    expect(read("deploy/prometheus/blackbox.yml")).toMatch(/http_ready:[\s\S]*valid_status_codes: \[200\]/);
    // a worker process serves /metrics on PORT (src/boot.ts): each replica is scraped
    expect(job("svc-worker")).toMatchObject({
      metrics_path: "/metrics",
      dns_sd_configs: [{ names: ["worker"], type: "A", port: 8080 }],
    });
  });
});

/** Compose's interpolation of one value: `${VAR:?msg}` from `given` (or throws), `${VAR:-default}`, `$$`. */
function interpolate(value: string, given: Record<string, string>, required: Set<string>): string {
  return value.replace(/\$\$|\$\{(\w+)(?::([?-])([^}]*))?\}/g, (all, name: string, op: string, arg: string) => {
    if (all === "$$") return "$";
    const v = given[name];
    if (v !== undefined && v !== "") return v;
    if (op === "?") {
      required.add(name);
      throw new Error(`${name}: ${arg}`);
    }
    if (op === "-") return arg;
    throw new Error(`${name}: no default and not required`);
  });
}

const PRODUCTION: Record<string, string> = {
  POSTGRES_PASSWORD: "pg-secret",
  BASE_URL: "https://api.example.com",
  PAY_TO: "0x1111111111111111111111111111111111111111",
  IDP_APP_ID: "app-123",
  IDP_JWKS_URL: "https://auth.example.com/jwks.json",
  SESSION_SECRET: "a-session-secret-of-at-least-32-characters",
  KEY_ENCRYPTION_KEY: "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff",
  GRAFANA_ADMIN_PASSWORD: "grafana-secret",
};

function environmentOf(name: string, given: Record<string, string>): Record<string, string> {
  const env = service(name).environment ?? {};
  return Object.fromEntries(Object.entries(env).map(([k, v]) => [k, interpolate(String(v), given, new Set())]));
}

describe("compose.prod.yml", () => {
  test("N API replicas and M workers run the compiled entry, one role each, from the Dockerfile's image", () => {
    const api = service("api");
    const worker = service("worker");
    expect(api.command).toEqual(["node", "--enable-source-maps", "dist/server/main.js", "--role=api"]);
    expect(worker.command).toEqual(["node", "--enable-source-maps", "dist/server/main.js", "--role=worker"]);
    expect(api.deploy?.replicas).toBeGreaterThanOrEqual(2);
    expect(worker.deploy?.replicas).toBeGreaterThanOrEqual(1);
    for (const s of [api, worker]) {
      expect(s.build).toEqual({ context: ".", dockerfile: "Dockerfile" });
      expect(s.image).toBe(api.image);
    }
    // a worker answers /healthz on PORT: the image's HEALTHCHECK stays on
    expect(worker.healthcheck).toBeUndefined();
    expect(service("postgres").image).toBe("postgres:15");
    expect(service("redis").image).toBe("redis:7");
    expect(service("redis").command).toEqual(expect.arrayContaining(["--maxmemory-policy", "noeviction"]));
  });

  test("Prometheus, the blackbox exporter and Grafana get the files of this repository, which exist", () => {
    const mounts = Object.values(compose.services).flatMap((s) => s.volumes ?? []);
    const binds = mounts.filter((m) => m.startsWith("./")).map((m) => m.split(":"));
    expect(binds.map(([from, to]) => `${from} -> ${to}`)).toEqual(
      expect.arrayContaining([
        "./deploy/prometheus/prometheus.yml -> /etc/prometheus/prometheus.yml",
        `./deploy/prometheus/alerts.yml -> ${prometheus.rule_files[0]}`,
        "./deploy/prometheus/blackbox.yml -> /etc/blackbox/blackbox.yml",
        "./docs/grafana -> /var/lib/grafana/dashboards/svc",
        "./deploy/grafana/provisioning -> /etc/grafana/provisioning",
      ]),
    );
    for (const [from] of binds) expect(existsSync(new URL(from ?? "", ROOT)), from).toBe(true);
    expect(read("deploy/grafana/provisioning/dashboards/svc.yml")).toContain("path: /var/lib/grafana/dashboards/svc");
  });

  test("nothing starts half-configured: the required variables, each refused when unset", () => {
    const required = new Set<string>();
    for (const name of Object.keys(PRODUCTION)) {
      const without = { ...PRODUCTION, [name]: "" };
      expect(() => {
        for (const s of Object.keys(compose.services)) {
          for (const v of Object.values(service(s).environment ?? {})) interpolate(String(v), without, required);
        }
      }, name).toThrow(name);
    }
    expect([...required].sort()).toEqual(Object.keys(PRODUCTION).sort());
  });

  test("the service's environment passes its own configuration parser, for both roles", () => {
    const env = environmentOf("api", PRODUCTION);
    expect(environmentOf("worker", PRODUCTION)).toEqual(env);
    for (const role of ["api", "worker"] as const) {
      const r = loadConfig(env, { mode: "production", role });
      if (!r.ok) throw new Error(r.errors.join("\n"));
      expect(r.config.http).toEqual({ host: "0.0.0.0", port: 8080 });
      expect(r.config.database.url).toBe("postgresql://svc:pg-secret@postgres:5432/svc");
      expect(r.config.redis.url).toBe("redis://redis:6379");
      expect(r.config.urls.base).toBe("https://api.example.com");
      expect(r.config.webhooks.allowPrivate).toBe(false);
      // an empty pass-through is the service's default
      expect(r.config.chain.id).toBe(8453);
      expect(r.config.fees.platformFeeBps).toBe(1000);
    }
    // a value the operator sets goes through
    const set = loadConfig(environmentOf("api", { ...PRODUCTION, KEY_MAX_IN_FLIGHT: "3" }), { mode: "production" });
    expect(set.ok && set.config.limits.keyMaxInFlight).toBe(3);
  });

  test("issue 38: a Postgres password with / + = (or any character) reaches the service intact", () => {
    for (const password of ["a/b+c=d", "p@ss:w%rd#?&", "ünï cødé"]) {
      const r = loadConfig(environmentOf("api", { ...PRODUCTION, POSTGRES_PASSWORD: password }), {
        mode: "production",
      });
      if (!r.ok) throw new Error(r.errors.join("\n"));
      const url = new URL(r.config.database.url);
      // what pg, Prisma's pg adapter and the migration runner decode from it: the container's password
      expect(decodeURIComponent(url.password), password).toBe(password);
      expect([url.username, url.host, url.pathname]).toEqual(["svc", "postgres:5432", "/svc"]);
      // and the postgres container gets it as it is
      expect(
        interpolate(
          String(service("postgres").environment?.POSTGRES_PASSWORD),
          { ...PRODUCTION, POSTGRES_PASSWORD: password },
          new Set(),
        ),
      ).toBe(password);
    }
  });

  test("issue 42: Compose v1 (Debian's 1.29) reads it too: no top-level `name`, only keys both versions know", () => {
    const top = Object.keys(parse(composeText) as Record<string, unknown>);
    expect(top.filter((k) => !k.startsWith("x-")).sort()).toEqual(["services", "volumes"]);
    // v1 without a `version:` key reads the Compose specification; `name:` is v2-only (the project
    // name comes from `-p svc`, docs/operations.md)
    expect(composeText).not.toMatch(/^(name|version):/m);
    expect(read("docs/operations.md")).toContain("docker compose -p svc -f compose.prod.yml");
  });

  test("issue 42: REDIS_PREFIX with the usual trailing colon is the same prefix", () => {
    const r = loadConfig(environmentOf("api", { ...PRODUCTION, REDIS_PREFIX: "svc-eu:" }), { mode: "production" });
    if (!r.ok) throw new Error(r.errors.join("\n"));
    expect(r.config.redis.prefix).toBe("svc-eu");
  });

  test("every variable of docs/configuration.md passes through, and nothing else", () => {
    const doc = read("docs/configuration.md");
    const table = doc.slice(doc.indexOf("| variable"), doc.indexOf("## Local mode"));
    const documented = table
      .split("\n")
      .filter((l) => l.startsWith("| `"))
      .flatMap((l) => [...(l.split("|")[1] ?? "").matchAll(/`([A-Z0-9_]+)`/g)].map((m) => m[1] ?? ""));
    expect(documented).toContain("KEY_ENCRYPTION_KEY");
    const passed = Object.keys(service("api").environment ?? {});
    // one of the two IdP key sources; the file says how to swap
    expect(documented.filter((v) => !passed.includes(v))).toEqual(["IDP_VERIFICATION_KEY"]);
    // biome-ignore lint/suspicious/noTemplateCurlyInString: compose's interpolation, not a template
    expect(composeText).toContain("IDP_VERIFICATION_KEY: ${IDP_VERIFICATION_KEY:?set it}");
    const contract = ["OTEL_EXPORTER_OTLP_ENDPOINT", "NODE_ENV"];
    expect(passed.filter((v) => !documented.includes(v) && !contract.includes(v))).toEqual([]);
  });
});
