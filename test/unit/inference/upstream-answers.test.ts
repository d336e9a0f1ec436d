// Issue 39 item 2: every answer Venice documents for the routes the client calls
// (vendor/venice/swagger.yaml), classified once (`classifyAnswer`, adapters/upstream/answers.ts) into
// the key's fault, the request's or the upstream's, and what that means for the buyer and the key
// (`classifyFailure`). The table below is docs/decisions.md "Venice's answers: whose fault"; the
// first test fails when the vendored reference documents a status the table does not cover.
import { readFileSync } from "node:fs";
import { describe, expect, test } from "vitest";
import { parse } from "yaml";
import { classifyAnswer } from "../../../src/adapters/upstream/answers.js";
import { failureOf } from "../../../src/adapters/upstream/client.js";
import { classifyFailure } from "../../../src/domain/inference/pipeline/failure.js";
import { DomainError } from "../../../src/lib/errors.js";

/** The routes the client calls, and their method. */
const ROUTES: Record<string, "get" | "post"> = {
  "/chat/completions": "post",
  "/responses": "post",
  "/image/generate": "post",
  "/images/generations": "post",
  "/video/quote": "post",
  "/video/queue": "post",
  "/video/retrieve": "post",
  "/video/complete": "post",
  "/models": "get",
  "/api_keys/rate_limits": "get",
};

/** What the service does with the answer, for the routes a request's attempts call. */
type Effect =
  | { key: "auth_failed" | "cooldown" | "confirm" }
  | { fallForward: true }
  | { buyer: [status: number, code: string] };

interface Row {
  route: string;
  status: number;
  /** the body as Venice documents it (StandardError `{error}` unless given) */
  body: unknown;
  kind: string;
  reason?: string;
  /** absent on routes outside the attempt loop (retrieve, complete, the catalog and rate-limits reads) */
  effect?: Effect;
}

const AUTH_FAILED = { error: "Authentication failed" };
const PRO_ONLY = { error: "This model is only available to Pro users" };
const ALPHA = { error: "This endpoint is currently available to Alpha testers only." };
const REGION = {
  error:
    "The specified model is unavailable in your region. Use of Tor, VPNs, proxies, or other means to circumvent this restriction is a violation of our Terms of Service.",
};
const INVALID = { error: "Invalid request parameters", details: { _errors: [], model: { _errors: ["Required"] } } };
const BALANCE = {
  error: "Insufficient USD or Diem balance to complete request. Visit https://venice.ai/settings/api to add credits.",
};
const RATE = { error: "Rate limit exceeded" };
const FAILED = { error: "Inference processing failed" };
const CAPACITY = { error: "The model is at capacity. Please try again later." };
const CONTENT_TYPE = { error: "Invalid request content-type" };
const CONSENT = {
  error: { code: "needs_consent", message: "Consent is required" },
  consent_flow: "seedance",
  face_media_roles: ["image"],
  consent: { consent_version: "1", policy_text: "…" },
  docs_url: "https://docs.venice.ai",
};
const TOO_LARGE = { code: "PAYLOAD_TOO_LARGE", error: "File exceeds the maximum allowed size of 25 MB." };
const CONTENT_POLICY = { error: "Your prompt violates the content policy of Venice.ai or the model provider" };
const PROVIDER_POLICY = {
  error: {
    message:
      "The selected model provider rejected this request due to its content policies. Credits have been refunded.",
    type: "provider_content_policy",
    credits_refunded: true,
  },
};

const KEY_AUTH: Effect = { key: "auth_failed" };
const KEY_COOLDOWN: Effect = { key: "cooldown" };
const CONFIRM: Effect = { key: "confirm" };
const FORWARD: Effect = { fallForward: true };
const INVALID_400: Effect = { buyer: [400, "invalid_request"] };
const ACCESS_403: Effect = { buyer: [403, "upstream_access_denied"] };
const REGION_403: Effect = { buyer: [403, "model_region_restricted"] };

/** The answers every token and image route documents (401 twice: two documented texts). */
function inferenceRows(route: string, more: Row[] = []): Row[] {
  return [
    { route, status: 400, body: INVALID, kind: "request", effect: INVALID_400 },
    { route, status: 401, body: AUTH_FAILED, kind: "auth", effect: KEY_AUTH },
    { route, status: 401, body: PRO_ONLY, kind: "request", reason: "pro_only", effect: ACCESS_403 },
    { route, status: 402, body: BALANCE, kind: "payment", effect: KEY_COOLDOWN },
    { route, status: 429, body: RATE, kind: "rate_limited", effect: FORWARD },
    { route, status: 500, body: FAILED, kind: "server", effect: FORWARD },
    ...more,
  ];
}

