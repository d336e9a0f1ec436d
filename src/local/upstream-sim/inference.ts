/**
 * Token-priced inference routes: `POST /chat/completions` (§3) and `POST /responses` (§4).
 * Both share admission (402/429), deterministic token planning, burn accounting and stream faults.
 */

import { randomUUID } from "node:crypto";
import type { OutgoingHttpHeaders } from "node:http";
import { VENICE_REQUEST_FIELDS } from "../../adapters/upstream/venice-fields.js";
import { computeBurnMicroDiem, WEB_SEARCH_FEE_MICRO_DIEM } from "./burn.js";
import { type ApiContext, balanceHeadersOf, baseHeaders, resolveModel, sendApiError, sendApiJson } from "./context.js";
import { detailedError, type Issue, isRecord, type Json, sleepUnlessClosed, typeName } from "./http-util.js";
import { admissionFailure, availableDiemMicro, debitBurn, type SimKeyRecord } from "./keys.js";
import type { SimModel, SimTextModel } from "./models.js";
import { microToNumber } from "./money.js";
import {
  chunkTokens,
  countPromptTokens,
  DEFAULT_STREAM_CHUNKS,
  parseDirectives,
  planCompletion,
  planToolCall,
  replyTokens,
  responsesInputToMessages,
  type SimDirectives,
  type SimToolCall,
  toolCallTokens,
} from "./tokens.js";

// ------------------------------------------------------------------ shared messages

export const MSG_INSUFFICIENT_BALANCE =
  "Insufficient USD or Diem balance to complete request. Visit https://venice.ai/settings/api to add credits.";
export const MSG_SPEND_LIMIT =
  "API key DIEM spend limit exceeded. Increase the key's consumption limit at https://venice.ai/settings/api or wait for the next epoch.";
export const MSG_RATE_LIMIT = "Rate limit exceeded";
export const MSG_MODEL_NOT_FOUND = "Specified model not found";
export const MSG_OVERLOADED = "The model is currently overloaded. Please try again later.";

const SSE_HEADERS: OutgoingHttpHeaders = {
  "content-type": "text/event-stream; charset=utf-8",
  "cache-control": "no-cache",
};

// ------------------------------------------------------------------ chat request schema

/**
 * Top-level fields `/chat/completions` accepts: the reference's (`additionalProperties: false`:
 * anything else → 400, the body is strict), read from the allow-list generated from it.
 */
const CHAT_FIELDS: ReadonlySet<string> = new Set(VENICE_REQUEST_FIELDS["/chat/completions"].fields);

/** Accepted and dropped before validation. */
const CHAT_DROPPED_FIELDS = ["include", "metadata"] as const;

const MESSAGE_ROLES = new Set(["system", "developer", "user", "assistant", "tool"]);

/** `venice_parameters` keys and their defaults (echoed back on buffered chat responses). */
const VENICE_PARAMETER_DEFAULTS: Record<string, Json> = {
  include_venice_system_prompt: true,
  character_slug: null,
  strip_thinking_response: false,
  disable_thinking: false,
  enable_web_search: "off",
  enable_web_scraping: false,
  enable_web_citations: false,
  include_search_results_in_stream: false,
  return_search_results_as_documents: false,
  enable_x_search: false,
  enable_e2ee: true,
};

/** Rewrites the documented aliases and drops the accepted-and-ignored fields (§1). */
function normalizeChatAliases(body: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...body };
  if ("input" in out) {
    if (!("messages" in out)) out.messages = out.input;
    delete out.input;
  }
  if ("max_output_tokens" in out) {
    if (!("max_tokens" in out)) out.max_tokens = out.max_output_tokens;
    delete out.max_output_tokens;
  }
  if ("promptCacheKey" in out) {
    if (!("prompt_cache_key" in out)) out.prompt_cache_key = out.promptCacheKey;
    delete out.promptCacheKey;
  }
  if ("web_search" in out) {
    const vp = isRecord(out.venice_parameters) ? { ...out.venice_parameters } : {};
    if (!("enable_web_search" in vp)) vp.enable_web_search = out.web_search;
    out.venice_parameters = vp;
    delete out.web_search;
  }
  for (const field of CHAT_DROPPED_FIELDS) delete out[field];
  return out;
}

