import type { CostFacts, StreamStartFacts } from "./answer-facts.js";

/**
 * Where an answer goes: the transport provides a sink (REST over `node:http` today, MCP later);
 * the pipeline writes the answer into it in the modality's shape.
 */

/** A streamed answer: the domain writes SSE text. */
export interface StreamSink {
  /** the stream starts (REST: status 200 and the stream headers, rendered from `facts`); once, before the first frame */
  start(facts: StreamStartFacts): void;
  write(text: string): void;
  end(): void;
  /** true once the buyer went away */
  readonly closed: boolean;
  /** aborts when the buyer goes away */
  readonly signal: AbortSignal;
}

/** A buffered answer: the JSON body (or the modality's answer a transport presents) and what it cost (the transport renders it: REST's cost headers, MCP's fields). */
export interface BufferedResult<A = Record<string, unknown>> {
  body: A;
  cost: CostFacts;
}
