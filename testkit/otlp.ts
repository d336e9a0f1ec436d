import { createServer, type IncomingMessage, type Server } from "node:http";
import { gunzipSync, inflateSync } from "node:zlib";

/**
 * An OTLP/HTTP trace receiver on 127.0.0.1, in process: what an OpenTelemetry collector would be
 * to the service (OTEL_EXPORTER_OTLP_ENDPOINT = `url`). It decodes the exporter's JSON
 * (`ExportTraceServiceRequest`, gzip or deflate when the exporter compresses) into flat spans, or,
 * with `keep: false`, only counts them (the bench's sink: accept and discard).
 */

/** One received span, flattened: ids as hex, attributes as plain values, `service` from its resource. */
export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  /** empty for a root span */
  parentSpanId: string;
  name: string;
  kind: "internal" | "server" | "client" | "producer" | "consumer" | "unspecified";
  attributes: Record<string, string | number | boolean | unknown[]>;
  /** 0 unset, 1 ok, 2 error */
  statusCode: number;
  service: string;
  startNs: bigint;
  endNs: bigint;
}

export interface OtlpReceiver {
  /** the base endpoint (`OTEL_EXPORTER_OTLP_ENDPOINT`); traces arrive at `<url>/v1/traces` */
  url: string;
  /** every span received so far (empty with `keep: false`) */
  spans: ReceivedSpan[];
  /** how many spans and export requests arrived, and their bytes on the wire */
  counts: { spans: number; requests: number; bytes: number };
  /** the spans matching `match` once `done` holds for them, polled (the exporter sends in batches) */
  waitFor(
    match: (s: ReceivedSpan) => boolean,
    done: (found: ReceivedSpan[]) => boolean,
    timeoutMs?: number,
  ): Promise<ReceivedSpan[]>;
  close(): Promise<void>;
}

const KINDS: ReceivedSpan["kind"][] = ["unspecified", "internal", "server", "client", "producer", "consumer"];

type AnyValue = {
  stringValue?: string;
  intValue?: number | string;
  doubleValue?: number;
  boolValue?: boolean;
  arrayValue?: { values?: AnyValue[] };
};
type KeyValue = { key: string; value: AnyValue };
type JsonSpan = {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind?: number;
  attributes?: KeyValue[];
  status?: { code?: number };
  startTimeUnixNano: string | number;
  endTimeUnixNano: string | number;
};
type ExportRequest = {
  resourceSpans?: { resource?: { attributes?: KeyValue[] }; scopeSpans?: { spans?: JsonSpan[] }[] }[];
};

function anyValue(v: AnyValue): string | number | boolean | unknown[] {
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.doubleValue !== undefined) return v.doubleValue;
  if (v.boolValue !== undefined) return v.boolValue;
  if (v.arrayValue) return (v.arrayValue.values ?? []).map(anyValue);
  return "";
}

function attrsOf(kvs: KeyValue[] | undefined): ReceivedSpan["attributes"] {
  return Object.fromEntries((kvs ?? []).map((kv) => [kv.key, anyValue(kv.value)]));
}

/** Flattens one export request's spans. */
export function decodeExport(body: ExportRequest): ReceivedSpan[] {
  const out: ReceivedSpan[] = [];
  for (const rs of body.resourceSpans ?? []) {
    const service = String(attrsOf(rs.resource?.attributes)["service.name"] ?? "");
    for (const ss of rs.scopeSpans ?? []) {
      for (const s of ss.spans ?? []) {
        out.push({
          traceId: s.traceId,
          spanId: s.spanId,
          parentSpanId: s.parentSpanId ?? "",
          name: s.name,
          kind: KINDS[s.kind ?? 0] ?? "unspecified",
          attributes: attrsOf(s.attributes),
          statusCode: s.status?.code ?? 0,
          service,
          startNs: BigInt(s.startTimeUnixNano),
          endNs: BigInt(s.endTimeUnixNano),
        });
      }
    }
  }
  return out;
}

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => resolve(Buffer.concat(chunks)));
    req.on("error", reject);
  });
}

function decompress(raw: Buffer, encoding: string | undefined): Buffer {
  if (encoding === "gzip") return gunzipSync(raw);
  if (encoding === "deflate") return inflateSync(raw);
  return raw;
}

/** Starts a receiver; `keep: false` only counts what arrives (nothing is parsed or kept). */
export async function startOtlpReceiver(opts: { keep?: boolean } = {}): Promise<OtlpReceiver> {
  const keep = opts.keep ?? true;
  const spans: ReceivedSpan[] = [];
  const counts = { spans: 0, requests: 0, bytes: 0 };
  const server: Server = createServer(async (req, res) => {
    const raw = await readBody(req);
    counts.requests++;
    counts.bytes += raw.length;
    if (req.method !== "POST" || req.url !== "/v1/traces") {
      res.writeHead(404).end();
      return;
    }
    try {
      const text = decompress(raw, req.headers["content-encoding"]).toString("utf8");
      if (keep) {
        const found = decodeExport(JSON.parse(text) as ExportRequest);
        spans.push(...found);
        counts.spans += found.length;
      } else {
        // counted, not decoded: one `spanId` per span (a link's would count too; the service makes none)
        counts.spans += text.split('"spanId":').length - 1;
      }
    } catch {
      res.writeHead(400, { "content-type": "application/json" }).end('{"error":"undecodable"}');
      return;
    }
    res.writeHead(200, { "content-type": "application/json" }).end("{}");
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  const url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  return {
    url,
    spans,
    counts,
    async waitFor(match, done, timeoutMs = 10_000) {
      const end = Date.now() + timeoutMs;
      for (;;) {
        const found = spans.filter(match);
        if (done(found)) return found;
        if (Date.now() > end) {
          throw new Error(`OTLP receiver: spans not complete within ${timeoutMs} ms (${found.length} matched)`);
        }
        await new Promise((r) => setTimeout(r, 50));
      }
    },
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
