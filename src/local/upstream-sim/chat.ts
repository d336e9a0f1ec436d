import {
  type Admitted,
  admitRequest,
  bill,
  contextLengthExceeded,
  costOf,
  hexId,
  MSG_MODEL_NOT_FOUND,
  MSG_OVERLOADED,
  textModelOrReject,
} from "./admission.js";
import { WEB_SEARCH_FEE_MICRO_DIEM } from "./burn.js";
import {
  effectiveVeniceParameters,
  hasPartOfType,
  isWebSearchOn,
  normalizeChatAliases,
  splitModelSuffix,
  validateChatBody,
} from "./chat-body.js";
import { type ApiContext, resolveModel, sendApiError, sendApiJson } from "./context.js";
import { FrameSink } from "./frame-sink.js";
import { detailedError, isRecord, type Json, sleepUnlessClosed, typeIssue } from "./http-util.js";
import type { SimTextModel } from "./models.js";
import {
  chunkTokens,
  countDefinitionTokens,
  countPromptTokens,
  DEFAULT_STREAM_CHUNKS,
  parseDirectives,
  planCompletion,
  planToolCall,
  replyTokens,
  type SimDirectives,
  type SimToolCall,
  toolCallTokens,
} from "./tokens.js";

/** `POST /chat/completions` (§3): strict validation, admission, deterministic reply, burn, SSE or JSON. */
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

  const promptTokens =
    countPromptTokens(messages) + countDefinitionTokens(body.tools, body.tool_choice, body.response_format);
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

function chatUsage(job: ChatJob, completionTokens: number): Json {
  return {
    prompt_tokens: job.promptTokens,
    completion_tokens: completionTokens,
    total_tokens: job.promptTokens + completionTokens,
    prompt_tokens_details: { cached_tokens: job.cachedTokens, cache_creation_input_tokens: job.cacheWriteTokens },
    completion_tokens_details: { reasoning_tokens: Math.min(job.directives.reasoningTokens ?? 0, completionTokens) },
  };
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
