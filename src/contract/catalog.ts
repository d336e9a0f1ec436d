import { MAX_CEILING_CENTS, MIN_CEILING_CENTS } from "../lib/money.js";
import { timestamp, z } from "./common.js";
import { parseWith } from "./parse.js";

/** SPEC "Catalog model row", "Model statistics", "Capacity" (the public market views). */

export const modality = z.enum(["text", "image", "video"]).openapi("Modality");

/** micro-USDC per 1M tokens (integers; informational: the debit is burn × clearing price). */
const tokenRates = {
  input_per_million: z.number().int(),
  output_per_million: z.number().int(),
  cache_per_million: z.number().int(),
  cache_write_per_million: z.number().int(),
};

/**
 * `pricing`, present on live rows only: text rows carry token rates (and an `extended` long-context
 * tier), image rows one of the flat-job forms, video rows their quote-time pricing. Integers in micro-USDC.
 */
export const modelPricing = z
  .object({
    ...Object.fromEntries(Object.entries(tokenRates).map(([k, v]) => [k, v.optional()])),
    extended: z
      .object({ context_token_threshold: z.number().int(), ...tokenRates })
      .optional()
      .openapi({ description: "long-context tier: above the threshold its rates apply to the whole request" }),
    per_image: z.number().int().optional(),
    per_image_by_resolution: z.record(z.number().int()).optional(),
    per_image_by_quality: z.record(z.record(z.number().int())).optional(),
    default_resolution: z.string().optional(),
    default_quality: z.string().optional(),
  })
  .passthrough()
  .openapi("ModelPricing");

/**
 * `constraints` (image and video rows only), exactly the published keys: a missing key means the
 * field must not be sent. Video rows carry `durations` and `model_type`.
 */
export const modelConstraints = z
  .object({
    durations: z
      .array(z.string())
      .optional()
      .openapi({ example: ["5s", "10s"] }),
    model_type: z.enum(["text-to-video", "image-to-video", "reference-to-video", "video-to-video"]).optional(),
    resolutions: z.array(z.string()).optional(),
    aspect_ratios: z.array(z.string()).optional(),
    audio: z.boolean().optional(),
    audio_configurable: z.boolean().optional(),
    prompt_character_limit: z.number().int().optional(),
  })
  .passthrough()
  .openapi("ModelConstraints");

export const modelRow = z
  .object({
    id: z.string().openapi({ description: "bare upstream slug: the `model` value in inference", example: "qwen3-4b" }),
    object: z.literal("model"),
    status: z.enum(["live", "coming_soon"]),
    modality,
    capabilities: z.record(z.unknown()),
    pricing: modelPricing.optional(),
    constraints: modelConstraints.optional(),
    name: z.string(),
    tier: z.enum(["frontier", "small"]),
    created: z.number().int().optional().openapi({ description: "unix seconds" }),
    regionRestrictions: z
      .array(z.string())
      .optional()
      .openapi({
        description:
          "the country codes the upstream serves this model in, as it publishes them; elsewhere it refuses the model (403 `model_region_restricted`). Absent: no restriction published",
        example: ["US"],
      }),
  })
  .openapi("Model");

export const modelList = z.object({ object: z.literal("list"), data: z.array(modelRow) }).openapi("ModelList");

/** `GET /v1/models/{id}`: a bare slug or a `svc/`-prefixed one (send the slash percent-encoded or as a path). */
export const modelIdParam = z.object({
  id: z.string().min(1).openapi({ description: "bare slug or `svc/<slug>`", example: "qwen3-4b" }),
});

/** SPEC "Limits": the stats windows (7d by default). */
export const STATS_WINDOW_VALUES = ["24h", "7d", "30d"] as const;
export const DEFAULT_STATS_WINDOW = "7d" satisfies (typeof STATS_WINDOW_VALUES)[number];
const WINDOW_MESSAGE = `window must be one of ${STATS_WINDOW_VALUES.join(", ")}.`;

/** `GET /v1/models/stats?window=`: 24h, 7d or 30d (default 7d); anything else is 400. */
export const modelStatsQuery = z.object({
  window: z
    .enum(STATS_WINDOW_VALUES, { errorMap: () => ({ message: WINDOW_MESSAGE }) })
    .default(DEFAULT_STATS_WINDOW)
    .openapi({ description: "statistics window" }),
});

/** `?window=` or GraphQL `window:` from any caller: absent → 7d; anything but 24h, 7d or 30d → the 400 naming `window`. */
export function parseStatsWindow(value: unknown): (typeof STATS_WINDOW_VALUES)[number] {
  return parseWith(modelStatsQuery, { window: value }).window;
}

export const modelStatsResponse = z
  .object({
    window: z.enum(STATS_WINDOW_VALUES),
    generatedAt: timestamp,
    hasSufficientVolume: z
      .boolean()
      .openapi({ description: "false below the privacy threshold, and then `models` is empty" }),
    models: z.array(
      z.object({
        id: z.string(),
        modality,
        rank: z.number().int().openapi({ description: "1 = most used by burn" }),
        usageShare: z.number().openapi({ description: "fraction of the window's burn (4 decimals)" }),
        daily: z.array(z.object({ day: z.string().openapi({ example: "2025-01-31" }), share: z.number() })),
      }),
    ),
  })
  .openapi("ModelStats");

const CAPACITY_MESSAGE = `maxPriceCents must be an integer ${MIN_CEILING_CENTS}-${MAX_CEILING_CENTS}.`;

/** The capacity filter as a number (an MCP tool's input): integer 30-80, optional; nothing is clamped. */
export const capacityMaxPriceCents = z
  .number({ invalid_type_error: CAPACITY_MESSAGE })
  .int({ message: CAPACITY_MESSAGE })
  .min(MIN_CEILING_CENTS, { message: CAPACITY_MESSAGE })
  .max(MAX_CEILING_CENTS, { message: CAPACITY_MESSAGE });

export const capacityInput = z.object({ maxPriceCents: capacityMaxPriceCents.optional() });

/** `GET /v1/capacity?maxPriceCents=`: the same filter as a query string (digits only). */
export const capacityQuery = z.object({
  maxPriceCents: z
    .string({ invalid_type_error: CAPACITY_MESSAGE })
    .regex(/^\d+$/, { message: CAPACITY_MESSAGE })
    .transform(Number)
    .pipe(capacityMaxPriceCents)
    .optional()
    .openapi({
      type: "integer",
      minimum: MIN_CEILING_CENTS,
      maximum: MAX_CEILING_CENTS,
      description: "narrow the ladder to prices at or below this (30-80; outside is 400, never clamped)",
    }),
});
