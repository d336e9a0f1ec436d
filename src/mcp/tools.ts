import type { ToolAnnotations } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import { apiKeyList, createdApiKey, createKeyBody } from "../contract/account.js";
import {
  agentKeyResponse,
  agentMeResponse,
  agentRequestResponse,
  maxPriceBody,
  maxPriceResponse,
} from "../contract/agent.js";
import { capacityInput, modality, modelList, modelStatsQuery, modelStatsResponse } from "../contract/catalog.js";
import { decimal6, supportReferenceParam, uuid } from "../contract/common.js";
import {
  type ChatRequest,
  chatCompletionBody,
  parseChatRequest,
  parseVideoRequest,
  type VideoRequest,
  videoBody,
  videoQuoteResponse,
} from "../contract/inference.js";
import { capacityResponse } from "../contract/market.js";
import type { Viewer } from "../domain/identity/viewer.js";
import type { Caller } from "../domain/inference/session.js";
import { historyReader, type Scope } from "../domain/keys/key-scopes.js";
import { keyChangeOf } from "../http/keys.js";
import { presentAgentMe, presentHistoryRow, presentKey, presentVideoQuote } from "../http/present.js";
import { presentModel, presentModelStats } from "../http/routes/catalog.js";
import { presentCapacity } from "../http/routes/market.js";
import { DomainError } from "../lib/errors.js";
import type { Runtime } from "../runtime.js";
import { type Json, parseArguments } from "./tool-result.js";

/**
 * The connector's tools (SPEC "What the service does" 14, issue 17 item 4). Each is what its REST
 * route is: the same contract schema checks the arguments, the same service method does the work
 * (authorisation and ownership included), the same presenter shapes the answer. Descriptions are
 * written for agents: what it costs, the units, what to do on each error code.
 */

export interface ToolContext {
  rt: Runtime;
  /** the Bearer key's account, resolved before any MCP processing */
  viewer: Viewer;
  /** aborted when the HTTP client goes away (a paid call is then ended without a charge) */
  signal: AbortSignal;
  /** the HTTP request's `X-Svc-Request-Id`: a paid call's record takes it (one id per request) */
  requestId: string | undefined;
}

export interface ToolDefinition {
  name: string;
  title: string;
  description: string;
  /** the arguments' contract schema: its JSON Schema is the tool's `inputSchema` */
  input: z.AnyZodObject;
  /** the shape of a successful result's `structuredContent` (a contract response schema) */
  output: z.AnyZodObject;
  annotations: ToolAnnotations;
  /** the scope the tool needs (key-scopes.ts `requireScope`, before anything else); null: the service checks */
  scope: Scope | null;
  /** the arguments parsed once, by the contract, into what `run` takes (400 naming the field) */
  parse(args: unknown): unknown;
  run(args: unknown, ctx: ToolContext): Promise<Json>;
}

/**
 * Keeps each tool's `run` typed by what its arguments parse into: `input`'s parse, or `parse` where
 * the tool hands a service the contract's typed request (that parse is then the only one).
 */
function defineTool<I extends z.AnyZodObject, A = z.output<I>>(def: {
  name: string;
  title: string;
  description: string;
  input: I;
  output: z.AnyZodObject;
  annotations: ToolAnnotations;
  scope: Scope | null;
  parse?: (args: unknown) => A;
  run(args: A, ctx: ToolContext): Promise<Json>;
}): ToolDefinition {
  return { ...def, parse: def.parse ?? ((args) => parseArguments(def.input, args)) } as ToolDefinition;
}

const UNITS =
  'USDC and DIEM amounts are decimal strings with six decimals ("0.001234"); prices are integer cents per 1 USD of DIEM face value.';

const ON_INVALID =
  "invalid_request: an argument is wrong (error.field names it); fix it and call again, nothing was changed.";

const ON_SUPPLY = [
  "no_eligible_supply: every posted price is above your ceiling; call set_max_price with error.cheapestPostedCents, then repeat the same call.",
  "pool_empty: nothing is posted at any price; wait and retry later (capacity shows depth).",
  "insufficient_routable_at_price: offers at your ceiling are too small for this request; send a smaller request or retry later (raising the ceiling does not help).",
].join(" ");

