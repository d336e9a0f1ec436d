import { type ExactDecimal, exactDecimal } from "../lib/decimal.js";
import { DomainError } from "../lib/errors.js";
import { z } from "./common.js";
import { bareModelId, modelId } from "./model-id.js";

/**
 * OpenRouter's request controls (docs/decisions.md "OpenRouter request controls"): `models` (the
 * fallback list), `provider` (routing preferences: `max_price` and `sort: "price"` honoured, the
 * rest only where they ask for what the router does anyway) and `usage` (usage is always sent).
 * A text route opts in by spreading `requestControlFields` into its body schema and putting
 * `requestControls(parsed)` on its typed request as `controls`, with `withoutControls` keeping them
 * out of what goes upstream; the endpoint (src/domain/inference/pipeline/endpoint.ts) acts on them.
 */

type Json = Record<string, unknown>;

/** At most this many distinct models are tried per request (`model`, then `models`, repeats skipped). */
export const MAX_MODELS = 5;

const MODELS_MESSAGE = `models must be an array of at most ${MAX_MODELS} model ids.`;

/** A price bound as OpenRouter sends it (a JSON number or a decimal string), read exactly. */
const priceBound = (field: string, unit: string, example: number) => {
  const message = `provider.max_price.${field} must be a non-negative number or decimal string (USD per ${unit}).`;
  return z
    .union([z.number(), z.string()], { errorMap: () => ({ message }) })
    .refine((v) => exactDecimal(v) !== undefined, { message })
    .nullable()
    .optional()
    .openapi({ type: "number", description: `USD per ${unit} (a number or a decimal string)`, example });
};

/**
 * A `provider` field honoured only with the value that asks for what the service does anyway
 * (OpenRouter's default, or the router's own rule); any other value is the 400 `message`.
 */
const onlyWhen = <T extends z.ZodTypeAny>(schema: T, ok: (v: z.output<T>) => boolean, message: string) =>
  schema.refine(ok, { message }).nullable().optional();

const NO_PROVIDERS =
  "cannot be honoured: there are no named providers to pick; every supplier key calls the same upstream (send [] or leave it out).";
const slugList = (field: string) =>
  onlyWhen(
    z.array(z.string(), { invalid_type_error: `provider.${field} must be an array of provider slugs.` }),
    (v) => v.length === 0,
    `provider.${field} ${NO_PROVIDERS}`,
  ).openapi({ description: "accepted only empty" });
const offFlag = (field: string, why: string) =>
  onlyWhen(
    z.boolean({ invalid_type_error: `provider.${field} must be a boolean.` }),
    (v) => v === false,
    `provider.${field}: true cannot be honoured: ${why}`,
  ).openapi({ description: "accepted only false" });

/** The `provider` fields and what each accepts (the table in docs/decisions.md). */
const providerFields = {
  sort: onlyWhen(
    z.unknown(),
    (v) => v === "price",
    'provider.sort must be "price": the router always clears the cheapest eligible offer first (throughput and latency sorting are not offered).',
  ).openapi({ type: "string", enum: ["price"], description: "accepted: the router sorts by price" }),
  max_price: z
    .object(
      {
        prompt: priceBound("prompt", "million prompt tokens", 0.7),
        completion: priceBound("completion", "million completion tokens", 2.5),
        request: priceBound("request", "request", 0),
        image: priceBound("image", "input image", 0),
        audio: priceBound("audio", "million audio tokens", 0),
      },
      { invalid_type_error: "provider.max_price must be an object." },
    )
    .strict("provider.max_price takes prompt, completion, request, image and audio.")
    .nullable()
    .optional()
    .openapi({
      description:
        "the most this request may cost, USD per million tokens: mapped for each model tried to a ceiling in cents per dollar (the lowest of it, the key's and the account's applies); request, image and audio hold always (nothing is priced per request, per image or per audio token)",
    }),
  allow_fallbacks: onlyWhen(
    z.boolean({ invalid_type_error: "provider.allow_fallbacks must be a boolean." }),
    (v) => v === true,
    "provider.allow_fallbacks: false cannot be honoured: a request that fails on a supplier key before its first byte always falls forward to the next cheapest.",
  ).openapi({ description: "accepted only true" }),
  require_parameters: offFlag(
    "require_parameters",
    "every supplier key calls the same upstream, which alone decides which parameters it takes.",
  ),
  data_collection: onlyWhen(
    z.unknown(),
    (v) => v === "allow",
    'provider.data_collection must be "allow": the router cannot pick supplier keys by data policy.',
  ).openapi({ type: "string", enum: ["allow"], description: "accepted only allow" }),
  zdr: offFlag("zdr", "the router cannot pick supplier keys by data retention."),
  enforce_distillable_text: offFlag("enforce_distillable_text", "the router cannot pick models by licence."),
  order: slugList("order"),
  only: slugList("only"),
  ignore: slugList("ignore"),
  quantizations: slugList("quantizations"),
};
const KNOWN_PROVIDER_FIELDS = new Set(Object.keys(providerFields));