const TABLE: Row[] = [
  ...inferenceRows("/chat/completions", [
    { route: "/chat/completions", status: 415, body: CONTENT_TYPE, kind: "request", effect: INVALID_400 },
    { route: "/chat/completions", status: 503, body: CAPACITY, kind: "server", effect: FORWARD },
    {
      route: "/chat/completions",
      status: 504,
      body: { error: "The request took too long to complete and was timed-out." },
      kind: "server",
      effect: FORWARD,
    },
  ]),
  // alpha-only: its refusal has no documented status or text, so only a text naming the alpha is
  // the request's; any other 401/403 there (even "Authentication failed") is confirmed first
  { route: "/responses", status: 400, body: INVALID, kind: "request", effect: INVALID_400 },
  { route: "/responses", status: 401, body: AUTH_FAILED, kind: "auth_unclear", effect: CONFIRM },
  { route: "/responses", status: 401, body: PRO_ONLY, kind: "request", reason: "pro_only", effect: ACCESS_403 },
  { route: "/responses", status: 401, body: ALPHA, kind: "request", reason: "alpha_only", effect: ACCESS_403 },
  { route: "/responses", status: 403, body: ALPHA, kind: "request", reason: "alpha_only", effect: ACCESS_403 },
  { route: "/responses", status: 403, body: { error: "Forbidden" }, kind: "auth_unclear", effect: CONFIRM },
  { route: "/responses", status: 402, body: BALANCE, kind: "payment", effect: KEY_COOLDOWN },
  { route: "/responses", status: 429, body: RATE, kind: "rate_limited", effect: FORWARD },
  { route: "/responses", status: 500, body: FAILED, kind: "server", effect: FORWARD },
  ...["/image/generate", "/images/generations"].flatMap((route) =>
    inferenceRows(route, [
      { route, status: 415, body: CONTENT_TYPE, kind: "request", effect: INVALID_400 },
      { route, status: 503, body: CAPACITY, kind: "server", effect: FORWARD },
    ]),
  ),
  { route: "/video/quote", status: 400, body: INVALID, kind: "request", effect: INVALID_400 },
  {
    route: "/video/quote",
    status: 403,
    body: REGION,
    kind: "request",
    reason: "region_restricted",
    effect: REGION_403,
  },
  // the only 403 documented on the video routes: a body without text is still the region's
  { route: "/video/quote", status: 403, body: "", kind: "request", reason: "region_restricted", effect: REGION_403 },
  {
    route: "/video/quote",
    status: 403,
    body: { error: "Unauthorized access" },
    kind: "auth_unclear",
    effect: CONFIRM,
  },
  ...inferenceRows("/video/queue", [
    {
      route: "/video/queue",
      status: 403,
      body: REGION,
      kind: "request",
      reason: "region_restricted",
      effect: REGION_403,
    },
    { route: "/video/queue", status: 403, body: AUTH_FAILED, kind: "auth", effect: KEY_AUTH },
    { route: "/video/queue", status: 409, body: CONSENT, kind: "request", effect: INVALID_400 },
    {
      route: "/video/queue",
      status: 413,
      body: TOO_LARGE,
      kind: "request",
      effect: { buyer: [413, "payload_too_large"] },
    },
    { route: "/video/queue", status: 422, body: CONTENT_POLICY, kind: "request", effect: INVALID_400 },
  ]),
  // the job's polls: provider-protocol.ts reads these (404 gone, 422 failed, else polled again); no key marked
  ...[400, 401, 402, 500, 503].map((status) => ({
    route: "/video/retrieve",
    status,
    body: status === 401 ? AUTH_FAILED : status === 402 ? BALANCE : status === 503 ? CAPACITY : FAILED,
    kind: ({ 400: "request", 401: "auth", 402: "payment", 500: "server", 503: "server" } as const)[status] ?? "",
  })),
  { route: "/video/retrieve", status: 403, body: REGION, kind: "request", reason: "region_restricted" },
  { route: "/video/retrieve", status: 404, body: { error: "Media could not be found." }, kind: "request" },
  { route: "/video/retrieve", status: 422, body: PROVIDER_POLICY, kind: "request" },
  ...[400, 401, 402, 500].map((status) => ({
    route: "/video/complete",
    status,
    body: status === 401 ? AUTH_FAILED : status === 402 ? BALANCE : FAILED,
    kind: ({ 400: "request", 401: "auth", 402: "payment", 500: "server" } as const)[status] ?? "",
  })),
  { route: "/models", status: 500, body: { error: "An unknown error occurred" }, kind: "server" },
  // names no model: any 401/403 is the key's (the balance sync and registration read it)
  { route: "/api_keys/rate_limits", status: 401, body: AUTH_FAILED, kind: "auth" },
  { route: "/api_keys/rate_limits", status: 403, body: { error: "Forbidden" }, kind: "auth" },
  { route: "/api_keys/rate_limits", status: 500, body: { error: "An unknown error occurred" }, kind: "server" },
];

