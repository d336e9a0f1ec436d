import { Agent, request } from "node:http";
import { parse as parseQueryString } from "node:querystring";
import type { RouteConfig } from "@asteasolutions/zod-to-openapi";
import fc from "fast-check";
import type { z } from "zod";
import { ERROR_CODES } from "../../src/lib/errors.js";
import { hasUnstorableText, jsonDepth, RawJson, toJsonText, unstorable } from "./json-text.js";
import {
  accepts,
  anyText,
  extraMembers,
  type Labelled,
  malformedJsonText,
  mutations,
  tooDeep,
  unwrap,
  validSample,
  withMember,
} from "./zod-fuzz.js";

/**
 * REST fuzzing over the OpenAPI registry's routes: for each route, requests built from its zod
 * request schemas with at least one part the contract (or the JSON parser in front of it) refuses —
 * a path parameter, a query value, the body, its content type — sent raw over node:http so a path
 * reaches the server byte for byte (no URL normalisation, no encoding by the client).
 */

type Schema = z.ZodTypeAny;
export type Credential = "bearer" | "session" | "none";

export interface FuzzRoute {
  method: string;
  /** OpenAPI path, `{param}` placeholders */
  path: string;
  operationId: string;
  /** the credentials the route takes (from its `security`), "none" for a public one */
  credentials: Credential[];
  params?: z.AnyZodObject;
  query?: z.AnyZodObject;
  body?: Schema;
  /** a method that may write: only refused input is generated for it */
  mutating: boolean;
  /** /graphql answers GraphQL errors (`errors[].extensions.code`) besides the REST error body */
  graphql: boolean;
}

const MUTATING = new Set(["post", "put", "patch", "delete"]);

function objectSchema(s: unknown): z.AnyZodObject | undefined {
  if (!s) return undefined;
  const { inner } = unwrap(s as Schema);
  return "shape" in inner ? (inner as z.AnyZodObject) : undefined;
}

/** The fuzz view of a registered route. */
export function fuzzRoute(route: RouteConfig): FuzzRoute {
  const kinds = new Set<Credential>();
  for (const requirement of route.security ?? []) {
    const names = Object.keys(requirement);
    if (names.includes("bearerAuth")) kinds.add("bearer");
    else if (names.includes("cookieAuth")) kinds.add("session");
    else kinds.add("none"); // `{}` or X-PAYMENT alone (signup)
  }
  if (kinds.size === 0) kinds.add("none");
  const json = route.request?.body?.content?.["application/json"]?.schema;
  return {
    method: route.method,
    path: route.path,
    operationId: route.operationId ?? `${route.method} ${route.path}`,
    credentials: [...kinds],
    params: objectSchema(route.request?.params),
    query: objectSchema(route.request?.query),
    body: json && typeof (json as Schema).safeParse === "function" ? (json as Schema) : undefined,
    mutating: MUTATING.has(route.method),
    graphql: route.path === "/graphql",
  };
}

// ---- the generated request -------------------------------------------------------------------

/** How the server's JSON parser treats a content type (see express.json / body-parser). */
type BodyHandling = "json" | "ignored" | "refused";

const CONTENT_TYPES: [string | null, BodyHandling][] = [
  ["application/json", "json"],
  ["application/json; charset=utf-8", "json"],
  ["text/plain", "ignored"],
  ["application/x-www-form-urlencoded", "ignored"],
  ["multipart/form-data; boundary=fuzz", "ignored"],
  ["application/octet-stream", "ignored"],
  ["application/xml", "ignored"],
  [null, "ignored"],
  ["application/json; charset=latin1", "refused"],
  ["application/json; charset=koi8-r", "refused"],
];

const ENCODINGS: [string, BodyHandling][] = [
  ["gzip", "refused"],
  ["deflate", "refused"],
  ["x-fuzz", "refused"],
];

export interface FuzzCase {
  /** raw request target: the path as sent (percent-escapes verbatim) plus `?query` */
  target: string;
  contentType: string | null;
  encoding: string | null;
  accept: string | null;
  /** the body as sent, or undefined for none */
  body?: string;
  /** what was done, for the failure report */
  labels: string[];
  /** decoded path parameters as the route sees them (undefined when a segment does not decode) */
  params: Record<string, string | undefined>;
  query: string;
}

const UNRESERVED = /[A-Za-z0-9\-._~]/;

