import type { Balances, HistoryRow } from "../../domain/accounts/account-types.js";
import { authProviderFor } from "../../domain/accounts/auth-provider.js";
import type { Viewer } from "../../domain/identity/viewer.js";
import { ACTIVE_API_KEYS } from "../../domain/keys/api-key-service.js";
import { DomainError } from "../../lib/errors.js";
import { builder } from "../builder.js";
import type { GraphQLContext } from "../context.js";

/** The viewer, or a 401-equivalent error (scope-auth refuses anonymous callers first). */
export function viewerOrThrow(ctx: GraphQLContext): Viewer {
  if (!ctx.viewer) throw new DomainError("authentication_failed", "Authentication failed.");
  return ctx.viewer;
}

/** One balances read per account per GraphQL request, shared by the fields that show it (consistent figures). */
const balancesRead = new WeakMap<GraphQLContext, Map<string, Promise<Balances>>>();
function balancesOf(ctx: GraphQLContext, accountId: string): Promise<Balances> {
  let reads = balancesRead.get(ctx);
  if (!reads) {
    reads = new Map();
    balancesRead.set(ctx, reads);
  }
  let read = reads.get(accountId);
  if (!read) {
    read = ctx.services.accounts.balances(accountId);
    reads.set(accountId, read);
  }
  return read;
}

export const AuthProviderEnum = builder.enumType("AuthProvider", {
  description: "How a wallet signs in: the identity provider or Sign-In with Ethereum (SPEC enum idp, siwe).",
  values: { IDP: { value: "idp" }, SIWE: { value: "siwe" } } as const,
});

export const KeySourceEnum = builder.enumType("ApiKeySource", {
  values: { SESSION: { value: "session" }, AGENT: { value: "agent" }, SIGNUP: { value: "signup" } } as const,
});

export const ApiKeyRef = builder.prismaObject("ApiKey", {
  description: "API key metadata. The plaintext is returned once, by createApiKey, and never again.",
  fields: (t) => ({
    id: t.exposeID("id"),
    name: t.exposeString("name"),
    keyPrefix: t.exposeString("keyPrefix"),
    source: t.field({ type: KeySourceEnum, resolve: (k) => k.source }),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
    lastUsedAt: t.expose("lastUsedAt", { type: "DateTime", nullable: true }),
  }),
});

export const LedgerEntryRef = builder.prismaObject("LedgerEntry", {
  // not a Relay node: reachable only through the viewer's own connection
  description: "One signed change to one of the account's books, in micro-USDC.",
  fields: (t) => ({
    id: t.exposeID("id"),
    kind: t.exposeString("kind"),
    book: t.exposeString("book"),
    amount: t.expose("amountMicroUsdc", { type: "MicroUsdc" }),
    transactionId: t.exposeString("transactionId"),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
  }),
});

export const AccountRef = builder.prismaObject("Account", {
  description: "The signed-in account (buyer and supplier roles share it).",
  fields: (t) => ({
    accountId: t.exposeID("id"),
    walletAddress: t.exposeString("walletAddress"),
    authProvider: t.field({
      type: AuthProviderEnum,
      nullable: true,
      description:
        "With a session: the provider that session signed in with. With an API key: IDP once the wallet signed in through the identity provider, else SIWE; null while it has never signed in (an account a paid signup created).",
      resolve: (a, _args, ctx) => authProviderFor(ctx.viewer, a.authProvider),
    }),
    maxPriceCentsPerDollar: t.exposeInt("maxPriceCentsPerDollar"),
    confirmedUsdc: t.field({
      type: "MicroUsdc",
      description: "funds inference",
      select: { id: true },
      resolve: async (a, _args, ctx) => (await balancesOf(ctx, a.id)).confirmedMicroUsdc,
    }),
    pendingUsdc: t.expose("pendingMicroUsdc", {
      type: "MicroUsdc",
      description: "awaiting confirmation depth; never funds inference",
    }),
    reservedUsdc: t.field({
      type: "MicroUsdc",
      description: "held by requests in flight (an idle escrow slice's unused part is available, not held)",
      select: { id: true },
      resolve: async (a, _args, ctx) => (await balancesOf(ctx, a.id)).reservedMicroUsdc,
    }),
    availableUsdc: t.field({
      type: "MicroUsdc",
      description: "confirmed − reserved: what a new request can use",
      select: { id: true },
      resolve: async (a, _args, ctx) => (await balancesOf(ctx, a.id)).availableMicroUsdc,
    }),
    supplierPayableUsdc: t.expose("supplierPayableMicroUsdc", {
      type: "MicroUsdc",
      description: "supplier earnings not yet paid out",
    }),
    hasEverFunded: t.exposeBoolean("hasEverFunded"),
    firstFundedAt: t.expose("firstFundedAt", { type: "DateTime", nullable: true }),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
    apiKeys: t.relation("apiKeys", {
      description: "Active API keys, newest first (metadata only).",
      query: { where: ACTIVE_API_KEYS, orderBy: [{ createdAt: "desc" }, { id: "desc" }] },
    }),
    ledger: t.relatedConnection("ledgerEntries", {
      description: "The account's ledger entries, newest first.",
      cursor: "id",
      query: { orderBy: [{ createdAt: "desc" }, { id: "desc" }] },
    }),
  }),
});

