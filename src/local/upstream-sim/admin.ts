/**
 * Test/dev-only admin API under `/__admin` (outside `/api/v1`). JSON in and out; amounts are
 * decimal strings of micro-units; dates are ISO strings. Mirrors the SimState methods.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { isSimFaultKind, type SimFault, type SimFaultEntry } from "./faults.js";
import { isRecord, readJsonBody, sendJson } from "./http-util.js";
import type { SimBalancePatch, SimKeyInit, SimKeySnapshot } from "./keys.js";
import { toMicroBigint } from "./money.js";
import type { SimRequestRecord } from "./request-log.js";
import type { SimState } from "./state.js";
import {
  isSimVideoSelectableOutcome,
  SIM_VIDEO_SELECTABLE_OUTCOMES,
  type SimVideoBurn,
  type SimVideoConfig,
  type SimVideoJob,
} from "./video-jobs.js";

export function serializeKey(k: SimKeySnapshot): Record<string, unknown> {
  return {
    key: k.key,
    diemMicro: k.diemMicro.toString(),
    usdMicro: k.usdMicro.toString(),
    diemCapMicro: k.diemCapMicro === null ? null : k.diemCapMicro.toString(),
    allocationMicro: k.allocationMicro.toString(),
    spentDiemEpochMicro: k.spentDiemEpochMicro.toString(),
    availableDiemMicro: k.availableDiemMicro.toString(),
    accessPermitted: k.accessPermitted,
    revoked: k.revoked,
    alphaAccess: k.alphaAccess,
    inFlight: k.inFlight,
    peakInFlight: k.peakInFlight,
    rpmLimit: k.rpmLimit,
    tpmLimit: k.tpmLimit,
  };
}

export function serializeRecord(r: SimRequestRecord): Record<string, unknown> {
  return {
    ...r,
    burnMicroDiem: r.burnMicroDiem.toString(),
    chargedDiemMicro: r.chargedDiemMicro.toString(),
    chargedUsdMicro: r.chargedUsdMicro.toString(),
    refundedMicro: r.refundedMicro.toString(),
    startedAt: r.startedAt.toISOString(),
    endedAt: r.endedAt ? r.endedAt.toISOString() : null,
  };
}

export function serializeVideoJob(j: SimVideoJob): Record<string, unknown> {
  return {
    ...j,
    quoteMicro: j.quoteMicro.toString(),
    charged: { diemMicro: j.charged.diemMicro.toString(), usdMicro: j.charged.usdMicro.toString() },
    createdAt: j.createdAt.toISOString(),
    completedAt: j.completedAt ? j.completedAt.toISOString() : null,
  };
}

export function serializeVideoBurn(key: string, b: SimVideoBurn): Record<string, unknown> {
  return {
    key,
    chargedMicro: b.chargedMicro.toString(),
    refundedMicro: b.refundedMicro.toString(),
    netMicro: b.netMicro.toString(),
    jobs: b.jobs,
  };
}

function serializeFault(f: SimFaultEntry): Record<string, unknown> {
  return { ...f };
}

class AdminInputError extends Error {}

function optionalMicro(body: Record<string, unknown>, field: string): bigint | undefined {
  const v = body[field];
  if (v === undefined) return undefined;
  try {
    return toMicroBigint(v, field);
  } catch (err) {
    throw new AdminInputError((err as Error).message);
  }
}

function parseKeyInit(body: unknown): SimKeyInit {
  if (!isRecord(body)) throw new AdminInputError("body must be an object");
  if (typeof body.key !== "string" || body.key.length === 0)
    throw new AdminInputError("key must be a non-empty string");
  const diemMicro = optionalMicro(body, "diemMicro");
  if (diemMicro === undefined) throw new AdminInputError("diemMicro is required");
  const init: SimKeyInit = { key: body.key, diemMicro };
  const usd = optionalMicro(body, "usdMicro");
  if (usd !== undefined) init.usdMicro = usd;
  if (body.diemCapMicro === null) init.diemCapMicro = null;
  else {
    const cap = optionalMicro(body, "diemCapMicro");
    if (cap !== undefined) init.diemCapMicro = cap;
  }
  const allocation = optionalMicro(body, "allocationMicro");
  if (allocation !== undefined) init.allocationMicro = allocation;
  if (body.revoked !== undefined) init.revoked = body.revoked === true;
  if (body.alphaAccess !== undefined) init.alphaAccess = body.alphaAccess === true;
  if (typeof body.rpmLimit === "number") init.rpmLimit = body.rpmLimit;
  if (typeof body.tpmLimit === "number") init.tpmLimit = body.tpmLimit;
  return init;
}

function parseBalancePatch(body: unknown): SimBalancePatch {
  if (!isRecord(body)) throw new AdminInputError("body must be an object");
  const patch: SimBalancePatch = {};
  const diem = optionalMicro(body, "diemMicro");
  if (diem !== undefined) patch.diemMicro = diem;
  const usd = optionalMicro(body, "usdMicro");
  if (usd !== undefined) patch.usdMicro = usd;
  const allocation = optionalMicro(body, "allocationMicro");
  if (allocation !== undefined) patch.allocationMicro = allocation;
  const spent = optionalMicro(body, "spentDiemEpochMicro");
  if (spent !== undefined) patch.spentDiemEpochMicro = spent;
  if (body.diemCapMicro === null) patch.diemCapMicro = null;
  else {
    const cap = optionalMicro(body, "diemCapMicro");
    if (cap !== undefined) patch.diemCapMicro = cap;
  }
  return patch;
}

function parseFault(body: unknown): { target: string; fault: SimFault } {
  if (!isRecord(body)) throw new AdminInputError("body must be an object");
  const target = body.key ?? body.target;
  if (typeof target !== "string" || target.length === 0) throw new AdminInputError('key must be a key or "*"');
  const f = isRecord(body.fault) ? body.fault : body;
  if (!isSimFaultKind(f.kind)) throw new AdminInputError(`unknown fault kind: ${String(f.kind)}`);
  const fault: SimFault = { kind: f.kind };
  if (f.count !== undefined) {
    if (typeof f.count !== "number" || !Number.isInteger(f.count) || f.count < 1) {
      throw new AdminInputError("count must be a positive integer");
    }
    fault.count = f.count;
  }
  if (typeof f.route === "string") fault.route = f.route;
  if (typeof f.model === "string") fault.model = f.model;
  if (typeof f.ms === "number") fault.ms = f.ms;
  if (typeof f.afterChunks === "number") fault.afterChunks = f.afterChunks;
  return { target, fault };
}

const VIDEO_CONFIG_FIELDS = new Set(["processingPolls", "renderMs", "defaultOutcome"]);

/** `{processingPolls?, renderMs?, defaultOutcome?}`; unknown fields and bad values → 400. */
function parseVideoConfig(body: unknown): Partial<SimVideoConfig> {
  if (!isRecord(body)) throw new AdminInputError("body must be an object");
  const unknown = Object.keys(body).filter((k) => !VIDEO_CONFIG_FIELDS.has(k));
  if (unknown.length > 0) {
    throw new AdminInputError(
      `unknown field(s) ${unknown.join(", ")}; expected {processingPolls?, renderMs?, defaultOutcome?}`,
    );
  }
  const patch: Partial<SimVideoConfig> = {};
  for (const field of ["processingPolls", "renderMs"] as const) {
    const v = body[field];
    if (v === undefined) continue;
    if (typeof v !== "number" || !Number.isInteger(v) || v < 0) {
      throw new AdminInputError(`${field} must be a non-negative integer`);
    }
    patch[field] = v;
  }
  if (body.defaultOutcome !== undefined) {
    if (!isSimVideoSelectableOutcome(body.defaultOutcome)) {
      throw new AdminInputError(`defaultOutcome must be one of ${SIM_VIDEO_SELECTABLE_OUTCOMES.join(" | ")}`);
    }
    patch.defaultOutcome = body.defaultOutcome;
  }
  return patch;
}

