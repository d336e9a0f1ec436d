import type { IncomingHttpHeaders } from "node:http";
import { type Dispatcher, Pool, request } from "undici";
import { upstreamDecimalToMicro } from "../../lib/money.js";
import { injectTrace } from "../../lib/tracing.js";
import { reportedDiemBalance, type UpstreamJson, type UpstreamResponse } from "./bodies.js";
import { failureFromError, failureFromResponse, failureOf, type UpstreamResult } from "./failures.js";

/**
 * Client of the one upstream provider (Venice-compatible API, ../shared/upstream/VENICE_API.md).
 * Failures are data (`{ ok: false, failure }`) because callers branch on them: fall-forward,
 * key cooldown, auth marking. Never logs key material. What a failure is and how an answer becomes
 * one: failures.ts; a 2xx answer's body (SSE, release, the reported balance): bodies.ts. Both are
 * re-exported here.
 */

export interface KeyStatus {
  accessPermitted: boolean;
  /** DIEM this key can still spend this epoch (key-clamped), micro-DIEM; null when not reported */
  diemMicro: bigint | null;
  usdMicro: bigint | null;
  nextEpochBegins: string | null;
}

export type UpstreamModelType = "text" | "image" | "video";

/** One row of GET /models, as published (shape per VENICE_API §2). */
export interface UpstreamModel {
  id: string;
  type: string;
  created?: number;
  model_spec?: Record<string, unknown>;
  [key: string]: unknown;
}

export interface UpstreamClientOptions {
  baseUrl: string;
  /** per-call timeout for control calls (models, rate limits) */
  timeoutMs?: number;
}

const isOk = (status: number) => status >= 200 && status < 300;

/** A streamed inference call: the answer's body is handed over as it arrives. */
export interface StreamedCall {
  stream: true;
  signal?: AbortSignal | undefined;
}

/** A buffered inference call: the answer read whole; it gives up after `timeoutMs`. */
export interface BufferedCall {
  stream: false;
  signal?: AbortSignal | undefined;
  timeoutMs: number;
}

/** An inference call's request options (`UpstreamClient.requestOf`). */
type Sent = { path: string; method: "POST"; headers: Record<string, string>; body: string };

/** A non-2xx answer read to its end: what `failureOf` classifies. */
interface Refused {
  status: number;
  statusText: string;
  headers: IncomingHttpHeaders;
  text: string;
}

/** One shape's call: its result, or a non-2xx answer still to be classified. */
type Got<T> = UpstreamResult<T> | { refused: Refused };

/** Why `signal` aborted, as an Error (an AbortError when it gave no Error). */
function abortReason(signal: AbortSignal | undefined): Error {
  const r: unknown = signal?.reason;
  return r instanceof Error ? r : new DOMException("aborted", "AbortError");
}

/** what global fetch sent; some gateways refuse calls without a user agent */
const USER_AGENT = "node";

/**
 * Calls go through undici's `request()` on a keep-alive connection pool owned by the client (one
 * origin); `close()` destroys it.
 */
/**
 * An inference body as JSON text. A body that cannot be serialised (nested past the stack, a cycle,
 * a bigint) is the request's own failure (`request`: relayed to the buyer, no other key tried, no
 * key marked), never a network failure: as one it fell forward through five keys, none of which could serve it.
 */
function serialiseBody(body: unknown): UpstreamResult<string> {
  try {
    return { ok: true, value: JSON.stringify(body) };
  } catch (e) {
    const why = e instanceof RangeError ? "it is nested too deeply" : "it is not JSON";
    return { ok: false, failure: { kind: "request", message: `the request body cannot be sent: ${why}` } };
  }
}

export class UpstreamClient {
  readonly baseUrl: string;
  private readonly timeoutMs: number;
  private readonly pool: Pool;
  /** the base URL's path (e.g. `/api/v1`), prefixed to every call's path */
  private readonly basePath: string;

  constructor(opts: UpstreamClientOptions) {
    this.baseUrl = opts.baseUrl.replace(/\/+$/, "");
    this.timeoutMs = opts.timeoutMs ?? 10_000;
    const url = new URL(this.baseUrl);
    this.basePath = url.pathname.replace(/\/+$/, "");
    this.pool = new Pool(url.origin);
  }

  /** Closes the pool's connections (in-flight calls are aborted). */
  async close(): Promise<void> {
    if (!this.pool.destroyed) await this.pool.destroy();
  }

