import { randomBytes } from "node:crypto";
import type { Db } from "../../adapters/db.js";
import type { EventBus } from "../../adapters/pubsub.js";
import type { Sql } from "../../adapters/sql.js";
import { assertUuid } from "../../contract/common.js";
import type { Prisma } from "../../generated/prisma/client.js";
import type { Clock } from "../../lib/clock.js";
import { DomainError } from "../../lib/errors.js";
import { sha256Hex } from "../../lib/secret-box.js";
import {
  ACTIVE_API_KEYS,
  type ApiKeyMetadata,
  type ApiKeyView,
  type AuthenticatedKey,
  apiKeyScopeFor,
  type CreatedApiKey,
  type KeySource,
  type KeyUpdate,
} from "./api-key-types.js";
import type { LimitReset } from "./key-period.js";
import {
  isExpired,
  type KeyPolicy,
  type KeyPolicyChange,
  type KeyUsage,
  keyUsage,
  type ListedModelIds,
  POLICY_FIELDS,
  policyColumns,
  policyOf,
  spentThisPeriod,
} from "./key-policy.js";

/** SPEC "Limits": at most 10 active keys per account, counted across every minting route. */
export const MAX_ACTIVE_KEYS = 10;
export const API_KEY_PREFIX = "svc_";
/** Characters of the plaintext kept for display (`svc_` + 8). */
export const KEY_PREFIX_LENGTH = 12;
/** `lastUsedAt` is written at most this often per key (avoids a write per request). */
const LAST_USED_RESOLUTION_MS = 60_000;
/**
 * How long a process trusts a Bearer key it has seen (the inference hot path only). Revocation is
 * still prompt everywhere: the revoking process forgets the key at once, every other process hears
 * of it through Redis (`routingChanged`), and the router's escrow top-up (`svc_escrow_take`)
 * refuses an inactive key.
 */
export const AUTH_CACHE_MS = 30_000;
const AUTH_CACHE_MAX = 50_000;

export * from "./api-key-types.js";

type Tx = Prisma.TransactionClient;

/** Key names are 1-64 characters (SPEC "Limits"). */
export function assertKeyName(name: unknown, field = "name"): asserts name is string {
  if (typeof name !== "string" || name.length < 1 || name.length > 64) {
    throw new DomainError("invalid_request", `${field} must be a string of 1-64 characters.`, { field });
  }
}

/** `svc_` + 32 random bytes (base64url, 43 characters): 256 bits of entropy. */
function newPlaintext(): string {
  return `${API_KEY_PREFIX}${randomBytes(32).toString("base64url")}`;
}

type KeyRow = ApiKeyMetadata & KeyPolicy;

function view(row: KeyRow, usage: KeyUsage): ApiKeyView {
  return {
    id: row.id,
    name: row.name,
    keyPrefix: row.keyPrefix,
    source: row.source,
    createdAt: row.createdAt,
    lastUsedAt: row.lastUsedAt,
    policy: policyOf(row),
    usage,
  };
}

/**
 * Buyer API keys. Plaintext is returned once; only sha256 is stored. The 10-key cap is enforced
 * under a row lock on the account, so concurrent creates across processes can never exceed it.
 */