/** Percent-encodes every byte of `s`'s UTF-8 (lone surrogates as their 3-byte WTF-8 form, which no decoder accepts). */
export function percentEncode(s: string): string {
  let out = "";
  for (let i = 0; i < s.length; i++) {
    const hi = s.charCodeAt(i);
    const lo = s.charCodeAt(i + 1);
    let cp = hi;
    if (hi >= 0xd800 && hi <= 0xdbff && lo >= 0xdc00 && lo <= 0xdfff) {
      cp = 0x10000 + ((hi - 0xd800) << 10) + (lo - 0xdc00);
      i++;
    }
    if (cp < 0x80 && UNRESERVED.test(String.fromCharCode(cp))) {
      out += String.fromCharCode(cp);
      continue;
    }
    const bytes =
      cp < 0x80
        ? [cp]
        : cp < 0x800
          ? [0xc0 | (cp >> 6), 0x80 | (cp & 63)]
          : cp < 0x10000
            ? [0xe0 | (cp >> 12), 0x80 | ((cp >> 6) & 63), 0x80 | (cp & 63)]
            : [0xf0 | (cp >> 18), 0x80 | ((cp >> 12) & 63), 0x80 | ((cp >> 6) & 63), 0x80 | (cp & 63)];
    for (const b of bytes) out += `%${b.toString(16).toUpperCase().padStart(2, "0")}`;
  }
  return out;
}

function decodeSegment(segment: string): string | undefined {
  try {
    return decodeURIComponent(segment);
  } catch {
    return undefined;
  }
}

/** Raw path segments: malformed escapes, NUL, dot segments, very long, arbitrary text. */
const hostileSegment: fc.Arbitrary<Labelled> = fc.oneof(
  fc
    .constantFrom(
      "%ZZ",
      "%00",
      "%",
      "%E0%A4%A",
      "%ED%A0%80",
      "ab%00cd",
      "%C0%AF",
      "%FF",
      "%2e%2e",
      "..",
      ".",
      "%2F",
      "a%2Fb",
      "%25",
      "null",
      "undefined",
      "0",
      "-1",
      "mine",
      "%20",
    )
    .map((s) => ({ label: `path segment ${s}`, value: s })),
  anyText(40)
    .filter((s) => s.length > 0)
    .map((s) => ({ label: "path segment: arbitrary text", value: percentEncode(s) })),
  fc
    .integer({ min: 200, max: 12_000 })
    .map((n) => ({ label: `path segment of ${n} characters`, value: "a".repeat(n) })),
  fc
    .uuid()
    .chain((u) =>
      fc
        .constantFrom(`${u}x`, u.replaceAll("-", ""), `${u}%00`, `${u}%ZZ`, `%7B${u}%7D`, u.toUpperCase())
        .map((s) => ({ label: "path segment: near uuid", value: s })),
    ),
);

/** A valid segment (one of the caller's real ids when the parameter is a uuid) or a hostile one. */
function segmentArbitrary(field: Schema, ids: readonly string[]): fc.Arbitrary<Labelled> {
  const samples = [...new Set([...ids, validSample(field)].filter((v): v is string => typeof v === "string"))].filter(
    (v) => field.safeParse(v).success,
  );
  const valid =
    samples.length > 0
      ? fc.constantFrom(...samples).map((v) => ({ label: "", value: percentEncode(v) }))
      : fc.uuid().map((u) => ({ label: "", value: u }));
  return fc.oneof({ weight: 1, arbitrary: valid }, { weight: 3, arbitrary: hostileSegment });
}

/** Query values a numeric, enum or free-text parameter might mind (raw, as they appear in the URL). */
const hostileQueryValue: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom(
    "",
    "abc",
    "0",
    "-1",
    "101",
    "29",
    "81",
    "1e21",
    "-0",
    "NaN",
    "Infinity",
    "1.5",
    "%205",
    "5%20",
    "0x10",
    "%2B5",
    "%D9%A5",
    "005",
    "99999999999999999999999",
    "%00",
    "%ZZ",
    "%",
    "%E0%A4%A",
    "%ED%A0%80",
    "a%00b",
    "24H",
    "7d%00",
    "null",
  ),
  anyText(30).map(percentEncode),
  fc.integer({ min: 1_000, max: 8_000 }).map((n) => "9".repeat(n)),
);

