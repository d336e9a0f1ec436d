import type { IncomingMessage } from "node:http";
import type { NextFunction, Request, RequestHandler, Response } from "express";
import type { Config } from "../config.js";
import type { Viewer } from "../domain/identity/viewer.js";
import { requireScope, type Scope } from "../domain/keys/key-scopes.js";
import { DomainError } from "../lib/errors.js";
import type { Services } from "../services.js";
import { type Authenticate, credentialLayer } from "./layers.js";
import { jsonBody } from "./middleware.js";

/**
 * Credentials (SPEC "Authentication"). One rule per route family:
 *   session routes: the `svc_session` cookie, and no Authorization header (a Bearer → 401);
 *   Bearer routes (inference, refill, agent): `Authorization: Bearer svc_…`, and no session
 *   cookie (a cookie → 401). Missing or invalid → 401.
 */
export const SESSION_COOKIE = "svc_session";

export function readCookie(req: IncomingMessage, name: string): string | undefined {
  const header = req.headers.cookie;
  if (!header) return undefined;
  for (const part of header.split(";")) {
    const eq = part.indexOf("=");
    if (eq < 0) continue;
    if (part.slice(0, eq).trim() === name) {
      const raw = part.slice(eq + 1).trim();
      try {
        return decodeURIComponent(raw);
      } catch {
        return raw;
      }
    }
  }
  return undefined;
}

export function bearerToken(req: IncomingMessage): string | undefined {
  const h = req.headers.authorization;
  if (!h) return undefined;
  const m = /^Bearer\s+(\S+)\s*$/i.exec(h);
  return m?.[1];
}

export function viewerOf(res: Response): Viewer {
  const v = res.locals.viewer as Viewer | undefined;
  if (!v) throw new DomainError("authentication_failed", "Authentication failed.");
  return v;
}

export function sessionCookie(config: Config, value: string, maxAgeSeconds: number): string {
  const parts = [`${SESSION_COOKIE}=${value}`, "Path=/", "HttpOnly", "SameSite=Lax", `Max-Age=${maxAgeSeconds}`];
  if (config.mode !== "local") parts.push("Secure");
  return parts.join("; ");
}

export function clearedSessionCookie(config: Config): string {
  return sessionCookie(config, "", 0);
}

/** Resolves the caller of a request from either credential (GraphQL serves both). */
export async function resolveViewer(services: Services, req: Request): Promise<Viewer | null> {
  const token = bearerToken(req);
  const cookie = readCookie(req, SESSION_COOKIE);
  if (token && cookie) return null; // ambiguous: refuse both
  if (token) {
    const k = await services.apiKeys.authenticate(token);
    return k
      ? {
          credential: "bearer",
          accountId: k.accountId,
          walletAddress: k.walletAddress,
          apiKeyId: k.apiKeyId,
          keyRules: k.rules,
          scopes: k.scopes,
        }
      : null;
  }
  if (cookie) {
    const s = await services.identity.resolveSession(cookie);
    return s
      ? {
          credential: "session",
          accountId: s.accountId,
          walletAddress: s.walletAddress,
          sessionId: s.sessionId,
          authProvider: s.authProvider,
        }
      : null;
  }
  return null;
}

/** The session rule for one request: an Authorization header, a missing or an unknown session → 401. */
export async function authenticateSession(services: Services, req: IncomingMessage): Promise<Viewer> {
  if (req.headers.authorization) {
    throw new DomainError("authentication_failed", "This route takes a session cookie, not an Authorization header.");
  }
  const cookie = readCookie(req, SESSION_COOKIE);
  if (!cookie)
    throw new DomainError("authentication_failed", "Sign in first: this route needs the svc_session cookie.");
  const s = await services.identity.resolveSession(cookie);
  if (!s) throw new DomainError("authentication_failed", "The session is invalid, expired or signed out.");
  return {
    credential: "session",
    accountId: s.accountId,
    walletAddress: s.walletAddress,
    sessionId: s.sessionId,
    authProvider: s.authProvider,
  };
}

/**
 * The route families that take a credential (SPEC "Authentication"), by path: their bodies are read
 * only once the credential checks out (`requireBearer` / `requireSession` parse them), so a 20 MB
 * body from nobody costs nothing. Every other route's body is parsed up front
 * (`bodyUnlessCredentialed`). Case-insensitive, trailing slash ignored, like Express's routing. A
 * route under one of these paths must use requireBearer, requireSession or (`either`) requireBearerOrSession,
 * or its body stays unread.
 * `bearerPaths` (as `routeKey` gives them): Bearer routes whose path is configured, not fixed (the
 * MCP connector at `{mcp_url}/mcp`), which check the key themselves before reading the body.
 */
export function credentialFamily(
  path: string,
  bearerPaths: ReadonlySet<string> = new Set(),
): "bearer" | "session" | "either" | null {
  const p = routeKey(path);
  const under = (prefix: string) => p === prefix || p.startsWith(`${prefix}/`);
  if (
    bearerPaths.has(p) ||
    ["/v1/chat/completions", "/v1/responses", "/v1/messages", "/v1/image/generate", "/v1/images/generations"].some(
      under,
    ) ||
    under("/v1/video") ||
    under("/v1/agent") ||
    p === "/v1/x402/refill"
  ) {
    return "bearer";
  }
  // webhooks serve buyers (Bearer or session) and suppliers (session): requireBearerOrSession
  if (under("/v1/webhooks")) return "either";
  if (p === "/v1/supply/pool/summary") return null;
  if (["/auth/logout", "/v1/me", "/v1/account", "/v1/supply"].some(under) || p === "/v1/x402/top-up") return "session";
  return null;
}