export class ApiKeyService {
  /** sha256 → the key it authenticated, when, and when lastUsedAt was last written */
  private readonly cache = new Map<string, { key: AuthenticatedKey; at: number; usedAt: number }>();

  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    /** pg pool: Bearer authentication is on every inference request's path */
    private readonly sql?: Sql,
    /** fans a revocation out to every process's authentication cache */
    private readonly bus?: EventBus,
    /** which model ids the catalog lists (a key's `models` must name catalog rows) */
    private readonly listedModelIds: ListedModelIds = async () => new Set(),
  ) {}

  /**
   * Mints a key, with an optional policy (`policyColumns`: checked before anything is written).
   * Locks the account row (FOR UPDATE) for the count-then-insert.
   * @throws DomainError invalid_request naming a bad policy field; key_limit_reached (409) at the
   *   cap; not_found if the account is gone.
   */
  async createKey(input: {
    accountId: string;
    name: string;
    source: KeySource;
    policy?: KeyPolicyChange;
  }): Promise<CreatedApiKey> {
    assertKeyName(input.name);
    const policy = input.policy ? await this.policyColumns(input.policy) : {};
    const created = await this.db.$transaction((tx) => this.createKeyInTx(tx, input, policy));
    this.announce(input.accountId, "api_key_created");
    return created;
  }

  /**
   * The same, inside a caller's transaction (x402 signup commits account, credit and key together:
   * the signup key has no policy).
   */
  async createKeyInTx(
    tx: Tx,
    input: { accountId: string; name: string; source: KeySource },
    policy: Partial<KeyPolicy> = {},
  ): Promise<CreatedApiKey> {
    assertKeyName(input.name);
    const locked = await tx.$queryRaw<{ id: string }[]>`
      SELECT id FROM accounts WHERE id = ${input.accountId}::uuid FOR UPDATE`;
    if (locked.length === 0) throw new DomainError("not_found", "Account not found.");
    const active = await tx.apiKey.count({ where: { ...apiKeyScopeFor(input), ...ACTIVE_API_KEYS } });
    if (active >= MAX_ACTIVE_KEYS) {
      throw new DomainError(
        "key_limit_reached",
        `This account already has ${MAX_ACTIVE_KEYS} active API keys; revoke one first.`,
        { cap: MAX_ACTIVE_KEYS, active },
      );
    }
    const apiKey = newPlaintext();
    const row = await tx.apiKey.create({
      data: {
        accountId: input.accountId,
        name: input.name,
        keyPrefix: apiKey.slice(0, KEY_PREFIX_LENGTH),
        keyHash: sha256Hex(apiKey),
        source: input.source,
        ...policy,
      },
    });
    // a new key has spent nothing
    return { ...view(row, keyUsage(row, 0n, this.clock.now())), apiKey };
  }

  /**
   * Active keys of an account, newest first: metadata, policy and this period's usage (two reads,
   * whatever the number of keys). An expired key is listed (its `expiresAt` says so) until revoked.
   */
  async listActive(accountId: string): Promise<{ keys: ApiKeyView[]; cap: number }> {
    const rows = await this.db.apiKey.findMany({
      where: { ...apiKeyScopeFor({ accountId }), ...ACTIVE_API_KEYS },
      orderBy: [{ createdAt: "desc" }, { id: "desc" }],
    });
    return { keys: await this.withUsage(rows), cap: MAX_ACTIVE_KEYS };
  }

  /**
   * The calling key (GET /v1/agent/key): metadata, policy and usage.
   * @throws DomainError not_found when it is not an active key of the account (revoked meanwhile)
   */
  async describeKey(input: { accountId: string; apiKeyId: string }): Promise<ApiKeyView> {
    const row = await this.db.apiKey.findFirst({
      where: { id: assertUuid(input.apiKeyId, "id"), ...apiKeyScopeFor(input), ...ACTIVE_API_KEYS },
    });
    if (!row) throw new DomainError("not_found", "API key not found on this account.");
    const [one] = await this.withUsage([row]);
    if (!one) throw new DomainError("not_found", "API key not found on this account.");
    return one;
  }

  /**
   * Changes a key's name and policy: only the fields present; `null` removes a setting. Everything
   * is checked before anything is written (400 naming the field); the write is guarded on the key
   * being active, the account's and unexpired. Every process forgets the key's cached
   * authentication (its expiry may have moved).
   * @throws DomainError invalid_request (an empty change, a bad field); not_found when the key is
   *   not an active key of this account (revoked keys included, as DELETE); conflict when it expired
   *   (expiry is final: revoke it and mint another)
   */
  async updateKey(input: { accountId: string; keyId: string; change: KeyUpdate }): Promise<ApiKeyView> {
    const keyId = assertUuid(input.keyId, "id");
    const { name, ...change } = input.change;
    if (name === undefined && Object.values(change).every((v) => v === undefined)) {
      throw new DomainError(
        "invalid_request",
        `Nothing to change: send at least one of name, ${POLICY_FIELDS.join(", ")}; nothing was changed.`,
      );
    }
    if (name !== undefined) assertKeyName(name);
    const columns = await this.policyColumns(change);
    const now = this.clock.now();
    const r = await this.db.apiKey.updateMany({
      where: {
        id: keyId,
        ...apiKeyScopeFor(input),
        ...ACTIVE_API_KEYS,
        OR: [{ expiresAt: null }, { expiresAt: { gt: now } }],
      },
      data: { ...(name !== undefined ? { name } : {}), ...columns },
    });
    const row = await this.db.apiKey.findFirst({
      where: { id: keyId, ...apiKeyScopeFor(input), ...ACTIVE_API_KEYS },
    });
    if (r.count === 0 && row?.expiresAt && isExpired(row.expiresAt, now)) {
      throw new DomainError(
        "conflict",
        `This key expired at ${row.expiresAt.toISOString()}; an expired key cannot be changed: revoke it and mint another.`,
        { field: "expiresAt" },
      );
    }
    if (r.count === 0 || !row) throw new DomainError("not_found", "API key not found on this account.");
    this.forget(keyId);
    this.bus?.publish("routingChanged", { kind: "api_key_revoked", id: keyId });
    this.announce(input.accountId, "api_key_updated");
    const [one] = await this.withUsage([row]);
    if (!one) throw new DomainError("not_found", "API key not found on this account.");
    return one;
  }

  /**
   * This period's usage of stored keys (GraphQL's key fields batch through it): one read for any
   * number of keys (`spentThisPeriod`).
   */
  async usageOf(
    keys: readonly (Pick<KeyPolicy, "limitMicroUsdc" | "limitReset"> & { id: string })[],
  ): Promise<KeyUsage[]> {
    const now = this.clock.now();
    const spent = await spentThisPeriod(this.db, keys, now);
    return keys.map((k) => keyUsage(k, spent.get(k.id) ?? 0n, now));
  }

  private async withUsage(rows: readonly KeyRow[]): Promise<ApiKeyView[]> {
    const usage = await this.usageOf(rows);
    return rows.map((row, i) => view(row, usage[i] ?? keyUsage(row, 0n, this.clock.now())));
  }

  /** `policyColumns` with this service's clock and catalog. */
  private policyColumns(change: KeyPolicyChange): Promise<Partial<KeyPolicy>> {
    return policyColumns(change, { now: this.clock.now(), listedModelIds: this.listedModelIds });
  }

  /**
   * Revokes one of the account's active keys (the calling key included).
   * @throws DomainError not_found when the key is not an active key of this account.
   */
  async revokeKey(input: { accountId: string; keyId: string }): Promise<void> {
    assertUuid(input.keyId, "id");
    const now = this.clock.now();
    const r = await this.db.apiKey.updateMany({
      where: { id: input.keyId, ...apiKeyScopeFor(input), ...ACTIVE_API_KEYS },
      data: { status: "revoked", revokedAt: now },
    });
    if (r.count === 0) throw new DomainError("not_found", "API key not found on this account.");
    this.forget(input.keyId);
    this.bus?.publish("routingChanged", { kind: "api_key_revoked", id: input.keyId });
    this.announce(input.accountId, "api_key_revoked");
  }

  /**
   * Tells the account's open dashboards that its keys changed (`balanceChanged`, the account's
   * event stream the buyer view re-reads on), whichever transport changed them.
   */
  private announce(accountId: string, kind: string): void {
    this.bus?.publish("balanceChanged", accountId, { accountId, kind, at: this.clock.now().toISOString() });
  }

  /** Drops a key from this process's authentication cache. */
  forget(apiKeyId: string): void {
    for (const [hash, e] of this.cache) if (e.key.apiKeyId === apiKeyId) this.cache.delete(hash);
  }

  /**
   * `authenticate` with a short in-process cache, for the inference routes only. A revocation
   * anywhere reaches every process's cache through `routingChanged`; a buyer with no escrow here is
   * re-checked by the router's top-up in the same transaction that escrows their funds (401). A
   * cached key past its `expiresAt` (on this service's clock) is refused at once, as a revoked one;
   * a change of expiry reaches every cache through `routingChanged` too.
   */
  async authenticateCached(plaintext: string): Promise<AuthenticatedKey | null> {
    if (!plaintext.startsWith(API_KEY_PREFIX) || plaintext.length > 128) return null;
    const hash = sha256Hex(plaintext);
    const now = Date.now();
    const hit = this.cache.get(hash);
    if (hit && isExpired(hit.key.expiresAt, this.clock.now())) {
      this.cache.delete(hash);
      return null;
    }
    if (hit && now - hit.at < AUTH_CACHE_MS) {
      if (now - hit.usedAt > LAST_USED_RESOLUTION_MS) {
        hit.usedAt = now;
        void this.db.apiKey
          .update({ where: { id: hit.key.apiKeyId }, data: { lastUsedAt: this.clock.now() } })
          .catch(() => undefined);
      }
      return hit.key;
    }
    const key = await this.authenticate(plaintext);
    if (!key) {
      this.cache.delete(hash);
      return null;
    }
    if (this.cache.size >= AUTH_CACHE_MAX) this.cache.clear();
    this.cache.set(hash, { key, at: now, usedAt: now });
    return key;
  }

  /**
   * Resolves a Bearer plaintext to its active, unexpired key and account, or null. Constant work
   * per call (one indexed lookup by hash); `lastUsedAt` is refreshed at most once a minute.
   */
  async authenticate(plaintext: string): Promise<AuthenticatedKey | null> {
    if (!plaintext.startsWith(API_KEY_PREFIX) || plaintext.length > 128) return null;
    const hash = sha256Hex(plaintext);
    const row = this.sql
      ? (
          await this.sql.query<{
            id: string;
            status: string;
            last_used_at: Date | null;
            expires_at: Date | null;
            account_id: string;
            wallet: string;
            limited: boolean;
            limit_reset: LimitReset;
            max_price: number | null;
            models: string[];
          }>(
            `SELECT k.id, k.status, k.last_used_at, k.expires_at, a.id AS account_id, a.wallet_address AS wallet,
                    k.limit_micro_usdc IS NOT NULL AS limited, k.limit_reset::text AS limit_reset,
                    k.max_price_cents_per_dollar AS max_price, k.models
               FROM api_keys k JOIN accounts a ON a.id = k.account_id WHERE k.key_hash = $1`,
            [hash],
          )
        ).rows[0]
      : await this.db.apiKey
          .findUnique({
            where: { keyHash: hash },
            select: {
              id: true,
              status: true,
              lastUsedAt: true,
              expiresAt: true,
              limitMicroUsdc: true,
              limitReset: true,
              maxPriceCentsPerDollar: true,
              models: true,
              account: { select: { id: true, walletAddress: true } },
            },
          })
          .then(
            (r) =>
              r && {
                id: r.id,
                status: r.status,
                last_used_at: r.lastUsedAt,
                expires_at: r.expiresAt,
                account_id: r.account.id,
                wallet: r.account.walletAddress,
                limited: r.limitMicroUsdc !== null,
                limit_reset: r.limitReset as LimitReset,
                max_price: r.maxPriceCentsPerDollar,
                models: r.models,
              },
          );
    if (row?.status !== "active") return null;
    const now = this.clock.now();
    // SPEC issue 28: after its expiry a key is refused exactly as a revoked one
    if (isExpired(row.expires_at, now)) return null;
    if (!row.last_used_at || now.getTime() - row.last_used_at.getTime() > LAST_USED_RESOLUTION_MS) {
      void this.db.apiKey.update({ where: { id: row.id }, data: { lastUsedAt: now } }).catch(() => undefined);
    }
    return {
      apiKeyId: row.id,
      accountId: row.account_id,
      walletAddress: row.wallet,
      expiresAt: row.expires_at,
      rules: {
        limitReset: row.limited ? row.limit_reset : null,
        maxPriceCents: row.max_price,
        models: row.models,
      },
    };
  }
}