/** Odd query keys: repeated, bracketed, prototype names, empty, encoded NUL. */
function oddPairs(keys: string[]): fc.Arbitrary<string> {
  const key = fc.oneof(
    ...(keys.length > 0 ? [fc.constantFrom(...keys)] : []),
    fc.constantFrom(
      "__proto__",
      "constructor",
      "toString",
      "",
      "a[b]",
      "a[]",
      "%00",
      "%ZZ",
      "k%5B0%5D",
      "hasOwnProperty",
    ),
    anyText(10).map(percentEncode),
  );
  const pair = fc.oneof(
    fc.tuple(key, hostileQueryValue).map(([k, v]) => `${k}=${v}`),
    key,
    key.map((k) => `${k}=`),
    fc.constantFrom("&", "&&", "=", "==", "?", "a=1=2", ";"),
  );
  return fc.array(pair, { minLength: 1, maxLength: 6 }).map((pairs) => pairs.join("&"));
}

function queryArbitrary(route: FuzzRoute): fc.Arbitrary<Labelled> {
  const keys = route.query ? Object.keys(route.query.shape) : [];
  const perKey = keys.map((k) =>
    fc.oneof(
      hostileQueryValue.map((v) => ({ label: `query ${k}=${v.slice(0, 40)}`, value: `${k}=${v}` })),
      fc
        .tuple(hostileQueryValue, hostileQueryValue)
        .map(([a, b]) => ({ label: `query ${k} repeated`, value: `${k}=${a}&${k}=${b}` })),
      fc.constantFrom(`${k}[]=1`, `${k}[a]=1`, `${k}`, `${k}=`).map((q) => ({ label: `query ${q}`, value: q })),
    ),
  );
  return fc.oneof(
    { weight: 2, arbitrary: fc.constant({ label: "", value: "" }) },
    { weight: 2, arbitrary: oddPairs(keys).map((q) => ({ label: `odd query ${q.slice(0, 60)}`, value: q })) },
    ...perKey.map((arbitrary) => ({ weight: 3, arbitrary })),
  );
}

function bodyArbitrary(route: FuzzRoute, ids: readonly string[]): fc.Arbitrary<Labelled | undefined> {
  const base = route.body ? validSample(route.body, ids) : {};
  const shaped = route.body ? mutations(route.body, base, ids) : [fc.constant({ label: "body: {}", value: {} })];
  const changed = fc.oneof(...shaped);
  const families: { weight: number; arbitrary: fc.Arbitrary<Labelled | undefined> }[] = [
    { weight: 8, arbitrary: changed },
    {
      weight: 2,
      arbitrary: fc.tuple(changed, extraMembers).map(([m, extra]) => ({
        label: `${m.label} + extra members ${extra.map(([k]) => JSON.stringify(k.slice(0, 20))).join(",")}`,
        value:
          m.value !== null && typeof m.value === "object" && !Array.isArray(m.value) && !(m.value instanceof RawJson)
            ? extra.reduce<object>((o, [k, v]) => withMember(o, k, v), m.value)
            : m.value,
      })),
    },
    {
      weight: 1,
      arbitrary: fc.oneof(
        changed.map((m) => ({ label: `[${m.label}]`, value: [m.value] })),
        fc
          .constantFrom<unknown>([], [1, 2], "body", 42, true, null)
          .map((value) => ({ label: "not an object", value })),
      ),
    },
    {
      weight: 1,
      arbitrary: fc
        .tuple(tooDeep, fc.constantFrom(...Object.keys((base as object | undefined) ?? {}), "extra"))
        .map(([deep, key]) => ({
          label: `${key}: ${deep.label}`,
          value: withMember((base as object | undefined) ?? {}, key, deep.value),
        })),
    },
    { weight: 1, arbitrary: tooDeep },
    { weight: 2, arbitrary: malformedJsonText(base) },
    { weight: 1, arbitrary: fc.constant(undefined) },
  ];
  return fc.oneof(...families);
}

const headerArbitrary = fc.record({
  contentType: fc.oneof(
    { weight: 6, arbitrary: fc.constant<[string | null, BodyHandling]>(["application/json", "json"]) },
    { weight: 2, arbitrary: fc.constantFrom(...CONTENT_TYPES) },
  ),
  encoding: fc.oneof(
    { weight: 8, arbitrary: fc.constant<[string, BodyHandling] | null>(null) },
    { weight: 1, arbitrary: fc.constantFrom(...ENCODINGS) },
  ),
  accept: fc.constantFrom(
    null,
    "application/json, text/event-stream",
    "application/json",
    "*/*",
    "text/html",
    "image/png",
  ),
});

