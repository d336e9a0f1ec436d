import fc from "fast-check";
import { afterAll, beforeAll, describe, expect } from "vitest";
import { buildOpenApiDocument, deploymentRegistry, docsPathOf, mcpPathOf } from "../../../src/contract/openapi.js";
import { createKey, type SignedInUser, signIn } from "../../../testkit/actors.js";
import { fileWorld, appTest as test } from "../../../testkit/app-test.js";
import { assertBooksBalance } from "../../../testkit/books.js";
import {
  answerProblem,
  type Credential,
  caseArbitrary,
  caseHeaders,
  type FuzzRoute,
  fuzzRoute,
  sendRaw,
} from "../../../testkit/fuzz/http-fuzz.js";
import { ownSupply } from "../../../testkit/fuzz/own-supply.js";
import { recordsChecksum } from "../../../testkit/fuzz/records-checksum.js";
import { fuzzParameters } from "../../../testkit/fuzz/settings.js";
import { addSupply, fundConfirmed } from "../../../testkit/market.js";

/**
 * Issue 18 Deliver 1, REST: every route of the OpenAPI registry (so a new route is fuzzed without
 * touching this file) gets requests generated from its own zod request schemas with at least one part
 * the contract or the JSON parser refuses: wrong types, missing and extra fields, out-of-range
 * numbers, unstorable and very long text, malformed JSON, non-objects, deep nesting, wrong content
 * types and encodings, malformed path parameters, odd and repeated query keys. Each is sent with the
 * route's own credential and with none. No answer may be a 5xx; every 4xx carries the error body
 * with a code of the table; a 2xx on a writing route means the contract's refusal was not enforced;
 * and the books and records are the same after the route's runs as before. The buyer is funded and
 * supply is posted, so input that slipped through to a paid route would show as a charge.
 */

test.override("appOptions", { sim: {}, syncCatalog: true, env: { GRAPHQL_COST_PER_MINUTE: "1000000000" } });
const world = fileWorld(test);

let user: SignedInUser;
let apiKey: string;
let ids: string[];
let credentials: Record<Credential, Record<string, string>>;

beforeAll(async () => {
  user = await signIn(world.app);
  const key = await createKey(world.app, user);
  apiKey = key.apiKey;
  await fundConfirmed(world.app, user.accountId, 50_000_000n);
  await addSupply(world.app, world.sim, [{ priceCents: 40, quantityMicroDiem: 50_000_000n }]);
  world.app.rt.services.inference.invalidateBook();
  const own = await ownSupply(world, user.accountId);
  // the caller's own ids, where a uuid is valid: a body's upstreamKeyId gets the free key (a valid
  // offer on it would post), a path {id} any of them (a valid request would revoke or cancel)
  ids = [own.freeKeyId, own.offerId, own.offeredKeyId, key.id];
  credentials = {
    bearer: { authorization: `Bearer ${apiKey}` },
    // a cookie-authenticated write must name an allowed Origin (CSRF guard)
    session: { cookie: user.cookie, origin: new URL(world.app.rt.config.urls.base).origin },
    none: {},
  };
});

afterAll(async () => {
  await assertBooksBalance(world.app.rt.db);
});

/** Deployment URLs placing the MCP connector and the docs site where the test app's config does (checked below). */
const URLS = { base: "http://127.0.0.1", mcp: "http://127.0.0.1", docs: "http://127.0.0.1/docs" };

/** Every registered route (test.each needs them before the app starts). */
const ROUTES: FuzzRoute[] = deploymentRegistry(URLS)
  .definitions.flatMap((d) => (d.type === "route" ? [fuzzRoute(d.route)] : []))
  .sort((a, b) => `${a.path} ${a.method}`.localeCompare(`${b.path} ${b.method}`));
const { numRuns, seed } = fuzzParameters();
const ran = new Map<string, number>();

/** Upstream requests that would have been paid inference (the catalog and balance reads are not). */
function upstreamInference(): number {
  return world.sim.state.listRequests().filter((r) => !/^\/(models|api_keys|billing)/.test(r.route)).length;
}

describe("REST fuzz: every registered route", () => {
  test("the registry is the document: every documented operation is fuzzed", () => {
    const doc = buildOpenApiDocument(URLS);
    const documented = Object.entries(doc.paths ?? {}).flatMap(([path, ops]) =>
      Object.keys(ops as object)
        .filter((m) => ["get", "post", "put", "patch", "delete"].includes(m))
        .map((m) => `${m} ${path}`),
    );
    expect(ROUTES.map((r) => `${r.method} ${r.path}`).sort()).toEqual(documented.sort());
    expect(ROUTES.length).toBeGreaterThan(40);
    // the app under test places the MCP connector and the docs site where these URLs do
    expect(mcpPathOf(world.app.rt.config.urls)).toBe(mcpPathOf(URLS));
    expect(docsPathOf(world.app.rt.config.urls)).toBe(docsPathOf(URLS));
  });

  test.each(ROUTES.map((r) => [`${r.method.toUpperCase()} ${r.path}`, r] as const))("%s", async (_name, route) => {
    const base = world.app.baseUrl;
    // a fresh session for the buyer per route: a finding that signs it out stays this route's
    const session = await signIn(world.app, { address: user.walletAddress, privateKey: user.privateKey });
    const headersOf: Record<Credential, Record<string, string>> = {
      ...credentials,
      session: { ...credentials.session, cookie: session.cookie },
    };
    const sends = [...route.credentials.filter((c) => c !== "none").map((c) => headersOf[c]), headersOf.none];
    const db = world.app.rt.db;
    const before = await recordsChecksum(db);
    const upstreamBefore = upstreamInference();
    let count = 0;
    await fc.assert(
      fc.asyncProperty(caseArbitrary(route, ids), async (c) => {
        const report = (
          problem: string,
          credential: Record<string, string>,
          answer?: { status: number; text: string },
        ) =>
          new Error(
            `${problem}\n${route.method.toUpperCase()} ${c.target.slice(0, 300)} with ${Object.keys(credential).join("+") || "no credential"}\n` +
              `did: ${c.labels.join("; ")}\nbody: ${(c.body ?? "").slice(0, 300)}` +
              (answer ? `\nanswer ${answer.status}: ${answer.text.slice(0, 400)}` : ""),
          );
        // compared with this run's own start, so shrinking replays the input that changed something
        const start = route.mutating ? await recordsChecksum(db) : "";
        for (const credential of sends) {
          const answer = await sendRaw(base, route.method, c.target, caseHeaders(c, credential), c.body);
          count++;
          const problem = answerProblem(route, answer);
          if (problem) throw report(problem, credential, answer);
          // a writing route is checked after every request, so a change names its input
          if (route.mutating && (await recordsChecksum(db)) !== start) {
            throw report("the books and records changed", credential, answer);
          }
        }
      }),
      { numRuns, seed },
    );
    ran.set(`${route.method} ${route.path}`, count);
    expect(count, "requests sent").toBeGreaterThanOrEqual(numRuns);
    expect(await recordsChecksum(db), "books and records unchanged").toBe(before);
    expect(upstreamInference(), "nothing reached the upstream").toBe(upstreamBefore);
  });

  test("every route was fuzzed", () => {
    const missing = ROUTES.filter((r) => !ran.has(`${r.method} ${r.path}`)).map((r) => `${r.method} ${r.path}`);
    expect(missing).toEqual([]);
  });
});
