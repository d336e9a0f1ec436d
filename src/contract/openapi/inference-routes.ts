import type { ResponseConfig, RouteConfig } from "@asteasolutions/zod-to-openapi";
import { type HeaderName, z } from "../common.js";
import {
  chatCompletionBody,
  chatCompletionResponse,
  imageGenerateBody,
  imageGenerateResponse,
  openAiImageBody,
  openAiImageResponse,
  responsesBody,
  responsesResponse,
  videoBody,
  videoCompleteResponse,
  videoQueueResponse,
  videoQuoteResponse,
  videoRetrieveBody,
  videoStatusResponse,
} from "../inference.js";
import {
  anthropicErrorBody,
  anthropicErrorType,
  anthropicMessageResponse,
  anthropicTool,
  countTokensBody,
  countTokensResponse,
  messagesBody,
} from "../messages.js";
import {
  BEARER,
  BODY_ERRORS,
  ERROR_DESCRIPTIONS,
  ERROR_HEADERS,
  errorResponses,
  headers,
  jsonBody,
  jsonResponse,
  registry,
} from "./registry.js";

const COST_HEADERS: HeaderName[] = ["supportReference", "costUsdc", "clearingPriceCents", "balanceRemaining"];

const INFERENCE_ERRORS = [...BODY_ERRORS, 401, 402, 404, 429, 502, 503];

const SSE = {
  "text/event-stream": {
    schema: {
      type: "string" as const,
      description:
        "With `stream: true`: SSE frames; no cost headers. Chat: content chunks, the usage chunk (its `usage` with `cost` and `cost_details` as on a buffered body), one `svc.cost` frame (costUsdc, clearingPriceCents, supportReference), then `[DONE]`.",
    },
  },
};

const ANTHROPIC_AUTH: RouteConfig["security"] = [{ bearerAuth: [] }, { anthropicApiKey: [] }];

/** The Messages routes' errors: the same statuses and headers, Anthropic's body, `x-should-retry`. */
function anthropicErrorResponses(statuses: number[]): Record<string, ResponseConfig> {
  const all = [...new Set([...statuses, 500])].sort((a, b) => a - b);
  return Object.fromEntries(
    all.map((s) => [
      String(s),
      {
        description: `${ERROR_DESCRIPTIONS[s] ?? "Error."} Anthropic's shape: \`error.type\` ${anthropicErrorType(s)}, the service's code in \`error.code\` and \`error.details.error_code\`.`,
        headers: headers(...(ERROR_HEADERS[s] ?? ["errorCode"]), "shouldRetry"),
        content: { "application/json": { schema: { $ref: "#/components/schemas/AnthropicErrorBody" } } },
      },
    ]),
  );
}

/**
 * The keyed inference routes (Bearer): chat, Responses, Anthropic's Messages API, images and video.
 * Answers the ones that have a pay-per-request twin under /x402/v1, by path
 * (pay-per-request-routes.ts documents the twins from them).
 */
