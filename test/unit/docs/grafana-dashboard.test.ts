// Issue 31 deliverable 5: docs/grafana/svc-dashboard.json names only metrics the service exports
// (read from the registry it builds), shows every metric of its own, and imports anywhere (a
// DS_PROMETHEUS input). docs/operations.md's Metrics table lists exactly the exported metrics.
import { readFileSync } from "node:fs";
import { describe, expect, test } from "vitest";
import { exportedAs, exportedMetrics, metricNames, ownMetrics, unknownMetrics } from "../../../testkit/promql.js";

const ROOT = new URL("../../../", import.meta.url);
const read = (path: string) => readFileSync(new URL(path, ROOT), "utf8");

interface Target {
  expr: string;
  datasource: { type: string; uid: string };
  refId: string;
}
interface Panel {
  id: number;
  type: string;
  title: string;
  datasource?: { type: string; uid: string };
  gridPos: { x: number; y: number; w: number; h: number };
  targets?: Target[];
  panels?: Panel[];
}
interface Dashboard {
  schemaVersion: number;
  uid: string;
  title: string;
  __inputs: { name: string; type: string; pluginId: string }[];
  templating: { list: { name: string; type: string; query: string }[] };
  panels: Panel[];
}

const dashboard = JSON.parse(read("docs/grafana/svc-dashboard.json")) as Dashboard;
const panels = dashboard.panels.flatMap((p) => [p, ...(p.panels ?? [])]);
const graphs = panels.filter((p) => p.type !== "row");
const exprsOf = (d: Dashboard) =>
  d.panels.flatMap((p) => [p, ...(p.panels ?? [])]).flatMap((p) => (p.targets ?? []).map((t) => t.expr));

describe("the PromQL name extraction", () => {
  test("finds the selected metrics, not functions, labels, durations, numbers or variables", () => {
    expect(
      metricNames(
        'histogram_quantile(0.99, sum by (le) (rate(svc_gate_wait_seconds_bucket{x="a b"}[$__rate_interval])))',
      ),
    ).toEqual(["svc_gate_wait_seconds_bucket"]);
    expect(
      metricNames(
        "max by (side) (svc_escrow_held) / 1e6 > 0 and on () (sum(rate(svc_clears_total[10m])) or vector(0)) == 0",
      ).sort(),
    ).toEqual(["svc_clears_total", "svc_escrow_held"]);
    expect(metricNames('up{job="svc-api"} == 0 unless ignoring (instance) probe_success')).toEqual([
      "up",
      "probe_success",
    ]);
  });

  test("a histogram's _bucket/_sum/_count series belong to it; a counter has none", async () => {
    const exported = await exportedMetrics();
    expect(exportedAs("svc_http_request_duration_seconds_count", exported)).toBe("svc_http_request_duration_seconds");
    expect(exportedAs("svc_gate_wait_seconds_bucket", exported)).toBe("svc_gate_wait_seconds");
    expect(exportedAs("svc_clears_total_count", exported)).toBeUndefined();
    expect(exportedAs("svc_nodejs_eventloop_lag_p99_seconds", exported)).toBe("svc_nodejs_eventloop_lag_p99_seconds");
  });
});

describe("docs/grafana/svc-dashboard.json", () => {
  test("every metric a panel names is exported by the service", async () => {
    const exported = await exportedMetrics();
    const exprs = exprsOf(dashboard);
    expect(exprs.length).toBeGreaterThan(20);
    expect(unknownMetrics(exprs, exported)).toEqual([]);
  });

  test("a panel naming a metric that does not exist is caught", async () => {
    const exported = await exportedMetrics();
    const broken = structuredClone(dashboard);
    const target = broken.panels.flatMap((p) => p.targets ?? [])[0];
    if (!target) throw new Error("no target");
    target.expr = target.expr.replace("svc_clears_total", "svc_clear_total");
    expect(unknownMetrics(exprsOf(broken), exported)).toEqual([`svc_clear_total in ${target.expr}`]);
  });

  test("every metric of the service's own has a panel, and so do the event-loop lag and CPU", async () => {
    const exported = await exportedMetrics();
    const shown = new Set(
      exprsOf(dashboard)
        .flatMap(metricNames)
        .map((n) => exportedAs(n, exported)),
    );
    expect(ownMetrics(exported).filter((m) => !shown.has(m))).toEqual([]);
    expect(ownMetrics(exported)).toContain("svc_webhook_deliveries_total");
    for (const m of ["svc_nodejs_eventloop_lag_p99_seconds", "svc_process_cpu_seconds_total"])
      expect(shown).toContain(m);
  });

  test("imports anywhere: a DS_PROMETHEUS input every panel and query uses, also a variable when provisioned", () => {
    expect(dashboard.schemaVersion).toBeGreaterThanOrEqual(36);
    expect(dashboard.schemaVersion).toBeLessThanOrEqual(41);
    expect(dashboard.uid).toMatch(/^[\w-]{1,40}$/);
    expect(dashboard.__inputs).toEqual([
      expect.objectContaining({ name: "DS_PROMETHEUS", type: "datasource", pluginId: "prometheus" }),
    ]);
    expect(dashboard.templating.list).toContainEqual(
      expect.objectContaining({ name: "DS_PROMETHEUS", type: "datasource", query: "prometheus" }),
    );
    // biome-ignore lint/suspicious/noTemplateCurlyInString: Grafana's input placeholder, not a template
    const ds = { type: "prometheus", uid: "${DS_PROMETHEUS}" };
    expect(graphs.length).toBeGreaterThan(15);
    for (const p of graphs) {
      expect(p.datasource, p.title).toEqual(ds);
      expect(p.targets?.length, p.title).toBeGreaterThan(0);
      for (const t of p.targets ?? []) expect(t.datasource, p.title).toEqual(ds);
      expect(new Set((p.targets ?? []).map((t) => t.refId)).size, p.title).toBe(p.targets?.length);
    }
  });

  test("panel ids are unique and every panel fits the 24-column grid without overlapping another", () => {
    expect(new Set(panels.map((p) => p.id)).size).toBe(panels.length);
    const cells = new Set<string>();
    for (const p of panels) {
      const { x, y, w, h } = p.gridPos;
      expect(x >= 0 && w > 0 && x + w <= 24 && h > 0, p.title).toBe(true);
      for (let i = x; i < x + w; i++) {
        for (let j = y; j < y + h; j++) {
          expect(cells.has(`${i},${j}`), `${p.title} overlaps at ${i},${j}`).toBe(false);
          cells.add(`${i},${j}`);
        }
      }
    }
  });
});

describe("docs/operations.md's Metrics table", () => {
  test("lists exactly the service's own metrics, and Node's under svc_process_* / svc_nodejs_*", async () => {
    const exported = await exportedMetrics();
    const doc = read("docs/operations.md");
    const section = doc.slice(doc.indexOf("## Metrics"), doc.indexOf("## What to alert on"));
    const rows = section.split("\n").filter((l) => l.startsWith("| `"));
    const listed = rows.flatMap((r) => [...(r.split("|")[1] ?? "").matchAll(/`([\w*]+)/g)].map((m) => m[1] ?? ""));
    const own = listed.filter((n) => !n.endsWith("*"));
    expect(own.filter((n) => !exported.has(n))).toEqual([]);
    expect(ownMetrics(exported).filter((n) => !own.includes(n))).toEqual([]);
    expect(listed).toEqual(expect.arrayContaining(["svc_process_*", "svc_nodejs_*"]));
  });
});
