/**
 * What the service counts for operators, as a port: the domain and the
 * transports report events here; `adapters/metrics.ts` keeps them in Prometheus form for
 * `GET /metrics`. The default does nothing (tests, tools).
 */
export interface Metrics {
  /** one HTTP answer: the route pattern (not the raw path), method, status, seconds taken */
  httpRequest(route: string, method: string, status: number, seconds: number): void;
  /** one clear settled: its modality and gross charge (micro-USDC) */
  clear(modality: string, grossMicroUsdc: bigint): void;
  /** one attempt that failed and fell forward to another supplier key, by why */
  fallForward(kind: string): void;
  /** a settlement that did not commit (nothing charged) */
  settleFailed(): void;
  /** a request that had to wait for a busy supplier key, and how long (seconds) */
  gateWait(seconds: number): void;
  /** a video job refunded, by why */
  videoRefund(reason: string): void;
  /**
   * one webhook delivery attempt that changed its row: `delivered` (2xx), `retrying` (failed, another
   * attempt is scheduled), `failed` (given up: the last attempt failed and the endpoint is disabled,
   * or the endpoint was already disabled)
   */
  webhookDelivery(outcome: "delivered" | "retrying" | "failed"): void;
}

export const noMetrics: Metrics = {
  httpRequest() {},
  clear() {},
  fallForward() {},
  settleFailed() {},
  gateWait() {},
  videoRefund() {},
  webhookDelivery() {},
};