export function registerInferenceRoutes(): Map<string, RouteConfig> {
  const twins = new Map<string, RouteConfig>();
  function registerTwin(config: RouteConfig): void {
    registry.registerPath(config);
    twins.set(config.path, config);
  }

  registerTwin({
    method: "post",
    path: "/v1/chat/completions",
    operationId: "createChatCompletion",
    tags: ["Inference"],
    summary: "OpenAI-compatible chat completion, routed to the cheapest eligible offer",
    security: BEARER,
    request: { body: jsonBody(chatCompletionBody) },
    responses: {
      200: {
        description: "Buffered completion (JSON, with the cost headers) or, with `stream: true`, an SSE stream",
        headers: headers(...COST_HEADERS),
        content: { "application/json": { schema: chatCompletionResponse }, ...SSE },
      },
      ...errorResponses(INFERENCE_ERRORS),
    },
  });

  registerTwin({
    method: "post",
    path: "/v1/responses",
    operationId: "createResponse",
    tags: ["Inference"],
    summary: "Stateless Responses facade (nothing stored)",
    security: BEARER,
    request: { body: jsonBody(responsesBody) },
    responses: {
      200: {
        description:
          "Buffered response (JSON, with the cost headers) or, with `stream: true`, `response.*` SSE events (cost on `response.completed`: flat `costUsdc` and `response.usage.cost`)",
        headers: headers(...COST_HEADERS),
        content: { "application/json": { schema: responsesResponse }, ...SSE },
      },
      ...errorResponses(INFERENCE_ERRORS),
    },
  });

  for (const path of ["/v1/responses", "/v1/responses/{id}"]) {
    registry.registerPath({
      method: "get",
      path,
      operationId: path.endsWith("{id}") ? "getResponse" : "listResponses",
      tags: ["Inference"],
      summary: "Responses are not stored: always 404",
      security: BEARER,
      request: path.endsWith("{id}") ? { params: z.object({ id: z.string() }) } : undefined,
      responses: errorResponses([401, 404], { 404: "Responses are not stored; there is nothing to retrieve." }),
    });
  }

  // ---- Anthropic's Messages API (Bearer or x-api-key; errors in Anthropic's shape) ----------------

  registry.register("AnthropicErrorBody", anthropicErrorBody);

  registry.register("AnthropicTool", anthropicTool);

  registerTwin({
    method: "post",
    path: "/v1/messages",
    operationId: "createMessage",
    tags: ["Inference"],
    summary: "Anthropic's Messages API, on the same pipeline as chat (Anthropic SDKs, Claude Code)",
    description:
      "Anthropic's request (`model` a catalog id, `max_tokens`, `messages` with text, image, tool_use and tool_result blocks, `system`, `tools`, `tool_choice`, `stop_sequences`, `temperature`, `top_p`, `top_k`, `metadata`, `stream`), translated onto the upstream's chat completions; unknown fields are ignored. Same key, scopes, budgets, debit, clearing and fall-forward as chat. Errors are Anthropic's `{type: error, error: {type, message}}` plus the service's `error.code`. See docs/decisions.md \"Anthropic Messages API\".",
    security: ANTHROPIC_AUTH,
    request: { body: jsonBody(messagesBody) },
    responses: {
      200: {
        description:
          "A message (JSON, with the cost headers; `usage.cost` and `usage.cost_details`) or, with `stream: true`, Anthropic's SSE events",
        headers: headers(...COST_HEADERS),
        content: {
          "application/json": { schema: anthropicMessageResponse },
          "text/event-stream": {
            schema: {
              type: "string" as const,
              description:
                "`message_start`, `ping`, per block `content_block_start` / `content_block_delta` (`text_delta`, `input_json_delta`, `thinking_delta`) / `content_block_stop`, then `message_delta` (stop reason; `usage` with `cost` and `cost_details`; flat `costUsdc`, `clearingPriceCents`, `supportReference`), `message_stop`. No cost headers. A stream that ends without usage: an `error` event (`stream_incomplete`, with the flat cost fields) and no `message_stop`; a settlement that does not commit: an `error` event (`settle_failed`).",
            },
          },
        },
      },
      ...anthropicErrorResponses([...BODY_ERRORS, 401, 402, 403, 404, 429, 502, 503]),
    },
  });

  registry.registerPath({
    method: "post",
    path: "/v1/messages/count_tokens",
    operationId: "countMessageTokens",
    tags: ["Inference"],
    summary: "The prompt estimate admission makes for a Messages body (free)",
    description:
      "`input_tokens` = ceil(UTF-8 bytes / 3) + 16 per message, over the translated messages and tool definitions: the generous estimate the service reserves for, not a tokenizer's count. Nothing is charged or recorded.",
    security: ANTHROPIC_AUTH,
    request: { body: jsonBody(countTokensBody) },
    responses: {
      200: jsonResponse(countTokensResponse, "The estimate"),
      ...anthropicErrorResponses([...BODY_ERRORS, 401, 403, 404]),
    },
  });

  registerTwin({
    method: "post",
    path: "/v1/image/generate",
    operationId: "generateImage",
    tags: ["Inference"],
    summary: "Synchronous image generation (one in flight per wallet)",
    security: BEARER,
    request: { body: jsonBody(imageGenerateBody) },
    responses: {
      200: jsonResponse(imageGenerateResponse, "Base64 images, one per variant", ...COST_HEADERS),
      ...errorResponses(INFERENCE_ERRORS),
    },
  });

  registerTwin({
    method: "post",
    path: "/v1/images/generations",
    operationId: "createImage",
    tags: ["Inference"],
    summary: "OpenAI-compatible image generation",
    security: BEARER,
    request: { body: jsonBody(openAiImageBody) },
    responses: {
      200: jsonResponse(openAiImageResponse, "OpenAI images result", ...COST_HEADERS),
      ...errorResponses(INFERENCE_ERRORS),
    },
  });

  registry.registerPath({
    method: "post",
    path: "/v1/video/quote",
    operationId: "quoteVideo",
    tags: ["Video"],
    summary: "Price a video job and say whether it clears now (no charge, no job)",
    security: BEARER,
    request: { body: jsonBody(videoBody) },
    responses: {
      200: jsonResponse(videoQuoteResponse, "The quote"),
      ...errorResponses([...BODY_ERRORS, 401, 404, 502, 503], { 503: "`keys_busy` (retry shortly), or no supply." }),
    },
  });

  registry.registerPath({
    method: "post",
    path: "/v1/video/queue",
    operationId: "queueVideo",
    tags: ["Video"],
    summary: "Queue a video job; the charge settles up front",
    security: BEARER,
    request: { body: jsonBody(videoBody) },
    responses: {
      200: jsonResponse(videoQueueResponse, "Queued", ...COST_HEADERS),
      ...errorResponses(INFERENCE_ERRORS),
    },
  });

  registry.registerPath({
    method: "post",
    path: "/v1/video/retrieve",
    operationId: "retrieveVideo",
    tags: ["Video"],
    summary: "Poll a job: JSON while rendering, `video/mp4` once; branch on Content-Type",
    security: BEARER,
    request: { body: jsonBody(videoRetrieveBody) },
    responses: {
      200: {
        description: "JSON status while rendering (or terminal), or the video bytes once (then 410)",
        headers: headers(),
        content: {
          "application/json": { schema: videoStatusResponse },
          "video/mp4": { schema: { type: "string", format: "binary" } },
        },
      },
      ...errorResponses([...BODY_ERRORS, 401, 404, 410, 502]),
    },
  });

  registry.registerPath({
    method: "post",
    path: "/v1/video/complete",
    operationId: "completeVideo",
    tags: ["Video"],
    summary: "Delete the provider-side media",
    security: BEARER,
    request: { body: jsonBody(videoRetrieveBody) },
    responses: {
      200: jsonResponse(videoCompleteResponse, "Media deleted"),
      ...errorResponses([...BODY_ERRORS, 401, 404, 502], { 400: "Invalid body, or the media is already gone." }),
    },
  });
  return twins;
}
