// GraphQL types, queries, mutations and subscriptions of the supply side's offers (upstream keys are
// upstream-keys.ts, earnings and payouts supplier-earnings.ts). Same service calls as
// src/http/routes/supply.ts; every `where` is a rule of domain/supply/supply-reads.ts and every derived
// field one of contract/supply.ts (the REST views use the same ones). The secret never leaves.

import type { SupplyChangeEvent } from "../../adapters/pubsub.js";
import { idParam } from "../../contract/common.js";
import { postOfferInput, soldMicroDiem, updateOfferInput } from "../../contract/supply.js";
import { liveOffer } from "../../domain/ledger/live-figures.js";
import { MAX_SCHEDULE_STEPS, type PriceStep, storedSchedule } from "../../domain/supply/price-schedule.js";
import { newestFirst, offerOwnerScopeFor, offerScopeFor } from "../../domain/supply/supply-reads.js";
import { MAX_OFFER_PRICE_CENTS, MIN_OFFER_PRICE_CENTS } from "../../lib/money.js";
import { builder } from "../builder.js";
import { burnsOf } from "../context.js";
import { withInput } from "../validate.js";
import { viewerOrThrow } from "./account.js";

export const UpstreamKeyStatusEnum = builder.enumType("UpstreamKeyStatus", {
  description: "active; auth_failed (the upstream refused it at the last check: not routed); revoked.",
  values: {
    ACTIVE: { value: "active" },
    AUTH_FAILED: { value: "auth_failed" },
    REVOKED: { value: "revoked" },
  } as const,
});

const OfferStatusEnum = builder.enumType("OfferStatus", {
  description: "A live offer is ACTIVE or PAUSED (at most one per upstream key).",
  values: {
    ACTIVE: { value: "active" },
    PAUSED: { value: "paused" },
    DEPLETED: { value: "depleted" },
    EXPIRED: { value: "expired" },
    CANCELLED: { value: "cancelled" },
  } as const,
});

const OfferStatusChangeEnum = builder.enumType("OfferStatusChange", {
  description: "What updateOffer may set: PAUSED stops routing, ACTIVE resumes it.",
  values: { ACTIVE: { value: "active" }, PAUSED: { value: "paused" } } as const,
});

const PriceStepRef = builder.objectRef<PriceStep>("PriceStep").implement({
  description: "One step of a price schedule: from `fromUtc` (UTC, HH:MM) on, the offer's price is this.",
  fields: (t) => ({
    fromUtc: t.exposeString("fromUtc"),
    priceCentsPerDollar: t.exposeInt("priceCentsPerDollar"),
  }),
});

const PriceStepInput = builder.inputType("PriceStepInput", {
  fields: (t) => ({
    fromUtc: t.string({ required: true, description: "UTC, HH:MM; strictly later than the previous step" }),
    priceCentsPerDollar: t.int({ required: true, description: `${MIN_OFFER_PRICE_CENTS}-${MAX_OFFER_PRICE_CENTS}` }),
  }),
});

const SCHEDULE_DESCRIPTION = `Price steps through the UTC day (1-${MAX_SCHEDULE_STEPS}, fromUtc strictly increasing): the effective price is the step whose time most recently passed today, else priceCentsPerDollar.`;

