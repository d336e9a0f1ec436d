/** Server-sent events: a small incremental parser for upstream streams, and the frame writers every stream uses. */
export interface SseFrame {
  event?: string;
  data: string;
}

/**
 * Yields each complete frame of an SSE byte stream (`\n\n`-separated; `data:` lines joined). Takes
 * any async iterable of bytes: a web ReadableStream, or a Node stream's iterator.
 */
export async function* readSse(body: AsyncIterable<Uint8Array>): AsyncGenerator<SseFrame> {
  const decoder = new TextDecoder();
  let buf = "";
  for await (const chunk of body) {
    buf += decoder.decode(chunk, { stream: true }).replace(/\r\n/g, "\n");
    let idx = buf.indexOf("\n\n");
    while (idx >= 0) {
      const block = buf.slice(0, idx);
      buf = buf.slice(idx + 2);
      const frame = parseBlock(block);
      if (frame) yield frame;
      idx = buf.indexOf("\n\n");
    }
  }
  const tail = parseBlock(buf.trim());
  if (tail) yield tail;
}

function parseBlock(block: string): SseFrame | undefined {
  let event: string | undefined;
  const data: string[] = [];
  for (const line of block.split("\n")) {
    if (line.startsWith(":") || line === "") continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
    if (field === "event") event = value;
    else if (field === "data") data.push(value);
  }
  if (data.length === 0) return undefined;
  return { event, data: data.join("\n") };
}

export function eventFrame(event: string, payload: unknown): string {
  return `event: ${event}\ndata: ${JSON.stringify(payload)}\n\n`;
}

/** A `data:` frame carrying `payload` as JSON (OpenAI chat-completion chunks). */
export function dataFrame(payload: unknown): string {
  return `data: ${JSON.stringify(payload)}\n\n`;
}

/**
 * THE in-band error frame of a `data:` stream (SPEC "Events" Chat SSE 5–6): once bytes are
 * written, a failure is an `{"error":{code,message[,supportReference]}}` frame, not a status.
 */
export function errorFrame(code: string, message: string, supportReference?: string): string {
  return dataFrame({ error: supportReference ? { code, message, supportReference } : { code, message } });
}
