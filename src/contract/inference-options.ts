import { z } from "./common.js";
import { withRule } from "./parse.js";
import type { RequestControls } from "./request-controls.js";

/**
 * What every inference request shares (SPEC "Inference"; the requests themselves are
 * inference-text.ts, inference-image.ts and inference-video.ts): the `svc` options, `stream`, the
 * token caps, THE paid add-on refusal (SPEC 12) and the fields the service does not price.
 */

export type Json = Record<string, unknown>;

/** The largest `max_tokens` a request may ask for (a number beyond it is a 400, not a reservation). */
export const MAX_REQUESTED_TOKENS = 10_000_000;

export const streamFlag = z
  .boolean({ invalid_type_error: "stream must be a boolean." })
  .optional()
  .openapi({ description: "true: SSE (text/event-stream); omitted or false: buffered JSON" });

/** An optional token cap (absent or null: none): an integer 1–MAX_REQUESTED_TOKENS. */
export const tokenCap = (field: string) => {
  const message = `${field} must be an integer from 1 to ${MAX_REQUESTED_TOKENS}.`;
  return z
    .number({ invalid_type_error: message })
    .int({ message })
    .min(1, { message })
    .max(MAX_REQUESTED_TOKENS, { message })
    .nullable()
    .optional();
};

// ---- THE paid add-on refusal (SPEC 12): anything that bills beyond published pricing ----------

export function isObject(v: unknown): v is Json {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** A paid add-on switch counts as on unless absent, null, false or "off" (text and image routes alike). */
function switchedOn(v: unknown): boolean {
  return v !== undefined && v !== null && v !== false && v !== "off";
}

/** Tool types that bill beyond published pricing. */
const PAID_TOOL = /^(web_search|web_search_preview|x_search)(_|$)/;

/** A paid add-on switch: absent, null, false and "off" are off; any other value is the 400 `message`. */
export const offSwitch = (message: string) =>
  withRule(z.unknown(), (v) => (switchedOn(v) ? message : undefined)).optional();

/**
 * The text routes' paid add-ons: the provider's web search, scraping and X search
 * (`venice_parameters.enable_*`), a provider character (`venice_parameters.character_slug`: its
 * prompt is billed but not in the request, so no estimate bounds it), OpenAI's `web_search`, and paid
 * tool types, each a 400 naming its field. Not in the documented bodies (no client sends them expecting them to work), so their
 * rules are `withRule`s, which cost nothing when the field is not sent.
 */
export const paidAddOns = {
  venice_parameters: withRule(
    z.record(z.unknown(), { invalid_type_error: "venice_parameters must be an object." }),
    (vp) => {
      if (switchedOn(vp.enable_web_search) || switchedOn(vp.enable_web_scraping) || switchedOn(vp.enable_x_search)) {
        return "Web search, scraping and X search are refused: they bill beyond published pricing.";
      }
      if (vp.character_slug !== undefined && vp.character_slug !== null) {
        return "venice_parameters.character_slug is refused: a character's prompt is billed as prompt tokens the request does not show, beyond its maximum charge.";
      }
      return undefined;
    },
  )
    .nullable()
    .optional(),
  web_search: offSwitch("web_search is refused: it bills beyond published pricing."),
  tools: withRule(z.array(z.unknown(), { invalid_type_error: "tools must be an array." }), (tools) => {
    for (const t of tools) {
      if (isObject(t) && typeof t.type === "string" && PAID_TOOL.test(t.type)) {
        return `The ${t.type} tool is refused: it bills beyond published pricing.`;
      }
    }
    return undefined;
  })
    .nullable()
    .optional(),
};

/**
 * Fields the upstream documents that change what it bills in a way the service does not price, each a
 * 400 naming it (nothing held): `fallbacks` (on failure the upstream answers from another model,
 * billed at that model's rates, while the settlement prices the requested one). Absent, null or an
 * empty list asks for nothing. Other fields the upstream does not document are dropped, not refused
 * (docs/decisions.md "Venice as documented: what goes upstream").
 */
export const unpricedFields = {
  fallbacks: withRule(z.unknown(), (v) =>
    v === undefined || v === null || (Array.isArray(v) && v.length === 0)
      ? undefined
      : "fallbacks is refused: the upstream bills a fallback model at that model's rates, which this service does not price.",
  ).optional(),
};

const SVC_CEILING_MESSAGE = "svc.maxPriceCentsPerDollar must be an integer from 30 to 80.";

/**
 * The service's own body object (`svc`, SPEC naming conventions), on every inference route: options
 * for this service, never forwarded upstream. `maxPriceCentsPerDollar` (30-80) is the request's own
 * ceiling: it can only lower the effective one (the lowest of the account's, the key's and this).
 */
export const svcOptions = z
  .object(
    {
      maxPriceCentsPerDollar: z
        .number({ invalid_type_error: SVC_CEILING_MESSAGE })
        .int({ message: SVC_CEILING_MESSAGE })
        .min(30, { message: SVC_CEILING_MESSAGE })
        .max(80, { message: SVC_CEILING_MESSAGE })
        .optional()
        .openapi({ description: "this request's ceiling (30-80); only lowers the account's and the key's" }),
    },
    { invalid_type_error: "svc must be an object." },
  )
  .strict("svc takes only maxPriceCentsPerDollar.")
  .optional()
  .openapi({ description: "the service's own options; never forwarded upstream" });

/** The body without `svc` (what goes upstream), and the request's own ceiling from it. */
export function ownOptions(
  raw: unknown,
  svc: z.infer<typeof svcOptions>,
): { body: Json; maxPriceCents: number | undefined } {
  const body = raw as Json;
  if (!("svc" in body)) return { body, maxPriceCents: undefined };
  const { svc: _svc, ...rest } = body;
  return { body: rest, maxPriceCents: svc?.maxPriceCentsPerDollar };
}

/** What every parsed inference request carries. */
export interface ModalityRequest {
  /** the buyer's body as sent, checked by the contract (forwarded fields come from it) */
  body: Json;
  /** the model as the buyer sent it */
  model: string;
  stream: boolean;
  /** the request's own ceiling (`svc.maxPriceCentsPerDollar`); it only lowers the effective one */
  maxPriceCents: number | undefined;
  /**
   * OpenRouter's request controls (`models`, `provider.max_price`; request-controls.ts), on the
   * routes that parse them; absent: none sent (or a route that does not take them)
   */
  controls?: RequestControls | undefined;
}

/** The 400 of a prompt that is missing, not a string or blank (images and video). */
export const PROMPT_MESSAGE = "prompt must be a non-empty string.";