  /** GET /api_keys/rate_limits: validity, access and the DIEM balance of the calling key. */
  async keyStatus(apiKey: string): Promise<UpstreamResult<KeyStatus>> {
    const r = await this.getJson(`/api_keys/rate_limits`, apiKey);
    if (!r.ok) return r;
    const data = (r.value as { data?: Record<string, unknown> }).data;
    if (!data || typeof data !== "object") {
      return { ok: false, failure: { kind: "invalid_response", message: "rate_limits without data" } };
    }
    const balances = (data.balances ?? {}) as Record<string, unknown>;
    const micro = (v: unknown): bigint | null => {
      if (typeof v !== "number" && typeof v !== "string") return null;
      try {
        const m = upstreamDecimalToMicro(v);
        return m < 0n ? 0n : m;
      } catch {
        return null;
      }
    };
    return {
      ok: true,
      value: {
        accessPermitted: data.accessPermitted === true,
        diemMicro: micro(balances.DIEM),
        usdMicro: micro(balances.USD),
        nextEpochBegins: typeof data.nextEpochBegins === "string" ? data.nextEpochBegins : null,
      },
    };
  }

  /** GET /models?type=…: the published catalog rows of one modality. */
  async listModels(type: UpstreamModelType, apiKey?: string): Promise<UpstreamResult<UpstreamModel[]>> {
    const r = await this.getJson(`/models?type=${type}`, apiKey);
    if (!r.ok) return r;
    const data = (r.value as { data?: unknown }).data;
    if (!Array.isArray(data))
      return { ok: false, failure: { kind: "invalid_response", message: "models without data" } };
    return {
      ok: true,
      value: data.filter(
        (m): m is UpstreamModel =>
          typeof m === "object" && m !== null && typeof (m as { id?: unknown }).id === "string",
      ),
    };
  }

  /**
   * An unauthenticated GET of provider media (a private video model's `download_url`, VENICE_API §6).
   * On success the caller owns the body (read it or `releaseBody` it).
   */
  async getMedia(url: string, signal?: AbortSignal): Promise<UpstreamResult<UpstreamResponse>> {
    try {
      const res = await request(url, { method: "GET", signal });
      if (!isOk(res.statusCode)) return { ok: false, failure: await failureFromResponse(url, res) };
      // media, not an inference call: no balance is reported
      return {
        ok: true,
        value: { status: res.statusCode, headers: res.headers, body: res.body, diemBalanceMicro: null },
      };
    } catch (e) {
      return { ok: false, failure: failureFromError(e) };
    }
  }

  /**
   * THE inference call (a POST on a supplier key), in one of two shapes. Streamed (`stream: true`):
   * the 2xx answer's body handed over as a stream (undici's `request()`); the caller owns it and
   * must read it to the end or release it (`releaseBody`); aborting `signal` cancels the call and
   * destroys the body. Buffered (`stream: false`): the answer read to its end and parsed, on
   * undici's dispatcher directly (no body stream; about a third of a buffered call's client-side
   * cost); aborting `signal`, or `timeoutMs` passing before the answer ends, cancels the call (a
   * timeout failure), and a 2xx answer that is not JSON is an `invalid_response` failure. Either
   * way a non-2xx answer is read to its end here and classified once (`failureOf`).
   */
  inference<C extends StreamedCall | BufferedCall>(
    path: string,
    apiKey: string,
    body: unknown,
    opts: C,
  ): Promise<UpstreamResult<C extends StreamedCall ? UpstreamResponse : UpstreamJson>>;
  async inference(
    path: string,
    apiKey: string,
    body: unknown,
    opts: StreamedCall | BufferedCall,
  ): Promise<UpstreamResult<UpstreamResponse | UpstreamJson>> {
    const json = serialiseBody(body);
    if (!json.ok) return json;
    const sent = this.requestOf(path, apiKey, json.value);
    const got = opts.stream ? await this.streamed(sent, opts.signal) : await this.buffered(sent, opts);
    if (!("refused" in got)) return got;
    const { status, statusText, headers, text } = got.refused;
    return { ok: false, failure: failureOf(path, status, statusText, headers, text) };
  }