/** A path as Express routes it: case-insensitive, trailing slash ignored. */
function routeKey(path: string): string {
  return path.toLowerCase().replace(/\/+$/, "");
}

/**
 * The app-wide body parser: every route's body but the credentialed families' (see
 * credentialFamily, with the app's configured Bearer paths).
 */
export function bodyUnlessCredentialed(bearerPaths: readonly string[] = []): RequestHandler {
  const own = new Set(bearerPaths.map(routeKey));
  return (req: Request, res: Response, next: NextFunction) => {
    if (credentialFamily(req.path, own) !== null) next();
    else jsonBody(req, res, next);
  };
}

/** The session rule as middleware; the body is read after the credential checks out (layers.ts). */
export function requireSession(services: Services): RequestHandler {
  return credentialLayer((req) => authenticateSession(services, req));
}

/**
 * The Bearer rule for one request: a session cookie, a missing or an unknown key → 401.
 * `cached`: the inference routes, whose hold re-checks the key in its own transaction.
 */
export async function authenticateBearer(
  services: Services,
  req: IncomingMessage,
  opts: BearerOptions = {},
): Promise<Viewer> {
  if (readCookie(req, SESSION_COOKIE) !== undefined) {
    throw new DomainError(
      "authentication_failed",
      "This route takes a Bearer API key; a session cookie is not accepted.",
    );
  }
  const token = opts.apiKeyHeader ? anthropicApiKey(req) : bearerToken(req);
  if (!token) {
    throw new DomainError(
      "authentication_failed",
      opts.apiKeyHeader
        ? "Missing API key: send x-api-key: <API key> or Authorization: Bearer <API key>."
        : "Missing Authorization: Bearer <API key>.",
    );
  }
  const k = opts.cached ? await services.apiKeys.authenticateCached(token) : await services.apiKeys.authenticate(token);
  if (!k) throw new DomainError("authentication_failed", "Invalid or revoked API key.");
  const viewer: Viewer = {
    credential: "bearer",
    accountId: k.accountId,
    walletAddress: k.walletAddress,
    apiKeyId: k.apiKeyId,
    keyRules: k.rules,
    scopes: k.scopes,
  };
  if (opts.scope) requireScope(viewer, opts.scope);
  return viewer;
}

/**
 * `cached`: the inference routes, whose hold re-checks the key in its own transaction. `scope`: the
 * scope the route needs (key-scopes.ts `requireScope`: 403 `insufficient_scope`, the body unread).
 * `apiKeyHeader`: the key may also come in `x-api-key` (the Messages routes, as Anthropic's clients send it).
 */
export interface BearerOptions {
  cached?: boolean;
  scope?: Scope;
  apiKeyHeader?: boolean;
}

/**
 * The API key of a Messages request: `x-api-key` (Anthropic's header, what `ANTHROPIC_API_KEY` sends)
 * or `Authorization: Bearer` (what `ANTHROPIC_AUTH_TOKEN` sends); both at once must be the same key.
 */
export function anthropicApiKey(req: IncomingMessage): string | undefined {
  const bearer = bearerToken(req);
  const header = req.headers["x-api-key"];
  const apiKey = typeof header === "string" && header.trim() !== "" ? header.trim() : undefined;
  if (bearer !== undefined && apiKey !== undefined && bearer !== apiKey) {
    throw new DomainError(
      "authentication_failed",
      "x-api-key and Authorization: Bearer name different keys; send one of them.",
    );
  }
  return bearer ?? apiKey;
}

/** The Bearer rule as middleware; the body is read after the credential checks out (layers.ts). */
export function requireBearer(services: Services, opts: BearerOptions = {}): RequestHandler {
  return credentialLayer(bearerCheck(services, opts));
}

/** The Bearer rule as a layer's credential check (layers.ts `credentialed`). */
export function bearerCheck(services: Services, opts: BearerOptions = {}): Authenticate {
  return (req) => authenticateBearer(services, req, opts);
}

/**
 * Routes that serve both kinds of caller (`/v1/webhooks`): a Bearer key, or the session cookie,
 * exactly one of them (both at once is 401, as GraphQL treats it); then each one's own rule.
 */
export function requireBearerOrSession(services: Services, opts: { scope?: Scope } = {}): RequestHandler {
  return credentialLayer(async (req) => {
    const hasBearer = req.headers.authorization !== undefined;
    const hasCookie = readCookie(req, SESSION_COOKIE) !== undefined;
    if (hasBearer && hasCookie) {
      throw new DomainError(
        "authentication_failed",
        "Send one credential: a Bearer API key or the session cookie, not both.",
      );
    }
    return hasBearer ? authenticateBearer(services, req, opts) : authenticateSession(services, req);
  });
}

/**
 * CSRF defence for cookie-authenticated writes, on top of SameSite=Lax and JSON-only bodies:
 * a browser request that names a foreign Origin is refused.
 */
export function allowedOrigins(config: Config): Set<string> {
  return new Set([new URL(config.urls.base).origin, new URL(config.urls.web).origin, new URL(config.urls.docs).origin]);
}

export function requireSameOrigin(config: Config): RequestHandler {
  const allowed = allowedOrigins(config);
  return (req, _res, next) => {
    if (req.method === "GET" || req.method === "HEAD" || req.method === "OPTIONS") return next();
    const origin = req.headers.origin;
    if (origin && origin !== "null" && !allowed.has(origin)) {
      return next(new DomainError("csrf_rejected", "Cross-origin request refused for a cookie-authenticated route."));
    }
    if (origin === "null") return next(new DomainError("csrf_rejected", "Opaque-origin request refused."));
    next();
  };
}
