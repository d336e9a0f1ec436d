// What the operator documents (the Grafana dashboard, the alert rules) may name: the metrics the
// service exports, read from the registry it builds (adapters/metrics.ts, as runtime.ts builds it),
// and the metric names a PromQL expression uses.
import { PromMetrics, type ScrapeSources } from "../src/adapters/metrics.js";

/** Series that come from Prometheus or the blackbox exporter of compose.prod.yml, not the service. */
export const OUTSIDE_METRICS: Record<string, string> = {
  up: "Prometheus: 1 when a scrape target answered",
  probe_success: "the blackbox exporter (deploy/prometheus/blackbox.yml): 1 when /readyz answered 200",
};

const sources: ScrapeSources = {
  escrowHeld: async () => ({ buyerMicroUsdc: 0n, offerMicroDiem: 0n }),
  escrowHoldersExpired: async () => 0,
  queueDepths: async () => ({}),
  reconciliationBacklog: async () => 0,
  videoJobsOpen: async () => ({}),
  webhookEndpointsDisabled: async () => 0,
  // the replica's gauges exist only with DATABASE_URL_READ_REPLICA: a deployment with one exports them
  readReplica: { lagMs: () => 0, maxLagMs: 10_000 },
};

/** Every metric one process's registry exports (counters, histograms, gauges, Node's own), by name → type. */
export async function exportedMetrics(): Promise<Map<string, string>> {
  const metrics = new PromMetrics(sources);
  const all = await metrics.registry.getMetricsAsJSON();
  return new Map(all.map((m) => [m.name, String(m.type)]));
}

/** The service's own metrics: not Node's defaults (`svc_process_*`, `svc_nodejs_*`). */
export function ownMetrics(exported: Map<string, string>): string[] {
  return [...exported.keys()].filter((n) => !/^svc_(process|nodejs)_/.test(n));
}

const KEYWORDS = new Set(["and", "or", "unless", "bool", "offset", "inf", "nan"]);

/**
 * The metric names an expression selects: every identifier that is not a function or aggregation
 * (followed by `(`), a keyword, a label (inside `{…}` or a `by/without/on/ignoring/group_*` list),
 * a duration (inside `[…]`), a string, a number or a Grafana variable.
 */
export function metricNames(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, '""')
    .replace(/\{[^}]*\}/g, " ")
    .replace(/\[[^\]]*\]/g, " ")
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, " ")
    .replace(/\$\{?\w+\}?/g, " ")
    .replace(/(?<![\w:])\d+(?:\.\d+)?(?:[eE][+-]?\d+)?/g, " ");
  const names = new Set<string>();
  for (const m of bare.matchAll(/[A-Za-z_:][\w:]*/g)) {
    const rest = bare.slice((m.index ?? 0) + m[0].length);
    if (/^\s*\(/.test(rest) || KEYWORDS.has(m[0].toLowerCase())) continue;
    names.add(m[0]);
  }
  return [...names];
}

/** The exported metric a selected name belongs to (`x_bucket`/`x_sum`/`x_count` of histogram `x`), or undefined. */
export function exportedAs(name: string, exported: Map<string, string>): string | undefined {
  if (exported.has(name)) return name;
  const base = name.replace(/_(bucket|sum|count)$/, "");
  const type = exported.get(base);
  if (base !== name && (type === "histogram" || type === "summary")) {
    return name.endsWith("_bucket") && type !== "histogram" ? undefined : base;
  }
  return undefined;
}

/** The names in `exprs` that neither the service nor Prometheus/blackbox export: each with its expression. */
export function unknownMetrics(exprs: readonly string[], exported: Map<string, string>): string[] {
  const out: string[] = [];
  for (const expr of exprs) {
    for (const name of metricNames(expr)) {
      if (!exportedAs(name, exported) && !(name in OUTSIDE_METRICS)) out.push(`${name} in ${expr}`);
    }
  }
  return out;
}