export function typeIssue(path: (string | number)[], expected: string, value: unknown): Issue {
  const received = typeName(value);
  return { code: "invalid_type", expected, received, path, message: `Expected ${expected}, received ${received}` };
}

function numberInRange(issues: Issue[], body: Record<string, unknown>, field: string, min: number, max: number): void {
  const v = body[field];
  if (v === undefined || v === null) return;
  if (typeof v !== "number" || !Number.isFinite(v)) {
    issues.push(typeIssue([field], "number", v));
  } else if (v < min) {
    issues.push({ code: "too_small", path: [field], message: `Number must be greater than or equal to ${min}` });
  } else if (v > max) {
    issues.push({ code: "too_big", path: [field], message: `Number must be less than or equal to ${max}` });
  }
}

function integerField(issues: Issue[], body: Record<string, unknown>, field: string): void {
  const v = body[field];
  if (v === undefined || v === null) return;
  if (typeof v !== "number" || !Number.isInteger(v)) issues.push(typeIssue([field], "integer", v));
}

function validateChatBody(body: Record<string, unknown>): Issue[] {
  const issues: Issue[] = [];
  const unknown = Object.keys(body).filter((k) => !CHAT_FIELDS.has(k));
  if (unknown.length > 0) {
    issues.push({
      code: "unrecognized_keys",
      keys: unknown,
      path: [],
      message: `Unrecognized key(s) in object: ${unknown.map((k) => `'${k}'`).join(", ")}`,
    });
  }
  const messages = body.messages;
  if (messages === undefined) {
    issues.push({
      code: "invalid_type",
      expected: "array",
      received: "undefined",
      path: ["messages"],
      message: "Required",
    });
  } else if (!Array.isArray(messages)) {
    issues.push(typeIssue(["messages"], "array", messages));
  } else if (messages.length === 0) {
    issues.push({ code: "too_small", path: ["messages"], message: "Array must contain at least 1 element(s)" });
  } else {
    messages.forEach((m, i) => {
      if (!isRecord(m)) {
        issues.push(typeIssue(["messages", i], "object", m));
        return;
      }
      if (typeof m.role !== "string" || !MESSAGE_ROLES.has(m.role)) {
        issues.push({
          code: "invalid_union_discriminator",
          path: ["messages", i, "role"],
          message: "Invalid discriminator value. Expected 'system' | 'developer' | 'user' | 'assistant' | 'tool'",
        });
      }
      const c = m.content;
      if (c !== undefined && c !== null && typeof c !== "string" && !Array.isArray(c)) {
        issues.push(typeIssue(["messages", i, "content"], "string | array", c));
      }
    });
  }
  for (const field of ["stream", "logprobs", "parallel_tool_calls", "store"]) {
    const v = body[field];
    if (v !== undefined && v !== null && typeof v !== "boolean") issues.push(typeIssue([field], "boolean", v));
  }
  for (const field of ["venice_parameters", "stream_options", "response_format", "reasoning"]) {
    const v = body[field];
    if (v !== undefined && v !== null && !isRecord(v)) issues.push(typeIssue([field], "object", v));
  }
  if (body.tools !== undefined && body.tools !== null && !Array.isArray(body.tools)) {
    issues.push(typeIssue(["tools"], "array", body.tools));
  }
  if (body.user !== undefined && typeof body.user !== "string") issues.push(typeIssue(["user"], "string", body.user));
  const stop = body.stop;
  if (stop !== undefined && stop !== null) {
    if (Array.isArray(stop)) {
      if (stop.length > 4)
        issues.push({ code: "too_big", path: ["stop"], message: "Array must contain at most 4 element(s)" });
    } else if (typeof stop !== "string") {
      issues.push(typeIssue(["stop"], "string | array", stop));
    }
  }
  numberInRange(issues, body, "temperature", 0, 2);
  numberInRange(issues, body, "top_p", 0, 1);
  numberInRange(issues, body, "frequency_penalty", -2, 2);
  numberInRange(issues, body, "presence_penalty", -2, 2);
  integerField(issues, body, "max_tokens");
  integerField(issues, body, "max_completion_tokens");
  integerField(issues, body, "seed");
  integerField(issues, body, "n");
  numberInRange(issues, body, "n", 1, 8);
  numberInRange(issues, body, "max_completion_tokens", 1, Number.MAX_SAFE_INTEGER);
  return issues;
}