export const OfferRef = builder.prismaObject("Offer", {
  description: "A supplier's ask: DIEM on one upstream key at a price, expiring at UTC midnight.",
  fields: (t) => ({
    id: t.exposeID("id"),
    upstreamKeyId: t.exposeID("upstreamKeyId"),
    upstreamKey: t.relation("upstreamKey"),
    keyStatus: t.field({
      type: UpstreamKeyStatusEnum,
      select: { upstreamKey: { select: { status: true } } },
      resolve: (o) => o.upstreamKey.status,
    }),
    priceCentsPerDollar: t.exposeInt("priceCentsPerDollar", { description: "the offer's own price" }),
    effectivePriceCentsPerDollar: t.int({
      description:
        "the price it clears at now: its schedule's step that most recently passed today, else priceCentsPerDollar",
      select: { priceCentsPerDollar: true, schedule: true },
      resolve: (o, _args, ctx) => ctx.services.offers.effectivePriceNow(o),
    }),
    schedule: t.field({
      type: [PriceStepRef],
      nullable: true,
      description: SCHEDULE_DESCRIPTION,
      select: { schedule: true },
      resolve: (o) => storedSchedule(o.schedule),
    }),
    repostDaily: t.exposeBoolean("repostDaily", {
      description: "a standing offer: posted again on the same key at each UTC midnight",
    }),
    dailyQuantity: t.expose("dailyQuantityMicroDiem", {
      type: "MicroDiem",
      nullable: true,
      description: "caps each daily repost's quantity; null: the key's fresh balance",
    }),
    repostedFromId: t.exposeID("repostedFromId", {
      nullable: true,
      description: "the expired offer this one re-posts; null: posted by the supplier",
    }),
    quantity: t.expose("quantityMicroDiem", { type: "MicroDiem" }),
    remaining: t.field({
      type: "MicroDiem",
      select: { id: true, remainingMicroDiem: true, reservedMicroDiem: true },
      resolve: async (o, _args, ctx) => liveOffer(o, await burnsOf(ctx)).remainingMicroDiem,
    }),
    reserved: t.field({
      type: "MicroDiem",
      description: "held by requests in flight",
      select: { id: true, remainingMicroDiem: true, reservedMicroDiem: true },
      resolve: async (o, _args, ctx) => liveOffer(o, await burnsOf(ctx)).reservedMicroDiem,
    }),
    sold: t.field({
      type: "MicroDiem",
      select: { id: true, quantityMicroDiem: true, remainingMicroDiem: true, reservedMicroDiem: true },
      resolve: async (o, _args, ctx) => soldMicroDiem(liveOffer(o, await burnsOf(ctx))),
    }),
    status: t.field({ type: OfferStatusEnum, resolve: (o) => o.status }),
    expiresAt: t.expose("expiresAt", { type: "DateTime" }),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
    updatedAt: t.expose("updatedAt", { type: "DateTime" }),
    endedAt: t.expose("endedAt", { type: "DateTime", nullable: true }),
  }),
});

// ───────────────────────────── queries ─────────────────────────────

builder.queryField("myOffers", (t) =>
  t.prismaConnection({
    type: OfferRef,
    cursor: "id",
    authScopes: { session: true },
    description: "The signed-in supplier's offers, cancelled excluded, newest first. Session only.",
    resolve: (query, _root, _args, ctx) =>
      ctx.db.offer.findMany({
        ...query,
        where: offerScopeFor(viewerOrThrow(ctx, "account")),
        orderBy: newestFirst(),
      }),
  }),
);
// ───────────────────────────── mutations ─────────────────────────────

const OfferPayload = builder.objectRef<{ offerId: string }>("OfferPayload").implement({
  fields: (t) => ({
    offer: t.prismaField({
      type: OfferRef,
      resolve: (query, p, _args, ctx) =>
        ctx.db.offer.findUniqueOrThrow({
          ...query,
          where: { id: p.offerId, ...offerOwnerScopeFor(viewerOrThrow(ctx, "account")) },
        }),
    }),
  }),
});
export const IdInput = (name: string) => builder.inputType(name, { fields: (t) => ({ id: t.id({ required: true }) }) });
const CancelOfferInput = IdInput("CancelOfferInput");
const PostOfferInput = builder.inputType("PostOfferInput", {
  fields: (t) => ({
    priceCentsPerDollar: t.int({ required: true, description: `${MIN_OFFER_PRICE_CENTS}-${MAX_OFFER_PRICE_CENTS}` }),
    quantity: t.field({ type: "MicroDiem", required: true, description: "micro-DIEM, > 0" }),
    upstreamKeyId: t.id({ required: true }),
    repostDaily: t.boolean({ required: false, description: "post it again at each UTC midnight (default false)" }),
    dailyQuantity: t.field({
      type: "MicroDiem",
      required: false,
      description: "caps each daily repost's quantity (micro-DIEM, > 0); absent: the key's fresh balance",
    }),
    schedule: t.field({ type: [PriceStepInput], required: false, description: SCHEDULE_DESCRIPTION }),
  }),
});

