import { DomainError } from "../../lib/errors.js";
import type { KeyPolicy } from "./key-policy.js";
import { canonicalScopes, SCOPES, type Scope } from "./key-scopes.js";

/**
 * The key tree (docs/decisions.md "Key scopes and the key tree"): THE rules of who may
 * change which key, and how far a key minted by a key may reach. Pure: the service reads the rows.
 *
 * - An **account-level** key (no parent, every scope, no policy: the signup key, a session's key
 *   without a policy, and a key minted without a policy by another account-level key — the spec's
 *   rotation) holds the account's rights, as a session does.
 * - Any other key minted by a key is that key's **child**: it lives below it (`ancestorIds`), never
 *   reaches past it (scopes, ceiling, models, expiry, limit), its spend counts against every
 *   budgeted ancestor (`svc_key_reserve`), and it is revoked with it.
 * - A key changes only keys below it (an account-level key: any key of the account), and never its
 *   own policy.
 */

/** The columns of a key the tree rules read. */
export interface ChainKey extends KeyPolicy {
  id: string;
  status: string;
  scopes: readonly string[];
  parentId: string | null;
  /** root … parent */
  ancestorIds: readonly string[];
}

/** No model may be called: the lists of a key and its ancestors have nothing in common. */
export const NO_MODEL = "(none)";

/** What a key may do once its ancestors are taken into account. */
export interface EffectivePolicy {
  /** the key and every ancestor active, and none of them expired at `now` */
  active: boolean;
  scopes: Scope[];
  /** the earliest expiry of the chain */
  expiresAt: Date | null;
  /** the lowest ceiling of the chain */
  maxPriceCentsPerDollar: number | null;
  /** the chain's lists intersected; empty: every model; [NO_MODEL]: none */
  models: string[];
  /** some key of the chain has a limit */
  budgeted: boolean;
}

function hasPolicy(k: KeyPolicy): boolean {
  return k.limitMicroUsdc !== null || k.maxPriceCentsPerDollar !== null || k.models.length > 0 || k.expiresAt !== null;
}

/** A key with the account's rights (see above). */
export function isAccountLevel(k: ChainKey): boolean {
  return k.parentId === null && SCOPES.every((s) => k.scopes.includes(s)) && !hasPolicy(k);
}

/**
 * The key's policy within its ancestors' (`ancestors`: the rows of `self.ancestorIds`, any order; a
 * missing one makes the key inactive).
 */
export function effectivePolicy(self: ChainKey, ancestors: readonly ChainKey[], now: Date): EffectivePolicy {
  const byId = new Map(ancestors.map((a) => [a.id, a]));
  const chain: ChainKey[] = [];
  let complete = true;
  for (const id of self.ancestorIds) {
    const a = byId.get(id);
    if (a) chain.push(a);
    else complete = false;
  }
  chain.push(self);
  let expiresAt: Date | null = null;
  let ceiling: number | null = null;
  let models: string[] | null = null;
  let scopes: Set<string> = new Set(SCOPES);
  let budgeted = false;
  for (const k of chain) {
    if (k.expiresAt && (expiresAt === null || k.expiresAt < expiresAt)) expiresAt = k.expiresAt;
    if (k.maxPriceCentsPerDollar !== null && (ceiling === null || k.maxPriceCentsPerDollar < ceiling))
      ceiling = k.maxPriceCentsPerDollar;
    if (k.models.length > 0) models = models === null ? [...k.models] : models.filter((m) => k.models.includes(m));
    scopes = new Set([...scopes].filter((s) => k.scopes.includes(s)));
    if (k.limitMicroUsdc !== null) budgeted = true;
  }
  const active =
    complete &&
    chain.every((k) => k.status === "active") &&
    (expiresAt === null || expiresAt.getTime() > now.getTime());
  return {
    active,
    scopes: canonicalScopes(scopes),
    expiresAt,
    maxPriceCentsPerDollar: ceiling,
    models: models === null ? [] : models.length === 0 ? [NO_MODEL] : models,
    budgeted,
  };
}

const forbidden = (field: string, message: string) => new DomainError("forbidden", message, { field });

/**
 * Whether key `caller` may change or revoke key `target` (both of one account): an account-level
 * key may change any key, any other key only keys below it; a key may revoke itself.
 * @throws DomainError forbidden
 */
