import { SIM_IMAGE_MODELS } from "./catalog-image.js";
import { SIM_TEXT_MODELS } from "./catalog-text.js";
import { SIM_VIDEO_MODELS } from "./catalog-video.js";
import type { SimModel } from "./models.js";

/**
 * Default catalog. Exported so tests can read prices and limits. Covers every shape the checklist
 * asks for: plain text rows, an `extended` long-context tier (`gemini-3-1-pro-preview`), cache
 * read/write prices, a text row without `pricing` (`llama-3.2-3b`), an `offline:true` row
 * (`deepseek-r1-671b`), a `betaModel:true` row (`kimi-k2-5`), a deprecated row (`llama-3.1-405b`),
 * the three image pricing shapes and four video flavours (no pricing).
 */
export const DEFAULT_SIM_MODELS: readonly SimModel[] = [...SIM_TEXT_MODELS, ...SIM_IMAGE_MODELS, ...SIM_VIDEO_MODELS];