builder.queryField("viewer", (t) =>
  t.prismaField({
    type: AccountRef,
    nullable: true,
    description: "The caller's account (session cookie or Bearer API key); null when anonymous.",
    resolve: (query, _root, _args, ctx) =>
      ctx.viewer ? ctx.db.account.findUnique({ ...query, where: ctx.services.accounts.scopeFor(ctx.viewer) }) : null,
  }),
);

// ───────────────────────────── buyer inference history ─────────────────────────────

export const InferenceRequestRef = builder.objectRef<HistoryRow>("InferenceRequest").implement({
  description: "One of the buyer's requests (text, image or video), as GET /v1/account/inference-history lists it.",
  fields: (t) => ({
    requestId: t.exposeID("requestId"),
    supportReference: t.exposeString("supportReference"),
    route: t.exposeString("route"),
    modality: t.exposeString("modality"),
    model: t.exposeString("model"),
    stream: t.exposeBoolean("stream"),
    status: t.exposeString("status"),
    errorCode: t.exposeString("errorCode", { nullable: true }),
    maxPriceCents: t.exposeInt("maxPriceCents"),
    clearingPriceCents: t.exposeInt("clearingPriceCents", { nullable: true }),
    burn: t.field({ type: "MicroDiem", nullable: true, resolve: (r) => r.burnMicroDiem }),
    cost: t.field({ type: "MicroUsdc", nullable: true, resolve: (r) => r.costMicroUsdc }),
    attempts: t.exposeInt("attempts"),
    startedAt: t.field({ type: "DateTime", resolve: (r) => r.startedAt }),
    completedAt: t.field({ type: "DateTime", nullable: true, resolve: (r) => r.completedAt }),
  }),
});

const InferenceRequestPageRef = builder
  .objectRef<{ items: HistoryRow[]; nextCursor: string | null }>("InferenceRequestPage")
  .implement({
    fields: (t) => ({
      items: t.field({ type: [InferenceRequestRef], resolve: (p) => p.items }),
      nextCursor: t.string({ nullable: true, resolve: (p) => p.nextCursor }),
    }),
  });

builder.queryField("myInferenceHistory", (t) =>
  t.field({
    type: InferenceRequestPageRef,
    authScopes: { authenticated: true },
    description:
      "The viewer's requests, newest first; `modality` (text, image, video) narrows it, e.g. the image history.",
    args: {
      modality: t.arg.string({ required: false }),
      limit: t.arg.int({ required: false }),
      cursor: t.arg.string({ required: false }),
    },
    resolve: (_root, args, ctx) =>
      ctx.services.accounts.inferenceHistory({
        accountId: viewerOrThrow(ctx).accountId,
        modality: args.modality ?? undefined,
        limit: args.limit ?? undefined,
        cursor: args.cursor ?? undefined,
      }),
  }),
);
