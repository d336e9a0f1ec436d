import type { OutgoingHttpHeaders } from "node:http";
import type { ApiContext } from "./context.js";
import { sleepUnlessClosed } from "./http-util.js";

const SSE_HEADERS: OutgoingHttpHeaders = {
  "content-type": "text/event-stream; charset=utf-8",
  "cache-control": "no-cache",
};

/**
 * Writes SSE frames: with no delay everything is buffered and sent in one write (cheap on the
 * benchmark path); with a delay, every content frame waits `delayMs` and is written on its own.
 */
export class FrameSink {
  private readonly pending: string[] = [];
  private started = false;

  constructor(
    private readonly ctx: ApiContext,
    private readonly headers: OutgoingHttpHeaders,
    private readonly delayMs: number,
  ) {}

  private start(): void {
    if (this.started) return;
    this.started = true;
    this.ctx.res.writeHead(200, { ...this.headers, ...SSE_HEADERS });
  }

  /** A frame sent immediately (no delay). */
  push(frame: string): void {
    if (this.delayMs > 0) {
      this.start();
      this.ctx.res.write(frame);
    } else {
      this.pending.push(frame);
    }
  }

  /** A content frame, preceded by the per-chunk delay. Returns false when the client went away. */
  async content(frame: string): Promise<boolean> {
    if (this.delayMs > 0) {
      this.start();
      if (!(await sleepUnlessClosed(this.ctx.res, this.delayMs))) return false;
      this.ctx.res.write(frame);
    } else {
      this.pending.push(frame);
    }
    return true;
  }

  /** Ends the response (headers first if nothing was written yet). */
  end(): void {
    if (this.ctx.res.destroyed) return;
    this.start();
    this.ctx.res.end(this.pending.length > 0 ? this.pending.join("") : undefined);
  }
}
