import type { TestApp } from "../harness.js";

/**
 * One answer from any transport, as the access matrix reads it: the status, the parsed body, and
 * `text` (the raw body plus every response header value) for the leak search.
 */
export interface Reply {
  status: number;
  body: unknown;
  headers: Headers;
  text: string;
}

export type HeaderMap = Record<string, string>;

async function reply(res: Response): Promise<Reply> {
  const raw = await res.text();
  let body: unknown = raw;
  try {
    body = JSON.parse(raw);
  } catch {}
  const headerText = [...res.headers.entries()].map(([k, v]) => `${k}: ${v}`).join("\n");
  return { status: res.status, body, headers: res.headers, text: `${raw}\n${headerText}` };
}

export function cookie(value: string): HeaderMap {
  return { cookie: value };
}

/** A REST call (JSON body when one is given). */
export async function rest(app: TestApp, method: string, path: string, headers: HeaderMap, body?: unknown) {
  const res = await fetch(`${app.baseUrl}${path}`, {
    method,
    headers: { ...(body !== undefined ? { "content-type": "application/json" } : {}), ...headers },
    body: body !== undefined ? JSON.stringify(body) : undefined,
  });
  return reply(res);
}

export interface GqlError {
  message: string;
  extensions?: { code?: string; status?: number };
}

/** A GraphQL POST from our own origin (cookie-authenticated writes need it; harmless otherwise). */
export async function gql(app: TestApp, query: string, variables: Record<string, unknown>, headers: HeaderMap) {
  const res = await fetch(`${app.baseUrl}/graphql`, {
    method: "POST",
    headers: { "content-type": "application/json", origin: new URL(app.baseUrl).origin, ...headers },
    body: JSON.stringify({ query, variables }),
  });
  return reply(res);
}

export function gqlParts(r: Reply): { data: Record<string, unknown> | null; errors: GqlError[] | undefined } {
  const b = (r.body ?? {}) as { data?: Record<string, unknown> | null; errors?: GqlError[] };
  return { data: b.data ?? null, errors: b.errors };
}

/**
 * One MCP `tools/call` as a raw JSON-RPC POST (the connector is stateless: no initialize needed),
 * at `mcpPath` (`{mcp_url}/mcp` on this listener).
 */
export async function mcpTool(app: TestApp, mcpPath: string, name: string, args: unknown, headers: HeaderMap) {
  const res = await fetch(`${app.baseUrl}${mcpPath}`, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json, text/event-stream", ...headers },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name, arguments: args } }),
  });
  return reply(res);
}

/** A tool call's result: `isError`, the structured content, and the text content parsed as JSON. */
export function toolResult(r: Reply): {
  isError: boolean;
  structured: Record<string, unknown> | undefined;
  json: unknown;
} {
  const result = (
    r.body as {
      result?: {
        isError?: boolean;
        structuredContent?: Record<string, unknown>;
        content?: { type: string; text?: string }[];
      };
    }
  )?.result;
  const text = result?.content?.[0]?.type === "text" ? (result.content[0].text ?? "") : "";
  let json: unknown = text;
  try {
    json = JSON.parse(text);
  } catch {}
  return { isError: result?.isError === true, structured: result?.structuredContent, json };
}