/**
 * Admin routes (all JSON):
 *   GET    /__admin/keys                      list keys
 *   POST   /__admin/keys                      upsert {key, diemMicro, usdMicro?, diemCapMicro?, allocationMicro?, revoked?, alphaAccess?, rpmLimit?, tpmLimit?}
 *   GET    /__admin/keys/{key}                one key (404 if unknown)
 *   DELETE /__admin/keys/{key}                remove
 *   POST   /__admin/keys/{key}/balance        set {diemMicro?, usdMicro?, diemCapMicro?, allocationMicro?, spentDiemEpochMicro?}
 *   POST   /__admin/keys/{key}/revoke         {revoked?: boolean} (default true)
 *   POST   /__admin/keys/{key}/alpha          {alphaAccess: boolean}: may it call the alpha-only /responses
 *   GET    /__admin/region                    {region}: the callers' country (default "US")
 *   POST   /__admin/region                    {region: "DE"} → {region}
 *   GET    /__admin/faults                    list
 *   POST   /__admin/faults                    {key: "<key>"|"*", fault: {kind, count?, route?, model?, ms?, afterChunks?}} → {id}
 *   DELETE /__admin/faults[?key=<key|*|id>]   clear (all, one target, or one fault id) → {cleared}
 *   GET    /__admin/requests[?key=&route=&model=]  request log
 *   DELETE /__admin/requests                  clear the log
 *   GET    /__admin/clock                     {now, nextEpochBegins}
 *   POST   /__admin/clock                     {advanceMs} or {set: ISO} → {now, nextEpochBegins}
 *   GET    /__admin/video/jobs                video jobs
 *   GET    /__admin/video/config              {processingPolls, renderMs, defaultOutcome}
 *   POST   /__admin/video/config              {processingPolls?, renderMs?, defaultOutcome?} → the config
 *   GET    /__admin/video/burn[?key=]         per key {key, chargedMicro, refundedMicro, netMicro, jobs}
 *   GET    /__admin/health                    {ok: true}
 */
