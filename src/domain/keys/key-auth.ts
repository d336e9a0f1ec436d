import type { Db } from "../../adapters/db.js";
import type { Sql } from "../../adapters/sql.js";
import type { Clock } from "../../lib/clock.js";
import { sha256Hex } from "../../lib/secret-box.js";
import type { AuthenticatedKey } from "./api-key-types.js";
import { type ChainKey, effectivePolicy } from "./key-chain.js";
import type { LimitReset } from "./key-period.js";
import { isExpired } from "./key-policy.js";

/**
 * Bearer authentication (SPEC "Authentication"; docs/decisions.md "Key scopes and the key tree"): a plaintext to its active key, its
 * scopes and its policy within its ancestors', with a short in-process cache for the inference
 * routes. `ApiKeyService` owns one and forgets keys through it when they change.
 */

export const API_KEY_PREFIX = "svc_";
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

/** The columns of an api_keys row the tree reads, as `authenticate`'s SQL returns them. */
interface AuthRow {
  id: string;
  status: string;
  last_used_at: Date | null;
  expires_at: Date | null;
  account_id: string;
  wallet: string;
  limit_micro_usdc: string | null;
  limit_reset: LimitReset;
  max_price: number | null;
  models: string[];
  scopes: string[];
  parent_id: string | null;
  ancestor_ids: string[];
  /** the ancestors' rows (json), null for a key without ancestors */
  ancestors: AncestorJson[] | null;
}

interface AncestorJson {
  id: string;
  status: string;
  scopes: string[];
  limit: string | null;
  reset: LimitReset;
  ceiling: number | null;
  models: string[];
  expires: string | null;
}

const AUTH_SQL = `SELECT k.id, k.status, k.last_used_at, k.expires_at, a.id AS account_id, a.wallet_address AS wallet,
        k.limit_micro_usdc::text AS limit_micro_usdc, k.limit_reset::text AS limit_reset,
        k.max_price_cents_per_dollar AS max_price, k.models, k.scopes, k.parent_id, k.ancestor_ids,
        CASE WHEN cardinality(k.ancestor_ids) = 0 THEN NULL ELSE
          (SELECT json_agg(json_build_object('id', p.id, 'status', p.status, 'scopes', p.scopes,
                                             'limit', p.limit_micro_usdc::text, 'reset', p.limit_reset,
                                             'ceiling', p.max_price_cents_per_dollar, 'models', p.models,
                                             'expires', p.expires_at))
             FROM api_keys p WHERE p.id = ANY(k.ancestor_ids)) END AS ancestors
   FROM api_keys k JOIN accounts a ON a.id = k.account_id`;

function chainOf(r: AuthRow): { self: ChainKey; ancestors: ChainKey[] } {
  return {
    self: {
      id: r.id,
      status: r.status,
      scopes: r.scopes,
      parentId: r.parent_id,
      ancestorIds: r.ancestor_ids,
      limitMicroUsdc: r.limit_micro_usdc === null ? null : BigInt(r.limit_micro_usdc),
      limitReset: r.limit_reset,
      maxPriceCentsPerDollar: r.max_price,
      models: r.models,
      expiresAt: r.expires_at,
    },
    ancestors: (r.ancestors ?? []).map((p) => ({
      id: p.id,
      status: p.status,
      scopes: p.scopes,
      parentId: null,
      ancestorIds: [],
      limitMicroUsdc: p.limit === null ? null : BigInt(p.limit),
      limitReset: p.reset,
      maxPriceCentsPerDollar: p.ceiling,
      models: p.models,
      expiresAt: p.expires === null ? null : new Date(p.expires),
    })),
  };
}

export class KeyAuthenticator {
  /** sha256 → the key it authenticated, when, and when lastUsedAt was last written */
  private readonly cache = new Map<string, { key: AuthenticatedKey; at: number; usedAt: number }>();

  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    /** pg pool: Bearer authentication is on every inference request's path */
    private readonly sql?: Sql,
  ) {}

  /** Drops a key, and every key below it, from this process's authentication cache. */
  forget(apiKeyId: string): void {
    for (const [hash, e] of this.cache) {
      if (e.key.apiKeyId === apiKeyId || e.key.ancestorIds.includes(apiKeyId)) this.cache.delete(hash);
    }
  }

  /**
   * `authenticate` with a short in-process cache, for the inference routes only. A revocation
   * anywhere reaches every process's cache through `routingChanged` (a key's, and its
   * descendants'); a buyer with no escrow here is re-checked by the router's top-up in the same
   * transaction that escrows their funds (401). A cached key past its `expiresAt` (on this service's
   * clock) is refused at once, as a revoked one; a change of expiry reaches every cache through
   * `routingChanged` too.
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
   * Resolves a Bearer plaintext to its active, unexpired key and account, or null: the key's
   * scopes and its policy within its ancestors' (`effectivePolicy`: a revoked or expired ancestor
   * refuses it). One indexed lookup by hash (the ancestors' rows in the same statement);
   * `lastUsedAt` is refreshed at most once a minute.
   */
  async authenticate(plaintext: string): Promise<AuthenticatedKey | null> {
    if (!plaintext.startsWith(API_KEY_PREFIX) || plaintext.length > 128) return null;
    const hash = sha256Hex(plaintext);
    const row = this.sql
      ? (await this.sql.query<AuthRow>(`${AUTH_SQL} WHERE k.key_hash = $1`, [hash])).rows[0]
      : (await this.db.$queryRawUnsafe<AuthRow[]>(`${AUTH_SQL} WHERE k.key_hash = $1`, hash))[0];
    if (row?.status !== "active") return null;
    const now = this.clock.now();
    const { self, ancestors } = chainOf(row);
    const eff = effectivePolicy(self, ancestors, now);
    // after its expiry a key is refused exactly as a revoked one (docs/decisions.md "Per-key policy")
    if (!eff.active) return null;
    if (!row.last_used_at || now.getTime() - row.last_used_at.getTime() > LAST_USED_RESOLUTION_MS) {
      void this.db.apiKey.update({ where: { id: row.id }, data: { lastUsedAt: now } }).catch(() => undefined);
    }
    return {
      apiKeyId: row.id,
      accountId: row.account_id,
      walletAddress: row.wallet,
      expiresAt: eff.expiresAt,
      scopes: eff.scopes,
      ancestorIds: row.ancestor_ids,
      rules: {
        budgeted: eff.budgeted,
        maxPriceCents: eff.maxPriceCentsPerDollar,
        models: eff.models,
      },
    };
  }
}
