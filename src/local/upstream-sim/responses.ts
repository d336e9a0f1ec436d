import {
  type Admitted,
  admitRequest,
  bill,
  contextLengthExceeded,
  hexId,
  MSG_MODEL_NOT_FOUND,
  MSG_OVERLOADED,
  textModelOrReject,
} from "./admission.js";
import { WEB_SEARCH_FEE_MICRO_DIEM } from "./burn.js";
import { isWebSearchOn } from "./chat-body.js";
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
  replyTokens,
  responsesInputToMessages,
  type SimDirectives,
} from "./tokens.js";

/** `POST /responses` (§4): stateless Responses API; permissive body; no `cost`; same burn accounting. */
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
  const promptTokens = countPromptTokens(messages) + countDefinitionTokens(body.tools, body.tool_choice);
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