/**
 * Generated requests for one route; on a mutating route only those the server must refuse. `ids`:
 * real ids of the caller's own objects, used where a uuid is valid (a path parameter, a body's
 * `upstreamKeyId`), so a refusal has to come from what was fuzzed rather than from an unknown id.
 */
export function caseArbitrary(route: FuzzRoute, ids: readonly string[] = []): fc.Arbitrary<FuzzCase> {
  const paramNames = route.params ? Object.keys(route.params.shape) : [];
  const params = fc.tuple(
    ...paramNames.map((name) => segmentArbitrary((route.params as z.AnyZodObject).shape[name] as Schema, ids)),
  );
  const body =
    route.method === "get"
      ? fc.oneof({ weight: 6, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: malformedJsonText({}) })
      : bodyArbitrary(route, ids);
  return fc
    .record({ params, query: queryArbitrary(route), body, headers: headerArbitrary })
    .map(({ params: segments, query, body: b, headers }): FuzzCase => {
      let path = route.path;
      const decoded: Record<string, string | undefined> = {};
      paramNames.forEach((name, i) => {
        const seg = segments[i]?.value as string;
        path = path.replace(`{${name}}`, seg);
        decoded[name] = decodeSegment(seg);
      });
      const labels = [
        ...segments.map((s) => s.label),
        query.label,
        ...(b ? [b.label, `content-type ${headers.contentType[0]}`] : ["no body"]),
        ...(b && headers.encoding ? [`content-encoding ${headers.encoding[0]}`] : []),
      ].filter((l) => l !== "");
      const q = query.value as string;
      return {
        target: q ? `${path}?${q}` : path,
        contentType: b === undefined ? null : headers.contentType[0],
        encoding: b === undefined || !headers.encoding ? null : headers.encoding[0],
        accept: headers.accept,
        body: b === undefined ? undefined : toJsonText(b.value),
        labels,
        params: decoded,
        query: q,
      };
    })
    .filter((c) => !route.mutating || !wouldServe(route, c));
}

/** The parser looks at the content type first: a body it does not read is not decoded either. */
function handlingOf(c: FuzzCase): BodyHandling {
  const handling = CONTENT_TYPES.find(([t]) => t === c.contentType)?.[1] ?? "ignored";
  return handling === "json" && c.encoding ? "refused" : handling;
}

/**
 * Whether the server would hand this request to the route's handler as valid: every path parameter
 * decodes to storable text the params schema accepts, the query (parsed as Express parses it) holds
 * storable text the query schema accepts, and the body parses (when sent as JSON) to a value no
 * deeper than 64 levels, with storable text, that the body schema accepts. An absent or unparsed body
 * counts as both `undefined` and `{}` (routes differ); either passing counts as served.
 */
export function wouldServe(route: FuzzRoute, c: FuzzCase): boolean {
  const params = Object.values(c.params);
  if (params.some((p) => p === undefined || p === "" || unstorable(p))) return false;
  if (route.params && !route.params.safeParse(c.params).success) return false;

  const query = parseQueryString(c.query);
  if (hasUnstorableText(query)) return false;
  if (route.query && !route.query.safeParse(query).success) return false;

  if (c.body === undefined)
    return !route.body || route.body.safeParse(undefined).success || route.body.safeParse({}).success;
  const handling = handlingOf(c);
  if (handling === "refused") return false;
  let value: unknown;
  if (handling === "json") {
    try {
      value = c.body.length === 0 ? {} : JSON.parse(c.body);
    } catch {
      return false;
    }
    if (jsonDepth(value) > 64 || hasUnstorableText(value)) return false;
  }
  if (!route.body) return true;
  return accepts(route.body, value) || accepts(route.body, value ?? {});
}

// ---- sending and judging ---------------------------------------------------------------------

const agent = new Agent({ keepAlive: true, maxSockets: 4 });

export interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

