// GraphQL type, query and mutations of a supplier's upstream keys (masked: the secret never leaves).
// Same service calls as src/http/routes/supply.ts; every `where` is a rule of
// domain/supply/supply-reads.ts, the masked key one of contract/supply.ts.

import { idParam } from "../../contract/common.js";
import { maskedKey, registerUpstreamKeyBody } from "../../contract/supply.js";
import { liveKeyBalance } from "../../domain/ledger/live-figures.js";
import { listedOffers, liveOffers, newestFirst, upstreamKeyScopeFor } from "../../domain/supply/supply-reads.js";
import { builder } from "../builder.js";
import { burnsOf } from "../context.js";
import { withInput } from "../validate.js";
import { viewerOrThrow } from "./account.js";
import { IdInput, OfferRef, UpstreamKeyStatusEnum } from "./supply.js";

export const UpstreamKeyRef = builder.prismaObject("UpstreamKey", {
  description: "A registered upstream key, masked. The secret is stored encrypted and never returned.",
  select: { id: true },
  fields: (t) => ({
    id: t.exposeID("id"),
    label: t.exposeString("label"),
    status: t.field({ type: UpstreamKeyStatusEnum, select: { status: true }, resolve: (k) => k.status }),
    maskedKey: t.string({
      description: "`…` plus the last four characters of the secret",
      select: { secretLast4: true },
      resolve: (k) => maskedKey(k.secretLast4),
    }),
    balance: t.field({
      type: "MicroDiem",
      nullable: true,
      description: "the last DIEM balance the upstream reported, less what was sold on it since",
      select: { id: true, lastBalanceMicroDiem: true },
      resolve: async (k, _args, ctx) => liveKeyBalance(k.id, k.lastBalanceMicroDiem, await burnsOf(ctx)),
    }),
    lastBalanceAt: t.expose("lastBalanceAt", { type: "DateTime", nullable: true }),
    authFailedAt: t.expose("authFailedAt", { type: "DateTime", nullable: true }),
    cooldownUntil: t.expose("cooldownUntil", { type: "DateTime", nullable: true }),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
    revokedAt: t.expose("revokedAt", { type: "DateTime", nullable: true }),
    liveOffer: t.field({
      type: OfferRef,
      nullable: true,
      description: "the key's live (active or paused) offer",
      select: (_args, _ctx, nestedSelection) => ({
        offers: nestedSelection({ where: liveOffers(), take: 1 }),
      }),
      resolve: (k) => k.offers[0] ?? null,
    }),
    offers: t.relation("offers", {
      description: "Offers on this key, cancelled excluded, newest first.",
      query: { where: listedOffers(), orderBy: newestFirst() },
    }),
  }),
});
// ───────────────────────────── query ─────────────────────────────

builder.queryField("myUpstreamKeys", (t) =>
  t.prismaField({
    type: [UpstreamKeyRef],
    authScopes: { session: true },
    description: "The signed-in supplier's upstream keys (revoked included), newest first. Session only.",
    resolve: (query, _root, _args, ctx) =>
      ctx.db.upstreamKey.findMany({
        ...query,
        where: upstreamKeyScopeFor(viewerOrThrow(ctx, "account")),
        orderBy: newestFirst(),
      }),
  }),
);
// ───────────────────────────── mutations ─────────────────────────────

const UpstreamKeyPayload = builder
  .objectRef<{ upstreamKeyId: string; cancelledOffers?: number }>("UpstreamKeyPayload")
  .implement({
    fields: (t) => ({
      upstreamKey: t.prismaField({
        type: UpstreamKeyRef,
        resolve: (query, p, _args, ctx) =>
          ctx.db.upstreamKey.findUniqueOrThrow({
            ...query,
            where: { id: p.upstreamKeyId, ...upstreamKeyScopeFor(viewerOrThrow(ctx, "account")) },
          }),
      }),
      cancelledOffers: t.int({
        description: "revokeUpstreamKey only: offers this call cancelled",
        resolve: (p) => p.cancelledOffers ?? 0,
      }),
    }),
  });
const RegisterUpstreamKeyInput = builder.inputType("RegisterUpstreamKeyInput", {
  fields: (t) => ({
    upstreamApiKey: t.string({ required: true, description: "the upstream secret; checked, then stored encrypted" }),
    label: t.string({ required: true, description: "1-64 characters" }),
  }),
});

builder.mutationField("registerUpstreamKey", (t) =>
  t.field({
    type: UpstreamKeyPayload,
    authScopes: { session: true },
    description: "Registers an upstream key after checking it with the upstream (POST /v1/supply/upstream-keys).",
    args: { input: t.arg({ type: RegisterUpstreamKeyInput, required: true }) },
    resolve: withInput(registerUpstreamKeyBody, async (_root, { input }, ctx) => {
      const k = await ctx.services.supply.registerUpstreamKey({
        accountId: viewerOrThrow(ctx, "account").accountId,
        upstreamApiKey: input.upstreamApiKey,
        label: input.label,
      });
      return { upstreamKeyId: k.id };
    }),
  }),
);
const RevokeUpstreamKeyInput = IdInput("RevokeUpstreamKeyInput");

builder.mutationField("revokeUpstreamKey", (t) =>
  t.field({
    type: UpstreamKeyPayload,
    authScopes: { session: true },
    description: "Revokes the key row and cancels its non-cancelled offers; repeatable.",
    args: { input: t.arg({ type: RevokeUpstreamKeyInput, required: true }) },
    resolve: withInput(idParam, async (_root, { input }, ctx) => {
      const r = await ctx.services.supply.revokeUpstreamKey({
        accountId: viewerOrThrow(ctx, "account").accountId,
        upstreamKeyId: input.id,
      });
      return { upstreamKeyId: r.upstreamKeyId, cancelledOffers: r.cancelledOffers };
    }),
  }),
);
