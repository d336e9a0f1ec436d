import { resolveCursorConnection } from "@pothos/plugin-relay";
import { ledgerCursor } from "../../domain/accounts/account-service.js";
import type { Balances, HistoryRow, LedgerLine } from "../../domain/accounts/account-types.js";
import { authProviderFor } from "../../domain/accounts/auth-provider.js";
import type { Viewer } from "../../domain/identity/viewer.js";
import { ACTIVE_API_KEYS } from "../../domain/keys/api-key-service.js";
import type { LimitReset } from "../../domain/keys/key-period.js";
import type { KeyUsage } from "../../domain/keys/key-policy.js";
import { canonicalScopes, historyReader, requireScope, type Scope } from "../../domain/keys/key-scopes.js";
import { Batcher } from "../../lib/batcher.js";
import { DomainError } from "../../lib/errors.js";
import { builder } from "../builder.js";
import type { GraphQLContext } from "../context.js";

/** The viewer, or a 401-equivalent error (scope-auth refuses anonymous callers first). */
/**
 * The caller, holding `scope` (key-scopes.ts `requireScope`: a Bearer key without it is 403
 * `insufficient_scope`; a session holds every scope). `null`: the service called checks the caller
 * itself (the key mutations).
 */
export function viewerOrThrow(ctx: GraphQLContext, scope: Scope | null): Viewer {
  if (!ctx.viewer) throw new DomainError("authentication_failed", "Authentication failed.");
  if (scope) requireScope(ctx.viewer, scope);
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

/** What the usage of a key depends on: its id and its limit's period and size. */
interface UsageKey {
  id: string;
  limitMicroUsdc: bigint | null;
  limitReset: LimitReset;
}

/**
 * Each key's usage once per GraphQL request, the keys of one list read together: every key's
 * `spentUsdc`, `remainingUsdc` and `resetsAt` resolve in the same tick, and one batch (one SQL
 * statement, `apiKeys.usageOf`) answers them all (N+1 guard: test/integration/graphql/query-count).
 */
const usageReads = new WeakMap<
  GraphQLContext,
  { batcher: Batcher<UsageKey, KeyUsage>; reads: Map<string, Promise<KeyUsage>> }
>();
function usageOf(ctx: GraphQLContext, key: UsageKey): Promise<KeyUsage> {
  let r = usageReads.get(ctx);
  if (!r) {
    const apiKeys = ctx.services.apiKeys;
    r = {
      batcher: new Batcher(
        (keys) => apiKeys.usageOf(keys),
        async (k) => {
          const [one] = await apiKeys.usageOf([k]);
          if (!one) throw new Error(`no usage for key ${k.id}`);
          return one;
        },
        { maxBatch: 100, maxInFlight: 4 },
      ),
      reads: new Map(),
    };
    usageReads.set(ctx, r);
  }
  const id = `${key.id}|${key.limitReset}|${key.limitMicroUsdc ?? ""}`;
  let read = r.reads.get(id);
  if (!read) {
    read = r.batcher.submit({ id: key.id, limitMicroUsdc: key.limitMicroUsdc, limitReset: key.limitReset });
    r.reads.set(id, read);
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

export const KeyLimitResetEnum = builder.enumType("KeyLimitReset", {
  description:
    "When a key's spending limit starts again, on UTC boundaries: DAILY (00:00 UTC), WEEKLY (Monday 00:00 UTC), MONTHLY (the 1st, 00:00 UTC) or NEVER.",
  values: {
    DAILY: { value: "daily" },
    WEEKLY: { value: "weekly" },
    MONTHLY: { value: "monthly" },
    NEVER: { value: "never" },
  } as const,
});

export const KeyScopeEnum = builder.enumType("KeyScope", {
  description:
    "What an API key may do: INFERENCE (model routes, its own key and history), KEYS (mint, list, change, revoke keys below it), ACCOUNT (ceiling, webhooks, refill, account-wide reads).",
  values: {
    INFERENCE: { value: "inference" },
    KEYS: { value: "keys" },
    ACCOUNT: { value: "account" },
  } as const,
});

export const ApiKeyRef = builder.prismaObject("ApiKey", {
  description:
    "API key metadata, its policy and what it spent this period (as GET /v1/agent/keys lists it). The plaintext is returned once, by createApiKey, and never again.",
  fields: (t) => ({
    id: t.exposeID("id"),
    name: t.exposeString("name"),
    keyPrefix: t.exposeString("keyPrefix"),
    source: t.field({ type: KeySourceEnum, resolve: (k) => k.source }),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
    lastUsedAt: t.expose("lastUsedAt", { type: "DateTime", nullable: true }),
    scopes: t.field({
      type: [KeyScopeEnum],
      description: "what the key may do",
      resolve: (k) => canonicalScopes(k.scopes),
    }),
    parentId: t.exposeID("parentId", {
      nullable: true,
      description: "the key it lives below (the key that minted it); null: an account-level or session-minted key",
    }),
    limitUsdc: t.field({
      type: "MicroUsdc",
      nullable: true,
      description: "the key's spending limit per period; null: no limit",
      resolve: (k) => k.limitMicroUsdc,
    }),
    limitReset: t.field({ type: KeyLimitResetEnum, resolve: (k) => k.limitReset }),
    maxPriceCentsPerDollar: t.exposeInt("maxPriceCentsPerDollar", {
      nullable: true,
      description: "the key's own price ceiling (30-80); null: none",
    }),
    models: t.stringList({
      nullable: true,
      description: "the catalog ids the key is limited to; null: every model",
      resolve: (k) => (k.models.length > 0 ? k.models : null),
    }),
    expiresAt: t.expose("expiresAt", {
      type: "DateTime",
      nullable: true,
      description: "after it the key is refused as a revoked key is; null: never",
    }),
    spentUsdc: t.field({
      type: "MicroUsdc",
      description:
        "what the key and every key below it were charged for requests started in the current period (all time when NEVER)",
      resolve: async (k, _args, ctx) => (await usageOf(ctx, k)).spentMicroUsdc,
    }),
    remainingUsdc: t.field({
      type: "MicroUsdc",
      nullable: true,
      description: "limitUsdc − spentUsdc, at least 0; null: no limit",
      resolve: async (k, _args, ctx) => (await usageOf(ctx, k)).remainingMicroUsdc,
    }),
    resetsAt: t.field({
      type: "DateTime",
      nullable: true,
      description: "when the current period ends; null: no limit, or it never resets",
      resolve: async (k, _args, ctx) => (await usageOf(ctx, k)).resetsAt,
    }),
  }),
});

export const LedgerEntryRef = builder.objectRef<LedgerLine>("LedgerEntry").implement({
  // not a Relay node: reachable only through the viewer's own connection. A line is a written
  // entry or one a clear implies (AccountService.ledgerLines, over the function ledger_lines).
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
    supplierPayableUsdc: t.field({
      type: "MicroUsdc",
      description: "supplier earnings not yet paid out",
      select: { id: true },
      resolve: async (a, _args, ctx) => (await balancesOf(ctx, a.id)).supplierPayableMicroUsdc,
    }),
    hasEverFunded: t.exposeBoolean("hasEverFunded"),
    firstFundedAt: t.expose("firstFundedAt", { type: "DateTime", nullable: true }),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
    apiKeys: t.relation("apiKeys", {
      description: "Active API keys, newest first (metadata only).",
      query: { where: ACTIVE_API_KEYS, orderBy: [{ createdAt: "desc" }, { id: "desc" }] },
    }),
    ledger: t.connection({
      type: LedgerEntryRef,
      description: "The account's ledger entries, newest first.",
      select: { id: true },
      resolve: (a, args, ctx) => {
        // the viewer's own account only (Account is reached through `viewer`)
        if (a.id !== viewerOrThrow(ctx, "account").accountId) throw new DomainError("not_found", "Account not found.");
        return resolveCursorConnection<Promise<LedgerLine[]>>(
          { args, toCursor: ledgerCursor },
          ({ before, after, limit, inverted }) =>
            ctx.services.accounts.ledgerLines({
              accountId: a.id,
              limit,
              olderThan: after,
              newerThan: before,
              oldestFirst: inverted,
            }),
        );
      },
    }),
  }),
});

builder.queryField("viewer", (t) =>
  t.prismaField({
    type: AccountRef,
    nullable: true,
    description: "The caller's account (session cookie or Bearer API key); null when anonymous.",
    resolve: (query, _root, _args, ctx) =>
      ctx.viewer
        ? ctx.db.account.findUnique({ ...query, where: ctx.services.accounts.scopeFor(viewerOrThrow(ctx, "account")) })
        : null,
  }),
);

// ───────────────────────────── buyer inference history ─────────────────────────────

export const InferenceRequestRef = builder.objectRef<HistoryRow>("InferenceRequest").implement({
  description: "One of the buyer's requests (text, image or video), as GET /v1/account/inference-history lists it.",
  fields: (t) => ({
    requestId: t.exposeID("requestId"),
    supportReference: t.exposeString("supportReference"),
    keyId: t.exposeID("keyId", { nullable: true, description: "the API key the request was made with" }),
    keyName: t.exposeString("keyName", { nullable: true }),
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
      "The viewer's requests, newest first; `modality` (text, image, video) narrows it, e.g. the image history; `keyId` to one API key's; `from` (inclusive) and `to` (exclusive) to a period of start times.",
    args: {
      modality: t.arg.string({ required: false }),
      keyId: t.arg.id({ required: false }),
      from: t.arg({ type: "DateTime", required: false }),
      to: t.arg({ type: "DateTime", required: false }),
      limit: t.arg.int({ required: false }),
      cursor: t.arg.string({ required: false }),
    },
    resolve: (_root, args, ctx) =>
      ctx.services.accounts.inferenceHistory({
        ...historyReader(viewerOrThrow(ctx, null)),
        modality: args.modality ?? undefined,
        keyId: args.keyId === null || args.keyId === undefined ? undefined : String(args.keyId),
        from: args.from ?? undefined,
        to: args.to ?? undefined,
        limit: args.limit ?? undefined,
        cursor: args.cursor ?? undefined,
      }),
  }),
);
