// GraphQL types, queries, mutations and subscriptions of issue 5 (supply). Same service calls as
// src/http/routes/supply.ts; every `where` is a rule of domain/supply/supply-reads.ts and every derived
// field one of contract/supply.ts (the REST views use the same ones). The secret never leaves.
import type { AccountEvent } from "../../adapters/pubsub.js";
import { maskedKey, soldMicroDiem } from "../../contract/supply.js";
import { MAX_SCHEDULE_STEPS, type PriceStep, storedSchedule } from "../../domain/supply/price-schedule.js";
import {
  listedOffers,
  liveOffers,
  newestFirst,
  offerOwnerScopeFor,
  offerScopeFor,
  upstreamKeyScopeFor,
} from "../../domain/supply/supply-reads.js";
import { MAX_OFFER_PRICE_CENTS, MIN_OFFER_PRICE_CENTS } from "../../lib/money.js";
import { builder } from "../builder.js";
import { viewerOrThrow } from "./account.js";

const UpstreamKeyStatusEnum = builder.enumType("UpstreamKeyStatus", {
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
    remaining: t.expose("remainingMicroDiem", { type: "MicroDiem" }),
    reserved: t.expose("reservedMicroDiem", { type: "MicroDiem", description: "held by requests in flight" }),
    sold: t.field({
      type: "MicroDiem",
      select: { quantityMicroDiem: true, remainingMicroDiem: true },
      resolve: (o) => soldMicroDiem(o),
    }),
    status: t.field({ type: OfferStatusEnum, resolve: (o) => o.status }),
    expiresAt: t.expose("expiresAt", { type: "DateTime" }),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
    updatedAt: t.expose("updatedAt", { type: "DateTime" }),
    endedAt: t.expose("endedAt", { type: "DateTime", nullable: true }),
  }),
});

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
    balance: t.expose("lastBalanceMicroDiem", {
      type: "MicroDiem",
      nullable: true,
      description: "the last DIEM balance the upstream reported",
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

// ───────────────────────────── queries ─────────────────────────────

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

interface LedgerLineShape {
  id: string;
  book: string;
  kind: string;
  amountMicroUsdc: bigint;
  transactionId: string;
  transactionKind: string;
  createdAt: Date;
}

const SupplierLedgerLineRef = builder.objectRef<LedgerLineShape>("SupplierLedgerLine").implement({
  description: "One signed change to the supplier's payable or held balance.",
  fields: (t) => ({
    id: t.exposeID("id"),
    book: t.exposeString("book", {
      description: "supplier_payable, or supplier_held (a video job's share until the job is final)",
    }),
    kind: t.exposeString("kind"),
    amount: t.field({ type: "MicroUsdc", resolve: (l) => l.amountMicroUsdc }),
    transactionId: t.exposeString("transactionId"),
    transactionKind: t.exposeString("transactionKind"),
    createdAt: t.field({ type: "DateTime", resolve: (l) => l.createdAt }),
  }),
});

interface PayoutShape {
  id: string;
  period: string;
  toAddress: string;
  amountMicroUsdc: bigint;
  status: string;
  txHash: string | null;
  createdAt: Date;
  confirmedAt: Date | null;
}

const SupplierPayoutRef = builder.objectRef<PayoutShape>("SupplierPayout").implement({
  description: "A daily payout of supplier earnings to the account wallet (USDC on Base).",
  fields: (t) => ({
    id: t.exposeID("id"),
    period: t.exposeString("period", { description: "UTC day, YYYY-MM-DD" }),
    toAddress: t.exposeString("toAddress"),
    amount: t.field({ type: "MicroUsdc", resolve: (p) => p.amountMicroUsdc }),
    status: t.exposeString("status", { description: "pending, submitted, confirmed or failed" }),
    transaction: t.exposeString("txHash", { nullable: true }),
    createdAt: t.field({ type: "DateTime", resolve: (p) => p.createdAt }),
    confirmedAt: t.field({ type: "DateTime", nullable: true, resolve: (p) => p.confirmedAt }),
  }),
});

interface LedgerPageShape {
  payableMicroUsdc: bigint;
  heldMicroUsdc: bigint;
  paidOutMicroUsdc: bigint;
  payoutPendingMicroUsdc: bigint;
  payoutMinimumMicroUsdc: bigint;
  recentPayouts: PayoutShape[];
  items: LedgerLineShape[];
  nextCursor: string | null;
}

const SupplierLedgerRef = builder.objectRef<LedgerPageShape>("SupplierLedger").implement({
  description:
    "Supplier earnings: payable and held balances, payouts and the supplier_payable and supplier_held lines (newest first).",
  fields: (t) => ({
    payable: t.field({
      type: "MicroUsdc",
      description:
        "Payable and not yet paid out; negative while a refund of a share already paid out is recovered from later earnings.",
      resolve: (l) => l.payableMicroUsdc,
    }),
    held: t.field({
      type: "MicroUsdc",
      description: "On hold: shares of video jobs not yet final (payable once delivered or expired).",
      resolve: (l) => l.heldMicroUsdc,
    }),
    paidOut: t.field({ type: "MicroUsdc", resolve: (l) => l.paidOutMicroUsdc }),
    payoutPending: t.field({ type: "MicroUsdc", resolve: (l) => l.payoutPendingMicroUsdc }),
    payoutMinimum: t.field({ type: "MicroUsdc", resolve: (l) => l.payoutMinimumMicroUsdc }),
    recentPayouts: t.field({ type: [SupplierPayoutRef], resolve: (l) => l.recentPayouts }),
    entries: t.field({ type: [SupplierLedgerLineRef], resolve: (l) => l.items }),
    nextCursor: t.string({ nullable: true, resolve: (l) => l.nextCursor }),
  }),
});

builder.queryField("mySupplierLedger", (t) =>
  t.field({
    type: SupplierLedgerRef,
    authScopes: { session: true },
    description: "Supplier earnings of the signed-in account (same numbers as GET /v1/supply/ledger).",
    args: { limit: t.arg.int({ required: false }), cursor: t.arg.string({ required: false }) },
    resolve: (_root, args, ctx) =>
      ctx.services.earnings.supplierLedger({
        accountId: viewerOrThrow(ctx, "account").accountId,
        limit: args.limit ?? undefined,
        cursor: args.cursor ?? undefined,
      }),
  }),
);

interface ClearShape {
  clearId: string;
  model: string;
  modality: string;
  priceCentsPerDollar: number;
  burnMicroDiem: bigint;
  grossMicroUsdc: bigint;
  feeMicroUsdc: bigint;
  earnedMicroUsdc: bigint;
  refundedAt: Date | null;
  createdAt: Date;
}

const SupplierClearRef = builder.objectRef<ClearShape>("SupplierClear").implement({
  description: "One clear sold by the supplier. Never identifies the buyer.",
  fields: (t) => ({
    clearId: t.exposeID("clearId"),
    model: t.exposeString("model"),
    modality: t.exposeString("modality"),
    priceCentsPerDollar: t.exposeInt("priceCentsPerDollar"),
    burn: t.field({ type: "MicroDiem", resolve: (c) => c.burnMicroDiem }),
    gross: t.field({ type: "MicroUsdc", resolve: (c) => c.grossMicroUsdc }),
    fee: t.field({ type: "MicroUsdc", resolve: (c) => c.feeMicroUsdc }),
    earned: t.field({ type: "MicroUsdc", resolve: (c) => c.earnedMicroUsdc }),
    refundedAt: t.field({ type: "DateTime", nullable: true, resolve: (c) => c.refundedAt }),
    createdAt: t.field({ type: "DateTime", resolve: (c) => c.createdAt }),
  }),
});

const SupplierClearPageRef = builder
  .objectRef<{ items: ClearShape[]; nextCursor: string | null }>("SupplierClearPage")
  .implement({
    fields: (t) => ({
      items: t.field({ type: [SupplierClearRef], resolve: (p) => p.items }),
      nextCursor: t.string({ nullable: true, resolve: (p) => p.nextCursor }),
    }),
  });

builder.queryField("mySupplierInferenceHistory", (t) =>
  t.field({
    type: SupplierClearPageRef,
    authScopes: { session: true },
    description: "Clears the signed-in account sold, newest first (same rows as GET /v1/supply/inference-history).",
    args: { limit: t.arg.int({ required: false }), cursor: t.arg.string({ required: false }) },
    resolve: (_root, args, ctx) =>
      ctx.services.earnings.supplierInferenceHistory({
        accountId: viewerOrThrow(ctx, "account").accountId,
        limit: args.limit ?? undefined,
        cursor: args.cursor ?? undefined,
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
    resolve: async (_root, { input }, ctx) => {
      const k = await ctx.services.supply.registerUpstreamKey({
        accountId: viewerOrThrow(ctx, "account").accountId,
        upstreamApiKey: input.upstreamApiKey,
        label: input.label,
      });
      return { upstreamKeyId: k.id };
    },
  }),
);

const IdInput = (name: string) => builder.inputType(name, { fields: (t) => ({ id: t.id({ required: true }) }) });
const RevokeUpstreamKeyInput = IdInput("RevokeUpstreamKeyInput");
const CancelOfferInput = IdInput("CancelOfferInput");

builder.mutationField("revokeUpstreamKey", (t) =>
  t.field({
    type: UpstreamKeyPayload,
    authScopes: { session: true },
    description: "Revokes the key row and cancels its non-cancelled offers; repeatable.",
    args: { input: t.arg({ type: RevokeUpstreamKeyInput, required: true }) },
    resolve: async (_root, { input }, ctx) => {
      const r = await ctx.services.supply.revokeUpstreamKey({
        accountId: viewerOrThrow(ctx, "account").accountId,
        upstreamKeyId: String(input.id),
      });
      return { upstreamKeyId: r.upstreamKeyId, cancelledOffers: r.cancelledOffers };
    },
  }),
);

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
    resolve: async (_root, { input }, ctx) => {
      const o = await ctx.services.offers.postOffer({
        accountId: viewerOrThrow(ctx, "account").accountId,
        upstreamKeyId: String(input.upstreamKeyId),
        priceCentsPerDollar: input.priceCentsPerDollar,
        quantityMicroDiem: input.quantity,
        repostDaily: input.repostDaily ?? undefined,
        dailyQuantityMicroDiem: input.dailyQuantity ?? undefined,
        schedule: input.schedule ?? undefined,
      });
      return { offerId: o.id };
    },
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
    resolve: async (_root, { input }, ctx) => {
      const o = await ctx.services.offers.updateOffer({
        accountId: viewerOrThrow(ctx, "account").accountId,
        offerId: String(input.id),
        priceCentsPerDollar: input.priceCentsPerDollar ?? undefined,
        status: input.status ?? undefined,
        repostDaily: input.repostDaily ?? undefined,
        // absent: unchanged; null: removed
        dailyQuantityMicroDiem: input.dailyQuantity,
        schedule: input.schedule,
      });
      return { offerId: o.id };
    },
  }),
);

builder.mutationField("cancelOffer", (t) =>
  t.field({
    type: OfferPayload,
    authScopes: { session: true },
    description: "Cancels a live offer and frees the key's slot.",
    args: { input: t.arg({ type: CancelOfferInput, required: true }) },
    resolve: async (_root, { input }, ctx) => {
      const o = await ctx.services.offers.cancelOffer({
        accountId: viewerOrThrow(ctx, "account").accountId,
        offerId: String(input.id),
      });
      return { offerId: o.id };
    },
  }),
);

// ───────────────────────────── subscriptions ─────────────────────────────

/** Event kinds are `<subject>:<id>:<state>` (offer:…:paused, key:…:auth_failed, payout:…:confirmed). */
function splitKind(e: AccountEvent): { subject: string; id: string | null; state: string } {
  const [subject = e.kind, id, state] = e.kind.split(":");
  return { subject, id: id ?? null, state: state ?? subject };
}

const OfferUpdatedRef = builder.objectRef<AccountEvent>("OfferUpdated").implement({
  description: "One of the viewer's offers or upstream keys changed; re-read `myOffers` / `myUpstreamKeys`.",
  fields: (t) => ({
    subject: t.string({ description: "offer or key", resolve: (e) => splitKind(e).subject }),
    id: t.id({ nullable: true, resolve: (e) => splitKind(e).id }),
    status: t.string({ description: "the new status", resolve: (e) => splitKind(e).state }),
    at: t.field({ type: "DateTime", resolve: (e) => new Date(e.at) }),
  }),
});

const EarningsChangedRef = builder.objectRef<AccountEvent>("EarningsChanged").implement({
  description: "The viewer's supplier earnings or payouts changed; re-read `mySupplierLedger`.",
  fields: (t) => ({
    kind: t.exposeString("kind"),
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

builder.subscriptionField("earningsChanged", (t) =>
  t.field({
    type: EarningsChangedRef,
    authScopes: { session: true },
    description: "Owner only: fires when the viewer's supplier earnings or payouts change, from any process.",
    subscribe: (_root, _args, ctx) => ctx.bus.subscribe("earningsChanged", viewerOrThrow(ctx, "account").accountId),
    resolve: (e) => e,
  }),
);
