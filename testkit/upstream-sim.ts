import type { SimKeyInit, UpstreamSimulator } from "../src/local/upstream-sim/index.js";
import { startUpstreamSimulator } from "../src/local/upstream-sim/index.js";

export interface SseFrame {
  event: string | null;
  data: string;
}

/** Splits an SSE body into frames (`event:` + joined `data:` lines); comments are skipped. */
export function parseSse(text: string): SseFrame[] {
  const frames: SseFrame[] = [];
  for (const block of text.split("\n\n")) {
    if (block.trim() === "") continue;
    let event: string | null = null;
    const data: string[] = [];
    for (const line of block.split("\n")) {
      if (line.startsWith("event:")) event = line.slice(6).trim();
      else if (line.startsWith("data:")) data.push(line.slice(5).trimStart());
    }
    if (data.length > 0 || event !== null) frames.push({ event, data: data.join("\n") });
  }
  return frames;
}

/** JSON payloads of the data frames, excluding the `[DONE]` terminator. */
export function jsonFrames(frames: SseFrame[]): Record<string, unknown>[] {
  return frames.filter((f) => f.data !== "[DONE]").map((f) => JSON.parse(f.data) as Record<string, unknown>);
}

export async function startSim(keys: SimKeyInit[] = [], now?: () => Date): Promise<UpstreamSimulator> {
  return startUpstreamSimulator({ port: 0, keys, now });
}

export function post(
  sim: UpstreamSimulator,
  path: string,
  body: unknown,
  key: string | null = "k1",
): Promise<Response> {
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (key !== null) headers.authorization = `Bearer ${key}`;
  return fetch(`${sim.baseUrl}${path}`, { method: "POST", headers, body: JSON.stringify(body) });
}

export function get(sim: UpstreamSimulator, path: string, key: string | null = "k1"): Promise<Response> {
  const headers: Record<string, string> = {};
  if (key !== null) headers.authorization = `Bearer ${key}`;
  return fetch(`${sim.baseUrl}${path}`, { headers });
}

export function admin(sim: UpstreamSimulator, method: string, path: string, body?: unknown): Promise<Response> {
  return fetch(`${sim.adminUrl}${path}`, {
    method,
    headers: body === undefined ? {} : { "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
}

export function userMessage(content: string): { role: "user"; content: string }[] {
  return [{ role: "user", content }];
}

export function diemOf(sim: UpstreamSimulator, key = "k1"): bigint {
  const snapshot = sim.state.getKey(key);
  if (!snapshot) throw new Error(`no key ${key}`);
  return snapshot.diemMicro;
}

/** Reads a body that may be cut short (truncated / dropped streams); returns what arrived. */
export async function readAllowingTruncation(res: Response): Promise<{ text: string; error: unknown }> {
  const reader = res.body?.getReader();
  if (!reader) return { text: "", error: null };
  const decoder = new TextDecoder();
  let text = "";
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
    }
    return { text, error: null };
  } catch (error) {
    return { text, error };
  }
}
