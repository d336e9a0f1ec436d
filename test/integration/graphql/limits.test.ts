import { formatDocument } from "@urql/core";
import { type DocumentNode, getIntrospectionQuery, print } from "graphql";
import { describe, expect } from "vitest";
import * as webOperations from "../../../src/web/app/lib/operations.js";
import { createKey, signIn } from "../../../testkit/actors.js";
import { appTest } from "../../../testkit/app-test.js";
import type { TestApp } from "../../../testkit/harness.js";
import { startAppBeside } from "../../../testkit/world.js";

/**
 * Issue 18 finding 4: GraphQL had no limits — depth 200-1,000 through `myOffers → upstreamKey →
 * offers` overflowed the stack, 1,000-10,000 aliases ran in one request, and 30 concurrent anonymous
 * alias-heavy queries held /healthz for 43 s. Per-operation limits (GraphQL Armor) refuse those
 * documents before anything runs; each executed operation's cost is spent on the caller's budget.
 */

/** a second app on the same database whose budget is tiny: 60 cost points a minute */
const test = appTest.extend("tight", { scope: "file" }, async ({ app }, { onCleanup }) => {
  const tight = await startAppBeside(app, {
    prefix: `${app.rt.config.redis.prefix}-tight`,
    env: { GRAPHQL_COST_PER_MINUTE: "60" },
  });
  onCleanup(() => tight.close());
  return tight;
});

interface GqlError {
  message: string;
  extensions?: { code?: string; details?: { limit?: string; retryAfterSeconds?: number } };
}

async function gql(target: TestApp, query: string, headers: Record<string, string> = {}) {
  const res = await fetch(`${target.baseUrl}/graphql`, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json", ...headers },
    body: JSON.stringify({ query }),
  });
  const text = await res.text();
  let body: { data?: unknown; errors?: GqlError[] } = {};
  try {
    body = JSON.parse(text);
  } catch {}
  return { status: res.status, headers: res.headers, body, text };
}

/** `myOffers { edges { node { upstreamKey { offers { upstreamKey { … id } } } } } }`, `levels` deep. */
function deepOffersQuery(levels: number): string {
  let inner = "id";
  // built from the inside out: the outermost level (next to `node`, an Offer) is upstreamKey
  for (let i = levels - 1; i >= 0; i--) inner = i % 2 === 0 ? `upstreamKey { ${inner} }` : `offers { ${inner} }`;
  return `{ myOffers { edges { node { ${inner} } } } }`;
}

function aliasesQuery(n: number): string {
  return `{ ${Array.from({ length: n }, (_, i) => `a${i}: market { routableDiem }`).join(" ")} }`;
}

function expectRefused(r: Awaited<ReturnType<typeof gql>>, limit: string) {
  // issue 38: a limit refusal is HTTP 400 on every Accept (yoga answered its parse and validation errors 200)
  expect(r.status, r.text.slice(0, 300)).toBe(400);
  expect(r.body.data ?? null).toBeNull();
  const e = r.body.errors?.[0];
  expect(e?.extensions?.code, r.text.slice(0, 300)).toBe("invalid_request");
  expect(e?.extensions?.details?.limit).toBe(limit);
}

