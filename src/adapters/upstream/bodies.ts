import type { IncomingHttpHeaders } from "node:http";
import type { Dispatcher } from "undici";
import { upstreamDecimalToMicro } from "../../lib/money.js";
import { readSse, type SseFrame } from "../../lib/sse.js";
import { headerOf } from "./failures.js";

/**
 * An upstream answer's body once the call succeeded: the 2xx shapes, the DIEM balance its headers
 * report, and how a body is read as SSE or released (drained for reuse, or destroyed).
 */

/** An upstream response body: a Node Readable with `.text()`, `.json()` and `.dump()`. */
export type UpstreamBody = Dispatcher.ResponseData["body"];

/** A 2xx answer of a buffered `inference()` call, read and parsed. */
export interface UpstreamJson {
  status: number;
  headers: IncomingHttpHeaders;
  json: unknown;
}

/**
 * A 2xx answer of a streamed `inference()` call: the caller owns `body` and must consume it or
 * release it (`releaseBody`).
 */
export interface UpstreamResponse {
  status: number;
  headers: IncomingHttpHeaders;
  body: UpstreamBody;
  /**
   * The key's DIEM balance before this call as the upstream reports it (`x-venice-balance-diem`,
   * VENICE_API §3 "Response headers"), micro-DIEM, never below 0; null when absent or unreadable
   * (the upstream leaves it out when the account has no DIEM).
   */
  diemBalanceMicro: bigint | null;
}
/**
 * `x-venice-balance-diem` → micro-DIEM (the same decimal reading as the rate-limits balance:
 * `upstreamDecimalToMicro`); a negative balance (DIEM may go slightly below zero) is 0; absent or
 * not a decimal: null.
 */
export function reportedDiemBalance(headers: IncomingHttpHeaders): bigint | null {
  const v = headerOf(headers, "x-venice-balance-diem");
  if (v === undefined || v.trim() === "") return null;
  try {
    const m = upstreamDecimalToMicro(v);
    return m < 0n ? 0n : m;
  } catch {
    return null;
  }
}

const noop = () => undefined;
/** The most a finished body is drained for its connection to be reused; beyond it, it is closed. */
const DRAIN_LIMIT_BYTES = 64 * 1024;

/**
 * Frees a body that will not be read further. `finished`: the upstream already sent its last event
 * (`[DONE]`, a terminal event, an empty answer), so the rest (usually just the end of the chunked
 * encoding) is drained and the keep-alive connection goes back to the pool. Otherwise the body is
 * destroyed, which closes the connection and stops the upstream. Idempotent; never throws.
 */
export function releaseBody(body: UpstreamBody, finished = false): void {
  if (body.destroyed || body.readableEnded) return;
  // undici's body emits `error` (RequestAbortedError) when destroyed before its end: nobody reads it now
  body.on("error", noop);
  if (!finished) {
    body.destroy();
    return;
  }
  let left = DRAIN_LIMIT_BYTES;
  body.on("data", (chunk: Buffer) => {
    left -= chunk.length;
    if (left < 0) body.destroy();
  });
  body.resume();
}

/**
 * Yields each complete frame of an upstream SSE body (`readSse` over the Node stream). Breaking out
 * of the loop leaves the body open (release it with `releaseBody`); a read error destroys it.
 */
export function readUpstreamSse(body: UpstreamBody): AsyncGenerator<SseFrame> {
  return readSse(body.iterator({ destroyOnReturn: false }) as AsyncIterable<Buffer>);
}
