import type { SimFaultKind } from "./faults.js";
import { normalizeRoute } from "./http-util.js";

/** The simulator's request log: one record per API request, what it asked and what it was charged. */

export interface SimRecordedUsage {
  promptTokens: number;
  completionTokens: number;
  totalTokens: number;
  cachedTokens: number;
  /** prompt tokens written to the cache (`cache_creation_input_tokens`) */
  cacheWriteTokens: number;
}

export interface SimRequestRecord {
  id: string;
  method: string;
  /** path below /api/v1, e.g. "/chat/completions" */
  route: string;
  /** bearer key presented (null when absent) */
  key: string | null;
  /** the W3C `traceparent` header the caller sent (null when absent): whose trace the call continues */
  traceparent: string | null;
  /** the query string, without `?` ("" when none) */
  query: string;
  /**
   * the JSON body as the simulator parsed it: what the caller really sent (null: no body, not JSON, or
   * an older request: bodies are kept for the latest MAX_BODIES requests). Read it, never change it.
   */
  body: unknown;
  /** canonical model id when resolvable, else the raw `model` value, else null */
  model: string | null;
  stream: boolean;
  /** HTTP status sent; 0 when no response was sent (drop, timeout, client gone first) */
  status: number;
  usage: SimRecordedUsage | null;
  burnMicroDiem: bigint;
  chargedDiemMicro: bigint;
  chargedUsdMicro: bigint;
  /** prepaid charge given back later (failed / content-policy video jobs) */
  refundedMicro: bigint;
  fault: SimFaultKind | null;
  /** the client closed the connection before the response completed */
  aborted: boolean;
  startedAt: Date;
  endedAt: Date | null;
}

export interface SimRequestFilter {
  key?: string;
  route?: string;
  model?: string;
}

const MAX_RECORDS = 100_000;
/** request bodies are kept on the latest this many records (a benchmark's log stays small) */
const MAX_BODIES = 1_000;

/** The log, oldest first (the oldest tenth dropped past MAX_RECORDS). */
export class SimRequestLog {
  private records: SimRequestRecord[] = [];
  /** the records holding a body, oldest first (at most MAX_BODIES) */
  private withBody: SimRequestRecord[] = [];
  private requestSeq = 0;

  /** @internal Starts a log entry (visible immediately, `endedAt` null until finished). */
  start(
    init: {
      method: string;
      route: string;
      key: string | null;
      traceparent?: string | null;
      query?: string;
    },
    startedAt: Date,
  ): SimRequestRecord {
    this.requestSeq += 1;
    const record: SimRequestRecord = {
      id: `req_${this.requestSeq}`,
      method: init.method,
      route: init.route,
      key: init.key,
      traceparent: init.traceparent ?? null,
      query: init.query ?? "",
      body: null,
      model: null,
      stream: false,
      status: 0,
      usage: null,
      burnMicroDiem: 0n,
      chargedDiemMicro: 0n,
      chargedUsdMicro: 0n,
      refundedMicro: 0n,
      fault: null,
      aborted: false,
      startedAt,
      endedAt: null,
    };
    this.records.push(record);
    if (this.records.length > MAX_RECORDS) this.records = this.records.slice(-Math.floor(MAX_RECORDS * 0.9));
    return record;
  }

  /** @internal Keeps the parsed body on its record (dropping the oldest kept body past MAX_BODIES). */
  keepBody(record: SimRequestRecord, body: unknown): void {
    record.body = body;
    this.withBody.push(record);
    if (this.withBody.length > MAX_BODIES) {
      const dropped = this.withBody.splice(0, this.withBody.length - MAX_BODIES);
      for (const r of dropped) r.body = null;
    }
  }

  /** Request log, oldest first, optionally filtered (copies; `route` accepts "/chat/completions"). */
  list(filter: SimRequestFilter = {}): SimRequestRecord[] {
    const route = filter.route === undefined ? undefined : normalizeRoute(filter.route);
    return this.records
      .filter(
        (r) =>
          (filter.key === undefined || r.key === filter.key) &&
          (route === undefined || r.route === route) &&
          (filter.model === undefined || r.model === filter.model),
      )
      .map((r) => ({ ...r, usage: r.usage ? { ...r.usage } : null }));
  }

  /** Empties the log. */
  clear(): void {
    this.records = [];
    this.withBody = [];
  }
}
