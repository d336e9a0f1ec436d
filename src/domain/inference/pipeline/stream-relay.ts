import { readUpstreamSse, releaseBody, type UpstreamBody } from "../../../adapters/upstream/client.js";
import type { SseFrame } from "../../../lib/sse.js";
import type { IncompleteStream } from "../settlement/usage.js";
import { type AnswerFacts, streamStartFacts } from "./answer-facts.js";
import type { AttemptScope, Settled, Usage } from "./session.js";
import type { StreamSink } from "./sink.js";

/** A stream that sends no first content within this long is a failed attempt. */
export const FIRST_CONTENT_TIMEOUT_MS = 60_000;

/** A started stream silent this long is treated as truncated. */
export const STREAM_IDLE_TIMEOUT_MS = 120_000;

/**
 * What a frame handler tells `StreamRelay.pump`: `finished` (the upstream's last frame: the rest is
 * drained, the connection reused), `stop` (the upstream call is cut), `retry` (failed before
 * content: the attempt falls forward, see `failBeforeContent`).
 */
export type FrameVerdict = "finished" | "stop" | "retry";

/** How one upstream attempt's stream ended, as the modality read it. */
export interface RelayOutcome {
  verdict: FrameVerdict;
  /** the upstream's usage, when it finished with one */
  usage?: Usage | undefined;
}

/**
 * One streamed request as its modality renders it: the modality reads the upstream's frames and
 * writes its own; the pipeline's streamed ending decides what is billed and when the last frames go.
 */
export interface StreamRenderer {
  /** Relays one upstream attempt through `relay` (emit, commit, failBeforeContent); state is per attempt. */
  relayAttempt(relay: StreamRelay): Promise<RelayOutcome>;
  /** A finished answer with usage and no content still starts the buyer's stream (an empty answer is a result). */
  readonly emptyAnswerIsResult: boolean;
  /** What the buyer was shown, to bill a stream that ended without usage. */
  incomplete(): IncompleteStream;
  /** The last frames of a settled stream (usage, cost, terminator). */
  completedFrames(settled: Settled): string;
  /** The last frames of a stream billed on estimated usage. */
  incompleteFrames(settled: Settled): string;
  /** The in-band error after content, when settlement (or the request) failed. */
  errorFrame(e: unknown): string;
  /** What the upstream said about the attempt's answer so far (id, model, finish reasons, usage breakdowns), for its span. */
  answerFacts?(): AnswerFacts;
}

/**
 * The protocol-neutral half of relaying one upstream stream attempt, made before the attempt's
 * upstream call: its `signal` cuts that call when the buyer goes away, when no first content came
 * within `FIRST_CONTENT_TIMEOUT_MS`, and (once committed) when the upstream is silent for
 * `STREAM_IDLE_TIMEOUT_MS`. The upstream's answer is handed to it (`receive`); frames are withheld
 * until the first content commits the buyer's stream (so a failure before it falls forward
 * invisibly), then written as they come. `close` ends the attempt's timer and its buyer listener.
 */
export class StreamRelay {
  private readonly pending: string[] = [];
  private isCommitted = false;
  private idle: NodeJS.Timeout | undefined;
  private failure: string | undefined;
  private firstChunkAt: number | undefined;
  private body: UpstreamBody | undefined;
  private readonly upstreamAbort = new AbortController();
  private readonly cut = () => this.upstreamAbort.abort();
  private readonly firstTimer: NodeJS.Timeout;
  /** when the upstream call was issued (`performance.now()`; the time to its first chunk) */
  private readonly issuedAt: number;

  constructor(
    private readonly o: {
      /** the attempt being relayed */
      scope: AttemptScope;
      sink: StreamSink;
      /** the buyer's stream started */
      onStart: () => void;
    },
  ) {
    o.sink.signal.addEventListener("abort", this.cut, { once: true });
    this.firstTimer = setTimeout(this.cut, FIRST_CONTENT_TIMEOUT_MS);
    this.issuedAt = performance.now();
  }

  /** the attempt's upstream call: streamed, cut by this relay */
  get call(): { stream: true; signal: AbortSignal } {
    return { stream: true, signal: this.upstreamAbort.signal };
  }

  /** The upstream's answer: the stream `pump` reads. */
  receive(body: UpstreamBody): void {
    this.body = body;
  }

  /** The attempt is over: its first-content timer and its buyer listener go. */
  close(): void {
    clearTimeout(this.firstTimer);
    this.o.sink.signal.removeEventListener("abort", this.cut);
  }

  /** seconds from issuing the upstream call to its stream's first chunk (undefined before one came) */
  get timeToFirstChunkSeconds(): number | undefined {
    return this.firstChunkAt === undefined ? undefined : (this.firstChunkAt - this.issuedAt) / 1000;
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
    const body = this.body;
    if (!body) throw new Error("a relay pumped before the upstream answered");
    let verdict: FrameVerdict = "stop";
    try {
      for await (const frame of readUpstreamSse(body)) {
        this.firstChunkAt ??= performance.now();
        if (this.isCommitted) {
          if (this.idle) this.idle.refresh();
          else this.idle = setTimeout(this.cut, STREAM_IDLE_TIMEOUT_MS);
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
      releaseBody(body, verdict === "finished");
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
    clearTimeout(this.firstTimer);
    this.o.scope.firstByte();
    this.o.sink.start(streamStartFacts(this.o.scope.session));
    this.o.onStart();
    for (const f of this.pending.splice(0)) this.o.sink.write(f);
  }

  /** The upstream failed in-band before content: cuts it; the attempt falls forward on `detail`. */
  failBeforeContent(detail: string): "retry" {
    this.cut();
    this.failure = detail;
    return "retry";
  }

  /** Why the attempt failed before content (`failBeforeContent`). */
  get failedBeforeContent(): string {
    return this.failure ?? "upstream failed before content";
  }
}