  /** A streamed call: a 2xx answer's body is the caller's; a non-2xx one is read to its end. */
  private async streamed(sent: Sent, signal: AbortSignal | undefined): Promise<Got<UpstreamResponse>> {
    try {
      const { statusCode: status, statusText, headers, body } = await this.pool.request({ ...sent, signal });
      if (!isOk(status)) return { refused: { status, statusText, headers, text: await body.text().catch(() => "") } };
      return { ok: true, value: { status, headers, body, diemBalanceMicro: reportedDiemBalance(headers) } };
    } catch (e) {
      return { ok: false, failure: failureFromError(e) };
    }
  }

  /** A buffered call on the dispatcher: the answer's chunks gathered, a 2xx one parsed. */
  private buffered(sent: Sent, opts: BufferedCall): Promise<Got<UpstreamJson>> {
    const { signal, timeoutMs } = opts;
    return new Promise((resolve) => {
      let controller: Dispatcher.DispatchController | null = null;
      let cancelled: Error | null = null;
      let settled = false;
      const cancel = (reason: Error) => {
        cancelled ??= reason;
        controller?.abort(reason);
      };
      const onAbort = () => cancel(abortReason(signal));
      const timer = setTimeout(() => cancel(new DOMException("upstream timed out", "TimeoutError")), timeoutMs);
      const done = (r: Got<UpstreamJson>) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
        resolve(r);
      };
      if (signal?.aborted) {
        done({ ok: false, failure: failureFromError(abortReason(signal)) });
        return;
      }
      signal?.addEventListener("abort", onAbort, { once: true });
      let status = 0;
      let statusText = "";
      let headers: IncomingHttpHeaders = {};
      const chunks: Buffer[] = [];
      try {
        this.pool.dispatch(sent, {
          onRequestStart(c) {
            controller = c;
            if (cancelled) c.abort(cancelled);
          },
          onResponseStart(_c, statusCode, h, message) {
            status = statusCode;
            headers = h;
            statusText = message ?? "";
          },
          onResponseData(_c, chunk) {
            chunks.push(chunk);
          },
          onResponseEnd() {
            const text = Buffer.concat(chunks).toString("utf8");
            if (!isOk(status)) {
              done({ refused: { status, statusText, headers, text } });
              return;
            }
            try {
              done({ ok: true, value: { status, headers, json: JSON.parse(text) } });
            } catch {
              done({
                ok: false,
                failure: { kind: "invalid_response", status, message: "invalid JSON from upstream" },
              });
            }
          },
          onResponseError(_c, err) {
            done({ ok: false, failure: failureFromError(cancelled ?? err) });
          },
        });
      } catch (e) {
        done({ ok: false, failure: failureFromError(e) });
      }
    });
  }

  /**
   * An inference call's request options (the body a string: sent with its content-length in one
   * write). With tracing on, `traceparent` names the active span (the attempt's client span), so
   * the upstream's own trace continues ours.
   */
  private requestOf(path: string, apiKey: string, json: string): Sent {
    const headers: Record<string, string> = {
      authorization: `Bearer ${apiKey}`,
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      "user-agent": USER_AGENT,
    };
    injectTrace(headers);
    return { path: `${this.basePath}${path}`, method: "POST" as const, headers, body: json };
  }

  private async getJson(path: string, apiKey?: string): Promise<UpstreamResult<unknown>> {
    try {
      const headers: Record<string, string> = apiKey
        ? { authorization: `Bearer ${apiKey}`, "user-agent": USER_AGENT }
        : { "user-agent": USER_AGENT };
      injectTrace(headers);
      const res = await this.pool.request({
        path: `${this.basePath}${path}`,
        method: "GET",
        headers,
        signal: AbortSignal.timeout(this.timeoutMs),
      });
      if (!isOk(res.statusCode)) return { ok: false, failure: await failureFromResponse(path, res) };
      try {
        // json() reads the body to the end, or it is destroyed on error
        return { ok: true, value: await res.body.json() };
      } catch {
        return {
          ok: false,
          failure: { kind: "invalid_response", status: res.statusCode, message: "invalid JSON from upstream" },
        };
      }
    } catch (e) {
      return { ok: false, failure: failureFromError(e) };
    }
  }
}

export {
  readUpstreamSse,
  releaseBody,
  reportedDiemBalance,
  type UpstreamBody,
  type UpstreamJson,
  type UpstreamResponse,
} from "./bodies.js";
export {
  failureFromError,
  failureOf,
  type UpstreamFailure,
  type UpstreamFailureKind,
  type UpstreamResult,
} from "./failures.js";
