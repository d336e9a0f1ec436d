import type { SignInProvider } from "../accounts/account-types.js";
import type { KeyRules } from "../keys/key-period.js";
import type { Scope } from "../keys/key-scopes.js";

/**
 * Who is calling: the authenticated principal that every transport (REST, GraphQL, MCP) resolves
 * from a session cookie or a Bearer API key and hands to the domain services. `null` where a
 * transport allows anonymous callers.
 */
export interface Viewer {
  accountId: string;
  walletAddress: string;
  /** how the caller authenticated: a session cookie or a Bearer API key */
  credential: "session" | "bearer";
  apiKeyId?: string;
  /** a Bearer caller: what admission enforces of its key's policy */
  keyRules?: KeyRules;
  /** a Bearer caller: its key's scopes (key-scopes.ts; a session holds every scope) */
  scopes?: readonly Scope[];
  sessionId?: string;
  /** a session caller: the provider the session was signed in with */
  authProvider?: SignInProvider;
}