/** The controls' body fields, for a text route's body schema (documented in /openapi.json). */
export const requestControlFields = {
  models: z
    .array(modelId, { invalid_type_error: MODELS_MESSAGE })
    .max(MAX_MODELS, { message: MODELS_MESSAGE })
    .nullable()
    .optional()
    .openapi({
      description: `OpenRouter's fallbacks: tried in order after \`model\` (or from the first, without \`model\`) when a model cannot be served before its first byte; at most ${MAX_MODELS} distinct models in all`,
      example: ["claude-sonnet-4-6", "qwen3-4b"],
    }),
  provider: z
    .object(providerFields, { invalid_type_error: "provider must be an object." })
    .passthrough()
    .superRefine((p, ctx) => {
      for (const k of Object.keys(p)) {
        if (!KNOWN_PROVIDER_FIELDS.has(k)) {
          ctx.addIssue({
            code: "custom",
            path: [k],
            message: `provider.${k} is not supported (provider takes sort, max_price and the fields that ask for what the router does anyway).`,
          });
          return;
        }
      }
    })
    .nullable()
    .optional()
    .openapi({
      description:
        'OpenRouter\'s routing preferences: `max_price` and `sort: "price"` are honoured; the other fields only with the value that asks for what the router does anyway (`allow_fallbacks: true`, `require_parameters`, `zdr` and `enforce_distillable_text` false, `data_collection: "allow"`, empty `order`, `only`, `ignore` and `quantizations`); anything else is 400 naming the field',
    }),
  usage: z
    .object(
      { include: z.boolean({ invalid_type_error: "usage.include must be a boolean." }).optional() },
      { invalid_type_error: 'usage must be an object ({"include": true}).' },
    )
    .strict("usage takes only include.")
    .nullable()
    .optional()
    .openapi({ description: "OpenRouter's usage accounting: accepted; usage, with its cost, is always sent" }),
  route: z
    .literal("fallback", {
      errorMap: () => ({ message: 'route must be "fallback" (OpenRouter\'s name for trying `models` in order).' }),
    })
    .nullable()
    .optional()
    .openapi({ description: 'OpenRouter\'s older companion of `models`: "fallback" accepted' }),
};

/** The control fields' names: never forwarded upstream. */
const CONTROL_FIELDS = Object.keys(requestControlFields);

/** provider.max_price's token prices, exact, in USD per million tokens (null: not bounded). */
export interface MaxPrice {
  prompt: ExactDecimal | null;
  completion: ExactDecimal | null;
}

/** What the endpoint acts on (absent on a request that sent none of them). */
export interface RequestControls {
  /** the models to try after `model`, in order: catalog ids (`svc/` dropped), each once, never `model` */
  models: string[];
  /** provider.max_price's token prices; null when it bounds neither */
  maxPrice: MaxPrice | null;
}

/** What a body schema with `requestControlFields` parsed (the fields the controls read). */
interface ParsedControls {
  model: string;
  models?: string[] | null | undefined;
  provider?: { max_price?: { prompt?: unknown; completion?: unknown } | null | undefined } | null | undefined;
}

/**
 * The controls of a parsed body, or undefined when it sent none that act. More than MAX_MODELS
 * distinct models (`model` included) is the 400 naming `models`.
 */
export function requestControls(b: ParsedControls): RequestControls | undefined {
  const models = b.models ? fallbacksOf(b.model, b.models) : [];
  const mp = b.provider?.max_price;
  const prompt = mp?.prompt != null ? (exactDecimal(mp.prompt) ?? null) : null;
  const completion = mp?.completion != null ? (exactDecimal(mp.completion) ?? null) : null;
  if (models.length === 0 && prompt === null && completion === null) return undefined;
  return { models, maxPrice: prompt !== null || completion !== null ? { prompt, completion } : null };
}

/** The models after `model`, as catalog ids, each once; at most MAX_MODELS in all. */
function fallbacksOf(model: string, models: readonly string[]): string[] {
  const first = bareModelId(model);
  const out: string[] = [];
  for (const m of models) {
    const id = bareModelId(m);
    if (id !== first && !out.includes(id)) out.push(id);
  }
  if (out.length + 1 > MAX_MODELS) {
    throw new DomainError(
      "invalid_request",
      `models: at most ${MAX_MODELS} distinct models per request, \`model\` included.`,
      { field: "models" },
    );
  }
  return out;
}

/** The body without the control fields (what may go upstream). */
export function withoutControls(body: Json): Json {
  if (!CONTROL_FIELDS.some((k) => k in body)) return body;
  const out = { ...body };
  for (const k of CONTROL_FIELDS) delete out[k];
  return out;
}

/** OpenRouter's `models` without `model`: the first of `models` is the model asked for. */
export function withPrimaryModel(raw: unknown): unknown {
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) return raw;
  const r = raw as Json;
  if (r.model !== undefined && r.model !== null) return raw;
  const first = Array.isArray(r.models) ? r.models[0] : undefined;
  return typeof first === "string" ? { ...r, model: first } : raw;
}