builder.mutationField("postOffer", (t) =>
  t.field({
    type: OfferPayload,
    authScopes: { session: true },
    description: "Posts an offer (initially ACTIVE, expiring at the next UTC midnight) on one of your active keys.",
    args: { input: t.arg({ type: PostOfferInput, required: true }) },
    resolve: withInput(postOfferInput, async (_root, { input }, ctx) => {
      const o = await ctx.services.offers.postOffer({
        accountId: viewerOrThrow(ctx, "account").accountId,
        upstreamKeyId: input.upstreamKeyId,
        priceCentsPerDollar: input.priceCentsPerDollar,
        quantityMicroDiem: input.quantity,
        repostDaily: input.repostDaily ?? undefined,
        dailyQuantityMicroDiem: input.dailyQuantity ?? undefined,
        schedule: input.schedule ?? undefined,
      });
      return { offerId: o.id };
    }),
  }),
);

const UpdateOfferInput = builder.inputType("UpdateOfferInput", {
  fields: (t) => ({
    id: t.id({ required: true }),
    priceCentsPerDollar: t.int({ required: false, description: `${MIN_OFFER_PRICE_CENTS}-${MAX_OFFER_PRICE_CENTS}` }),
    status: t.field({ type: OfferStatusChangeEnum, required: false }),
    repostDaily: t.boolean({ required: false, description: "post it again at each UTC midnight" }),
    dailyQuantity: t.field({
      type: "MicroDiem",
      required: false,
      description: "caps each daily repost's quantity; null removes the cap",
    }),
    schedule: t.field({
      type: [PriceStepInput],
      required: false,
      description: `${SCHEDULE_DESCRIPTION} null removes the schedule.`,
    }),
  }),
});

builder.mutationField("updateOffer", (t) =>
  t.field({
    type: OfferPayload,
    authScopes: { session: true },
    description:
      "Reprices and/or pauses/unpauses a live offer, and sets its standing settings (repostDaily, dailyQuantity, schedule) (PATCH /v1/supply/offers/{id}).",
    args: { input: t.arg({ type: UpdateOfferInput, required: true }) },
    resolve: withInput(idParam.merge(updateOfferInput), async (_root, { input }, ctx) => {
      const o = await ctx.services.offers.updateOffer({
        accountId: viewerOrThrow(ctx, "account").accountId,
        offerId: input.id,
        priceCentsPerDollar: input.priceCentsPerDollar ?? undefined,
        status: input.status ?? undefined,
        repostDaily: input.repostDaily ?? undefined,
        // absent: unchanged; null: removed
        dailyQuantityMicroDiem: input.dailyQuantity,
        schedule: input.schedule,
      });
      return { offerId: o.id };
    }),
  }),
);

builder.mutationField("cancelOffer", (t) =>
  t.field({
    type: OfferPayload,
    authScopes: { session: true },
    description: "Cancels a live offer and frees the key's slot.",
    args: { input: t.arg({ type: CancelOfferInput, required: true }) },
    resolve: withInput(idParam, async (_root, { input }, ctx) => {
      const o = await ctx.services.offers.cancelOffer({
        accountId: viewerOrThrow(ctx, "account").accountId,
        offerId: input.id,
      });
      return { offerId: o.id };
    }),
  }),
);
// ───────────────────────────── subscriptions ─────────────────────────────

const OfferUpdatedRef = builder.objectRef<SupplyChangeEvent>("OfferUpdated").implement({
  description: "One of the viewer's offers or upstream keys changed; re-read `myOffers` / `myUpstreamKeys`.",
  fields: (t) => ({
    subject: t.string({ description: "offer or key", resolve: (e) => e.kind }),
    id: t.id({ nullable: true, resolve: (e) => e.id }),
    status: t.string({ description: "the new status", resolve: (e) => e.status }),
    at: t.field({ type: "DateTime", resolve: (e) => new Date(e.at) }),
  }),
});
builder.subscriptionField("offerUpdated", (t) =>
  t.field({
    type: OfferUpdatedRef,
    authScopes: { session: true },
    description: "Owner only: fires when one of the viewer's offers or keys changes state, from any process.",
    subscribe: (_root, _args, ctx) => ctx.bus.subscribe("offerUpdated", viewerOrThrow(ctx, "account").accountId),
    resolve: (e) => e,
  }),
);
