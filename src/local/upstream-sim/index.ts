/**
 * Local simulator of the upstream provider (Venice AI) API. See README.md in this folder.
 */
export { computeBurnMicroDiem, type SimUsageInput, textPricingToMicro, WEB_SEARCH_FEE_MICRO_DIEM } from "./burn.js";
export { DEFAULT_SIM_MODELS } from "./catalog.js";
export { SIM_VIDEO_FALLBACK_PRICE, SIM_VIDEO_PRICING, type SimVideoPrice } from "./catalog-video.js";
export { SIM_VENICE_VERSION } from "./context.js";
export { SIM_FAULT_KINDS, type SimFault, type SimFaultEntry, type SimFaultKind } from "./faults.js";
export { imageUnitPriceMicro } from "./images.js";
export type { SimBalancePatch, SimKeyInit, SimKeySnapshot } from "./keys.js";
export type {
  PriceUnit,
  SimImageModel,
  SimModel,
  SimTextModel,
  SimTextPricing,
  SimVideoModel,
} from "./models.js";
export { formatMicro, parseDecimalToMicro } from "./money.js";
export type { SimRecordedUsage, SimRequestFilter, SimRequestRecord } from "./request-log.js";
export {
  API_ROUTES,
  startUpstreamSimulator,
  type UpstreamSimulator,
  type UpstreamSimulatorOptions,
} from "./server.js";
export { SimState } from "./state.js";
export {
  countDefinitionTokens,
  countPromptTokens,
  PER_MESSAGE_OVERHEAD_TOKENS,
  parseDirectives,
  planCompletion,
  responsesInputToMessages,
  type SimDirectives,
} from "./tokens.js";
export { quoteVideoMicro, SIM_MP4_BYTES } from "./video.js";
export {
  SIM_VIDEO_SELECTABLE_OUTCOMES,
  type SimVideoBurn,
  type SimVideoConfig,
  type SimVideoJob,
  type SimVideoOutcome,
  type SimVideoSelectableOutcome,
} from "./video-jobs.js";
