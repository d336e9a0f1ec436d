import type { IncomingHttpHeaders } from "node:http";
import type { UpstreamBody, UpstreamClient, UpstreamFailure } from "../../adapters/upstream/client.js";
import type { VideoJobRow } from "./job-rows.js";

/**
 * The provider's side of a queued video job (VENICE_API §6): `/video/retrieve` asked on the key
 * that queued the job, its answer read into one `Observation` (still rendering, the media, finished
 * without media, failed, gone, or no answer), the media of private models fetched from the queue
 * answer's `download_url`, and `/video/complete` (delete the provider's media). Nothing here
 * touches the job's row: what an observation does to the job is `VideoJobTransitions.apply`.
 */

/** An upstream retrieve (or complete) gives up after this long. */
const RETRIEVE_TIMEOUT_MS = 30_000;
const RUNNING = /^(processing|pending|queued|in_progress|running|starting)$/i;
const FAILED = /^(failed|failure|error|cancelled|canceled)$/i;

/** What one upstream retrieve said about a job. */
export type Observation =
  | { kind: "processing"; upstreamStatus: string; averageMs: number | null; elapsedMs: number | null }
  | { kind: "media"; contentType: string; contentLength: number | null; body: UpstreamBody }
  | { kind: "completed_no_media"; upstreamStatus: string }
  | { kind: "failed"; reason: string; upstreamRefunded: boolean; upstreamStatus: string }
  | { kind: "gone" }
  | { kind: "unavailable"; detail: string };

/** What the provider needs to know of a job: the key it was queued on, the model and its queue id. */
export type ProviderJob = Pick<VideoJobRow, "upstreamKeyId" | "model" | "upstreamQueueId" | "downloadUrl">;

export interface VideoProviderDeps {
  upstream: UpstreamClient;
  /** the plaintext secret of the supplier key the job was queued on (any status; never logged) */
  openKey: (upstreamKeyId: string) => Promise<string>;
}

export class VideoProvider {
  constructor(private readonly deps: VideoProviderDeps) {}

  /** Asks the upstream about a job, on the key that queued it. */
  async observe(job: ProviderJob): Promise<Observation> {
    let secret: string;
    try {
      secret = await this.deps.openKey(job.upstreamKeyId);
    } catch (err) {
      return { kind: "unavailable", detail: `key: ${(err as Error).message}` };
    }
    const res = await this.deps.upstream.inference(
      "/video/retrieve",
      secret,
      { model: job.model, queue_id: job.upstreamQueueId, delete_media_on_completion: false },
      { stream: true, signal: AbortSignal.timeout(RETRIEVE_TIMEOUT_MS) },
    );
    if (!res.ok) return failureObservation(res.failure);
    const type = String(res.value.headers["content-type"] ?? "").toLowerCase();
    if (type.startsWith("video/") || type.startsWith("application/octet-stream")) {
      return {
        kind: "media",
        contentType: type.startsWith("video/") ? type.split(";")[0] || "video/mp4" : "video/mp4",
        contentLength: contentLengthOf(res.value.headers),
        body: res.value.body,
      };
    }
    let json: Record<string, unknown> | null;
    try {
      json = (await res.value.body.json()) as Record<string, unknown> | null;
    } catch {
      return { kind: "unavailable", detail: "unreadable retrieve answer" };
    }
    const seen = statusObservation(json);
    // a private model's finished media is served at its download_url, not by the retrieve
    if (seen.kind === "completed_no_media" && job.downloadUrl) return this.download(job.downloadUrl);
    return seen;
  }

  /** Deletes the provider's media of a job (`/video/complete`); an already gone job (404) is no error. */
  async deleteMedia(job: ProviderJob): Promise<void> {
    const secret = await this.deps.openKey(job.upstreamKeyId);
    const r = await this.deps.upstream.inference(
      "/video/complete",
      secret,
      { model: job.model, queue_id: job.upstreamQueueId },
      { stream: false, timeoutMs: RETRIEVE_TIMEOUT_MS },
    );
    // 404: already gone; anything else is logged by the caller
    if (!r.ok && r.failure.status !== 404) throw new Error(`complete: ${r.failure.kind} ${r.failure.status ?? ""}`);
  }

  /** Private models: the media behind the queue answer's download_url (unauthenticated GET). */
  private async download(url: string): Promise<Observation> {
    const r = await this.deps.upstream.getMedia(url, AbortSignal.timeout(RETRIEVE_TIMEOUT_MS));
    if (!r.ok) return r.failure.status === 404 ? { kind: "gone" } : failureObservation(r.failure);
    return {
      kind: "media",
      contentType: "video/mp4",
      contentLength: contentLengthOf(r.value.headers),
      body: r.value.body,
    };
  }
}

/**
 * A JSON retrieve answer: the running synonyms → processing; the failure synonyms → failed (the key
 * refunded when the answer says so); `COMPLETED` → finished without media (the caller fetches a
 * private model's `download_url`); anything else → unavailable.
 */
export function statusObservation(json: Record<string, unknown> | null): Observation {
  const status = String(json?.status ?? "");
  if (json && RUNNING.test(status)) {
    return {
      kind: "processing",
      upstreamStatus: status,
      averageMs: num(json.average_execution_time),
      elapsedMs: num(json.execution_duration),
    };
  }
  if (json && FAILED.test(status)) {
    const text = JSON.stringify(json);
    return {
      kind: "failed",
      reason: "provider_failed",
      upstreamRefunded: json.credits_refunded === true || /refunded/i.test(text),
      upstreamStatus: status,
    };
  }
  if (/^completed$/i.test(status)) return { kind: "completed_no_media", upstreamStatus: status };
  return { kind: "unavailable", detail: `unknown status ${status.slice(0, 40)}` };
}

/** A refused retrieve: 404 → gone; 422 → failed (content policy or rejected); anything else → unavailable. */
export function failureObservation(f: UpstreamFailure): Observation {
  if (f.status === 404) return { kind: "gone" };
  if (f.status === 422) {
    const err = (f.body as { error?: { type?: unknown; credits_refunded?: unknown } } | undefined)?.error;
    return {
      kind: "failed",
      reason: err?.type === "provider_content_policy" ? "content_policy" : "provider_rejected",
      upstreamRefunded: err?.credits_refunded === true,
      upstreamStatus: "422",
    };
  }
  return { kind: "unavailable", detail: `${f.kind}${f.status ? ` ${f.status}` : ""}` };
}

function contentLengthOf(headers: IncomingHttpHeaders): number | null {
  const len = Number(headers["content-length"]);
  return Number.isFinite(len) && len >= 0 ? len : null;
}

function num(v: unknown): number | null {
  return typeof v === "number" && Number.isFinite(v) ? v : null;
}
