import { readUpstreamSse, releaseBody, type UpstreamBody } from "../../adapters/upstream/client.js";
import type { SseFrame } from "../../lib/sse.js";
import type { InferencePipeline } from "./pipeline.js";
import { type InferenceSession, serverTiming } from "./session.js";
import type { StreamSink } from "./sink.js";

/** A started stream silent this long is treated as truncated. */
export const STREAM_IDLE_TIMEOUT_MS = 120_000;

/**
 * What a frame handler tells `StreamRelay.pump`: `finished` (the upstream's last frame: the rest is
 * drained, the connection reused), `stop` (the upstream call is cut), `retry` (fell forward).
 */
export type FrameVerdict = "finished" | "stop" | "retry";

/**
 * The protocol-neutral half of relaying one upstream stream attempt: frames are withheld until the
 * first content commits the buyer's stream (so a failure before it falls forward invisibly), then
 * written as they come; once committed, a silent upstream is aborted after `STREAM_IDLE_TIMEOUT_MS`.
 */
export class StreamRelay {
  private readonly pending: string[] = [];
  private isCommitted = false;
  private idle: NodeJS.Timeout | undefined;

  constructor(
    private readonly pipeline: InferencePipeline,
    private readonly session: InferenceSession,
    private readonly sink: StreamSink,
    private readonly body: UpstreamBody,
    private readonly upstreamAbort: AbortController,
    private readonly firstTimer: NodeJS.Timeout,
    private readonly onStart: () => void,
  ) {}

  /** true once the buyer's stream started (status and headers sent) */
  get committed(): boolean {
    return this.isCommitted;
  }

  /**
   * Reads the upstream frames into `onFrame` until it returns a verdict or the upstream ends; a reset,
   * abort or idle timeout (or a throw from `onFrame`) ends it as `stop`. Releases the body either way.
   */
  async pump(
    onFrame: (frame: SseFrame) => FrameVerdict | undefined | Promise<FrameVerdict | undefined>,
  ): Promise<FrameVerdict> {
    let verdict: FrameVerdict = "stop";
    try {
      for await (const frame of readUpstreamSse(this.body)) {
        if (this.isCommitted) {
          if (this.idle) this.idle.refresh();
          else this.idle = setTimeout(() => this.upstreamAbort.abort(), STREAM_IDLE_TIMEOUT_MS);
          void this.pipeline.renew(this.session).catch(() => undefined);
        }
        const v = await onFrame(frame);
        if (v) {
          verdict = v;
          break;
        }
      }
    } catch {
      // reset, abort or idle timeout: the caller handles it as an early close
    } finally {
      if (this.idle) clearTimeout(this.idle);
      releaseBody(this.body, verdict === "finished");
    }
    return verdict;
  }

  /** Withholds `frame` until content arrives (`content` commits the stream), then writes it. */
  emit(frame: string, content: boolean): void {
    if (!this.isCommitted) {
      this.pending.push(frame);
      if (content) this.commit();
    } else if (!this.sink.closed) {
      this.sink.write(frame);
    }
  }

  /** Starts the buyer's stream and flushes the withheld frames; once only. */
  commit(): void {
    if (this.isCommitted) return;
    this.isCommitted = true;
    clearTimeout(this.firstTimer);
    const { requestId, supportReference } = this.session;
    this.pipeline.markFirstByte(this.session);
    this.sink.start({
      "X-Svc-Request-Id": requestId,
      "X-Svc-Support-Reference": supportReference,
      "Server-Timing": serverTiming(this.session),
    });
    this.onStart();
    for (const f of this.pending.splice(0)) this.sink.write(f);
  }

  /** The upstream failed in-band before content: cuts it and falls forward. */
  async failBeforeContent(detail: string): Promise<"retry"> {
    this.upstreamAbort.abort();
    await this.pipeline.fallForward(this.session, { kind: "retryable", detail });
    return "retry";
  }

  /** The upstream closed before content: ends the request if the buyer left, else falls forward. */
  async closeBeforeContent(): Promise<"retry" | "done"> {
    if (this.sink.closed) {
      await this.pipeline.abort(this.session, "client_closed");
      return "done";
    }
    await this.pipeline.fallForward(this.session, {
      kind: "retryable",
      detail: "upstream stream closed before its first content",
    });
    return "retry";
  }
}