export function assertManages(caller: ChainKey, target: ChainKey, action: "change" | "revoke"): void {
  if (caller.id === target.id) {
    if (action === "revoke") return;
    throw forbidden("id", "A key cannot change its own policy; ask the key that minted it, or sign in.");
  }
  if (isAccountLevel(caller) || target.ancestorIds.includes(caller.id)) return;
  throw forbidden("id", "This API key may change only the keys it minted (or keys below them).");
}

/** What a child may not exceed: its parent's effective policy and what the parent's budgets leave. */
export interface ChildBounds {
  policy: EffectivePolicy;
  /** the least the parent's budgets (its own and its ancestors') leave this period; null: none */
  remainingMicroUsdc: bigint | null;
}

/**
 * A child's policy within its parent's (`bounds`): a field left out (or null) inherits the parent's
 * ceiling, models and expiry; a wider one is refused, naming the field. `limitMicroUsdc` is at most
 * what the parent's budgets leave (a child may have no limit of its own: its parent's holds it).
 * Returns the columns to store (changed fields only when `partial`).
 * @throws DomainError forbidden naming the field
 */
export function boundChild(
  change: Partial<KeyPolicy>,
  bounds: ChildBounds,
  opts: { partial: boolean },
): Partial<KeyPolicy> {
  const out: Partial<KeyPolicy> = { ...change };
  const p = bounds.policy;
  const limit = change.limitMicroUsdc;
  if (
    limit !== undefined &&
    limit !== null &&
    bounds.remainingMicroUsdc !== null &&
    limit > bounds.remainingMicroUsdc
  ) {
    throw forbidden(
      "limitUsdc",
      `limitUsdc is above what the minting key's budget leaves this period (${bounds.remainingMicroUsdc} micro-USDC); nothing was changed.`,
    );
  }
  if (change.maxPriceCentsPerDollar !== undefined || !opts.partial) {
    const want = change.maxPriceCentsPerDollar ?? null;
    if (p.maxPriceCentsPerDollar !== null) {
      if (want !== null && want > p.maxPriceCentsPerDollar)
        throw forbidden(
          "maxPriceCentsPerDollar",
          `maxPriceCentsPerDollar is above the minting key's ceiling (${p.maxPriceCentsPerDollar}); nothing was changed.`,
        );
      out.maxPriceCentsPerDollar = want ?? p.maxPriceCentsPerDollar;
    }
  }
  if (change.models !== undefined || !opts.partial) {
    const want = change.models ?? [];
    if (p.models.length > 0) {
      const outside = want.filter((m) => !p.models.includes(m));
      if (outside.length > 0)
        throw forbidden(
          "models",
          `models names models the minting key may not call: ${outside.slice(0, 5).join(", ")}; nothing was changed.`,
        );
      out.models = want.length > 0 ? want : [...p.models];
    }
  }
  if (change.expiresAt !== undefined || !opts.partial) {
    const want = change.expiresAt ?? null;
    if (p.expiresAt !== null) {
      if (want !== null && want > p.expiresAt)
        throw forbidden(
          "expiresAt",
          `expiresAt is after the minting key's expiry (${p.expiresAt.toISOString()}); nothing was changed.`,
        );
      out.expiresAt = want ?? p.expiresAt;
    }
  }
  return out;
}

/**
 * The scopes of a key minted by `minter` (null: a session): those asked for, within the minter's;
 * by default every scope of the minter, or `inference` alone when the key has a policy.
 * @throws DomainError forbidden naming `scopes`
 */
export function childScopes(asked: Scope[] | undefined, minter: readonly Scope[] | null, withPolicy: boolean): Scope[] {
  const may = minter ?? SCOPES;
  if (asked) {
    const beyond = asked.filter((s) => !may.includes(s));
    if (beyond.length > 0)
      throw forbidden(
        "scopes",
        `A key cannot grant scopes it does not hold: ${beyond.join(", ")}; nothing was changed.`,
      );
    return asked;
  }
  if (!withPolicy) return canonicalScopes(may);
  if (!may.includes("inference"))
    throw forbidden("scopes", "The minting key lacks 'inference': name the scopes the new key should hold.");
  return ["inference"];
}

/** Whether a create or a change sets any policy field (then the new key holds `inference` alone by default). */
export function hasPolicyChange(p: Partial<KeyPolicy>): boolean {
  return (
    (p.limitMicroUsdc ?? null) !== null ||
    (p.maxPriceCentsPerDollar ?? null) !== null ||
    (p.models?.length ?? 0) > 0 ||
    (p.expiresAt ?? null) !== null
  );
}