/** route → the non-2xx statuses the vendored reference documents for it. */
function documentedStatuses(): Map<string, number[]> {
  const spec = parse(readFileSync(new URL("../../../vendor/venice/swagger.yaml", import.meta.url), "utf8")) as {
    paths: Record<string, Record<string, { responses: Record<string, unknown> }>>;
  };
  const out = new Map<string, number[]>();
  for (const [route, method] of Object.entries(ROUTES)) {
    const responses = spec.paths[route]?.[method]?.responses ?? {};
    out.set(
      route,
      Object.keys(responses)
        .map(Number)
        .filter((s) => s >= 300),
    );
  }
  return out;
}

const text = (body: unknown) => (typeof body === "string" ? body : JSON.stringify(body));

describe("classifyAnswer: every documented upstream answer, whose fault", () => {
  test("the table covers every non-2xx status the vendored reference documents for the routes called", () => {
    const documented = documentedStatuses();
    for (const [route, statuses] of documented) {
      expect(statuses.length, route).toBeGreaterThan(0);
      for (const status of statuses) {
        expect(
          TABLE.some((r) => r.route === route && r.status === status),
          `${route} ${status} is documented but not in the table`,
        ).toBe(true);
      }
    }
  });

  test.each(TABLE.map((r) => ({ ...r, name: `${r.route} ${r.status} ${text(r.body).slice(0, 40)}` })))(
    "$name",
    (row) => {
      const f = failureOf(`/api/v1${row.route}`, row.status, "", {}, text(row.body));
      expect(f.kind).toBe(row.kind);
      expect(f.reason).toBe(row.reason);
      // the path as the client passes it (below the base URL) classifies the same
      expect(classifyAnswer(row.route, row.status, typeof row.body === "string" ? "" : f.message)).toEqual({
        kind: row.kind,
        ...(row.reason ? { reason: row.reason } : {}),
      });
      if (!row.effect) return;
      const c = classifyFailure(f);
      if ("buyer" in row.effect) {
        expect(c).toBeInstanceOf(DomainError);
        const e = c as DomainError;
        expect([e.status, e.code]).toEqual(row.effect.buyer);
        return;
      }
      expect(c).not.toBeInstanceOf(DomainError);
      const kind = (c as { kind: string }).kind;
      if ("fallForward" in row.effect) expect(kind).toBe("retryable");
      else
        expect(kind).toBe(
          { auth_failed: "supplier_auth", cooldown: "supplier_exhausted", confirm: "supplier_unclear" }[row.effect.key],
        );
    },
  );

  test("the request's refusals never blame the key: every row the buyer is answered for is a `request`", () => {
    for (const r of TABLE) {
      if (r.effect && "buyer" in r.effect) expect(r.kind, `${r.route} ${r.status}`).toBe("request");
    }
  });

  test("a body that is not JSON is read by its status alone (no text: an unclear 401 is confirmed)", () => {
    expect(failureOf("/chat/completions", 401, "Unauthorized", {}, "<html>nope</html>")).toMatchObject({
      kind: "auth_unclear",
      message: "Unauthorized",
    });
    expect(failureOf("/chat/completions", 403, "", {}, "")).toMatchObject({ kind: "auth_unclear" });
    expect(failureOf("/video/queue", 403, "Forbidden", {}, "")).toMatchObject({
      kind: "request",
      reason: "region_restricted",
    });
    expect(failureOf("/chat/completions", 502, "Bad Gateway", {}, "")).toMatchObject({ kind: "server" });
  });
});
