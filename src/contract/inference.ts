/**
 * SPEC "Inference" (Bearer only): the requests of chat, Responses, images and video, and their
 * answers. Each body is parsed once, here, into the typed request the domain takes
 * (`parseChatRequest`, `parseResponsesRequest`, `parseImageRequest`, `parseOpenAiImageRequest`,
 * `parseVideoRequest`): every rule that needs no database row lives in these schemas — the model
 * id, `stream`, `n`, the token caps, THE paid add-on refusal (SPEC 12), the image fields — with the
 * message and the field of its 400. Rules that need the catalog row or a price (image tiers, video
 * constraints, admission) are the domain's (src/domain/inference). The `…Body` objects are what
 * /openapi.json documents and the MCP tools list; the parses add the refusals no client sends on
 * purpose (paid add-ons, `return_binary`), in the order a 400 names them (the first issue speaks).
 *
 * One file per concern: what every request shares (inference-options.ts), the text routes
 * (inference-text.ts), images (inference-image.ts), video (inference-video.ts) and the answers
 * (inference-answers.ts). This file is the one import path the transports and the domain use.
 */

export {
  type ChatCompletionResponse,
  chatCompletionResponse,
  costFrame,
  imageGenerateResponse,
  openAiImageResponse,
  responsesResponse,
  type VideoQuoteResponse,
  videoCompleteResponse,
  videoQueueResponse,
  videoQuoteResponse,
  videoStatusResponse,
} from "./inference-answers.js";
export {
  type ImageRequest,
  imageGenerateBody,
  MAX_IMAGE_VARIANTS,
  type OpenAiImageOptions,
  openAiImageBody,
  parseImageRequest,
  parseOpenAiImageRequest,
} from "./inference-image.js";
export {
  type Json,
  MAX_REQUESTED_TOKENS,
  type ModalityRequest,
  paidAddOns,
  svcOptions,
  unpricedFields,
} from "./inference-options.js";
export {
  type ChatCompletionBody,
  type ChatMessage,
  type ChatRequest,
  chatCompletionBody,
  chatMessage,
  parseChatRequest,
  parseResponsesRequest,
  type ResponsesRequest,
  responsesBody,
} from "./inference-text.js";
export {
  parseVideoJobRef,
  parseVideoRequest,
  queueIdField,
  type VideoBody,
  type VideoRequest,
  videoBody,
  videoRetrieveBody,
} from "./inference-video.js";
export { modelId } from "./model-id.js";
