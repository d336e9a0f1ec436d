import { describe, expect } from "vitest";
import { appTest as test } from "../../../testkit/app-test.js";
import { createAccount, createOffer, createUpstreamKey } from "../../../testkit/fixtures.js";
import type { TestApp } from "../../../testkit/harness.js";

async function gql(app: TestApp, query: string, variables?: Record<string, unknown>) {
  const res = await fetch(`${app.baseUrl}/graphql`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ query, variables }),
  });
  return {
    status: res.status,
    body: (await res.json()) as {
      data?: Record<string, unknown>;
      errors?: { message: string; extensions?: Record<string, unknown> }[];
    },
  };
}

describe("HTTP basics", () => {
  test("/healthz is 200 text/plain", async ({ app }) => {
    const res = await fetch(`${app.baseUrl}/healthz`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/plain/);
    expect((await res.text()).trim()).toBe("ok");
  });

  test("/readyz checks Postgres and Redis", async ({ app }) => {
    const res = await fetch(`${app.baseUrl}/readyz`);
    expect(res.status).toBe(200);
  });

  test("malformed JSON is 400 invalid_request with the error envelope, never 500", async ({ app }) => {
    for (const path of ["/graphql", "/v1/anything", "/healthz"]) {
      const res = await fetch(`${app.baseUrl}${path}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: '{"model": "x",',
      });
      expect(res.status, path).toBe(400);
      expect(res.headers.get("x-svc-error-code")).toBe("invalid_request");
      const body = (await res.json()) as { error: { code: string; message: string } };
      expect(body.error.code).toBe("invalid_request");
      expect(body.error.message).toMatch(/JSON/);
    }
  });

  test("an oversized body is 413", async ({ app }) => {
    // a public route: a credentialed route answers 401 first (hostile-input.test.ts, finding 6)
    const res = await fetch(`${app.baseUrl}/graphql`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ pad: "x".repeat(21 * 1024 * 1024) }),
    });
    expect(res.status).toBe(413);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe("payload_too_large");
  });

  test("unknown routes are 404 JSON with a request id", async ({ app }) => {
    const res = await fetch(`${app.baseUrl}/nope`);
    expect(res.status).toBe(404);
    expect(res.headers.get("x-svc-request-id")).toMatch(/^[0-9a-f-]{36}$/);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe("not_found");
  });
});

describe("GraphQL", () => {
  test("market reads the routable ladder from Postgres, cheapest first, narrowed by price", async ({ app }) => {
    const supplier = await createAccount(app.rt.db);
    const k1 = await createUpstreamKey(app.rt.db, supplier.id);
    const k2 = await createUpstreamKey(app.rt.db, supplier.id, { lastBalanceMicroDiem: 2_000_000n });
    const k3 = await createUpstreamKey(app.rt.db, supplier.id);
    const k4 = await createUpstreamKey(app.rt.db, supplier.id);
    await createOffer(app.rt.db, {
      accountId: supplier.id,
      upstreamKeyId: k1.id,
      priceCentsPerDollar: 60,
      quantityMicroDiem: 10_000_000n,
    });
    // capped by the key's balance (2 DIEM)
    await createOffer(app.rt.db, {
      accountId: supplier.id,
      upstreamKeyId: k2.id,
      priceCentsPerDollar: 40,
      quantityMicroDiem: 5_000_000n,
    });
    // paused: not routable
    await createOffer(app.rt.db, {
      accountId: supplier.id,
      upstreamKeyId: k3.id,
      priceCentsPerDollar: 35,
      quantityMicroDiem: 5_000_000n,
      status: "paused",
    });
    await createOffer(app.rt.db, {
      accountId: supplier.id,
      upstreamKeyId: k4.id,
      priceCentsPerDollar: 40,
      quantityMicroDiem: 1_000_001n,
    });

    const all = await gql(
      app,
      "{ market { cheapestPostedCents routableDiem usdcToBuyAll prices { priceCentsPerDollar routableDiem usdcToBuyAll } } }",
    );
    expect(all.status).toBe(200);
    expect(all.body.errors).toBeUndefined();
    expect(all.body.data?.market).toEqual({
      cheapestPostedCents: 40,
      routableDiem: "13000001",
      // 3000001 × 40/100 = 1200000 (floor) + 10000000 × 60/100 = 6000000
      usdcToBuyAll: "7200000",
      prices: [
        { priceCentsPerDollar: 40, routableDiem: "3000001", usdcToBuyAll: "1200000" },
        { priceCentsPerDollar: 60, routableDiem: "10000000", usdcToBuyAll: "6000000" },
      ],
    });

    const narrowed = await gql(
      app,
      "query($m: Int) { market(maxPriceCents: $m) { cheapestPostedCents routableDiem prices { priceCentsPerDollar } } }",
      { m: 50 },
    );
    expect(narrowed.body.data?.market).toEqual({
      cheapestPostedCents: 40,
      routableDiem: "3000001",
      prices: [{ priceCentsPerDollar: 40 }],
    });
  });

  test("a domain error keeps its code in extensions", async ({ app }) => {
    const r = await gql(app, "{ market(maxPriceCents: 81) { cheapestPostedCents } }");
    expect(r.body.errors?.[0]?.extensions?.code).toBe("invalid_request");
    expect(r.body.errors?.[0]?.message).toMatch(/1-80/);
  });

  test("GraphiQL is served in local mode", async ({ app }) => {
    const res = await fetch(`${app.baseUrl}/graphql`, { headers: { accept: "text/html" } });
    expect(res.status).toBe(200);
    expect(await res.text()).toMatch(/graphiql/i);
  });
});