/**
 * A contract schema with a description on some fields, for the agent reading `inputSchema` (the
 * contract's own descriptions are OpenAPI metadata, which the JSON Schema converter does not read).
 * Validation is the contract's, unchanged.
 */
function described<S extends z.AnyZodObject>(schema: S, text: Partial<Record<keyof S["shape"] & string, string>>): S {
  const shape: z.ZodRawShape = {};
  for (const [field, description] of Object.entries(text)) {
    const f = schema.shape[field] as z.ZodTypeAny | undefined;
    if (f && typeof description === "string") shape[field] = f.describe(description);
  }
  return schema.extend(shape) as unknown as S;
}

const capacityArgs = described(capacityInput, {
  maxPriceCents: "optional ceiling to look at, integer 30-80 cents per 1 USD of DIEM face; omit for the whole corridor",
});

const modelStatsArgs = described(modelStatsQuery, { window: "24h, 7d or 30d (default 7d)" });

const lookupArgs = described(supportReferenceParam, {
  support_reference: "the supportReference a paid call returned (a uuid)",
});

const maxPriceArgs = described(maxPriceBody, {
  maxPriceCentsPerDollar: "your new ceiling: integer 30-80 cents per 1 USD of DIEM face",
});

const createKeyArgs = described(createKeyBody, {
  name: "a name for the key, 1-64 characters (e.g. the sub-agent it is for)",
  limitUsdc: 'optional: the key\'s spending limit per period, USDC with six decimals, e.g. "2.000000"',
  limitReset: "optional: daily, weekly (from Monday), monthly or never (default), on UTC boundaries",
  maxPriceCentsPerDollar: "optional: the key's own price ceiling, integer 30-80",
  models: "optional: the catalog ids the key is limited to (from list_models); omit for every model",
  expiresAt: "optional: ISO 8601 instant after which the key stops working (401); must be in the future",
  scopes:
    "optional: what the key may do, 1-3 of inference, keys, account; default: your key's scopes, or inference alone when a policy is set; never more than your key holds",
});

/** What a key tool answers: the key as GET /v1/agent/keys lists it. */
const KEY_FIELDS =
  "id, name, keyPrefix, scopes (what it may do: inference, keys, account), parentId (the key it lives below; null: account-level), limitUsdc (null: no limit), limitReset, maxPriceCentsPerDollar, models (null: every model), expiresAt, spentUsdc (charged this period), remainingUsdc (null: no limit) and resetsAt (when the period ends)";

const videoArgs = described(videoBody, {
  model: "a live video model id from list_models (modality video)",
  duration: 'one of the row\'s constraints.durations, e.g. "5s"',
  image_url: "http(s) or data: URL; required by image-to-video models",
});

/**
 * The chat tool takes the buffered call's essentials: the contract's model, messages and max_tokens
 * (listed from the contract's body; parsed by `chatToolRequest`).
 */
const chatCompletionArgs = described(
  chatCompletionBody.pick({ model: true, messages: true, max_tokens: true }).strip(),
  {
    model: "a live text model id from list_models (a `svc/` prefix is accepted)",
    messages: 'OpenAI chat messages, e.g. [{"role":"user","content":"Hello"}]',
    max_tokens: "optional cap on completion tokens; it also caps what the call holds from your balance while it runs",
  },
);

const chatCompletionOutput = z.object({
  id: z.string().optional(),
  model: z.string().optional(),
  message: z.object({ role: z.string(), content: z.string().nullable() }).passthrough(),
  finishReason: z.string().nullable(),
  usage: z.record(z.unknown()).nullable(),
  costUsdc: decimal6.describe("what this call cost; your confirmed balance moved by exactly this"),
  clearingPriceCents: z.number().int().describe("the posted price of the offer the call cleared at"),
  balanceRemainingUsdc: decimal6.describe("your confirmed USDC after settlement"),
  supportReference: uuid.describe("look the call up later with request_lookup"),
  requestId: uuid,
});

