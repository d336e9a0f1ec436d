import type { Prisma } from "../../generated/prisma/client.js";
import type { KeyRules, LimitReset } from "./key-period.js";
import type { KeyPolicy, KeyPolicyChange, KeyUsage } from "./key-policy.js";
import type { Scope, ScopedCaller } from "./key-scopes.js";

/** The API key's shapes and scopes (src/domain/keys/api-key-service.ts re-exports them). */

export type KeySource = "session" | "agent" | "signup";

/** The keys an account lists and counts against the cap: the active ones (revoked keys never show). */
export const ACTIVE_API_KEYS = { status: "active" } as const satisfies Prisma.ApiKeyWhereInput;

/** Prisma `where` for the viewer's own API keys (REST lists, GraphQL reads). */
export function apiKeyScopeFor(viewer: { accountId: string }): { accountId: string } {
  return { accountId: viewer.accountId };
}

export interface ApiKeyMetadata {
  id: string;
  name: string;
  keyPrefix: string;
  source: KeySource;
  createdAt: Date;
  lastUsedAt: Date | null;
  /** what the key may do (key-scopes.ts) */
  scopes: Scope[];
  /** the key it lives below (its minter), null: an account-level or session-minted key */
  parentId: string | null;
}

/** A key as listings show it: metadata, policy and what it spent this period. */
export interface ApiKeyView extends ApiKeyMetadata {
  policy: KeyPolicy;
  usage: KeyUsage;
}

export interface CreatedApiKey extends ApiKeyView {
  /** the plaintext, returned once and never stored */
  apiKey: string;
}

export interface AuthenticatedKey {
  apiKeyId: string;
  accountId: string;
  walletAddress: string;
  /** the key's expiry, or an ancestor's if earlier: checked on every use, cached or not */
  expiresAt: Date | null;
  /** what the key may do, within its ancestors' scopes */
  scopes: Scope[];
  /** root … parent: a change to any of them drops the key from authentication caches */
  ancestorIds: readonly string[];
  /** what admission enforces of the key's policy (models, ceiling, budget; docs/decisions.md "Key budgets") */
  rules: KeyRules;
}

/** `PATCH` of a key: its name and any policy field (absent = unchanged, null = removed). */
export interface KeyUpdate extends KeyPolicyChange {
  name?: string;
}

/**
 * A key's fields as every transport receives them, once parsed (REST and MCP by the contract's
 * schemas, GraphQL by their twins `createKeyInput`/`updateKeyInput`): `limitUsdc` already micro-USDC,
 * null to remove a setting.
 */
export interface KeyFields {
  name?: string | null;
  limitUsdc?: bigint | null;
  limitReset?: LimitReset | null;
  maxPriceCentsPerDollar?: number | null;
  models?: readonly string[] | null;
  expiresAt?: Date | null;
}

/**
 * THE mapping of received key fields onto the key service's change: only the fields sent, null
 * kept (it removes a setting). A null name is passed on for the service to refuse (a name cannot be
 * removed).
 */
export function keyChangeOf(fields: KeyFields): KeyUpdate {
  const out: KeyUpdate = {};
  if (fields.name !== undefined) out.name = fields.name as string;
  if (fields.limitUsdc !== undefined) out.limitMicroUsdc = fields.limitUsdc;
  if (fields.limitReset !== undefined) out.limitReset = fields.limitReset;
  if (fields.maxPriceCentsPerDollar !== undefined) out.maxPriceCentsPerDollar = fields.maxPriceCentsPerDollar;
  if (fields.models !== undefined) out.models = fields.models;
  if (fields.expiresAt !== undefined) out.expiresAt = fields.expiresAt;
  return out;
}

/** Who acts on keys: a session, or a Bearer key (its id and scopes). */
export interface KeyActor extends ScopedCaller {
  accountId: string;
  apiKeyId?: string;
}
