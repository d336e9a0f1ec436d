import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import { decimal6, uuid } from "../contract/common.js";
import {
  type ChatRequest,
  chatCompletionBody,
  imageGenerateBody,
  parseChatRequest,
  parseImageRequest,
} from "../contract/inference.js";
import type { PayPerRequestId } from "../contract/paid-routes.js";
import type { ImageRequest } from "../domain/inference/modalities/image/image.js";
import type { BufferedResult } from "../domain/inference/pipeline/sink.js";
import { formatDecimal6 } from "../lib/money.js";
import { caller, defineTool, described, ON_INVALID, ON_SUPPLY, type ToolDefinition, UNITS } from "./tool-def.js";
import { type Json, toolResult } from "./tool-result.js";

/**
 * The paid tools (docs/decisions.md "Paid MCP tools"): `chat_completion` and `generate_image`. With a
 * Bearer key they are debited from the key's account like their REST routes; with no key they are
 * paid per call through the x402 MCP binding (paid-calls.ts), run by the pay-per-request service on
 * the same REST body. Each tool says which REST body its arguments make and how an answer is shown.
 */

export interface PaidTool {
  definition: ToolDefinition;
  /** the pay-per-request route whose body and price the tool shares (contract/paid-routes.ts) */
  route: PayPerRequestId;
  /** the REST body the arguments make (the tool's fields only, buffered) */
  restBody(args: unknown): Json;
  /** the tool's structured answer from the buffered REST answer to `body`, paid per call */
  present(out: BufferedResult, body: Json): Json;
}

const PAY_PER_CALL =
  "With no API key it is paid per call with x402 (upto, USDC on Base): an unpaid call answers isError with the payment requirements (structuredContent), sign them and call again with _meta['x402/payment']; the receipt is _meta['x402/payment-response'].";

/**
 * The settled figures every paid answer carries (the facts REST renders as its cost headers);
 * `balanceRemainingUsdc` only when a balance paid (a call paid per call draws on none).
 */
function costFields({ cost }: BufferedResult): Json {
  const balance = cost.balanceRemainingMicroUsdc;
  return {
    costUsdc: formatDecimal6(cost.costMicroUsdc),
    clearingPriceCents: cost.clearingPriceCents,
    ...(balance !== null ? { balanceRemainingUsdc: formatDecimal6(balance) } : {}),
    supportReference: cost.supportReference,
    requestId: cost.requestId,
  };
}

const costOutput = {
  costUsdc: decimal6.describe("what this call cost: your balance moved, or the payment settled, by exactly this"),
  clearingPriceCents: z.number().int().describe("the posted price of the offer the call cleared at"),
  balanceRemainingUsdc: decimal6
    .optional()
    .describe("your confirmed USDC after settlement (absent when the call was paid per call)"),
  supportReference: uuid.describe("look the call up later with request_lookup (with a key) or the support page"),
  requestId: uuid,
};

/** The tool's fields of `args` (others dropped, as the listed schema says), as a buffered REST body. */
function pickBody(shape: z.ZodRawShape, args: unknown, extra: Json): Json {
  const a = (typeof args === "object" && args !== null ? args : {}) as Json;
  const body: Json = { ...extra };
  for (const k of Object.keys(shape)) if (a[k] !== undefined) body[k] = a[k];
  return body;
}

/**
 * The chat tool takes the buffered call's essentials: the contract's model, messages and max_tokens
 * (listed from the contract's body; parsed by the contract's `parseChatRequest`, the REST route's parse).
 */
const chatArgs = described(chatCompletionBody.pick({ model: true, messages: true, max_tokens: true }).strip(), {
  model: "a live text model id from list_models (a `svc/` prefix is accepted)",
  messages: 'OpenAI chat messages, e.g. [{"role":"user","content":"Hello"}]',
  max_tokens: "optional cap on completion tokens; it also caps what the call holds (or the payment's maximum)",
});

const chatOutput = z.object({
  id: z.string().optional(),
  model: z.string().optional(),
  message: z.object({ role: z.string(), content: z.string().nullable() }).passthrough(),
  finishReason: z.string().nullable(),
  usage: z.record(z.unknown()).nullable(),
  ...costOutput,
});

const chatBody = (args: unknown): Json => pickBody(chatArgs.shape, args, { stream: false });

function presentChat(out: BufferedResult): Json {
  const choice = (Array.isArray(out.body.choices) ? out.body.choices[0] : undefined) as Json | undefined;
  const message = (choice?.message ?? { role: "assistant", content: null }) as Json;
  return {
    id: typeof out.body.id === "string" ? out.body.id : undefined,
    model: typeof out.body.model === "string" ? out.body.model : undefined,
    message: { ...message, role: typeof message.role === "string" ? message.role : "assistant" },
    finishReason: typeof choice?.finish_reason === "string" ? choice.finish_reason : null,
    usage: (out.body.usage as Json | undefined) ?? null,
    ...costFields(out),
  };
}

