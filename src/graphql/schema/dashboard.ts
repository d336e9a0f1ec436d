import type { ClearRecordedEvent } from "../../adapters/pubsub.js";
import type { Savings } from "../../domain/accounts/account-types.js";
import { DomainError } from "../../lib/errors.js";
import { builder } from "../builder.js";
import { InferenceRequestRef, viewerOrThrow } from "./account.js";
import { ClearRef } from "./market.js";

/**
 * What the web app ({web_url}, src/web) reads that the other type files did not expose: the recent
 * public clears that seed the live feed, the buyer's savings (GET /v1/account/savings) and one
 * request by support reference (GET /v1/agent/requests/{ref}'s, for a session).
 */

const MAX_RECENT_CLEARS = 100;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

builder.queryField("recentClears", (t) =>
  t.field({
    type: [ClearRef],
    description: `Public: the latest clears, newest first (\`limit\` 1-${MAX_RECENT_CLEARS}), anonymised like the \`clears\` subscription that continues them.`,
    args: { limit: t.arg.int({ required: false, defaultValue: 20 }) },
    resolve: async (_root, args, ctx) => {
      const limit = args.limit ?? 20;
      if (!Number.isInteger(limit) || limit < 1 || limit > MAX_RECENT_CLEARS) {
        throw new DomainError("invalid_request", `limit must be an integer 1-${MAX_RECENT_CLEARS}.`, {
          field: "limit",
        });
      }
      // public data: no buyer, supplier, key, offer or request identity is selected
      const rows = await ctx.db.clear.findMany({
        where: { refundedAt: null },
        orderBy: [{ createdAt: "desc" }, { id: "desc" }],
        take: limit,
        select: {
          createdAt: true,
          model: true,
          modality: true,
          priceCentsPerDollar: true,
          burnMicroDiem: true,
          grossMicroUsdc: true,
        },
      });
      return rows.map(
        (r): ClearRecordedEvent => ({
          at: r.createdAt.toISOString(),
          model: r.model,
          modality: r.modality,
          priceCentsPerDollar: r.priceCentsPerDollar,
          burnMicroDiem: r.burnMicroDiem,
          grossMicroUsdc: r.grossMicroUsdc,
        }),
      );
    },
  }),
);

const BuyerSavingsRef = builder.objectRef<Savings>("BuyerSavings").implement({
  description: "What the viewer's clears cost against face value and against their ceiling (refunds excluded).",
  fields: (t) => ({
    clears: t.exposeInt("clears"),
    faceValue: t.field({
      type: "MicroUsdc",
      description: "face value of the DIEM burned",
      resolve: (s) => s.faceMicroUsdc,
    }),
    atCeiling: t.field({
      type: "MicroUsdc",
      description: "what the burn would have cost at the ceiling of the time",
      resolve: (s) => s.atCeilingMicroUsdc,
    }),
    paid: t.field({ type: "MicroUsdc", resolve: (s) => s.paidMicroUsdc }),
    savedVsFace: t.field({ type: "MicroUsdc", resolve: (s) => s.savedVsFaceMicroUsdc }),
    savedVsCeiling: t.field({ type: "MicroUsdc", resolve: (s) => s.savedVsCeilingMicroUsdc }),
  }),
});

builder.queryField("mySavings", (t) =>
  t.field({
    type: BuyerSavingsRef,
    authScopes: { authenticated: true },
    description: "The viewer's savings over every clear (the same numbers as GET /v1/account/savings).",
    resolve: (_root, _args, ctx) => ctx.services.accounts.savings(viewerOrThrow(ctx).accountId),
  }),
);

builder.queryField("myInferenceRequest", (t) =>
  t.field({
    type: InferenceRequestRef,
    authScopes: { authenticated: true },
    description:
      "One of the viewer's requests by support reference (as GET /v1/agent/requests/{support_reference}); another account's is not_found.",
    args: { supportReference: t.arg.string({ required: true }) },
    resolve: (_root, args, ctx) => {
      if (!UUID.test(args.supportReference)) {
        throw new DomainError("invalid_request", "supportReference must be a uuid.", { field: "supportReference" });
      }
      return ctx.services.accounts.requestDetail({
        accountId: viewerOrThrow(ctx).accountId,
        supportReference: args.supportReference.toLowerCase(),
      });
    },
  }),
);