/** One raw request; the target is sent as is. Times out (a finding) after `timeoutMs`. */
export function sendRaw(
  baseUrl: string,
  method: string,
  target: string,
  headers: Record<string, string>,
  body: string | undefined,
  timeoutMs = 15_000,
): Promise<Answer> {
  const { hostname, port } = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: hostname,
        port: Number(port),
        method: method.toUpperCase(),
        path: target,
        headers,
        agent,
        timeout: timeoutMs,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString("utf8") }),
        );
        res.on("error", reject);
      },
    );
    req.on("timeout", () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    req.on("error", reject);
    if (body !== undefined) req.end(body);
    else req.end();
  });
}

/** Headers of a fuzz case plus a credential's. */
export function caseHeaders(c: FuzzCase, credential: Record<string, string>): Record<string, string> {
  const h: Record<string, string> = { ...credential };
  if (c.contentType !== null) h["content-type"] = c.contentType;
  if (c.encoding !== null) h["content-encoding"] = c.encoding;
  if (c.accept !== null) h.accept = c.accept;
  if (c.body !== undefined) h["content-length"] = String(Buffer.byteLength(c.body));
  return h;
}

const CODES = new Set<string>(ERROR_CODES);

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** The REST error body: `{"error":{"code","message"}}` with a code of the table, and X-Svc-Error-Code. */
export function restErrorProblem(a: Answer): string | null {
  const type = String(a.headers["content-type"] ?? "");
  if (!type.startsWith("application/json")) return `a ${a.status} answered ${type || "no content type"}`;
  const body = parseJson(a.text) as { error?: { code?: unknown; message?: unknown } } | undefined;
  const code = body?.error?.code;
  if (typeof code !== "string" || !CODES.has(code)) return `a ${a.status} without an error code of the table`;
  if (typeof body?.error?.message !== "string") return `a ${a.status} without error.message`;
  if (a.headers["x-svc-error-code"] !== code)
    return `X-Svc-Error-Code ${String(a.headers["x-svc-error-code"])} is not ${code}`;
  return null;
}

interface GraphQLBody {
  data?: Record<string, unknown> | null;
  errors?: { message?: unknown; extensions?: { code?: unknown } }[];
}

/** GraphQL result bodies of an answer: the JSON body, or each `next` event of an SSE answer. */
export function graphqlResults(a: Answer): GraphQLBody[] | undefined {
  const type = String(a.headers["content-type"] ?? "");
  if (type.startsWith("text/event-stream")) {
    return a.text
      .split(/\n\n/)
      .filter((e) => /^event: next$/m.test(e))
      .map((e) => parseJson(/^data: (.*)$/m.exec(e)?.[1] ?? "") as GraphQLBody);
  }
  if (type.startsWith("application/json") || type.startsWith("application/graphql-response+json")) {
    const body = parseJson(a.text);
    return body === undefined ? undefined : [body as GraphQLBody];
  }
  return undefined;
}

/**
 * A GraphQL answer to a refused operation: every error has a message and a string `extensions.code`
 * that is not a masked `internal_error`, and no field returned data. A REST error body (the
 * transport's refusals: 413, 415, a malformed body, CSRF) is accepted too.
 */
export function graphqlProblem(a: Answer): string | null {
  if (a.status >= 400 && restErrorProblem(a) === null) return null;
  const results = graphqlResults(a);
  if (!results || results.length === 0) return `a ${a.status} that is neither a GraphQL result nor the error body`;
  for (const r of results) {
    if (!Array.isArray(r?.errors) || r.errors.length === 0) return "an answer without errors";
    for (const e of r.errors) {
      if (typeof e?.message !== "string") return "an error without a message";
      const code = e.extensions?.code;
      if (typeof code !== "string") return `an error without extensions.code: ${String(e.message).slice(0, 200)}`;
      if (code === "internal_error") return `a masked internal error: ${String(e.message).slice(0, 200)}`;
    }
    const data = r.data;
    if (data && Object.values(data).some((v) => v !== null && v !== undefined))
      return "data returned for a refused operation";
  }
  return null;
}

/** What is wrong with the answer to a refused (or, on a GET route, merely odd) request, or null. */
export function answerProblem(route: FuzzRoute, a: Answer): string | null {
  if (a.status >= 500) return `server error ${a.status}`;
  if (route.graphql) return route.mutating || a.status >= 400 ? graphqlProblem(a) : null;
  if (a.status >= 400) return restErrorProblem(a);
  if (route.mutating) return `a ${a.status} on ${route.method.toUpperCase()}: input the contract refuses was accepted`;
  return null;
}
