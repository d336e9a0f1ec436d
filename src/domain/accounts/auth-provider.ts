import type { AccountCaller, AuthProviderName, SignInProvider } from "./account-types.js";

/** The sign-in provider a stored value names; null for `x402` (a signup account never signed in). */
export function signInProviderOf(stored: AuthProviderName): SignInProvider | null {
  return stored === "x402" ? null : stored;
}

/**
 * THE `authProvider` every surface answers, so no two surfaces disagree (docs/decisions.md): a session
 * caller gets the provider of its own session (a wallet may hold an IdP and a SIWE session at
 * once); a Bearer caller the account's stored sign-in provider (`idp` once it ever signed in with
 * the IdP, else `siwe`), or null while the wallet has never signed in. Never `x402`.
 */
export function authProviderFor(
  viewer: Pick<AccountCaller, "authProvider"> | null | undefined,
  stored: AuthProviderName,
): SignInProvider | null {
  return viewer?.authProvider ?? signInProviderOf(stored);
}
