import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";
import type { Metrics } from "../lib/metrics.js";

/** Figures read when Prometheus scrapes (each a short query; a failing one is left out). */
export interface ScrapeSources {
  /** micro-USDC held in buyer escrow slices, micro-DIEM in offer slices, less their unfolded charges */
  escrowHeld(): Promise<{ buyerMicroUsdc: bigint; offerMicroDiem: bigint }>;
  /** escrow holders whose lease expired and that the sweeper has not released (their processes died) */
  escrowHoldersExpired(): Promise<number>;
  /** jobs waiting per BullMQ queue */
  queueDepths(): Promise<Record<string, number>>;
  /** payments settled but not yet credited (the reconciliation backlog) */
  reconciliationBacklog(): Promise<number>;
  /** video jobs by status that are not finished */
  videoJobsOpen(): Promise<Record<string, number>>;
  /** webhook endpoints disabled after every attempt of an event failed (and not enabled again) */
  webhookEndpointsDisabled(): Promise<number>;
  /**
   * With a read replica only: how stale it is now (ms; undefined before it was ever seen fresh) and
   * the bound beyond which it serves no read (READ_REPLICA_MAX_LAG_MS). Absent: no replica, no gauge.
   */
  readReplica?: { lagMs(): number | undefined; maxLagMs: number };
}

const SECONDS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

/**
 * The Prometheus registry of one process (prom-client): counters and histograms the service
 * reports through `Metrics`, gauges read from Postgres and Redis at scrape time, and Node's
 * default process metrics. Names are prefixed `svc_`.
 */
export class PromMetrics implements Metrics {
  readonly registry = new Registry();
  private readonly http: Histogram<"route" | "method" | "status">;
  private readonly clears: Counter<"modality">;
  private readonly volume: Counter<"modality">;
  private readonly fallForwards: Counter<"kind">;
  private readonly settleFailures: Counter;
  private readonly gateWaits: Histogram;
  private readonly refunds: Counter<"reason">;
  private readonly webhookDeliveries: Counter<"outcome">;

  constructor(sources?: ScrapeSources) {
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry, prefix: "svc_" });
    this.http = new Histogram({
      name: "svc_http_request_duration_seconds",
      help: "HTTP answers by route pattern, method and status, with their duration",
      labelNames: ["route", "method", "status"],
      buckets: SECONDS,
      registers,
    });
    this.clears = new Counter({
      name: "svc_clears_total",
      help: "Clears settled",
      labelNames: ["modality"],
      registers,
    });
    this.volume = new Counter({
      name: "svc_cleared_usdc_total",
      help: "Gross USDC charged by clears",
      labelNames: ["modality"],
      registers,
    });
    this.fallForwards = new Counter({
      name: "svc_fall_forwards_total",
      help: "Attempts that failed and fell forward to another supplier key, by why",
      labelNames: ["kind"],
      registers,
    });
    this.settleFailures = new Counter({
      name: "svc_settlement_failures_total",
      help: "Settlements that did not commit (nothing charged; 500 settle_failed)",
      registers,
    });
    this.gateWaits = new Histogram({
      name: "svc_gate_wait_seconds",
      help: "Time requests waited for a busy supplier key",
      buckets: SECONDS,
      registers,
    });
    this.refunds = new Counter({
      name: "svc_video_refunds_total",
      help: "Video jobs refunded, by why",
      labelNames: ["reason"],
      registers,
    });
    this.webhookDeliveries = new Counter({
      name: "svc_webhook_deliveries_total",
      help: "Webhook delivery attempts by outcome: delivered, retrying (failed, retry scheduled), failed (given up)",
      labelNames: ["outcome"],
      registers,
    });
    if (!sources) return;
    const escrow = new Gauge({
      name: "svc_escrow_held",
      help: "Escrow held in slices and not yet charged (amount less unfolded charges): buyer micro-USDC and offer micro-DIEM",
      labelNames: ["side"],
      registers,
      async collect() {
        const e = await sources.escrowHeld().catch(() => null);
        if (!e) return;
        this.set({ side: "buyer_micro_usdc" }, Number(e.buyerMicroUsdc));
        this.set({ side: "offer_micro_diem" }, Number(e.offerMicroDiem));
      },
    });
    void escrow;
    new Gauge({
      name: "svc_escrow_holders_expired",
      help: "Escrow holders whose lease expired and that are not yet swept (a process died; the sweeper releases them within 30 s)",
      registers,
      async collect() {
        const n = await sources.escrowHoldersExpired().catch(() => null);
        if (n !== null) this.set(n);
      },
    });
    new Gauge({
      name: "svc_queue_depth",
      help: "Jobs waiting or delayed per BullMQ queue",
      labelNames: ["queue"],
      registers,
      async collect() {
        const d = await sources.queueDepths().catch(() => null);
        if (!d) return;
        for (const [queue, n] of Object.entries(d)) this.set({ queue }, n);
      },
    });
    new Gauge({
      name: "svc_reconciliation_backlog",
      help: "Payments settled on chain but not yet credited",
      registers,
      async collect() {
        const n = await sources.reconciliationBacklog().catch(() => null);
        if (n !== null) this.set(n);
      },
    });
    new Gauge({
      name: "svc_video_jobs_open",
      help: "Video jobs not finished, by status",
      labelNames: ["status"],
      registers,
      async collect() {
        const d = await sources.videoJobsOpen().catch(() => null);
        if (!d) return;
        for (const [status, n] of Object.entries(d)) this.set({ status }, n);
      },
    });
    new Gauge({
      name: "svc_webhook_endpoints_disabled",
      help: "Webhook endpoints disabled after repeated delivery failures",
      registers,
      async collect() {
        const n = await sources.webhookEndpointsDisabled().catch(() => null);
        if (n !== null) this.set(n);
      },
    });
    const replica = sources.readReplica;
    if (!replica) return;
    new Gauge({
      name: "svc_read_replica_lag_seconds",
      help: "How far behind the primary the read replica is, as this process last measured (+Inf: never seen fresh)",
      registers,
      collect() {
        const lag = replica.lagMs();
        this.set(lag === undefined ? Number.POSITIVE_INFINITY : lag / 1000);
      },
    });
    new Gauge({
      name: "svc_read_replica_max_lag_seconds",
      help: "READ_REPLICA_MAX_LAG_MS: a replica further behind serves no read (they go to the primary)",
      registers,
      collect() {
        this.set(replica.maxLagMs / 1000);
      },
    });
  }

  httpRequest(route: string, method: string, status: number, seconds: number): void {
    this.http.observe({ route, method, status: String(status) }, seconds);
  }
  clear(modality: string, grossMicroUsdc: bigint): void {
    this.clears.inc({ modality });
    // a gauge of USDC for people: the exact figures are in the books
    this.volume.inc({ modality }, Number(grossMicroUsdc) / 1e6);
  }
  fallForward(kind: string): void {
    this.fallForwards.inc({ kind });
  }
  settleFailed(): void {
    this.settleFailures.inc();
  }
  gateWait(seconds: number): void {
    this.gateWaits.observe(seconds);
  }
  videoRefund(reason: string): void {
    this.refunds.inc({ reason });
  }
  webhookDelivery(outcome: "delivered" | "retrying" | "failed"): void {
    this.webhookDeliveries.inc({ outcome });
  }

  /** The exposition text for `GET /metrics`. */
  async text(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }
}
