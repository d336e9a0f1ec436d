import { apiKeyScopeFor } from "../../domain/keys/api-key-service.js";
import { MAX_CEILING_CENTS, MIN_CEILING_CENTS } from "../../lib/money.js";
import { builder } from "../builder.js";
import { ApiKeyRef, viewerOrThrow } from "./account.js";

const CreateApiKeyInput = builder.inputType("CreateApiKeyInput", {
  fields: (t) => ({ name: t.string({ required: true, description: "1-64 characters" }) }),
});

const CreatedApiKey = builder.objectRef<{ apiKey: string; keyId: string }>("CreateApiKeyPayload").implement({
  fields: (t) => ({
    apiKey: t.exposeString("apiKey", { description: "the plaintext `svc_…`, shown once" }),
    key: t.prismaField({
      type: ApiKeyRef,
      resolve: (query, p, _args, ctx) =>
        ctx.db.apiKey.findUniqueOrThrow({ ...query, where: { id: p.keyId, ...apiKeyScopeFor(viewerOrThrow(ctx)) } }),
    }),
  }),
});

builder.mutationField("createApiKey", (t) =>
  t.field({
    type: CreatedApiKey,
    authScopes: { authenticated: true },
    description: "Mints an API key (at most 10 active per account).",
    args: { input: t.arg({ type: CreateApiKeyInput, required: true }) },
    resolve: async (_root, { input }, ctx) => {
      const v = viewerOrThrow(ctx);
      const k = await ctx.services.apiKeys.createKey({
        accountId: v.accountId,
        name: input.name,
        source: v.credential === "bearer" ? "agent" : "session",
      });
      return { apiKey: k.apiKey, keyId: k.id };
    },
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
    resolve: async (_root, { input }, ctx) => {
      const v = viewerOrThrow(ctx);
      const keyId = String(input.id);
      await ctx.services.apiKeys.revokeKey({ accountId: v.accountId, keyId });
      return { id: keyId };
    },
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
    resolve: (_root, { input }, ctx) =>
      ctx.services.accounts.setMaxPrice({
        accountId: viewerOrThrow(ctx).accountId,
        maxPriceCentsPerDollar: input.maxPriceCentsPerDollar,
      }),
  }),
);

builder.subscriptionField("balanceChanged", (t) =>
  t.field({
    type: builder.objectRef<{ accountId: string; kind: string; at: string }>("BalanceChanged").implement({
      description: "The viewer's balances or ceiling changed; re-read `viewer` for the numbers.",
      fields: (f) => ({
        kind: f.exposeString("kind"),
        at: f.field({ type: "DateTime", resolve: (e) => new Date(e.at) }),
      }),
    }),
    authScopes: { authenticated: true },
    description: "Owner only: fires when the viewer's balances or ceiling change, from any process.",
    subscribe: (_root, _args, ctx) => ctx.bus.subscribe("balanceChanged", viewerOrThrow(ctx).accountId),
    resolve: (e) => e,
  }),
);
