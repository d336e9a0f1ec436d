import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from "node:http";

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json | undefined };

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Upstream caps request bodies at 35 MB (413 PAYLOAD_TOO_LARGE above). */
export const MAX_BODY_BYTES = 35 * 1024 * 1024;

export type BodyResult =
  | { ok: true; value: unknown; empty: boolean }
  | { ok: false; aborted: false; status: number; body: Json }
  | { ok: false; aborted: true };

/** Reads and parses a JSON body. `aborted` means the client went away while sending it. */
export function readJsonBody(req: IncomingMessage): Promise<BodyResult> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let done = false;
    const finish = (result: BodyResult): void => {
      if (done) return;
      done = true;
      resolve(result);
    };
    req.on("data", (chunk: Buffer) => {
      if (done) return;
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        finish({
          ok: false,
          aborted: false,
          status: 413,
          body: { code: "PAYLOAD_TOO_LARGE", error: "Request body is too large" },
        });
        req.resume();
        return;
      }
      chunks.push(chunk);
    });
    req.on("end", () => {
      if (size === 0) {
        finish({ ok: true, value: undefined, empty: true });
        return;
      }
      const text =
        chunks.length === 1 && chunks[0] ? chunks[0].toString("utf8") : Buffer.concat(chunks).toString("utf8");
      try {
        finish({ ok: true, value: JSON.parse(text), empty: false });
      } catch {
        finish({ ok: false, aborted: false, status: 400, body: { error: "Invalid JSON request" } });
      }
    });
    req.on("error", () => finish({ ok: false, aborted: true }));
    req.on("close", () => finish({ ok: false, aborted: true }));
  });
}

export function sendJson(res: ServerResponse, status: number, body: unknown, headers: OutgoingHttpHeaders = {}): void {
  if (res.headersSent || res.destroyed) return;
  const text = JSON.stringify(body);
  headers["content-type"] = "application/json; charset=utf-8";
  headers["content-length"] = Buffer.byteLength(text);
  res.writeHead(status, headers);
  res.end(text);
}

/** Resolves true after `ms`, or false as soon as the response closes (client gone / server closing). */
export function sleepUnlessClosed(res: ServerResponse, ms: number): Promise<boolean> {
  if (res.destroyed || res.closed) return Promise.resolve(false);
  if (ms <= 0) return Promise.resolve(true);
  return new Promise((resolve) => {
    const onClose = (): void => {
      clearTimeout(timer);
      resolve(false);
    };
    const timer = setTimeout(() => {
      res.off("close", onClose);
      resolve(true);
    }, ms);
    res.once("close", onClose);
  });
}

/** Zod-like issue, the `issues[]` entries of upstream's DetailedError. */
export interface Issue {
  code: string;
  message: string;
  path: (string | number)[];
  keys?: string[];
  expected?: string;
  received?: string;
}

/** Upstream DetailedError: `{"error":"Invalid request parameters","details":{…nested _errors…},"issues":[…]}`. */
export function detailedError(issues: Issue[]): Json {
  const details: { [key: string]: Json } = { _errors: [] };
  for (const issue of issues) {
    if (issue.path.length === 0) {
      (details._errors as Json[]).push(issue.message);
      continue;
    }
    let node = details;
    for (const segment of issue.path) {
      const name = String(segment);
      const next = node[name];
      if (isRecord(next)) {
        node = next as { [key: string]: Json };
      } else {
        const created: { [key: string]: Json } = { _errors: [] };
        node[name] = created;
        node = created;
      }
    }
    (node._errors as Json[]).push(issue.message);
  }
  return {
    error: "Invalid request parameters",
    details,
    issues: issues.map((i) => {
      const out: { [key: string]: Json } = { code: i.code, message: i.message, path: i.path };
      if (i.keys) out.keys = i.keys;
      if (i.expected) out.expected = i.expected;
      if (i.received) out.received = i.received;
      return out;
    }),
  };
}

export function typeName(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  return typeof value;
}

/** Normalises a route filter: "chat/completions", "/api/v1/chat/completions" → "/chat/completions". */
export function normalizeRoute(route: string): string {
  let r = route.trim();
  if (r.startsWith("/api/v1")) r = r.slice("/api/v1".length);
  if (!r.startsWith("/")) r = `/${r}`;
  return r.length > 1 && r.endsWith("/") ? r.slice(0, -1) : r;
}

export function typeIssue(path: (string | number)[], expected: string, value: unknown): Issue {
  const received = typeName(value);
  return { code: "invalid_type", expected, received, path, message: `Expected ${expected}, received ${received}` };
}
