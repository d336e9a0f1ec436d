import { createKeyInput, maxPriceBody, updateKeyInput } from "../../contract/account.js";
import { idParam } from "../../contract/common.js";
import { apiKeyScopeFor, keyChangeOf } from "../../domain/keys/api-key-service.js";
import { MAX_KEY_LIMIT_MICRO_USDC, MAX_KEY_MODELS } from "../../lib/key-bounds.js";
import { MAX_CEILING_CENTS, MIN_CEILING_CENTS } from "../../lib/money.js";
import { builder } from "../builder.js";
import { withInput } from "../validate.js";
import { ApiKeyRef, KeyLimitResetEnum, KeyScopeEnum, viewerOrThrow } from "./account.js";

const LIMIT_DESCRIPTION = `the key's spending limit per period, micro-USDC: above 0, at most ${MAX_KEY_LIMIT_MICRO_USDC}`;
const MODELS_DESCRIPTION = `1-${MAX_KEY_MODELS} catalog ids the key is limited to (bare or \`svc/\`)`;

// The inputs' fields are parsed by the contract's twins of REST's bodies (`createKeyInput`,
// `updateKeyInput`), so a refusal reads as REST's 400 and nothing is written.
const CreateApiKeyInput = builder.inputType("CreateApiKeyInput", {
  fields: (t) => ({
    name: t.string({ required: true, description: "1-64 characters" }),
    limitUsdc: t.field({ type: "MicroUsdc", description: LIMIT_DESCRIPTION }),
    limitReset: t.field({ type: KeyLimitResetEnum, description: "when the limit starts again (default NEVER)" }),
    maxPriceCentsPerDollar: t.int({ description: `the key's own ceiling, ${MIN_CEILING_CENTS}-${MAX_CEILING_CENTS}` }),
    models: t.stringList({
      description: `${MODELS_DESCRIPTION}; omitted: every model`,
    }),
    expiresAt: t.field({ type: "DateTime", description: "after it the key is refused; must be in the future" }),
    scopes: t.field({
      type: [KeyScopeEnum],
      description:
        "what the key may do; default: every scope of the minting key, or INFERENCE alone when the key has a policy; never more than the minting key holds",
    }),
  }),
});

const CreatedApiKey = builder.objectRef<{ apiKey: string; keyId: string }>("CreateApiKeyPayload").implement({
  fields: (t) => ({
    apiKey: t.exposeString("apiKey", { description: "the plaintext `svc_…`, shown once" }),
    key: t.prismaField({
      type: ApiKeyRef,
      resolve: (query, p, _args, ctx) =>
        ctx.db.apiKey.findUniqueOrThrow({
          ...query,
          where: { id: p.keyId, ...apiKeyScopeFor(viewerOrThrow(ctx, null)) },
        }),
    }),
  }),
});

builder.mutationField("createApiKey", (t) =>
  t.field({
    type: CreatedApiKey,
    authScopes: { authenticated: true },
    description: "Mints an API key (at most 10 active per account).",
    args: { input: t.arg({ type: CreateApiKeyInput, required: true }) },
    resolve: withInput(createKeyInput, async (_root, { input }, ctx) => {
      const v = viewerOrThrow(ctx, null);
      const k = await ctx.services.apiKeys.createKey({
        actor: v,
        name: input.name,
        source: v.credential === "bearer" ? "agent" : "session",
        policy: keyChangeOf(input),
        scopes: input.scopes ?? undefined,
      });
      return { apiKey: k.apiKey, keyId: k.id };
    }),
  }),
);

const UpdateApiKeyInput = builder.inputType("UpdateApiKeyInput", {
  description: "Only the fields sent change; null removes a setting (as PATCH /v1/agent/keys/{id}).",
  fields: (t) => ({
    id: t.id({ required: true }),
    name: t.string({ description: "1-64 characters" }),
    limitUsdc: t.field({ type: "MicroUsdc", description: LIMIT_DESCRIPTION }),
    limitReset: t.field({ type: KeyLimitResetEnum, description: "when the limit starts again; null: NEVER" }),
    maxPriceCentsPerDollar: t.int({ description: `the key's own ceiling, ${MIN_CEILING_CENTS}-${MAX_CEILING_CENTS}` }),
    models: t.stringList({ description: `${MODELS_DESCRIPTION}; null: every model` }),
    expiresAt: t.field({ type: "DateTime", description: "after it the key is refused; must be in the future" }),
  }),
});