/**
 * The chat tool's arguments as the buffered REST call's request, body for body: the tool's fields
 * (others are dropped, as the listed schema says), stream off, parsed once by the contract's
 * `parseChatRequest` (the REST route's parse).
 */
function chatToolRequest(args: unknown): ChatRequest {
  const a = (typeof args === "object" && args !== null ? args : {}) as Record<string, unknown>;
  const body: Record<string, unknown> = { stream: false };
  for (const k of Object.keys(chatCompletionArgs.shape)) if (a[k] !== undefined) body[k] = a[k];
  return parseChatRequest(body);
}

function header(headers: Record<string, string>, name: string): string {
  const v = headers[name];
  if (v === undefined) throw new DomainError("internal_error", `settled answer without ${name}`);
  return v;
}

function caller(v: Viewer, requestId?: string): Caller {
  return {
    accountId: v.accountId,
    apiKeyId: v.apiKeyId ?? "",
    ...(v.keyRules ? { key: v.keyRules } : {}),
    ...(requestId ? { requestId } : {}),
  };
}

export const TOOLS: readonly ToolDefinition[] = [
  defineTool({
    name: "agent_me",
    title: "My account",
    description: [
      "Your account as your API key sees it (GET /v1/agent/me): wallet address, confirmedUsdc (what pays for",
      "inference), pendingUsdc (top-ups awaiting confirmationBlocks block confirmations; never spendable),",
      "availableUsdc (confirmed minus what in-flight calls hold) and maxPriceCentsPerDollar (your ceiling, 30-80).",
      `Free. ${UNITS}`,
    ].join(" "),
    input: z.object({}),
    output: agentMeResponse,
    annotations: { readOnlyHint: true, openWorldHint: false },
    scope: "account",
    async run(_args, { rt, viewer }) {
      const a = await rt.services.accounts.getSummary(viewer);
      return presentAgentMe(a, rt.config.chain.confirmationBlocks) satisfies z.infer<typeof agentMeResponse>;
    },
  }),
  defineTool({
    name: "agent_key",
    title: "My API key",
    description: [
      "The API key this connector uses (GET /v1/agent/key): its",
      `${KEY_FIELDS}. Check remainingUsdc before spending when the key has a limit. Free. ${UNITS}`,
    ].join(" "),
    input: z.object({}),
    output: agentKeyResponse,
    annotations: { readOnlyHint: true, openWorldHint: false },
    scope: null,
    async run(_args, { rt, viewer }) {
      return presentKey(
        await rt.services.apiKeys.describeKey({ accountId: viewer.accountId, apiKeyId: viewer.apiKeyId ?? "" }),
      );
    },
  }),
  defineTool({
    name: "list_keys",
    title: "List my API keys",
    description: [
      "Your account's active API keys (GET /v1/agent/keys), newest first, with cap (10) and active: each key's",
      `${KEY_FIELDS}. Never the plaintext. Free. ${UNITS}`,
    ].join(" "),
    input: z.object({}),
    output: apiKeyList,
    annotations: { readOnlyHint: true, openWorldHint: false },
    scope: null,
    async run(_args, { rt, viewer }) {
      const { keys, cap } = await rt.services.apiKeys.listActive(viewer);
      return { keys: keys.map(presentKey), cap, active: keys.length };
    },
  }),
  defineTool({
    name: "create_key",
    title: "Mint an API key",
    description: [
      "Mints another API key on your account (POST /v1/agent/keys), e.g. one per sub-agent or tool, with an",
      "optional policy: a spending limit (limitUsdc per limitReset period), its own price ceiling, a model list, an expiry.",
      "Returns apiKey (the plaintext svc_…, shown once: hand it over or store it now) with the key's fields.",
      `Free. ${UNITS} Errors: ${ON_INVALID} key_limit_reached: 10 active keys already; revoke one first.`,
    ].join(" "),
    input: createKeyArgs,
    output: createdApiKey,
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
    scope: null,
    async run(args, { rt, viewer }) {
      const k = await rt.services.apiKeys.createKey({
        actor: viewer,
        name: args.name,
        source: "agent",
        policy: keyChangeOf(args),
        scopes: args.scopes,
      });
      return { ...presentKey(k), apiKey: k.apiKey };
    },
  }),
  defineTool({
    name: "capacity",
    title: "Market capacity",
    description: [
      "Routable supply right now (GET /v1/capacity): routableDiem and usdcToBuyAll in total and per price row",
      "(cheapest first), cheapestPostedCents (null when nothing is eligible) and which modalities are live.",
      "maxPriceCents (integer 30-80, optional) narrows the ladder to rows at or below it, as the router would",
      "with that ceiling. Free; a pre-flight view cached 30 s, not a reservation.",
      `${UNITS} Errors: ${ON_INVALID}`,
    ].join(" "),
    input: capacityArgs,
    output: capacityResponse,
    annotations: { readOnlyHint: true, openWorldHint: false },
    scope: null,
    async run(args, { rt }) {
      return presentCapacity(await rt.services.market.capacity(args.maxPriceCents));
    },
  }),
  defineTool({
    name: "list_models",
    title: "List models",
    description: [
      "The catalog (GET /v1/models): each row's id (the `model` value for calls), status (live = callable,",
      "coming_soon = listed only), modality (text, image, video), pricing (text: micro-USDC per million tokens,",
      "informational; the charge is metered burn × clearing price) and, for image and video, constraints",
      "(a missing key means the field must not be sent). modality (optional) keeps only that modality. Free.",
      `Errors: ${ON_INVALID}`,
    ].join(" "),
    input: z.object({ modality: modality.optional().describe("keep only rows of this modality") }),
    output: modelList,
    annotations: { readOnlyHint: true, openWorldHint: false },
    scope: null,
    async run(args, { rt }) {
      const rows = await rt.services.catalog.listModels();
      const kept = args.modality ? rows.filter((r) => r.modality === args.modality) : rows;
      return { object: "list", data: kept.map(presentModel) };
    },
  }),
  defineTool({
    name: "model_stats",
    title: "Model usage statistics",
    description: [
      "Which models the market uses (GET /v1/models/stats): models ranked by share of burn over window",
      "(24h, 7d or 30d; default 7d), with daily shares. When volume is below the privacy threshold",
      `hasSufficientVolume is false and models is empty. Free. Errors: ${ON_INVALID}`,
    ].join(" "),
    input: modelStatsArgs,
    output: modelStatsResponse,
    annotations: { readOnlyHint: true, openWorldHint: false },
    scope: null,
    async run(args, { rt }) {
      return presentModelStats(await rt.services.catalog.modelStats(args.window));
    },
  }),
  defineTool({
    name: "video_quote",
    title: "Quote a video job",
    description: [
      "Prices a video job without queueing it (POST /v1/video/quote, same body as the queue): quote_diem (the",
      "upstream quote plus the published markup), estimated_usdc (what it would cost at clearing_price_cents),",
      "max_eligible_offer_diem and eligible_routable_diem at your ceiling, and clears_now (true when one",
      "eligible offer holds the whole job). Free: no charge, no job, no support reference. The body is",
      "model-specific: read the row's constraints in list_models (durations, resolutions, aspect_ratios,",
      "audio; image_url for image-to-video, reference-to-video and video-to-video models). If clears_now is false",
      "and eligible_routable_diem is 0 while capacity shows supply, raise your ceiling with set_max_price; if the",
      `market is thin, a smaller job or a later retry helps, more money does not. ${UNITS}`,
      `Errors: ${ON_INVALID} model_not_found / model_not_live / unsupported_modality: pick a live video id from`,
      `list_models. ${ON_SUPPLY} keys_busy: every eligible supplier key is busy; retry shortly.`,
    ].join(" "),
    input: videoArgs,
    output: videoQuoteResponse,
    annotations: { readOnlyHint: true, openWorldHint: true },
    scope: "inference",
    parse: parseVideoRequest,
    async run(req: VideoRequest, { rt, viewer }) {
      return presentVideoQuote(await rt.services.videoQuotes.quote(caller(viewer), req));
    },
  }),
  defineTool({
    name: "request_lookup",
    title: "Look up a request",
    description: [
      "One of your requests by its support reference (GET /v1/agent/requests/{support_reference}): status,",
      "costUsdc, clearingPriceCents, burnDiem, token usage, attempts and timings; a stream still running is",
      "in_progress. chat_completion returns the reference as supportReference. Free.",
      `${UNITS} Errors: ${ON_INVALID} not_found: no request with this reference on your account.`,
    ].join(" "),
    input: lookupArgs,
    output: agentRequestResponse,
    annotations: { readOnlyHint: true, openWorldHint: false },
    scope: null,
    async run(args, { rt, viewer }) {
      return presentHistoryRow(
        await rt.services.accounts.requestDetail({
          ...historyReader(viewer),
          supportReference: args.support_reference,
        }),
      );
    },
  }),
  defineTool({
    name: "set_max_price",
    title: "Set my price ceiling",
    description: [
      "Sets your buyer ceiling (PATCH /v1/agent/max-price): maxPriceCentsPerDollar, an integer 30-80 cents per",
      "1 USD of DIEM face. The router picks the cheapest offer at or below it and you pay that offer's price,",
      "not the ceiling. Use it after no_eligible_supply with error.cheapestPostedCents. Free; applies to your",
      `next call. Errors: ${ON_INVALID} Outside 30-80 nothing is changed and nothing is clamped.`,
    ].join(" "),
    input: maxPriceArgs,
    output: maxPriceResponse,
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    scope: "account",
    async run(args, { rt, viewer }) {
      return rt.services.accounts.setMaxPrice({
        accountId: viewer.accountId,
        maxPriceCentsPerDollar: args.maxPriceCentsPerDollar,
      });
    },
  }),
  defineTool({
    name: "chat_completion",
    title: "Chat completion (paid)",
    description: [
      "A paid, non-streaming chat completion (POST /v1/chat/completions), debited from your confirmed USDC:",
      "the metered burn times the clearing price (the posted price of the cheapest offer at or below your",
      "ceiling; see pricing.md). Returns the assistant message, costUsdc (your balance moved by exactly this),",
      "clearingPriceCents, balanceRemainingUsdc and supportReference (for request_lookup). On an error nothing",
      `is charged. ${UNITS}`,
      "Errors: insufficient_balance: confirmed USDC too low (pending does not count); fund the wallet",
      `(POST /v1/x402/refill) and retry. ${ON_SUPPLY} ${ON_INVALID} model_not_found / model_not_live /`,
      "unsupported_modality: pick a live text id from list_models. key_concurrency_limit: too many calls in",
      "flight on this key; retry after error.retryAfterSeconds. key_wait_timeout, upstream_error, settle_failed,",
      "internal_error: retry (not charged).",
    ].join(" "),
    input: chatCompletionArgs,
    output: chatCompletionOutput,
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true },
    scope: "inference",
    parse: chatToolRequest,
    async run(req: ChatRequest, { rt, viewer, signal, requestId }) {
      const out = await rt.services.chat.buffered(caller(viewer, requestId), req, signal);
      const choice = (Array.isArray(out.body.choices) ? out.body.choices[0] : undefined) as Json | undefined;
      const message = (choice?.message ?? { role: "assistant", content: null }) as Json;
      return {
        id: typeof out.body.id === "string" ? out.body.id : undefined,
        model: typeof out.body.model === "string" ? out.body.model : undefined,
        message: { ...message, role: typeof message.role === "string" ? message.role : "assistant" },
        finishReason: typeof choice?.finish_reason === "string" ? choice.finish_reason : null,
        usage: (out.body.usage as Json | undefined) ?? null,
        costUsdc: header(out.headers, "X-Svc-Cost-Usdc"),
        clearingPriceCents: Number(header(out.headers, "X-Svc-Clearing-Price-Cents")),
        balanceRemainingUsdc: header(out.headers, "X-Balance-Remaining"),
        supportReference: header(out.headers, "X-Svc-Support-Reference"),
        requestId: header(out.headers, "X-Svc-Request-Id"),
      };
    },
  }),
];
