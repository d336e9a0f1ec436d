import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from "node:http";
import type { SimFaultEntry } from "./faults.js";
import { sendJson } from "./http-util.js";
import type { SimKeyRecord } from "./keys.js";
import { normalizeModelId, type SimModel } from "./models.js";
import { formatMicro } from "./money.js";
import type { SimRequestRecord } from "./request-log.js";
import type { SimState } from "./state.js";

/** Value of the `x-venice-version` header (swagger `info.version` of the documented snapshot). */
export const SIM_VENICE_VERSION = "20260821.193530";

/** Shared, read-mostly runtime of one simulator instance. */
export interface SimRuntime {
  state: SimState;
  models: readonly SimModel[];
  /** normalised id and trait name → model */
  modelIndex: Map<string, SimModel>;
  /** pre-serialised `GET /models` bodies per type */
  modelsBodyByType: Map<string, string>;
  nextRayId(): string;
}

/** Per-request context handed to a route handler. */
export interface ApiContext {
  rt: SimRuntime;
  req: IncomingMessage;
  res: ServerResponse;
  method: string;
  /** path below /api/v1 */
  route: string;
  query: URLSearchParams;
  record: SimRequestRecord;
  /** authenticated key (null on routes with optional auth called without a key) */
  key: SimKeyRecord | null;
  /** parsed JSON body (POST) */
  body: unknown;
  rayId: string;
  /** a stream-only fault picked for this request, applied by the streaming handler */
  streamFault: SimFaultEntry | null;
}

export type ApiHandler = (ctx: ApiContext) => void | Promise<void>;

export interface ApiRoute {
  /** "required": no key → 402 x402 discovery; "optional": key checked only when sent */
  auth: "required" | "optional";
  /** inference routes get balance/rate-limit headers, in-flight tracking and route-less faults */
  inference: boolean;
  handler: ApiHandler;
}

export function baseHeaders(ctx: ApiContext): OutgoingHttpHeaders {
  return { "x-venice-version": SIM_VENICE_VERSION, "cf-ray": ctx.rayId };
}

/** Pre-request balance headers (decimal strings), as upstream sends on inference responses. */
export interface BalanceHeaders {
  diem: string;
  usd: string;
}

export function balanceHeadersOf(availableDiemMicro: bigint, usdMicro: bigint): BalanceHeaders {
  return { diem: formatMicro(availableDiemMicro), usd: formatMicro(usdMicro) };
}

export function sendApiJson(ctx: ApiContext, status: number, body: unknown, headers?: OutgoingHttpHeaders): void {
  sendJson(ctx.res, status, body, { ...baseHeaders(ctx), ...headers });
}

export function sendApiError(ctx: ApiContext, status: number, message: string, headers?: OutgoingHttpHeaders): void {
  sendApiJson(ctx, status, { error: message }, headers);
}

export function resolveModel(rt: SimRuntime, id: string): SimModel | undefined {
  return rt.modelIndex.get(id) ?? rt.modelIndex.get(normalizeModelId(id));
}
