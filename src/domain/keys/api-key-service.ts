import { randomBytes } from "node:crypto";
import { lockAccountRow } from "../../adapters/account-lock.js";
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
  type ApiKeyView,
  type AuthenticatedKey,
  apiKeyScopeFor,
  type CreatedApiKey,
  type KeyActor,
  type KeySource,
  type KeyUpdate,
} from "./api-key-types.js";
import { API_KEY_PREFIX, KeyAuthenticator } from "./key-auth.js";
import {
  assertManages,
  boundChild,
  childScopes,
  effectivePolicy,
  hasPolicyChange,
  isAccountLevel,
} from "./key-chain.js";
import { chainRemaining, type KeyRow, readChain } from "./key-chain-reads.js";
import {
  assertKeyName,
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
import { parseScopes, requireScope, type Scope } from "./key-scopes.js";

/** SPEC "Limits": at most 10 active keys per account, counted across every minting route. */
export const MAX_ACTIVE_KEYS = 10;
/** Characters of the plaintext kept for display (`svc_` + 8). */
export const KEY_PREFIX_LENGTH = 12;

export * from "./api-key-types.js";
export { API_KEY_PREFIX, AUTH_CACHE_MS } from "./key-auth.js";
export { assertKeyName } from "./key-policy.js";

type Tx = Prisma.TransactionClient;

/** `svc_` + 32 random bytes (base64url, 43 characters): 256 bits of entropy. */
function newPlaintext(): string {
  return `${API_KEY_PREFIX}${randomBytes(32).toString("base64url")}`;
}

function view(row: KeyRow, usage: KeyUsage): ApiKeyView {
  return {
    id: row.id,
    name: row.name,
    keyPrefix: row.keyPrefix,
    source: row.source,
    createdAt: row.createdAt,
    lastUsedAt: row.lastUsedAt,
    scopes: row.scopes as Scope[],
    parentId: row.parentId,
    policy: policyOf(row),
    usage,
  };
}

const notFound = () => new DomainError("not_found", "API key not found on this account.");

/**
 * Buyer API keys. Plaintext is returned once; only sha256 is stored. The 10-key cap is enforced
 * under a row lock on the account, so concurrent creates across processes can never exceed it.
 * Who may mint, list, change and revoke which key: `requireScope` (key-scopes.ts) and the tree
 * rules (key-chain.ts), here for every transport.
 */
export class ApiKeyService {
  /** Bearer authentication and its cache */
  private readonly auth: KeyAuthenticator;

  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    /** pg pool: Bearer authentication is on every inference request's path */
    sql?: Sql,
    /** fans a revocation out to every process's authentication cache */
    private readonly bus?: EventBus,
    /** which model ids the catalog lists (a key's `models` must name catalog rows) */
    private readonly listedModelIds: ListedModelIds = async () => new Set(),
  ) {
    this.auth = new KeyAuthenticator(db, clock, sql);
  }

  /**
   * Mints a key, with an optional policy (`policyColumns`: checked before anything is written) and
   * scopes. A session mints account keys; a Bearer key needs `keys` and mints within itself
   * (key-chain.ts: `childScopes`, `boundChild`): a key minted with a policy, or narrower than an
   * account-level minter, lives below its minter. Locks the minter's row (FOR NO KEY UPDATE), then
   * the account row (`lockAccountRow`) for the count-then-insert.
   * @throws DomainError invalid_request naming a bad field; insufficient_scope; forbidden naming a
   *   field wider than the minter; key_limit_reached (409) at the cap; not_found if the account is gone.
   */
  async createKey(input: {
    actor: KeyActor;
    name: string;
    source: KeySource;
    policy?: KeyPolicyChange;
    scopes?: unknown;
  }): Promise<CreatedApiKey> {
    const { actor } = input;
    requireScope(actor, "keys");
    assertKeyName(input.name);
    const asked = input.scopes === undefined || input.scopes === null ? undefined : parseScopes(input.scopes);
    const policy = input.policy ? await this.policyColumns(input.policy) : {};
    const withPolicy = hasPolicyChange(policy);
    const now = this.clock.now();
    const created = await this.db.$transaction(async (tx) => {
      const minterId = actor.credential === "bearer" ? actor.apiKeyId : undefined;
      if (minterId === undefined) {
        const scopes = childScopes(asked, null, withPolicy);
        return this.createKeyInTx(
          tx,
          { accountId: actor.accountId, name: input.name, source: input.source },
          {
            ...policy,
            scopes,
          },
        );
      }
      const chain = await readChain(tx, actor.accountId, minterId, true);
      const eff = effectivePolicy(chain.self, chain.ancestors, now);
      if (!eff.active) throw new DomainError("authentication_failed", "Invalid or revoked API key.");
      const scopes = childScopes(asked, eff.scopes, withPolicy);
      const peer = isAccountLevel(chain.self) && !withPolicy && scopes.length === 3;
      if (peer) {
        return this.createKeyInTx(
          tx,
          { accountId: actor.accountId, name: input.name, source: input.source },
          {
            ...policy,
            scopes,
          },
        );
      }
      const bounded = boundChild(
        policy,
        { policy: eff, remainingMicroUsdc: await chainRemaining(tx, [...chain.ancestors, chain.self], now) },
        { partial: false },
      );
      return this.createKeyInTx(
        tx,
        { accountId: actor.accountId, name: input.name, source: input.source },
        {
          ...bounded,
          scopes,
          parentId: chain.self.id,
          ancestorIds: [...chain.self.ancestorIds, chain.self.id],
        },
      );
    });
    this.announce(actor.accountId, "api_key_created");
    return created;
  }

  /**
   * The same, inside a caller's transaction (x402 signup commits account, credit and key together:
   * the signup key is account-level: no policy, every scope, no parent).
   */
  async createKeyInTx(
    tx: Tx,
    input: { accountId: string; name: string; source: KeySource },
    columns: Partial<KeyPolicy> & { scopes?: Scope[]; parentId?: string; ancestorIds?: string[] } = {},
  ): Promise<CreatedApiKey> {
    assertKeyName(input.name);
    if (!(await lockAccountRow(tx, input.accountId))) throw new DomainError("not_found", "Account not found.");
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
        ...columns,
      },
    });
    // a new key has spent nothing
    return { ...view(row, keyUsage(row, 0n, this.clock.now())), apiKey };
  }

  /**
   * The keys an actor may see (`keys`), newest first: an account-level key or a session every
   * active key of the account, any other key itself and the keys below it. Metadata, policy, scopes
   * and this period's usage (two reads, whatever the number of keys). An expired key is listed (its
   * `expiresAt` says so) until revoked.
   * @throws DomainError insufficient_scope
   */
  async listActive(actor: KeyActor): Promise<{ keys: ApiKeyView[]; cap: number }> {
    requireScope(actor, "keys");
    let below: string | null = null;
    if (actor.credential === "bearer" && actor.apiKeyId) {
      const chain = await readChain(this.db, actor.accountId, actor.apiKeyId, false);
      if (!isAccountLevel(chain.self)) below = chain.self.id;
    }
    const rows = await this.db.apiKey.findMany({
      where: {
        ...apiKeyScopeFor(actor),
        ...ACTIVE_API_KEYS,
        ...(below ? { OR: [{ id: below }, { ancestorIds: { has: below } }] } : {}),
      },
      orderBy: [{ createdAt: "desc" }, { id: "desc" }],
    });
    return { keys: await this.withUsage(rows), cap: MAX_ACTIVE_KEYS };
  }

  /**
   * The calling key (GET /v1/agent/key): metadata, scopes, policy and usage. Any scope reads it.
   * @throws DomainError not_found when it is not an active key of the account (revoked meanwhile)
   */
  async describeKey(input: { accountId: string; apiKeyId: string }): Promise<ApiKeyView> {
    const row = await this.db.apiKey.findFirst({
      where: { id: assertUuid(input.apiKeyId, "id"), ...apiKeyScopeFor(input), ...ACTIVE_API_KEYS },
    });
    if (!row) throw notFound();
    const [one] = await this.withUsage([row]);
    if (!one) throw notFound();
    return one;
  }

  /**
   * Changes a key's name and policy: only the fields present; `null` removes a setting (a key below
   * another inherits its parent's ceiling, models and expiry instead). Everything is checked before
   * anything is written (400 naming the field; 403 `forbidden` for a field wider than the key's
   * parent); the write is guarded on the key being active, the account's and unexpired. A Bearer
   * actor needs `keys` and changes only keys below it (an account-level key: any), never its own
   * policy (its name, yes). Every process forgets the key's cached authentication, and its
   * descendants'.
   * @throws DomainError invalid_request (an empty change, a bad field); insufficient_scope;
   *   forbidden; not_found when the key is not an active key of this account (revoked keys
   *   included, as DELETE); conflict when it expired (expiry is final: revoke it and mint another)
   */
  async updateKey(input: { actor: KeyActor; keyId: string; change: KeyUpdate }): Promise<ApiKeyView> {
    const { actor } = input;
    const keyId = assertUuid(input.keyId, "id");
    const { name, ...change } = input.change;
    const policyChanged = Object.values(change).some((v) => v !== undefined);
    if (name === undefined && !policyChanged) {
      throw new DomainError(
        "invalid_request",
        `Nothing to change: send at least one of name, ${POLICY_FIELDS.join(", ")}; nothing was changed.`,
      );
    }
    if (actor.credential === "bearer") requireScope(actor, "keys");
    if (name !== undefined) assertKeyName(name);
    let columns = await this.policyColumns(change);
    const now = this.clock.now();
    const target = await this.db.apiKey.findFirst({
      where: { id: keyId, ...apiKeyScopeFor(actor), ...ACTIVE_API_KEYS },
    });
    if (!target) throw notFound();
    if (actor.credential === "bearer" && actor.apiKeyId) {
      const caller = await readChain(this.db, actor.accountId, actor.apiKeyId, false);
      if (!(caller.self.id === target.id && !policyChanged)) assertManages(caller.self, target, "change");
    }
    if (target.parentId !== null && policyChanged) {
      const parent = await readChain(this.db, actor.accountId, target.parentId, false);
      const bounds = {
        policy: effectivePolicy(parent.self, parent.ancestors, now),
        remainingMicroUsdc: await chainRemaining(this.db, [...parent.ancestors, parent.self], now),
      };
      columns = boundChild(columns, bounds, { partial: true });
    }
    const r = await this.db.apiKey.updateMany({
      where: {
        id: keyId,
        ...apiKeyScopeFor(actor),
        ...ACTIVE_API_KEYS,
        OR: [{ expiresAt: null }, { expiresAt: { gt: now } }],
      },
      data: { ...(name !== undefined ? { name } : {}), ...columns },
    });
    const row = await this.db.apiKey.findFirst({
      where: { id: keyId, ...apiKeyScopeFor(actor), ...ACTIVE_API_KEYS },
    });
    if (r.count === 0 && row?.expiresAt && isExpired(row.expiresAt, now)) {
      throw new DomainError(
        "conflict",
        `This key expired at ${row.expiresAt.toISOString()}; an expired key cannot be changed: revoke it and mint another.`,
        { field: "expiresAt" },
      );
    }
    if (r.count === 0 || !row) throw notFound();
    this.forget(keyId);
    this.bus?.publish("routingChanged", { kind: "api_key_revoked", id: keyId });
    this.announce(actor.accountId, "api_key_updated");
    const [one] = await this.withUsage([row]);
    if (!one) throw notFound();
    return one;
  }

  /**
   * This period's usage of stored keys (GraphQL's key fields batch through it): one read for any
   * number of keys (`spentThisPeriod`: each key's whole subtree).
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
   * Revokes one of the account's active keys (the calling key included) and every key below it. A
   * Bearer actor needs `keys` and revokes itself or keys below it (an account-level key: any).
   * @throws DomainError insufficient_scope; forbidden; not_found when the key is not an active key
   *   of this account.
   */
  async revokeKey(input: { actor: KeyActor; keyId: string }): Promise<void> {
    const { actor } = input;
    assertUuid(input.keyId, "id");
    if (actor.credential === "bearer") requireScope(actor, "keys");
    const target = await this.db.apiKey.findFirst({
      where: { id: input.keyId, ...apiKeyScopeFor(actor), ...ACTIVE_API_KEYS },
    });
    if (!target) throw notFound();
    if (actor.credential === "bearer" && actor.apiKeyId) {
      const caller = await readChain(this.db, actor.accountId, actor.apiKeyId, false);
      assertManages(caller.self, target, "revoke");
    }
    const now = this.clock.now();
    const revoked = await this.db.$queryRaw<{ id: string }[]>`
      UPDATE api_keys SET status = 'revoked', revoked_at = ${now}
       WHERE account_id = ${actor.accountId}::uuid AND status = 'active'
         AND (id = ${input.keyId}::uuid OR ancestor_ids @> ARRAY[${input.keyId}::uuid])
      RETURNING id::text AS id`;
    if (!revoked.some((r) => r.id === input.keyId)) throw notFound();
    for (const { id } of revoked) {
      this.forget(id);
      this.bus?.publish("routingChanged", { kind: "api_key_revoked", id });
    }
    this.announce(actor.accountId, "api_key_revoked");
  }

  /**
   * Tells the account's open dashboards that its keys changed (`balanceChanged`, the account's
   * event stream the buyer view re-reads on), whichever transport changed them.
   */
  private announce(accountId: string, kind: string): void {
    this.bus?.publish("balanceChanged", accountId, { accountId, kind, at: this.clock.now().toISOString() });
  }

  /** Drops a key, and every key below it, from this process's authentication cache. */
  forget(apiKeyId: string): void {
    this.auth.forget(apiKeyId);
  }

  /** `KeyAuthenticator.authenticateCached` (the inference routes). */
  authenticateCached(plaintext: string): Promise<AuthenticatedKey | null> {
    return this.auth.authenticateCached(plaintext);
  }

  /** `KeyAuthenticator.authenticate`. */
  authenticate(plaintext: string): Promise<AuthenticatedKey | null> {
    return this.auth.authenticate(plaintext);
  }
}
