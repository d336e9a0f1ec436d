import { upstreamDecimalToMicro } from "../../lib/money.js";

/**
 * Client of the one upstream provider (Venice-compatible API, ../shared/upstream/VENICE_API.md).
 * Failures are data (`{ ok: false, failure }`) because callers branch on them: fall-forward,
 * key cooldown, auth marking. Never logs key material.
 */
export type UpstreamFailureKind =
  /** 401/403: the key is invalid, revoked or not allowed */
  | "auth"
  /** 402: the supplier's key is out of balance or over its spend limit */
  | "payment"
  | "rate_limited"
  /** 5xx */
  | "server"
  | "timeout"
  /** connection refused/reset, DNS */
  | "network"
  /** 400/404/413/415/422: the request itself was refused */
  | "request"
  | "invalid_response";

export interface UpstreamFailure {
  kind: UpstreamFailureKind;
  status?: number;
  message: string;
  /** seconds, from Retry-After */
  retryAfter?: number;
  /** the upstream's error body, for request errors relayed to the buyer */
  body?: unknown;
}

export type UpstreamResult<T> = { ok: true; value: T } | { ok: false; failure: UpstreamFailure };

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

export function classifyStatus(status: number): UpstreamFailureKind {
  if (status === 401 || status === 403) return "auth";
  if (status === 402) return "payment";
  if (status === 429) return "rate_limited";
  if (status >= 500) return "server";
  return "request";
}

export function failureFromError(e: unknown): UpstreamFailure {
  const err = e as { name?: string; code?: string; cause?: { code?: string }; message?: string };
  if (err?.name === "TimeoutError" || err?.name === "AbortError")
    return { kind: "timeout", message: "upstream timed out" };
  return {
    kind: "network",
    message: `upstream unreachable (${err?.cause?.code ?? err?.code ?? err?.message ?? "error"})`,
  };
}

function retryAfterOf(res: Response): number | undefined {
  const v = res.headers.get("retry-after");
  if (!v) return undefined;
  const n = Number(v);
  return Number.isFinite(n) && n >= 0 ? n : undefined;
}

async function failureFromResponse(res: Response): Promise<UpstreamFailure> {
  const text = await res.text().catch(() => "");
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {}
  const message =
    typeof body === "object" && body !== null && "error" in body
      ? typeof (body as { error: unknown }).error === "string"
        ? String((body as { error: string }).error)
        : String((body as { error: { message?: string } }).error?.message ?? res.statusText)
      : res.statusText || `HTTP ${res.status}`;
  return { kind: classifyStatus(res.status), status: res.status, message, retryAfter: retryAfterOf(res), body };
}

export class UpstreamClient {
  readonly baseUrl: string;
  private readonly timeoutMs: number;

  constructor(opts: UpstreamClientOptions) {
    this.baseUrl = opts.baseUrl.replace(/\/+$/, "");
    this.timeoutMs = opts.timeoutMs ?? 10_000;
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

  /** A raw call (inference): the caller owns the response body. */
  async post(
    path: string,
    apiKey: string,
    body: unknown,
    opts: { signal?: AbortSignal } = {},
  ): Promise<UpstreamResult<Response>> {
    try {
      const res = await fetch(`${this.baseUrl}${path}`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${apiKey}`,
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
        },
        body: JSON.stringify(body),
        signal: opts.signal,
      });
      if (!res.ok) return { ok: false, failure: await failureFromResponse(res) };
      return { ok: true, value: res };
    } catch (e) {
      return { ok: false, failure: failureFromError(e) };
    }
  }

  private async getJson(path: string, apiKey?: string): Promise<UpstreamResult<unknown>> {
    try {
      const res = await fetch(`${this.baseUrl}${path}`, {
        headers: apiKey ? { authorization: `Bearer ${apiKey}` } : {},
        signal: AbortSignal.timeout(this.timeoutMs),
      });
      if (!res.ok) return { ok: false, failure: await failureFromResponse(res) };
      try {
        return { ok: true, value: await res.json() };
      } catch {
        return {
          ok: false,
          failure: { kind: "invalid_response", status: res.status, message: "invalid JSON from upstream" },
        };
      }
    } catch (e) {
      return { ok: false, failure: failureFromError(e) };
    }
  }
}
