/**
 * HTTP front of the upstream simulator, on bare `node:http` (it sits on the benchmark path: no
 * per-request logging, no framework, responses serialised once).
 */
import { randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { Socket } from "node:net";
import {
  buildModelsBodies,
  handleAdminOnly,
  handleListModels,
  handleRateLimits,
  MSG_AUTH_FAILED,
  sendX402Discovery,
} from "./account.js";
import { handleAdmin } from "./admin.js";
import { MSG_INSUFFICIENT_BALANCE, MSG_OVERLOADED, MSG_RATE_LIMIT, MSG_SPEND_LIMIT } from "./admission.js";
import { textPricingToMicro } from "./burn.js";
import { DEFAULT_SIM_MODELS } from "./catalog.js";
import { handleChatCompletions } from "./chat.js";
import { type ApiContext, type ApiRoute, resolveModel, type SimRuntime, sendApiError, sendApiJson } from "./context.js";
import { type SimFaultEntry, STREAM_ONLY_FAULTS } from "./faults.js";
import { isRecord, normalizeRoute, readJsonBody, sendJson, sleepUnlessClosed } from "./http-util.js";
import { handleImageGenerate, handleImagesGenerations } from "./images.js";
import type { SimKeyInit, SimKeyRecord } from "./keys.js";
import { normalizeModelId, type SimModel } from "./models.js";
import { refuseAccess, sendRefusalFault } from "./refusals.js";
import { handleResponses } from "./responses.js";
import { SimState } from "./state.js";
import {
  handleMediaDownload,
  handleVideoComplete,
  handleVideoQueue,
  handleVideoQuote,
  handleVideoRetrieve,
} from "./video.js";

export interface UpstreamSimulatorOptions {
  /** listen port; 0 (default) picks a free one */
  port?: number;
  /** bind address (default 127.0.0.1) */
  host?: string;
  /** injectable base clock (admin/state clock offsets are applied on top) */
  now?: () => Date;
  keys?: SimKeyInit[];
  /** replaces the default catalog (DEFAULT_SIM_MODELS) */
  models?: SimModel[];
}

export interface UpstreamSimulator {
  /** the UPSTREAM_BASE_URL value, e.g. http://127.0.0.1:PORT/api/v1 */
  baseUrl: string;
  /** e.g. http://127.0.0.1:PORT/__admin */
  adminUrl: string;
  port: number;
  state: SimState;
  models: readonly SimModel[];
  /** closes the server and destroys every open socket (pending streams and `timeout` faults included) */
  close(): Promise<void>;
}

/**
 * Route table, keyed "METHOD /path" below /api/v1. Media routes live in images.ts (§5) and video.ts (§6).
 */
export const API_ROUTES: ReadonlyMap<string, ApiRoute> = new Map<string, ApiRoute>([
  ["GET /models", { auth: "optional", inference: false, handler: handleListModels }],
  ["GET /api_keys/rate_limits", { auth: "required", inference: false, handler: handleRateLimits }],
  ["POST /chat/completions", { auth: "required", inference: true, handler: handleChatCompletions }],
  ["POST /responses", { auth: "required", inference: true, handler: handleResponses }],
  ["POST /image/generate", { auth: "required", inference: true, handler: handleImageGenerate }],
  ["POST /images/generations", { auth: "required", inference: true, handler: handleImagesGenerations }],
  ["POST /video/quote", { auth: "required", inference: true, handler: handleVideoQuote }],
  ["POST /video/queue", { auth: "required", inference: true, handler: handleVideoQueue }],
  ["POST /video/retrieve", { auth: "required", inference: true, handler: handleVideoRetrieve }],
  ["POST /video/complete", { auth: "required", inference: true, handler: handleVideoComplete }],
]);

const KNOWN_PATHS = new Set([...API_ROUTES.keys()].map((k) => k.slice(k.indexOf(" ") + 1)));

/** ADMIN-key-only routes: an inference key gets 401 "Admin API key required". */
function isAdminOnlyRoute(route: string): boolean {
  if (route === "/api_keys/rate_limits") return false;
  return (
    route === "/api_keys" || route.startsWith("/api_keys/") || route === "/billing" || route.startsWith("/billing/")
  );
}

function parseBearer(header: string | undefined): string | null {
  if (!header) return null;
  const match = /^Bearer\s+(.+)$/i.exec(header.trim());
  return match?.[1] ? match[1].trim() : null;
}

const MSG_TIMEOUT =
  "Request timed out. Non-streaming requests must finish within the time limit; use the streaming API for long generations.";

/** Sends the response of an HTTP-level fault (or drops / stalls the request). */
function applyHttpFault(ctx: ApiContext, fault: SimFaultEntry): void {
  switch (fault.kind) {
    case "http_429": {
      const rpm = ctx.key?.rpmLimit ?? 0;
      const reset = String((Math.floor(ctx.rt.state.nowMs() / 60_000) + 1) * 60_000);
      sendApiError(ctx, 429, MSG_RATE_LIMIT, {
        "x-ratelimit-limit-requests": String(rpm),
        "x-ratelimit-remaining-requests": "0",
        "x-ratelimit-reset-requests": reset,
        "x-ratelimit-type": "api_key",
      });
      return;
    }
    case "http_429_overloaded":
      sendApiError(ctx, 429, MSG_OVERLOADED, { "retry-after": "30" });
      return;
    case "http_500":
      sendApiError(ctx, 500, "Inference processing failed");
      return;
    case "http_503":
      sendApiError(ctx, 503, "The model is at capacity. Please try again later.");
      return;
    case "http_504":
      sendApiError(ctx, 504, MSG_TIMEOUT);
      return;
    case "http_402_balance":
      sendApiError(ctx, 402, MSG_INSUFFICIENT_BALANCE);
      return;
    case "http_402_spend_limit":
      sendApiError(ctx, 402, MSG_SPEND_LIMIT);
      return;
    case "timeout":
      // Accept and never answer; the socket stays open until the client gives up or close().
      return;
    case "drop":
      ctx.req.socket.destroy();
      return;
    default:
      if (!sendRefusalFault(ctx, fault.kind)) sendApiError(ctx, 500, "An unknown error occurred");
  }
}

async function dispatchApi(rt: SimRuntime, req: IncomingMessage, res: ServerResponse, path: string, query: string) {
  const state = rt.state;
  const route = normalizeRoute(path);
  const method = req.method ?? "GET";
  const bearer = parseBearer(req.headers.authorization);
  state.tick();
  const traceparent = req.headers.traceparent;
  const record = state.startRecord({
    method,
    route,
    key: bearer,
    traceparent: typeof traceparent === "string" ? traceparent : null,
    query,
  });
  const ctx: ApiContext = {
    rt,
    req,
    res,
    method,
    route,
    query: new URLSearchParams(query),
    record,
    key: null,
    body: undefined,
    rayId: rt.nextRayId(),
    streamFault: null,
  };
  let entered: SimKeyRecord | null = null;
  res.once("close", () => {
    record.endedAt = state.now();
    record.status = res.headersSent ? res.statusCode : 0;
    if (!res.writableFinished && record.fault !== "drop") record.aborted = true;
    if (entered) state.leave(entered);
  });

  const def = API_ROUTES.get(`${method} ${route}`);
  const adminOnly = isAdminOnlyRoute(route);
  if (!def && !adminOnly) {
    if (KNOWN_PATHS.has(route)) sendApiError(ctx, 405, `Method ${method} not allowed`);
    else sendApiError(ctx, 404, "Not Found");
    return;
  }
  if (bearer === null) {
    if (adminOnly || def?.auth === "required") sendX402Discovery(ctx);
    else if (def) await runHandler(ctx, def);
    return;
  }
  const key = state.lookupActiveKey(bearer);
  if (typeof key === "string") {
    sendApiError(ctx, 401, MSG_AUTH_FAILED);
    return;
  }
  ctx.key = key;
  if (adminOnly || !def) {
    handleAdminOnly(ctx);
    return;
  }
  state.enter(key);
  entered = key;
  await runHandler(ctx, def);
}

async function runHandler(ctx: ApiContext, def: ApiRoute): Promise<void> {
  const { rt, record } = ctx;
  let stream = false;
  if (ctx.method === "POST") {
    const parsed = await readJsonBody(ctx.req);
    if (!parsed.ok) {
      if (!parsed.aborted) sendApiJson(ctx, parsed.status, parsed.body);
      return;
    }
    ctx.body = parsed.value;
    rt.state.recordBody(record, parsed.value);
    if (isRecord(parsed.value)) {
      const raw = parsed.value.model;
      if (typeof raw === "string") {
        const bare = raw.includes(":") ? raw.slice(0, raw.indexOf(":")) : raw;
        record.model = resolveModel(rt, bare)?.id ?? raw;
      }
      stream = parsed.value.stream === true;
      record.stream = stream;
    }
  }
  const { latencyMs, fault } = rt.state.takeFaults({
    key: ctx.key?.key ?? "",
    route: ctx.route,
    model: record.model,
    stream,
    inference: def.inference,
  });
  if (fault) record.fault = fault.kind;
  if (latencyMs > 0 && !(await sleepUnlessClosed(ctx.res, latencyMs))) return;
  if (fault && !STREAM_ONLY_FAULTS.has(fault.kind)) {
    applyHttpFault(ctx, fault);
    return;
  }
  // the documented refusals of the caller whatever its body: alpha-only /responses, a region-restricted model
  if (def.inference && refuseAccess(ctx)) return;
  ctx.streamFault = fault;
  await def.handler(ctx);
}

function buildModelIndex(models: readonly SimModel[]): Map<string, SimModel> {
  const index = new Map<string, SimModel>();
  for (const m of models) {
    index.set(m.id, m);
    if (!index.has(normalizeModelId(m.id))) index.set(normalizeModelId(m.id), m);
  }
  // Trait names (e.g. "default", "fastest") resolve to the first text model carrying them.
  for (const m of models) {
    if (m.type !== "text" || m.model_spec.offline) continue;
    for (const trait of m.model_spec.traits) if (!index.has(trait)) index.set(trait, m);
  }
  return index;
}

/** Starts a simulator of the upstream (Venice) API. See README.md in this folder. */
export async function startUpstreamSimulator(opts: UpstreamSimulatorOptions = {}): Promise<UpstreamSimulator> {
  const models: readonly SimModel[] = opts.models ?? DEFAULT_SIM_MODELS;
  for (const m of models) {
    // Fail fast on prices that are not exact in micro-units.
    if (m.type === "text" && m.model_spec.pricing) textPricingToMicro(m.model_spec.pricing);
  }
  const state = new SimState({ now: opts.now, keys: opts.keys });
  const rayPrefix = randomBytes(4).toString("hex");
  let raySeq = 0;
  const rt: SimRuntime = {
    state,
    models,
    modelIndex: buildModelIndex(models),
    modelsBodyByType: buildModelsBodies(models),
    nextRayId: () => {
      raySeq += 1;
      return `${rayPrefix}${raySeq.toString(16).padStart(8, "0")}-SJC`;
    },
  };

  const sockets = new Set<Socket>();
  const server = createServer((req, res) => {
    const url = req.url ?? "/";
    const q = url.indexOf("?");
    const path = q < 0 ? url : url.slice(0, q);
    const query = q < 0 ? "" : url.slice(q + 1);
    let work: Promise<void>;
    if (path === "/api/v1" || path.startsWith("/api/v1/")) {
      work = dispatchApi(rt, req, res, path, query);
    } else if (path === "/__admin" || path.startsWith("/__admin/")) {
      work = handleAdmin(state, req, res, path, new URLSearchParams(query));
    } else if (path.startsWith("/__media/")) {
      handleMediaDownload(state, req, res, path);
      return;
    } else {
      sendJson(res, 404, { error: "Not Found" });
      return;
    }
    work.catch(() => {
      if (!res.headersSent) sendJson(res, 500, { error: "An unknown error occurred" });
      else res.destroy();
    });
  });
  server.on("connection", (socket: Socket) => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
  });

  const host = opts.host ?? "127.0.0.1";
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(opts.port ?? 0, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("simulator did not bind a TCP port");
  const urlHost = host === "0.0.0.0" || host === "::" ? "127.0.0.1" : host.includes(":") ? `[${host}]` : host;
  const origin = `http://${urlHost}:${address.port}`;
  let closing: Promise<void> | null = null;

  return {
    baseUrl: `${origin}/api/v1`,
    adminUrl: `${origin}/__admin`,
    port: address.port,
    state,
    models,
    close(): Promise<void> {
      closing ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
        for (const socket of sockets) socket.destroy();
      });
      return closing;
    },
  };
}
