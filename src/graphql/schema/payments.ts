import { builder } from "../builder.js";
import { AccountRef, viewerOrThrow } from "./account.js";

const PaymentStatusEnum = builder.enumType("PaymentStatus", {
  description:
    "settling → pending → confirmed; reconciling when the payment settled, or may have (the facilitator gave no definite answer), and is not credited yet: the chain decides, and it is credited once if the transfer happened; failed when no money moved (or the transfer left the chain).",
  values: {
    SETTLING: { value: "settling" },
    PENDING: { value: "pending" },
    CONFIRMED: { value: "confirmed" },
    RECONCILING: { value: "reconciling" },
    FAILED: { value: "failed" },
  } as const,
});

const PaymentKindEnum = builder.enumType("PaymentKind", {
  values: {
    SIGNUP: { value: "signup" },
    TOP_UP: { value: "top_up" },
    REFILL: { value: "refill" },
    RECONCILED: { value: "reconciled" },
  } as const,
});

export const PaymentRef = builder.prismaObject("Payment", {
  // not a Relay node: reachable only through the viewer's own connection
  description: "An x402 payment that funded the account.",
  fields: (t) => ({
    id: t.exposeID("id"),
    kind: t.field({ type: PaymentKindEnum, resolve: (p) => p.kind }),
    status: t.field({ type: PaymentStatusEnum, resolve: (p) => p.status }),
    amount: t.expose("amountMicroUsdc", { type: "MicroUsdc" }),
    transaction: t.exposeString("settlementTxHash", { nullable: true }),
    confirmations: t.exposeInt("confirmations"),
    confirmationsRequired: t.int({ resolve: (_p, _a, ctx) => ctx.services.funding.confirmationBlocks }),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
    settledAt: t.expose("settledAt", { type: "DateTime", nullable: true }),
    confirmedAt: t.expose("confirmedAt", { type: "DateTime", nullable: true }),
  }),
});

builder.prismaObjectField(AccountRef, "payments", (t) =>
  t.relatedConnection("payments", {
    description: "Payments that funded this account, newest first.",
    cursor: "id",
    query: { orderBy: [{ createdAt: "desc" }, { id: "desc" }] },
  }),
);

builder.subscriptionField("paymentConfirmed", (t) =>
  t.field({
    type: builder.objectRef<{ accountId: string; kind: string; at: string }>("PaymentConfirmed").implement({
      description: "One of the viewer's payments reached confirmation depth; its credit is now spendable.",
      fields: (f) => ({
        paymentId: f.string({ resolve: (e) => e.kind.replace(/^payment:/, "") }),
        at: f.field({ type: "DateTime", resolve: (e) => new Date(e.at) }),
      }),
    }),
    authScopes: { authenticated: true },
    description: "Owner only: fires when a payment of the viewer is confirmed, from any process.",
    subscribe: (_root, _args, ctx) => ctx.bus.subscribe("paymentConfirmed", viewerOrThrow(ctx, "account").accountId),
    resolve: (e) => e,
  }),
);
