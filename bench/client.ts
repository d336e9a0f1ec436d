// The bench's load client: a lean keep-alive `node:http` client (the load generator must not be the
// bottleneck), with the timings a stream needs (first content, last content, the usage chunk, the
// cost frame), closed-loop load and serial interleaving.
import http from "node:http";
import { performance } from "node:perf_hooks";

/** One answer, timed from the moment the request was written (ms). */
export interface Sample {
  status: number;
  totalMs: number;
  /** buffered: the response head; streamed: the first content frame */
  ttfbMs: number;
  /** streamed: the last content frame */
  lastContentMs: number;
  /** streamed: the usage chunk (chat) or `response.completed` (Responses), as the upstream sends them */
  usageMs: number;
  /** streamed through the service: the `svc.cost` frame (chat) or `response.completed` with `costUsdc` */
  costMs: number;
  costUsdc?: string;
  supportReference?: string;
  serverTiming?: string;
}

/** How a stream marks its content: chat chunks or Responses events. */
export type StreamKind = "chat" | "responses";

const CONTENT: Record<StreamKind, RegExp> = {
  chat: /"content":"[^"]/,
  responses: /"type":"response\.output_text\.delta"/,
};

export const agent = new http.Agent({ keepAlive: true, maxSockets: 512 });

/** Classifies each complete SSE frame of a stream as it arrives and stamps the sample. */
function frameTimer(kind: StreamKind, s: Sample, t0: number) {
  let buf = "";
  return (chunk: string) => {
    buf += chunk;
    let end = buf.indexOf("\n\n");
    if (end < 0) return;
    const now = performance.now() - t0;
    while (end >= 0) {
      const frame = buf.slice(0, end);
      buf = buf.slice(end + 2);
      end = buf.indexOf("\n\n");
      if (CONTENT[kind].test(frame)) {
        if (!s.ttfbMs) s.ttfbMs = now;
        s.lastContentMs = now;
      } else if (kind === "chat" && frame.includes('"object":"svc.cost"')) {
        s.costMs = now;
        const cost = JSON.parse(frame.slice(frame.indexOf("{"))) as { costUsdc: string; supportReference: string };
        s.costUsdc = cost.costUsdc;
        s.supportReference = cost.supportReference;
      } else if (kind === "chat" && !s.usageMs && frame.includes('"usage":{')) {
        s.usageMs = now;
      } else if (kind === "responses" && frame.startsWith("event: response.completed")) {
        s.usageMs = now;
        if (frame.includes('"costUsdc"')) {
          s.costMs = now;
          const done = JSON.parse(frame.slice(frame.indexOf("{"))) as { costUsdc: string; supportReference: string };
          s.costUsdc = done.costUsdc;
          s.supportReference = done.supportReference;
        }
      }
    }
  };
}

/**
 * POSTs `body` (with `stream: true` when `stream` is given) and resolves with its timings once the
 * answer has ended; any status but 200 rejects, and so does a reset or error of the request or of
 * the response (without a listener, a response's ECONNRESET would be an uncaught error that ends the
 * process). `headers` go out beside the key and content type (Portkey's routing headers).
 */
export function post(
  url: string,
  key: string,
  body: unknown,
  stream?: StreamKind,
  headers?: Record<string, string>,
): Promise<Sample> {
  const payload = JSON.stringify(stream ? { ...(body as object), stream: true } : body);
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const s: Sample = { status: 0, totalMs: 0, ttfbMs: 0, lastContentMs: 0, usageMs: 0, costMs: 0 };
    const t0 = performance.now();
    const req = http.request(
      {
        agent,
        host: u.hostname,
        port: u.port,
        path: u.pathname,
        method: "POST",
        headers: {
          ...headers,
          authorization: `Bearer ${key}`,
          "content-type": "application/json",
          "content-length": Buffer.byteLength(payload),
        },
      },
      (res) => {
        s.status = res.statusCode ?? 0;
        if (!stream) s.ttfbMs = performance.now() - t0;
        const st = res.headers["server-timing"];
        if (typeof st === "string") s.serverTiming = st;
        const ref = res.headers["x-svc-support-reference"];
        if (typeof ref === "string") s.supportReference = ref;
        const cost = res.headers["x-svc-cost-usdc"];
        if (typeof cost === "string") s.costUsdc = cost;
        res.setEncoding("utf8");
        const onFrames = stream && s.status === 200 ? frameTimer(stream, s, t0) : null;
        let errorBody = "";
        res.on("data", (d: string) => {
          if (onFrames) onFrames(d);
          else if (s.status !== 200 && errorBody.length < 300) errorBody += d;
        });
        res.on("end", () => {
          s.totalMs = performance.now() - t0;
          if (s.status !== 200) reject(new Error(`${u.pathname}: status ${s.status} ${errorBody.slice(0, 300)}`));
          else resolve(s);
        });
        res.on("error", reject);
        // a response cut short ends in `close` without `end` (an `error` first, on current Node)
        res.on("close", () => {
          if (!res.complete) reject(new Error(`${u.pathname}: the response was cut short`));
        });
      },
    );
    req.on("error", reject);
    req.end(payload);
  });
}

/** What `load` measured: the answered requests' samples, the wall time, and how many failed. */
export interface LoadResult {
  samples: Sample[];
  wallMs: number;
  /** requests that failed (a status but 200, a reset, an error): no sample; `load` throws past 1% */
  errors: number;
}

/** A load with more failed requests than this share of its total ends the run. */
export const MAX_ERROR_SHARE = 0.01;

/**
 * `total` requests from `concurrency` closed-loop workers; the samples of those answered and the wall
 * time. A failed request is counted and the worker carries on (one reset in thousands says nothing
 * of the system under load); more than `MAX_ERROR_SHARE` of `total` failing stops the load and
 * throws, with the first failure as its cause.
 */
export async function load(
  total: number,
  concurrency: number,
  one: (i: number) => Promise<Sample>,
): Promise<LoadResult> {
  const samples: Sample[] = [];
  const budget = Math.floor(total * MAX_ERROR_SHARE);
  let errors = 0;
  let first: unknown;
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < total) {
        const i = next++;
        try {
          samples.push(await one(i));
        } catch (e) {
          errors++;
          first ??= e;
          if (errors > budget) next = total;
        }
      }
    }),
  );
  const wallMs = performance.now() - t0;
  if (errors > budget) {
    const why = first instanceof Error ? first.message : String(first);
    throw new Error(`load: ${errors} requests failed, over ${MAX_ERROR_SHARE * 100}% of ${total}; the first: ${why}`, {
      cause: first,
    });
  }
  return { samples, wallMs, errors };
}

/**
 * Serial and interleaved: round r sends one request to each target in turn, one at a time, the
 * order rotated every round, so whatever else the machine does hits every target alike.
 */
export async function interleave<T extends Record<string, (i: number) => Promise<Sample>>>(
  rounds: number,
  targets: T,
): Promise<{ [K in keyof T]: Sample[] }> {
  type K = keyof T & string;
  const names = Object.keys(targets) as K[];
  const out = Object.fromEntries(names.map((n) => [n, [] as Sample[]])) as { [P in keyof T]: Sample[] };
  for (let r = 0; r < rounds; r++) {
    for (let j = 0; j < names.length; j++) {
      const name = names[(r + j) % names.length] as K;
      out[name].push(await (targets[name] as T[K])(r));
    }
  }
  return out;
}
