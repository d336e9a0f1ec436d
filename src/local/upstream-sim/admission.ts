import { randomUUID } from "node:crypto";
import type { OutgoingHttpHeaders } from "node:http";
import { computeBurnMicroDiem } from "./burn.js";
import { type ApiContext, balanceHeadersOf, baseHeaders, sendApiError, sendApiJson } from "./context.js";
import type { Json } from "./http-util.js";
import { admissionFailure, availableDiemMicro, debitBurn, type SimKeyRecord } from "./keys.js";
import type { SimModel, SimTextModel } from "./models.js";
import { microToNumber } from "./money.js";

/**
 * What the token-priced routes (`POST /chat/completions` §3, `POST /responses` §4) share, and the
 * media routes' admission: the 402/429 messages, admission with the response headers it sets, the
 * burn of what was produced and its debit (`bill`), and the ids.
 */

export const MSG_INSUFFICIENT_BALANCE =
  "Insufficient USD or Diem balance to complete request. Visit https://venice.ai/settings/api to add credits.";
export const MSG_SPEND_LIMIT =
  "API key DIEM spend limit exceeded. Increase the key's consumption limit at https://venice.ai/settings/api or wait for the next epoch.";
export const MSG_RATE_LIMIT = "Rate limit exceeded";
export const MSG_MODEL_NOT_FOUND = "Specified model not found";
export const MSG_OVERLOADED = "The model is currently overloaded. Please try again later.";

export function requireKey(ctx: ApiContext): SimKeyRecord {
  if (!ctx.key) throw new Error("inference route reached without an authenticated key");
  return ctx.key;
}

/** 400 for non-text and offline models; null when the model can serve text. */
export function textModelOrReject(ctx: ApiContext, model: SimModel, routeName: string): SimTextModel | null {
  if (model.type !== "text") {
    sendApiError(ctx, 400, `Model ${model.id} is a ${model.type} model and does not support ${routeName}`);
    return null;
  }
  if (model.model_spec.offline) {
    sendApiError(ctx, 400, `Model ${model.id} is currently offline. Please select a different model.`);
    return null;
  }
  return model;
}

function deprecationHeaders(model: SimModel): OutgoingHttpHeaders {
  const dep = model.model_spec.deprecation;
  if (!dep) return {};
  const headers: OutgoingHttpHeaders = {
    "x-venice-model-deprecation-warning": `Model ${model.id} is deprecated and will be removed on ${dep.date}.`,
    "x-venice-model-deprecation-date": dep.date,
    "x-venice-deprecated": "true",
  };
  if (dep.replacementModelId) headers["x-venice-deprecated-replacement"] = dep.replacementModelId;
  return headers;
}

export function contextLengthExceeded(ctx: ApiContext, limit: number, promptTokens: number): void {
  sendApiJson(ctx, 400, {
    error: {
      message: `This model's maximum context length is ${limit} tokens. However, you requested ${promptTokens} tokens. Please reduce the length of the messages.`,
      type: "invalid_request_error",
      param: "messages",
      code: "context_length_exceeded",
    },
  });
}

export interface Admitted {
  key: SimKeyRecord;
  headers: OutgoingHttpHeaders;
  window: { tokens: number };
}

/**
 * Admission: DIEM cap reached → 402 spend limit; for token-priced requests (not `prepaid`) no positive
 * DIEM and no positive USD → 402 insufficient balance (prepaid routes check coverage when debiting);
 * per-model RPM/TPM window exhausted → 429. On success the request is counted in the window and the
 * response headers (pre-request balances, rate limits, model metadata) are returned. Returns null when
 * a response was already sent.
 */
export function admitRequest(ctx: ApiContext, model: SimModel, opts: { prepaid?: boolean } = {}): Admitted | null {
  const key = requireKey(ctx);
  const state = ctx.rt.state;
  const balance = balanceHeadersOf(availableDiemMicro(key), key.usdMicro);
  const window = state.rateWindow(key, model.id);
  const headers: OutgoingHttpHeaders = {
    ...baseHeaders(ctx),
    "x-venice-balance-diem": balance.diem,
    "x-venice-balance-usd": balance.usd,
    "x-venice-model-id": model.id,
    "x-venice-model-name": model.model_spec.name,
    ...deprecationHeaders(model),
  };
  const failure = admissionFailure(key);
  if (failure === "spend_limit" || (failure === "insufficient" && !opts.prepaid)) {
    sendApiJson(ctx, 402, { error: failure === "spend_limit" ? MSG_SPEND_LIMIT : MSG_INSUFFICIENT_BALANCE }, headers);
    return null;
  }
  const reset = String(window.startMs + 60_000);
  const limited = window.requests >= key.rpmLimit || window.tokens >= key.tpmLimit;
  if (!limited) window.requests += 1;
  Object.assign(headers, {
    "x-ratelimit-limit-requests": String(key.rpmLimit),
    "x-ratelimit-remaining-requests": String(Math.max(0, key.rpmLimit - window.requests)),
    "x-ratelimit-reset-requests": reset,
    "x-ratelimit-limit-tokens": String(key.tpmLimit),
    "x-ratelimit-remaining-tokens": String(Math.max(0, key.tpmLimit - window.tokens)),
    "x-ratelimit-reset-tokens": reset,
    "x-ratelimit-type": "api_key",
  });
  if (limited) {
    sendApiJson(ctx, 429, { error: MSG_RATE_LIMIT }, headers);
    return null;
  }
  return { key, headers, window };
}

interface BillInput {
  model: SimTextModel;
  admitted: Admitted;
  promptTokens: number;
  cachedTokens: number;
  /** cache writes (chat only; 0 elsewhere) */
  cacheWriteTokens?: number;
  completionTokens: number;
  extraFeeMicro: bigint;
}

/**
 * Computes the burn of what was produced, debits it (after the fact, DIEM first; see `debitBurn` in keys.ts)
 * and writes usage/burn into the request record. Returns the charge split for `cost`.
 */
export function bill(ctx: ApiContext, input: BillInput): { diemMicro: bigint; usdMicro: bigint } {
  const usage = {
    prompt_tokens: input.promptTokens,
    completion_tokens: input.completionTokens,
    prompt_tokens_details: {
      cached_tokens: input.cachedTokens,
      cache_creation_input_tokens: input.cacheWriteTokens ?? 0,
    },
  };
  const tokenBurn = computeBurnMicroDiem(input.model.model_spec.pricing, usage);
  // Add-on fees (web search) are charged only on billed responses, i.e. ones with output tokens.
  const burn = input.completionTokens > 0 ? tokenBurn + input.extraFeeMicro : 0n;
  const charged = debitBurn(input.admitted.key, burn);
  input.admitted.window.tokens += input.promptTokens + input.completionTokens;
  const rec = ctx.record;
  rec.usage = {
    promptTokens: input.promptTokens,
    completionTokens: input.completionTokens,
    totalTokens: input.promptTokens + input.completionTokens,
    cachedTokens: input.cachedTokens,
    cacheWriteTokens: input.cacheWriteTokens ?? 0,
  };
  rec.burnMicroDiem = burn;
  rec.chargedDiemMicro = charged.diemMicro;
  rec.chargedUsdMicro = charged.usdMicro;
  return charged;
}
export function costOf(charged: { diemMicro: bigint; usdMicro: bigint }): Json {
  return { diem: microToNumber(charged.diemMicro), usd: microToNumber(charged.usdMicro) };
}

export function hexId(): string {
  return randomUUID().replaceAll("-", "");
}
