/**
 * Whose fault each documented answer of the upstream is (docs/decisions.md "Venice's answers: whose
 * fault"): the one reading of
 * Venice's error statuses and texts (vendor/venice/swagger.yaml, the `responses` of every route the
 * client calls; api-spec.mdx for the headers). The client attaches what this answers to every
 * failure; `classifyFailure` (domain/inference/pipeline/failure.ts) turns it into what the buyer sees and what
 * happens to the key. The table of every status is docs/decisions.md "Venice's answers: whose fault".
 *
 * - the key's: `auth` (the documented invalid-key answer: 401 "Authentication failed"; any 401/403 on
 *   a route that names no model and carries no body, i.e. the rate-limits read) and `payment` (402);
 * - the request's: `request` (400, 404, 409, 413, 415, 422, other 4xx) and the documented refusals of
 *   a model or route to a valid key, `request` with a `reason`: a region-restricted model (403 "The
 *   specified model is unavailable in your region", the only documented 403 of the video routes),
 *   the alpha-only `/responses`, a Pro-only model (401 "This model is only available to Pro users");
 * - the upstream's: `rate_limited` (429) and `server` (5xx);
 * - unclear: `auth_unclear`, a 401/403 the reference does not document (or any on `/responses`,
 *   whose alpha refusal has no documented status or text): neither punished nor trusted, the key is
 *   confirmed with a rate-limits read (`SupplierKeys.mark`).
 */

/** A model or route the upstream refuses to a valid key, documented as such. */
export type UpstreamRefusal = "region_restricted" | "alpha_only" | "pro_only";

/** What an answer says about whose fault it is (the `kind` of an `UpstreamFailure`, and why). */
export interface AnswerClass {
  kind: "auth" | "auth_unclear" | "payment" | "rate_limited" | "server" | "request";
  reason?: UpstreamRefusal;
}

/** The documented invalid-key answer (401 on every route; `/api_keys/rate_limits` knows no other). */
const INVALID_KEY = /^\s*authentication failed\b/i;
/** 403 on `/video/quote`, `/video/queue`, `/video/retrieve` (the only 403 documented there). */
const REGION = /\bunavailable in your region\b/i;
/** 401 on every inference route: the model is gated to Pro (and beta-access) accounts. */
const PRO_ONLY = /\bonly available to pro users\b/i;
/** `/responses`: "This endpoint is currently available to Alpha testers only." */
const ALPHA = /\balpha\b/i;

/** Routes that name no model and send no body: a 401/403 there can only be about the key. */
const KEY_ONLY_ROUTES = new Set(["/api_keys/rate_limits", "/models"]);
/** Routes whose only documented 403 is the region restriction. */
const REGION_403_ROUTES = new Set(["/video/quote", "/video/queue", "/video/retrieve"]);

/** `/api/v1/video/queue?x=1` or `/video/queue` → `/video/queue` (the route below the base path). */
export function routeOf(path: string): string {
  const bare = path.split("?")[0] ?? "";
  const i = bare.indexOf("/api/v1/");
  return i >= 0 ? bare.slice(i + "/api/v1".length) : bare;
}

/**
 * Whose fault an upstream answer of status `status` (not 2xx) to `path` is. `errorText` is the
 * body's documented error text (`error`, or `error.message`; "" when the body carries none).
 */
export function classifyAnswer(path: string, status: number, errorText: string): AnswerClass {
  if (status === 401 || status === 403) return refusalOf(routeOf(path), status, errorText);
  if (status === 402) return { kind: "payment" };
  if (status === 429) return { kind: "rate_limited" };
  if (status >= 500) return { kind: "server" };
  return { kind: "request" };
}

/** A 401 or 403: the key's, the request's, or unclear (see the module comment). */
function refusalOf(route: string, status: number, text: string): AnswerClass {
  if (KEY_ONLY_ROUTES.has(route)) return { kind: "auth" };
  if (REGION.test(text)) return { kind: "request", reason: "region_restricted" };
  if (PRO_ONLY.test(text)) return { kind: "request", reason: "pro_only" };
  if (route === "/responses") {
    // alpha-only: its refusal's status and text are undocumented, so even "Authentication failed"
    // may be it; only a rate-limits read with the key can tell a revoked key (auth_unclear)
    return ALPHA.test(text) ? { kind: "request", reason: "alpha_only" } : { kind: "auth_unclear" };
  }
  if (INVALID_KEY.test(text)) return { kind: "auth" };
  if (status === 403 && text.trim() === "" && REGION_403_ROUTES.has(route)) {
    return { kind: "request", reason: "region_restricted" };
  }
  return { kind: "auth_unclear" };
}