const imageArgs = described(
  imageGenerateBody
    .pick({ model: true, prompt: true, variants: true, resolution: true, quality: true, format: true })
    .strip(),
  {
    model: "a live image model id from list_models (modality image)",
    prompt: "what to draw",
    variants: "optional: how many images, 1-4 (each is charged)",
    resolution: "optional: one of the row's constraints.resolutions",
    quality: "optional: one of the row's constraints.qualities",
    format: "optional: webp (default), png or jpeg",
  },
);

const imageOutput = z.object({
  id: z.string(),
  imageCount: z.number().int().describe("how many image content blocks follow the text block"),
  mimeType: z.string(),
  ...costOutput,
});

const imageBody = (args: unknown): Json => pickBody(imageArgs.shape, args, {});

const MIME: Record<string, string> = { webp: "image/webp", png: "image/png", jpeg: "image/jpeg", jpg: "image/jpeg" };

/** The images ride as MCP image blocks; structuredContent counts them (no base64 twice). */
const IMAGE_DATA = new WeakMap<Json, string[]>();

function presentImage(out: BufferedResult, format: unknown): Json {
  const images = Array.isArray(out.body.images)
    ? out.body.images.filter((i): i is string => typeof i === "string")
    : [];
  const value: Json = {
    id: typeof out.body.id === "string" ? out.body.id : "",
    imageCount: images.length,
    mimeType: MIME[typeof format === "string" ? format.toLowerCase() : "webp"] ?? "application/octet-stream",
    ...costFields(out),
  };
  IMAGE_DATA.set(value, images);
  return value;
}

function imageResult(value: Json): CallToolResult {
  const base = toolResult(value);
  const images = IMAGE_DATA.get(value) ?? [];
  const mimeType = String(value.mimeType);
  return { ...base, content: [...base.content, ...images.map((data) => ({ type: "image" as const, data, mimeType }))] };
}

const chatTool = defineTool({
  name: "chat_completion",
  title: "Chat completion (paid)",
  description: [
    "A paid, non-streaming chat completion (POST /v1/chat/completions): the metered burn times the clearing",
    "price (the posted price of the cheapest offer at or below your ceiling; see pricing.md). With an API key",
    "it is debited from your confirmed USDC. Returns the assistant message, costUsdc (what moved),",
    "clearingPriceCents, balanceRemainingUsdc (with a key) and supportReference. On an error nothing is",
    `charged. ${PAY_PER_CALL} ${UNITS}`,
    "Errors: insufficient_balance: confirmed USDC too low (pending does not count); fund the wallet",
    `(POST /v1/x402/refill) and retry. ${ON_SUPPLY} ${ON_INVALID} model_not_found / model_not_live /`,
    "unsupported_modality: pick a live text id from list_models. key_concurrency_limit: too many calls in",
    "flight on this key; retry after error.retryAfterSeconds. key_wait_timeout, upstream_error, settle_failed,",
    "internal_error: retry (not charged).",
  ].join(" "),
  input: chatArgs,
  output: chatOutput,
  annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true },
  scope: "inference",
  parse: (args: unknown): ChatRequest => parseChatRequest(chatBody(args)),
  async run(req: ChatRequest, { rt, viewer, signal, takeRequestId }) {
    return presentChat(await rt.services.chat.serve(caller(viewer, takeRequestId()), req, { signal }));
  },
});

const imageTool = defineTool({
  name: "generate_image",
  title: "Generate an image (paid)",
  description: [
    "A paid image generation (POST /v1/image/generate): the upstream's price for the model, resolution,",
    "quality and variants times the clearing price. With an API key it is debited from your confirmed USDC.",
    "Returns the images as image content blocks (base64) after a text block with imageCount, mimeType,",
    `costUsdc, clearingPriceCents and supportReference. On an error nothing is charged. ${PAY_PER_CALL} ${UNITS}`,
    `Errors: as chat_completion; model_not_found / model_not_live / unsupported_modality: pick a live image`,
    "id from list_models.",
  ].join(" "),
  input: imageArgs,
  output: imageOutput,
  annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true },
  scope: "inference",
  parse: (args: unknown): ImageRequest => parseImageRequest(imageBody(args)),
  async run(req: ImageRequest, { rt, viewer, signal, takeRequestId }) {
    return presentImage(
      await rt.services.image.serve(caller(viewer, takeRequestId()), req, { signal }),
      req.forward.format,
    );
  },
  result: imageResult,
});

export const PAID_TOOLS: readonly PaidTool[] = [
  { definition: chatTool, route: "chat_completions", restBody: chatBody, present: (out) => presentChat(out) },
  {
    definition: imageTool,
    route: "image_generate",
    restBody: imageBody,
    present: (out, body) => presentImage(out, body.format),
  },
];
