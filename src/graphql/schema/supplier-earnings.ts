// GraphQL queries and subscription of a supplier's earnings: the ledger, payouts and the clears it
// sold (same numbers as GET /v1/supply/ledger and /v1/supply/inference-history). Never the buyer.
import type { AccountEvent } from "../../adapters/pubsub.js";
import { builder } from "../builder.js";
import { viewerOrThrow } from "./account.js";

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

const EarningsChangedRef = builder.objectRef<AccountEvent>("EarningsChanged").implement({
  description: "The viewer's supplier earnings or payouts changed; re-read `mySupplierLedger`.",
  fields: (t) => ({
    kind: t.exposeString("kind"),
    at: t.field({ type: "DateTime", resolve: (e) => new Date(e.at) }),
  }),
});
builder.subscriptionField("earningsChanged", (t) =>
  t.field({
    type: EarningsChangedRef,
    authScopes: { session: true },
    description: "Owner only: fires when the viewer's supplier earnings or payouts change, from any process.",
    subscribe: (_root, _args, ctx) => ctx.bus.subscribe("earningsChanged", viewerOrThrow(ctx, "account").accountId),
    resolve: (e) => e,
  }),
);
