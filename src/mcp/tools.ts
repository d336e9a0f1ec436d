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
import { supportReferenceParam } from "../contract/common.js";
import { parseVideoRequest, type VideoRequest, videoBody, videoQuoteResponse } from "../contract/inference.js";
import { capacityResponse } from "../contract/market.js";
import { keyChangeOf } from "../domain/keys/api-key-service.js";
import { historyReader } from "../domain/keys/key-scopes.js";
import {
  presentAgentMe,
  presentHistoryRow,
  presentKey,
  presentModel,
  presentModelStats,
  presentVideoQuote,
} from "../http/present.js";
import { presentCapacity } from "../http/routes/market.js";
import { PAID_TOOLS } from "./inference-tools.js";
import { caller, defineTool, described, ON_INVALID, ON_SUPPLY, type ToolDefinition, UNITS } from "./tool-def.js";

export type { ToolContext, ToolDefinition } from "./tool-def.js";

/**
 * The connector's tools (SPEC "What the service does" 14). Each is what its REST
 * route is: the same contract schema checks the arguments, the same service method does the work
 * (authorisation and ownership included), the same presenter shapes the answer. Descriptions are
 * written for agents: what it costs, the units, what to do on each error code.
 */

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
  ...PAID_TOOLS.map((t) => t.definition),
];
