/**
 * Where an answer goes: the transport provides a sink (REST over `node:http` today, MCP later);
 * the pipeline writes the answer into it in the modality's shape.
 */

/** A streamed answer: the domain writes SSE text. */
export interface StreamSink {
  /** sends status 200 and the stream headers; called once, before the first frame */
  start(headers: Record<string, string>): void;
  write(text: string): void;
  end(): void;
  /** true once the buyer went away */
  readonly closed: boolean;
  /** aborts when the buyer goes away */
  readonly signal: AbortSignal;
}

/** A buffered answer: the JSON body and the headers (cost, support reference, Server-Timing). */
export interface BufferedResult {
  body: Record<string, unknown>;
  headers: Record<string, string>;
}
