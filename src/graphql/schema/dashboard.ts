import { requestDetailArgs } from "../../contract/account.js";
import { DEFAULT_RECENT_CLEARS, MAX_RECENT_CLEARS, recentClearsArgs } from "../../contract/market.js";
import type { Savings } from "../../domain/accounts/account-types.js";
import { historyReader } from "../../domain/keys/key-scopes.js";
import { builder } from "../builder.js";
import { withArgs } from "../validate.js";
import { InferenceRequestRef, viewerOrThrow } from "./account.js";
import { ClearRef } from "./market.js";

/**
 * What the web app ({web_url}, src/web) reads that the other type files did not expose: the recent
 * public clears that seed the live feed, the buyer's savings (GET /v1/account/savings) and one
 * request by support reference (GET /v1/agent/requests/{ref}'s, for a session).
 */

builder.queryField("recentClears", (t) =>
  t.field({
    type: [ClearRef],
    description: `Public: the latest clears, newest first (\`limit\` 1-${MAX_RECENT_CLEARS}), anonymised like the \`clears\` subscription that continues them.`,
    args: { limit: t.arg.int({ required: false, defaultValue: DEFAULT_RECENT_CLEARS }) },
    resolve: withArgs(recentClearsArgs, (_root, args, ctx) => ctx.services.market.recentClears(args.limit)),
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
    resolve: (_root, _args, ctx) => ctx.services.accounts.savings(viewerOrThrow(ctx, "account").accountId),
  }),
);

builder.queryField("myInferenceRequest", (t) =>
  t.field({
    type: InferenceRequestRef,
    authScopes: { authenticated: true },
    description:
      "One of the viewer's requests by support reference (as GET /v1/agent/requests/{support_reference}); another account's is not_found.",
    args: { supportReference: t.arg.string({ required: true }) },
    resolve: withArgs(requestDetailArgs, (_root, args, ctx) =>
      ctx.services.accounts.requestDetail({
        ...historyReader(viewerOrThrow(ctx, null)),
        supportReference: args.supportReference,
      }),
    ),
  }),
);