// ------------------------------------------------------------------ shared helpers

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

function contextLengthExceeded(ctx: ApiContext, limit: number, promptTokens: number): void {
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
 * Computes the burn of what was produced, debits it (after the fact, DIEM first; see SimState.debit)
 * and writes usage/burn into the request record. Returns the charge split for `cost`.
 */
function bill(ctx: ApiContext, input: BillInput): { diemMicro: bigint; usdMicro: bigint } {
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

function chatUsage(job: ChatJob, completionTokens: number): Json {
  return {
    prompt_tokens: job.promptTokens,
    completion_tokens: completionTokens,
    total_tokens: job.promptTokens + completionTokens,
    prompt_tokens_details: { cached_tokens: job.cachedTokens, cache_creation_input_tokens: job.cacheWriteTokens },
    completion_tokens_details: { reasoning_tokens: Math.min(job.directives.reasoningTokens ?? 0, completionTokens) },
  };
}

function costOf(charged: { diemMicro: bigint; usdMicro: bigint }): Json {
  return { diem: microToNumber(charged.diemMicro), usd: microToNumber(charged.usdMicro) };
}

export function hexId(): string {
  return randomUUID().replaceAll("-", "");
}

/**
 * Writes SSE frames: with no delay everything is buffered and sent in one write (cheap on the
 * benchmark path); with a delay, every content frame waits `delayMs` and is written on its own.
 */
class FrameSink {
  private readonly pending: string[] = [];
  private started = false;

  constructor(
    private readonly ctx: ApiContext,
    private readonly headers: OutgoingHttpHeaders,
    private readonly delayMs: number,
  ) {}

  private start(): void {
    if (this.started) return;
    this.started = true;
    this.ctx.res.writeHead(200, { ...this.headers, ...SSE_HEADERS });
  }

  /** A frame sent immediately (no delay). */
  push(frame: string): void {
    if (this.delayMs > 0) {
      this.start();
      this.ctx.res.write(frame);
    } else {
      this.pending.push(frame);
    }
  }

  /** A content frame, preceded by the per-chunk delay. Returns false when the client went away. */
  async content(frame: string): Promise<boolean> {
    if (this.delayMs > 0) {
      this.start();
      if (!(await sleepUnlessClosed(this.ctx.res, this.delayMs))) return false;
      this.ctx.res.write(frame);
    } else {
      this.pending.push(frame);
    }
    return true;
  }

  /** Ends the response (headers first if nothing was written yet). */
  end(): void {
    if (this.ctx.res.destroyed) return;
    this.start();
    this.ctx.res.end(this.pending.length > 0 ? this.pending.join("") : undefined);
  }
}

function isWebSearchOn(value: Json | undefined): boolean {
  return value === "on" || value === true || value === "true";
}

/** Splits `model:key=value&…` into the id and the suffix parameters (chat only). */
function splitModelSuffix(raw: string): { id: string; params: Record<string, Json> } {
  const at = raw.indexOf(":");
  if (at < 0) return { id: raw, params: {} };
  const params: Record<string, Json> = {};
  for (const [k, v] of new URLSearchParams(raw.slice(at + 1))) {
    params[k] = v === "true" ? true : v === "false" ? false : v;
  }
  return { id: raw.slice(0, at), params };
}

function effectiveVeniceParameters(fromBody: unknown, fromSuffix: Record<string, Json>): Record<string, Json> {
  const out: Record<string, Json> = { ...VENICE_PARAMETER_DEFAULTS };
  for (const source of [isRecord(fromBody) ? fromBody : {}, fromSuffix]) {
    for (const [k, v] of Object.entries(source)) {
      // Unknown keys are silently dropped, as upstream does.
      if (k in VENICE_PARAMETER_DEFAULTS) out[k] = v as Json;
    }
  }
  return out;
}

function hasPartOfType(messages: readonly unknown[], type: string): boolean {
  return messages.some(
    (m) => isRecord(m) && Array.isArray(m.content) && m.content.some((p) => isRecord(p) && p.type === type),
  );
}

// ------------------------------------------------------------------ POST /chat/completions

/** `POST /chat/completions`: strict validation, admission, deterministic reply, burn, SSE or JSON. */
export async function handleChatCompletions(ctx: ApiContext): Promise<void> {
  if (!isRecord(ctx.body)) {
    sendApiJson(ctx, 400, detailedError([typeIssue([], "object", ctx.body)]));
    return;
  }
  const body = normalizeChatAliases(ctx.body);
  const issues = validateChatBody(body);
  if (issues.length > 0) {
    sendApiJson(ctx, 400, detailedError(issues));
    return;
  }
  if (typeof body.model !== "string" || body.model.trim() === "") {
    sendApiError(ctx, 400, "model is required");
    return;
  }
  const { id: modelId, params: suffixParams } = splitModelSuffix(body.model);
  const found = resolveModel(ctx.rt, modelId);
  if (!found) {
    sendApiError(ctx, 404, MSG_MODEL_NOT_FOUND);
    return;
  }
  ctx.record.model = found.id;
  const model = textModelOrReject(ctx, found, "/chat/completions");
  if (!model) return;
  const messages = body.messages as unknown[];
  const caps = model.model_spec.capabilities;
  if (Array.isArray(body.tools) && body.tools.length > 0 && !caps.supportsFunctionCalling) {
    sendApiError(ctx, 400, `Model ${model.id} does not support tools / function calling`);
    return;
  }
  if (!caps.supportsVision && hasPartOfType(messages, "image_url")) {
    sendApiError(ctx, 400, `Model ${model.id} does not support image inputs`);
    return;
  }
  if (isRecord(body.response_format) && body.response_format.type === "json_schema" && !caps.supportsResponseSchema) {
    sendApiError(ctx, 400, `Model ${model.id} does not support response_format json_schema`);
    return;
  }
  if (body.logprobs === true && !caps.supportsLogProbs) {
    sendApiError(ctx, 400, `Model ${model.id} does not support logprobs`);
    return;
  }

  // max_completion_tokens wins over the deprecated max_tokens; max_tokens ≤ 0 is ignored.
  let maxTokens: number | null = null;
  let maxField = "max_completion_tokens";
  if (typeof body.max_completion_tokens === "number") {
    maxTokens = body.max_completion_tokens;
  } else if (typeof body.max_tokens === "number" && body.max_tokens > 0) {
    maxTokens = body.max_tokens;
    maxField = "max_tokens";
  }
  const cap = model.model_spec.maxCompletionTokens;
  if (maxTokens !== null && maxTokens > cap) {
    sendApiError(
      ctx,
      400,
      `${maxField} (${maxTokens}) exceeds the maximum completion tokens (${cap}) for model ${model.id}`,
    );
    return;
  }

  const promptTokens = countPromptTokens(messages);
  if (promptTokens > model.model_spec.availableContextTokens) {
    contextLengthExceeded(ctx, model.model_spec.availableContextTokens, promptTokens);
    return;
  }

  const admitted = admitRequest(ctx, model);
  if (!admitted) return;

  const directives = parseDirectives(messages);
  const toolCall = planToolCall(body, messages);
  const plan: ChatJob["plan"] = toolCall
    ? { tokens: Math.min(toolCallTokens(toolCall), maxTokens ?? cap), finishReason: "tool_calls" }
    : planCompletion({
        promptTokens,
        maxTokens,
        modelMaxCompletionTokens: cap,
        directiveTokens: directives.tokens,
      });
  const n = typeof body.n === "number" ? body.n : 1;
  const cachedTokens = Math.min(promptTokens, directives.cachedTokens ?? 0);
  const cacheWriteTokens = Math.min(promptTokens - cachedTokens, directives.cacheWriteTokens ?? 0);
  const veniceParameters = effectiveVeniceParameters(body.venice_parameters, suffixParams);
  const webSearch = isWebSearchOn(veniceParameters.enable_web_search) && caps.supportsWebSearch;
  const job: ChatJob = {
    model,
    admitted,
    promptTokens,
    cachedTokens,
    cacheWriteTokens,
    plan,
    n,
    directives,
    extraFeeMicro: webSearch ? WEB_SEARCH_FEE_MICRO_DIEM : 0n,
    // echoed without the unset ones (the reference types `character_slug` as a string, never null)
    veniceParameters: {
      ...Object.fromEntries(Object.entries(veniceParameters).filter(([, v]) => v !== null)),
      web_search_citations: [],
    },
    id: `chatcmpl-${hexId()}`,
    created: Math.floor(ctx.rt.state.nowMs() / 1000),
    toolCall: toolCall ? { ...toolCall, id: `call_${hexId().slice(0, 24)}` } : undefined,
  };
  if (body.stream === true) {
    await streamChat(ctx, job);
  } else {
    await bufferedChat(ctx, job);
  }
}

interface ChatJob {
  model: SimTextModel;
  admitted: Admitted;
  promptTokens: number;
  cachedTokens: number;
  cacheWriteTokens: number;
  plan: { tokens: number; finishReason: "stop" | "length" | "tool_calls" };
  n: number;
  directives: SimDirectives;
  extraFeeMicro: bigint;
  veniceParameters: Record<string, Json>;
  id: string;
  created: number;
  /** the function call the reply is instead of text (`planToolCall`), with its call id */
  toolCall: (SimToolCall & { id: string }) | undefined;
}

/** A chat message's `tool_calls` entry for the job's call. */
function toolCallEntry(call: SimToolCall & { id: string }): Json {
  return { id: call.id, type: "function", function: { name: call.name, arguments: call.arguments } };
}

/**
 * The streamed deltas of a reply, each with the completion tokens it carries: text in content
 * pieces; a tool call as its head (id, name, empty arguments) then its arguments in pieces, the
 * call's tokens spread over them.
 */
function replyPieces(job: ChatJob, tokens: readonly string[]): { delta: Json; tokens: number }[] {
  const chunks = job.directives.chunks ?? DEFAULT_STREAM_CHUNKS;
  const call = job.toolCall;
  if (!call) return chunkTokens(tokens, chunks).map((p) => ({ delta: { content: p.text }, tokens: p.tokens }));
  const head = { index: 0, id: call.id, type: "function", function: { name: call.name, arguments: "" } };
  const size = Math.max(1, Math.ceil(call.arguments.length / Math.max(1, chunks)));
  const parts: string[] = [];
  for (let i = 0; i < call.arguments.length; i += size) parts.push(call.arguments.slice(i, i + size));
  const total = job.plan.tokens;
  const pieces: { delta: Json; tokens: number }[] = [
    { delta: { tool_calls: [head] }, tokens: parts.length ? 0 : total },
  ];
  parts.forEach((arg, i) => {
    const share = Math.floor(total / parts.length) + (i < total % parts.length ? 1 : 0);
    pieces.push({ delta: { tool_calls: [{ index: 0, function: { arguments: arg } }] }, tokens: share });
  });
  return pieces;
}

async function bufferedChat(ctx: ApiContext, job: ChatJob): Promise<void> {
  const tokens = replyTokens(job.plan.tokens);
  const delay = job.directives.chunkDelayMs ?? 0;
  if (delay > 0) {
    const chunks = Math.max(1, chunkTokens(tokens, job.directives.chunks ?? DEFAULT_STREAM_CHUNKS).length);
    // Buffered generation is not billed when the client leaves before it completes.
    if (!(await sleepUnlessClosed(ctx.res, delay * chunks))) return;
  }
  const completionTokens = job.plan.tokens * job.n;
  const charged = bill(ctx, {
    model: job.model,
    admitted: job.admitted,
    promptTokens: job.promptTokens,
    cachedTokens: job.cachedTokens,
    cacheWriteTokens: job.cacheWriteTokens,
    completionTokens,
    extraFeeMicro: job.extraFeeMicro,
  });
  const content = job.toolCall ? null : tokens.join("");
  const toolCalls = job.toolCall ? [toolCallEntry(job.toolCall)] : [];
  const choices: Json[] = [];
  for (let i = 0; i < job.n; i++) {
    choices.push({
      index: i,
      message: { role: "assistant", content, reasoning_content: null, tool_calls: toolCalls },
      finish_reason: job.plan.finishReason,
      logprobs: null,
      stop_reason: null,
    });
  }
  sendApiJson(
    ctx,
    200,
    {
      id: job.id,
      object: "chat.completion",
      created: job.created,
      model: job.model.id,
      choices,
      usage: chatUsage(job, completionTokens),
      cost: costOf(charged),
      prompt_logprobs: null,
      venice_parameters: job.veniceParameters,
    },
    job.admitted.headers,
  );
}

async function streamChat(ctx: ApiContext, job: ChatJob): Promise<void> {
  const fault = ctx.streamFault;
  const sink = new FrameSink(ctx, job.admitted.headers, job.directives.chunkDelayMs ?? 0);
  const frame = (choices: Json[], extra?: Record<string, Json>): string =>
    `data: ${JSON.stringify({
      id: job.id,
      object: "chat.completion.chunk",
      created: job.created,
      model: job.model.id,
      choices,
      ...extra,
    })}\n\n`;
  const billProduced = (completionTokens: number) =>
    bill(ctx, {
      model: job.model,
      admitted: job.admitted,
      promptTokens: job.promptTokens,
      cachedTokens: job.cachedTokens,
      cacheWriteTokens: job.cacheWriteTokens,
      completionTokens,
      extraFeeMicro: job.extraFeeMicro,
    });

  if (fault?.kind === "close_before_content") {
    sink.end();
    return;
  }
  const pieces = replyPieces(job, replyTokens(job.plan.tokens));
  // Stream faults stop after `afterChunks` content pieces (defaults: truncate 2, midstream error 0).
  let stopAfter = pieces.length;
  if (fault?.kind === "truncate_stream") stopAfter = Math.min(pieces.length, fault.afterChunks ?? 2);
  if (fault?.kind === "midstream_error") stopAfter = Math.min(pieces.length, fault.afterChunks ?? 0);

  if (!(fault?.kind === "midstream_error" && stopAfter === 0)) {
    for (let i = 0; i < job.n; i++) {
      sink.push(frame([{ index: i, delta: { role: "assistant", content: "" }, finish_reason: null, logprobs: null }]));
    }
  }
  let produced = 0;
  for (let p = 0; p < stopAfter; p++) {
    const piece = pieces[p];
    if (!piece) break;
    for (let i = 0; i < job.n; i++) {
      const ok = await sink.content(frame([{ index: i, delta: piece.delta, finish_reason: null, logprobs: null }]));
      if (!ok) {
        // Client went away mid-stream: bill what was produced so far.
        billProduced(produced);
        return;
      }
      produced += piece.tokens;
    }
  }
  if (fault?.kind === "truncate_stream") {
    billProduced(produced);
    sink.end();
    return;
  }
  if (fault?.kind === "midstream_error") {
    billProduced(produced);
    sink.push(
      `data: ${JSON.stringify({
        error: {
          message: MSG_OVERLOADED,
          type: "server_error",
          code: "model_overloaded",
          param: null,
          retry_after: 30,
        },
      })}\n\n`,
    );
    sink.push("data: [DONE]\n\n");
    sink.end();
    return;
  }
  const completionTokens = job.plan.tokens * job.n;
  const charged = billProduced(completionTokens);
  for (let i = 0; i < job.n; i++) {
    sink.push(frame([{ index: i, delta: {}, finish_reason: job.plan.finishReason, logprobs: null }]));
  }
  // Upstream always sends the usage chunk, whatever stream_options.include_usage says.
  sink.push(frame([], { usage: chatUsage(job, completionTokens), cost: costOf(charged) }));
  sink.push("data: [DONE]\n\n");
  sink.end();
}

// ------------------------------------------------------------------ POST /responses

/** `POST /responses`: stateless Responses API; permissive body; no `cost`; same burn accounting. */
export async function handleResponses(ctx: ApiContext): Promise<void> {
  const body = ctx.body;
  if (!isRecord(body)) {
    sendApiJson(ctx, 400, detailedError([typeIssue([], "object", body)]));
    return;
  }
  if (typeof body.model !== "string" || body.model.trim() === "") {
    sendApiError(ctx, 400, "model is required");
    return;
  }
  if (typeof body.input !== "string" && !Array.isArray(body.input)) {
    sendApiJson(ctx, 400, detailedError([typeIssue(["input"], "string | array", body.input)]));
    return;
  }
  const found = resolveModel(ctx.rt, body.model);
  if (!found) {
    sendApiError(ctx, 404, MSG_MODEL_NOT_FOUND);
    return;
  }
  ctx.record.model = found.id;
  const model = textModelOrReject(ctx, found, "/responses");
  if (!model) return;
  let maxTokens: number | null = null;
  if (body.max_output_tokens !== undefined && body.max_output_tokens !== null) {
    if (
      typeof body.max_output_tokens !== "number" ||
      !Number.isInteger(body.max_output_tokens) ||
      body.max_output_tokens < 1
    ) {
      sendApiJson(
        ctx,
        400,
        detailedError([typeIssue(["max_output_tokens"], "positive integer", body.max_output_tokens)]),
      );
      return;
    }
    maxTokens = body.max_output_tokens;
  }
  const cap = model.model_spec.maxCompletionTokens;
  if (maxTokens !== null && maxTokens > cap) {
    sendApiError(
      ctx,
      400,
      `max_output_tokens (${maxTokens}) exceeds the maximum completion tokens (${cap}) for model ${model.id}`,
    );
    return;
  }
  const messages = responsesInputToMessages(body.input, body.instructions);
  const promptTokens = countPromptTokens(messages);
  if (promptTokens > model.model_spec.availableContextTokens) {
    contextLengthExceeded(ctx, model.model_spec.availableContextTokens, promptTokens);
    return;
  }
  const admitted = admitRequest(ctx, model);
  if (!admitted) return;
  const directives = parseDirectives(messages);
  const plan = planCompletion({
    promptTokens,
    maxTokens,
    modelMaxCompletionTokens: cap,
    directiveTokens: directives.tokens,
  });
  const vp = isRecord(body.venice_parameters) ? body.venice_parameters : {};
  const webSearch =
    (body.web_search === true || isWebSearchOn(vp.enable_web_search as Json | undefined)) &&
    model.model_spec.capabilities.supportsWebSearch;
  const job: ResponsesJob = {
    model,
    admitted,
    promptTokens,
    cachedTokens: Math.min(promptTokens, directives.cachedTokens ?? 0),
    plan,
    directives,
    extraFeeMicro: webSearch ? WEB_SEARCH_FEE_MICRO_DIEM : 0n,
    id: `resp_${hexId()}`,
    messageId: `msg_${hexId()}`,
    createdAt: Math.floor(ctx.rt.state.nowMs() / 1000),
  };
  if (body.stream === true) {
    await streamResponses(ctx, job);
  } else {
    await bufferedResponses(ctx, job);
  }
}

interface ResponsesJob {
  model: SimTextModel;
  admitted: Admitted;
  promptTokens: number;
  cachedTokens: number;
  plan: { tokens: number; finishReason: "stop" | "length" };
  directives: SimDirectives;
  extraFeeMicro: bigint;
  id: string;
  messageId: string;
  createdAt: number;
}

function responseObject(
  job: ResponsesJob,
  status: "in_progress" | "completed" | "incomplete" | "failed",
  text: string | null,
  usage: { input: number; output: number } | null,
  error: Json = null,
): Json {
  const output: Json[] =
    text === null
      ? []
      : [
          {
            id: job.messageId,
            type: "message",
            role: "assistant",
            status: status === "incomplete" ? "incomplete" : "completed",
            content: [{ type: "output_text", text, annotations: [] }],
          },
        ];
  return {
    id: job.id,
    object: "response",
    created_at: job.createdAt,
    model: job.model.id,
    status,
    output,
    usage: usage
      ? {
          input_tokens: usage.input,
          output_tokens: usage.output,
          total_tokens: usage.input + usage.output,
          input_tokens_details: { cached_tokens: job.cachedTokens },
          output_tokens_details: { reasoning_tokens: Math.min(job.directives.reasoningTokens ?? 0, usage.output) },
        }
      : null,
    // the reference's `error` is an object: absent unless the response failed
    ...(error === null ? {} : { error }),
    incomplete_details: status === "incomplete" ? { reason: "max_output_tokens" } : null,
  };
}

async function bufferedResponses(ctx: ApiContext, job: ResponsesJob): Promise<void> {
  const tokens = replyTokens(job.plan.tokens);
  const delay = job.directives.chunkDelayMs ?? 0;
  if (delay > 0) {
    const chunks = Math.max(1, chunkTokens(tokens, job.directives.chunks ?? DEFAULT_STREAM_CHUNKS).length);
    if (!(await sleepUnlessClosed(ctx.res, delay * chunks))) return;
  }
  bill(ctx, {
    model: job.model,
    admitted: job.admitted,
    promptTokens: job.promptTokens,
    cachedTokens: job.cachedTokens,
    cacheWriteTokens: 0,
    completionTokens: job.plan.tokens,
    extraFeeMicro: job.extraFeeMicro,
  });
  const status = job.plan.finishReason === "length" ? "incomplete" : "completed";
  sendApiJson(
    ctx,
    200,
    responseObject(job, status, tokens.join(""), { input: job.promptTokens, output: job.plan.tokens }),
    job.admitted.headers,
  );
}

async function streamResponses(ctx: ApiContext, job: ResponsesJob): Promise<void> {
  const fault = ctx.streamFault;
  const sink = new FrameSink(ctx, job.admitted.headers, job.directives.chunkDelayMs ?? 0);
  let seq = 0;
  const event = (type: string, payload: Record<string, Json>): string =>
    `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: seq++, ...payload })}\n\n`;
  const billProduced = (completionTokens: number): void => {
    bill(ctx, {
      model: job.model,
      admitted: job.admitted,
      promptTokens: job.promptTokens,
      cachedTokens: job.cachedTokens,
      cacheWriteTokens: 0,
      completionTokens,
      extraFeeMicro: job.extraFeeMicro,
    });
  };
  if (fault?.kind === "close_before_content") {
    sink.end();
    return;
  }
  const tokens = replyTokens(job.plan.tokens);
  const pieces = chunkTokens(tokens, job.directives.chunks ?? DEFAULT_STREAM_CHUNKS);
  let stopAfter = pieces.length;
  if (fault?.kind === "truncate_stream") stopAfter = Math.min(pieces.length, fault.afterChunks ?? 2);
  if (fault?.kind === "midstream_error") stopAfter = Math.min(pieces.length, fault.afterChunks ?? 0);

  sink.push(event("response.created", { response: responseObject(job, "in_progress", null, null) }));
  const inProgressItem = {
    id: job.messageId,
    type: "message",
    role: "assistant",
    status: "in_progress",
    content: [],
  };
  const part = { item_id: job.messageId, output_index: 0, content_index: 0 };
  if (!(fault?.kind === "midstream_error" && stopAfter === 0)) {
    sink.push(event("response.output_item.added", { output_index: 0, item: inProgressItem }));
    sink.push(
      event("response.content_part.added", { ...part, part: { type: "output_text", text: "", annotations: [] } }),
    );
  }
  let produced = 0;
  for (let p = 0; p < stopAfter; p++) {
    const piece = pieces[p];
    if (!piece) break;
    if (!(await sink.content(event("response.output_text.delta", { ...part, delta: piece.text })))) {
      billProduced(produced);
      return;
    }
    produced += piece.tokens;
  }
  if (fault?.kind === "truncate_stream") {
    billProduced(produced);
    sink.end();
    return;
  }
  if (fault?.kind === "midstream_error") {
    billProduced(produced);
    sink.push(
      event("response.failed", {
        response: responseObject(job, "failed", null, null, { code: "model_overloaded", message: MSG_OVERLOADED }),
      }),
    );
    sink.push("data: [DONE]\n\n");
    sink.end();
    return;
  }
  billProduced(job.plan.tokens);
  const text = tokens.join("");
  const status = job.plan.finishReason === "length" ? "incomplete" : "completed";
  sink.push(event("response.output_text.done", { ...part, text }));
  sink.push(event("response.content_part.done", { ...part, part: { type: "output_text", text, annotations: [] } }));
  sink.push(
    event("response.output_item.done", {
      output_index: 0,
      item: {
        ...inProgressItem,
        status: status === "incomplete" ? "incomplete" : "completed",
        content: [{ type: "output_text", text, annotations: [] }],
      },
    }),
  );
  sink.push(
    event(status === "incomplete" ? "response.incomplete" : "response.completed", {
      response: responseObject(job, status, text, { input: job.promptTokens, output: job.plan.tokens }),
    }),
  );
  sink.push("data: [DONE]\n\n");
  sink.end();
}