export async function handleAdmin(
  state: SimState,
  req: IncomingMessage,
  res: ServerResponse,
  path: string,
  query: URLSearchParams,
): Promise<void> {
  const method = req.method ?? "GET";
  let body: unknown;
  if (method === "POST" || method === "PUT" || method === "PATCH") {
    const parsed = await readJsonBody(req);
    if (!parsed.ok) {
      if (!parsed.aborted) sendJson(res, parsed.status, parsed.body);
      return;
    }
    body = parsed.value ?? {};
  }
  const segments = path
    .slice("/__admin".length)
    .split("/")
    .filter((s) => s.length > 0)
    .map((s) => decodeURIComponent(s));
  try {
    const [head, id, action] = segments;
    if (head === "keys") {
      if (id === undefined) {
        if (method === "GET") return sendJson(res, 200, { data: state.listKeys().map(serializeKey) });
        if (method === "POST") return sendJson(res, 200, serializeKey(state.upsertKey(parseKeyInit(body))));
      } else if (action === undefined) {
        if (method === "GET") {
          const k = state.getKey(id);
          return k ? sendJson(res, 200, serializeKey(k)) : sendJson(res, 404, { error: "unknown key" });
        }
        if (method === "DELETE") return sendJson(res, 200, { removed: state.removeKey(id) });
      } else if (state.getKey(id) === undefined) {
        return sendJson(res, 404, { error: "unknown key" });
      } else if (action === "balance" && method === "POST") {
        return sendJson(res, 200, serializeKey(state.setBalance(id, parseBalancePatch(body))));
      } else if (action === "revoke" && method === "POST") {
        const revoked = !(isRecord(body) && body.revoked === false);
        return sendJson(res, 200, serializeKey(state.revokeKey(id, revoked)));
      } else if (action === "alpha" && method === "POST") {
        if (!isRecord(body) || typeof body.alphaAccess !== "boolean")
          throw new AdminInputError("expected {alphaAccess: boolean}");
        return sendJson(res, 200, serializeKey(state.setAlphaAccess(id, body.alphaAccess)));
      }
    } else if (head === "faults" && id === undefined) {
      if (method === "GET") return sendJson(res, 200, { data: state.listFaults().map(serializeFault) });
      if (method === "POST") {
        const { target, fault } = parseFault(body);
        return sendJson(res, 200, { id: state.injectFault(target, fault) });
      }
      if (method === "DELETE") {
        const target = query.get("key") ?? query.get("target") ?? undefined;
        return sendJson(res, 200, { cleared: state.clearFaults(target) });
      }
    } else if (head === "requests" && id === undefined) {
      if (method === "GET") {
        const filter = {
          key: query.get("key") ?? undefined,
          route: query.get("route") ?? undefined,
          model: query.get("model") ?? undefined,
        };
        return sendJson(res, 200, { data: state.listRequests(filter).map(serializeRecord) });
      }
      if (method === "DELETE") {
        state.resetRequests();
        return sendJson(res, 200, { cleared: true });
      }
    } else if (head === "clock" && id === undefined) {
      if (method === "POST") {
        if (!isRecord(body)) throw new AdminInputError("body must be an object");
        if (typeof body.set === "string") {
          const at = new Date(body.set);
          if (Number.isNaN(at.getTime())) throw new AdminInputError("set must be an ISO date");
          state.setClock(at);
        } else if (typeof body.advanceMs === "number" && Number.isFinite(body.advanceMs)) {
          state.advanceClock(body.advanceMs);
        } else {
          throw new AdminInputError("expected {advanceMs} or {set}");
        }
      }
      if (method === "GET" || method === "POST") {
        return sendJson(res, 200, {
          now: state.now().toISOString(),
          nextEpochBegins: state.nextEpochBegins().toISOString(),
        });
      }
    } else if (head === "video" && id === "jobs" && method === "GET") {
      return sendJson(res, 200, { data: state.listVideoJobs().map(serializeVideoJob) });
    } else if (head === "video" && id === "config" && action === undefined) {
      if (method === "GET") return sendJson(res, 200, { ...state.videoConfig() });
      if (method === "POST") {
        const patch = parseVideoConfig(body);
        try {
          return sendJson(res, 200, { ...state.setVideoConfig(patch) });
        } catch (err) {
          throw new AdminInputError((err as Error).message);
        }
      }
    } else if (head === "video" && id === "burn" && action === undefined && method === "GET") {
      const only = query.get("key");
      const data = [...state.videoBurnByKey()]
        .filter(([key]) => only === null || key === only)
        .map(([key, burn]) => serializeVideoBurn(key, burn));
      return sendJson(res, 200, { data });
    } else if (head === "region" && id === undefined && (method === "GET" || method === "POST")) {
      if (method === "POST") {
        if (!isRecord(body) || typeof body.region !== "string") throw new AdminInputError("expected {region}");
        try {
          state.setCallerRegion(body.region);
        } catch (err) {
          throw new AdminInputError((err as Error).message);
        }
      }
      return sendJson(res, 200, { region: state.callerRegion() });
    } else if (head === "health" && method === "GET") {
      return sendJson(res, 200, { ok: true });
    }
    sendJson(res, 404, { error: `no admin route ${method} ${path}` });
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    sendJson(res, err instanceof AdminInputError || message === "unknown key" ? 400 : 500, { error: message });
  }
}