builder.mutationField("updateApiKey", (t) =>
  t.field({
    type: builder.objectRef<{ keyId: string }>("UpdateApiKeyPayload").implement({
      fields: (f) => ({
        key: f.prismaField({
          type: ApiKeyRef,
          resolve: (query, p, _args, ctx) =>
            ctx.db.apiKey.findUniqueOrThrow({
              ...query,
              where: { id: p.keyId, ...apiKeyScopeFor(viewerOrThrow(ctx, null)) },
            }),
        }),
      }),
    }),
    authScopes: { authenticated: true },
    description:
      "Changes one of the account's active keys: its name and policy (limit, period, ceiling, models, expiry). Another account's key or a revoked one is not_found; an expired one is conflict.",
    args: { input: t.arg({ type: UpdateApiKeyInput, required: true }) },
    resolve: withInput(idParam.merge(updateKeyInput), async (_root, { input }, ctx) => {
      const k = await ctx.services.apiKeys.updateKey({
        actor: viewerOrThrow(ctx, null),
        keyId: input.id,
        change: keyChangeOf(input),
      });
      return { keyId: k.id };
    }),
  }),
);

const RevokeApiKeyInput = builder.inputType("RevokeApiKeyInput", {
  fields: (t) => ({ id: t.id({ required: true }) }),
});

builder.mutationField("revokeApiKey", (t) =>
  t.field({
    type: builder.objectRef<{ id: string }>("RevokeApiKeyPayload").implement({
      fields: (f) => ({ id: f.exposeID("id"), status: f.string({ resolve: () => "revoked" }) }),
    }),
    authScopes: { authenticated: true },
    description: "Revokes one of the account's active keys (the calling key included).",
    args: { input: t.arg({ type: RevokeApiKeyInput, required: true }) },
    resolve: withInput(idParam, async (_root, { input }, ctx) => {
      await ctx.services.apiKeys.revokeKey({ actor: viewerOrThrow(ctx, null), keyId: input.id });
      return { id: input.id };
    }),
  }),
);

const SetMaxPriceInput = builder.inputType("SetMaxPriceInput", {
  fields: (t) => ({
    maxPriceCentsPerDollar: t.int({ required: true, description: `${MIN_CEILING_CENTS}-${MAX_CEILING_CENTS}` }),
  }),
});

builder.mutationField("setMaxPrice", (t) =>
  t.field({
    type: builder.objectRef<{ walletAddress: string; maxPriceCentsPerDollar: number }>("SetMaxPricePayload").implement({
      fields: (f) => ({
        walletAddress: f.exposeString("walletAddress"),
        maxPriceCentsPerDollar: f.exposeInt("maxPriceCentsPerDollar"),
      }),
    }),
    authScopes: { authenticated: true },
    description: `Sets the buyer ceiling (integer ${MIN_CEILING_CENTS}-${MAX_CEILING_CENTS}; nothing is clamped).`,
    args: { input: t.arg({ type: SetMaxPriceInput, required: true }) },
    resolve: withInput(maxPriceBody, (_root, { input }, ctx) =>
      ctx.services.accounts.setMaxPrice({
        accountId: viewerOrThrow(ctx, "account").accountId,
        maxPriceCentsPerDollar: input.maxPriceCentsPerDollar,
      }),
    ),
  }),
);

builder.subscriptionField("balanceChanged", (t) =>
  t.field({
    type: builder.objectRef<{ accountId: string; kind: string; at: string }>("BalanceChanged").implement({
      description: "The viewer's balances, ceiling or API keys changed; re-read `viewer` for the numbers.",
      fields: (f) => ({
        kind: f.exposeString("kind"),
        at: f.field({ type: "DateTime", resolve: (e) => new Date(e.at) }),
      }),
    }),
    authScopes: { authenticated: true },
    description: "Owner only: fires when the viewer's balances, ceiling or API keys change, from any process.",
    subscribe: (_root, _args, ctx) => ctx.bus.subscribe("balanceChanged", viewerOrThrow(ctx, "account").accountId),
    resolve: (e) => e,
  }),
);
