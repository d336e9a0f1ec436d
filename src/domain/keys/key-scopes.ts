import { DomainError } from "../../lib/errors.js";

/**
 * What an API key may do (docs/decisions.md "Key scopes and the key tree"): THE scope
 * rules. Every transport asks `requireScope` before it calls a service on a key's behalf, and the
 * key services mint and change keys within `grantableScopes`, so REST, GraphQL and MCP refuse alike.
 *
 * - `inference`: call the model routes; read its own key and its own requests;
 * - `keys`: mint, list, change and revoke keys (only keys below it, unless it is account-level);
 * - `account`: the account's ceiling, webhooks, refills, and account-wide reads (balances, ledger,
 *   every key's history).
 *
 * A session holds every scope.
 */
export type Scope = "inference" | "keys" | "account";

/** Every scope, in the order listings show them. */
export const SCOPES: readonly Scope[] = ["inference", "keys", "account"];

/** Who asks: a session, or a Bearer key with its scopes. */
export interface ScopedCaller {
  credential: "session" | "bearer";
  /** a Bearer key's scopes (absent on a session) */
  scopes?: readonly Scope[];
}

/** Whether the caller holds `scope` (a session holds them all). */
export function hasScope(caller: ScopedCaller, scope: Scope): boolean {
  if (caller.credential === "session") return true;
  return caller.scopes?.includes(scope) ?? false;
}

/**
 * 403 `insufficient_scope` naming the scope the caller lacks.
 * @throws DomainError insufficient_scope
 */
export function requireScope(caller: ScopedCaller, scope: Scope): void {
  if (hasScope(caller, scope)) return;
  throw insufficientScope(scope, caller.scopes ?? []);
}

/** The 403 `insufficient_scope` answer for a key that holds `held` and needs `scope`. */
export function insufficientScope(scope: Scope, held: readonly Scope[]): DomainError {
  return new DomainError(
    "insufficient_scope",
    `This API key lacks the '${scope}' scope (it holds: ${held.join(", ") || "none"}); use a key with '${scope}', or sign in.`,
    { scope },
  );
}

/** Whose requests a caller may read: the account's (`account`), or its own key's (`inference`). */
export interface HistoryReader {
  accountId: string;
  /** set: only this key's requests */
  onlyKeyId?: string;
}

/**
 * The history a caller may read: a session or a key with `account` every request of the account; a
 * key with `inference` alone its own key's.
 * @throws DomainError insufficient_scope (`inference`) for a key with neither
 */
export function historyReader(caller: ScopedCaller & { accountId: string; apiKeyId?: string }): HistoryReader {
  if (hasScope(caller, "account")) return { accountId: caller.accountId };
  requireScope(caller, "inference");
  return { accountId: caller.accountId, onlyKeyId: caller.apiKeyId ?? "" };
}

/** Scopes in their canonical order, once each. */
export function canonicalScopes(scopes: Iterable<string>): Scope[] {
  const set = new Set(scopes);
  return SCOPES.filter((s) => set.has(s));
}

/**
 * Checks a requested `scopes` list: 1-3 known scope names. Returns them in canonical order.
 * @throws DomainError invalid_request naming `scopes`
 */
export function parseScopes(scopes: unknown): Scope[] {
  if (
    !Array.isArray(scopes) ||
    scopes.length === 0 ||
    scopes.length > 3 ||
    scopes.some((s) => typeof s !== "string" || !SCOPES.includes(s as Scope))
  ) {
    throw new DomainError(
      "invalid_request",
      `scopes must be a list of 1-3 of ${SCOPES.join(", ")}; nothing was changed.`,
      { field: "scopes" },
    );
  }
  return canonicalScopes(scopes as string[]);
}
