import { readUpstreamSse, releaseBody, type UpstreamBody } from "../../adapters/upstream/client.js";
import type { SseFrame } from "../../lib/sse.js";
import { streamStartFacts } from "./answer-facts.js";
import type { AttemptScope } from "./session.js";
import type { StreamSink } from "./sink.js";

/** A started stream silent this long is treated as truncated. */
export const STREAM_IDLE_TIMEOUT_MS = 120_000;

/**
 * What a frame handler tells `StreamRelay.pump`: `finished` (the upstream's last frame: the rest is
 * drained, the connection reused), `stop` (the upstream call is cut), `retry` (failed before
 * content: the attempt falls forward, see `failBeforeContent`).
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
  private failure: string | undefined;
  private firstChunkAt: number | undefined;

  constructor(
    private readonly o: {
      /** the attempt being relayed */
      scope: AttemptScope;
      sink: StreamSink;
      /** the upstream's stream */
      body: UpstreamBody;
      /** cuts the upstream call */
      upstreamAbort: AbortController;
      /** the first-content timer (cleared when the stream commits) */
      firstTimer: NodeJS.Timeout;
      /** the buyer's stream started */
      onStart: () => void;
      /** when the upstream call was issued (`performance.now()`; the time to its first chunk) */
      issuedAt: number;
    },
  ) {}

  /** seconds from issuing the upstream call to its stream's first chunk (undefined before one came) */
  get timeToFirstChunkSeconds(): number | undefined {
    return this.firstChunkAt === undefined ? undefined : (this.firstChunkAt - this.o.issuedAt) / 1000;
  }

  /** true once the buyer's stream started (the sink told its start) */
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
      for await (const frame of readUpstreamSse(this.o.body)) {
        this.firstChunkAt ??= performance.now();
        if (this.isCommitted) {
          if (this.idle) this.idle.refresh();
          else this.idle = setTimeout(() => this.o.upstreamAbort.abort(), STREAM_IDLE_TIMEOUT_MS);
          void this.o.scope.renew().catch(() => undefined);
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
      releaseBody(this.o.body, verdict === "finished");
    }
    return verdict;
  }

  /** Withholds `frame` until content arrives (`content` commits the stream), then writes it. */
  emit(frame: string, content: boolean): void {
    if (!this.isCommitted) {
      this.pending.push(frame);
      if (content) this.commit();
    } else if (!this.o.sink.closed) {
      this.o.sink.write(frame);
    }
  }

  /** Starts the buyer's stream and flushes the withheld frames; once only. */
  commit(): void {
    if (this.isCommitted) return;
    this.isCommitted = true;
    clearTimeout(this.o.firstTimer);
    this.o.scope.firstByte();
    this.o.sink.start(streamStartFacts(this.o.scope.session));
    this.o.onStart();
    for (const f of this.pending.splice(0)) this.o.sink.write(f);
  }

  /** The upstream failed in-band before content: cuts it; the attempt falls forward on `detail`. */
  failBeforeContent(detail: string): "retry" {
    this.o.upstreamAbort.abort();
    this.failure = detail;
    return "retry";
  }

  /** Why the attempt failed before content (`failBeforeContent`). */
  get failedBeforeContent(): string {
    return this.failure ?? "upstream failed before content";
  }
}