describe("per-operation limits", () => {
  test.for([
    [20, "depth"],
    [200, "nesting"],
    [1_000, "nesting"],
  ] as const)("depth %i through myOffers → upstreamKey → offers is refused (%s)", async ([levels, limit], { app }) => {
    // past 60 levels the document nests past GRAPHQL_LIMITS.maxNesting, refused before it is parsed
    expectRefused(await gql(app, deepOffersQuery(levels)), limit);
  });

  test("25 aliases are refused (aliases); 1,000 and 10,000 are refused at the token limit", async ({ app }) => {
    expectRefused(await gql(app, aliasesQuery(25)), "aliases");
    expectRefused(await gql(app, aliasesQuery(1_000)), "tokens");
    expectRefused(await gql(app, aliasesQuery(10_000)), "tokens");
  });

  test("an operation whose cost is past the limit is refused (cost)", async ({ app }) => {
    const page = "myOffers(first: 100) { edges { node { id quantity upstreamKey { id label offers { id } } } } }";
    const r = await gql(app, `{ ${Array.from({ length: 10 }, (_, i) => `p${i}: ${page}`).join(" ")} }`);
    expectRefused(r, "cost");
  });

  test("the refusal happens before any resolver: a signed-in supplier gets the same answer", async ({ app }) => {
    const user = await signIn(app);
    const r = await gql(app, deepOffersQuery(20), { cookie: user.cookie });
    expectRefused(r, "depth");
  });

  test("every operation the web app sends passes the limits", async ({ app }) => {
    const docs = Object.entries(webOperations).filter(
      (e): e is [string, DocumentNode] =>
        typeof e[1] === "object" && e[1] !== null && (e[1] as DocumentNode).kind === "Document",
    );
    expect(docs.length).toBeGreaterThan(10);
    for (const [name, doc] of docs) {
      // as urql sends it: `__typename` in every selection set, which Armor's cost model counts
      const r = await gql(app, print(formatDocument(doc)));
      const limited = (r.body.errors ?? []).filter((e) => e.extensions?.details?.limit !== undefined);
      expect(limited, name).toEqual([]);
    }
  });

  test("GraphiQL's introspection query passes the limits", async ({ app }) => {
    const r = await gql(app, getIntrospectionQuery({ descriptions: true, inputValueDeprecation: true }));
    expect(r.status, r.text.slice(0, 300)).toBe(200);
    expect(r.body.errors, r.text.slice(0, 300)).toBeUndefined();
  });

  test("an ordinary query still answers", async ({ app }) => {
    const r = await gql(app, "{ market { routableDiem cheapestPostedCents } }");
    expect(r.body.errors).toBeUndefined();
    expect(r.body.data).toMatchObject({ market: { routableDiem: expect.any(String) } });
  });
});

describe("the caller's cost budget", () => {
  test("an anonymous caller past its budget gets rate_limited (HTTP 429, Retry-After); a signed-in one has its own", async ({
    tight,
  }) => {
    const q = "{ market { routableDiem cheapestPostedCents usdcToBuyAll } }";
    let limited: Awaited<ReturnType<typeof gql>> | undefined;
    for (let i = 0; i < 60 && !limited; i++) {
      const r = await gql(tight, q);
      if (r.body.errors?.[0]?.extensions?.code === "rate_limited") limited = r;
      else expect(r.body.errors, r.text).toBeUndefined();
    }
    expect(limited, "refused within 60 calls of a 60-point budget").toBeDefined();
    expect(limited?.status).toBe(429);
    expect(Number(limited?.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect(limited?.body.errors?.[0]?.extensions?.details?.retryAfterSeconds).toBeGreaterThanOrEqual(1);
    expect(limited?.body.data ?? null).toBeNull();

    // the budget is per caller: a signed-in account spends its own
    const user = await signIn(tight);
    const { apiKey } = await createKey(tight, user);
    const mine = await gql(tight, q, { authorization: `Bearer ${apiKey}` });
    expect(mine.body.errors, mine.text).toBeUndefined();
  });
});

describe("/healthz under a flood", () => {
  test("30 concurrent anonymous alias-heavy queries are refused and /healthz keeps answering", async ({ app }) => {
    const flood = Array.from({ length: 30 }, (_, i) => gql(app, aliasesQuery(i % 2 === 0 ? 5_000 : 1_000)));
    // liveness only: /healthz must answer at all while the flood is in, within a generous bound
    const started = Date.now();
    const health = await fetch(`${app.baseUrl}/healthz`, { signal: AbortSignal.timeout(2_000) });
    expect(health.status).toBe(200);
    expect(Date.now() - started).toBeLessThan(2_000);
    const answers = await Promise.all(flood);
    for (const r of answers) expectRefused(r, "tokens");
  }, 120_000);
});
