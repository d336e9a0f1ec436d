import { randomUUID } from "node:crypto";
import { describe, expect } from "vitest";
import { signIn } from "../../../testkit/actors.js";
import { fileWorld, appTest as test } from "../../../testkit/app-test.js";
import { addSupply, chat, endedRequest, fundedBuyerKey } from "../../../testkit/market.js";

/**
 * The queries the web app reads beside the rest of the schema (src/graphql/schema/dashboard.ts):
 * `recentClears` (public, anonymised), `mySavings` and `myInferenceRequest` (the viewer's own).
 */

const MODEL = "zai-org-glm-5-1";
test.override("appOptions", { sim: {}, syncCatalog: true });
const world = fileWorld(test);

interface GqlResult<T> {
  data?: T | null;
  errors?: { message: string; extensions?: { code?: string } }[];
}

async function gql<T>(query: string, opts: { cookie?: string; variables?: Record<string, unknown> } = {}) {
  const res = await fetch(`${world.app.baseUrl}/graphql`, {
    method: "POST",
    headers: { "content-type": "application/json", ...(opts.cookie ? { cookie: opts.cookie } : {}) },
    body: JSON.stringify({ query, variables: opts.variables }),
  });
  return (await res.json()) as GqlResult<T>;
}

async function clearOnce(priceCents: number) {
  await addSupply(world.app, world.sim, [{ priceCents, quantityMicroDiem: 20_000_000n }]);
  world.app.rt.services.inference.invalidateBook();
  const buyer = await fundedBuyerKey(world.app, 5_000_000n);
  const r = await chat(world.app, buyer.apiKey, {
    model: MODEL,
    messages: [{ role: "user", content: "hi [[sim:tokens=25]]" }],
  });
  expect(r.status).toBe(200);
  const reference = r.headers.get("x-svc-support-reference") ?? "";
  await endedRequest(world.app, reference);
  return { buyer, reference, cost: r.headers.get("x-svc-cost-usdc") ?? "" };
}

describe("recentClears", () => {
  test("the latest clears, newest first, with no identity of buyer, supplier, key or request", async () => {
    const first = await clearOnce(44);
    const second = await clearOnce(43);
    const r = await gql<{ recentClears: Record<string, unknown>[] }>(
      "{ recentClears(limit: 2) { at model modality priceCentsPerDollar burnDiem grossUsdc } }",
    );
    expect(r.errors).toBeUndefined();
    const rows = r.data?.recentClears ?? [];
    expect(rows.map((c) => c.priceCentsPerDollar)).toEqual([43, 44]);
    for (const c of rows) {
      expect(Object.keys(c).sort()).toEqual([
        "at",
        "burnDiem",
        "grossUsdc",
        "modality",
        "model",
        "priceCentsPerDollar",
      ]);
      expect(c.model).toBe(MODEL);
      expect(c.modality).toBe("text");
      expect(String(c.grossUsdc)).toMatch(/^\d+$/);
    }
    // the support reference is the request id
    const request = await world.app.rt.db.inferenceRequest.findFirstOrThrow({ where: { id: second.reference } });
    const row = await world.app.rt.db.clear.findFirstOrThrow({ where: { requestId: request.id } });
    expect(rows[0]?.grossUsdc).toBe(row.grossMicroUsdc.toString());
    expect(rows[0]?.burnDiem).toBe(row.burnMicroDiem.toString());
    expect(JSON.stringify(rows)).not.toContain(first.buyer.accountId);
    expect(JSON.stringify(rows)).not.toContain(second.reference);
  });

  test.each([
    { label: "zero", limit: 0 },
    { label: "above the cap", limit: 101 },
  ])("limit $label is invalid_request", async ({ limit }) => {
    const r = await gql("query ($limit: Int) { recentClears(limit: $limit) { at } }", { variables: { limit } });
    expect(r.errors?.[0]?.extensions?.code).toBe("invalid_request");
  });
});

describe("mySavings and myInferenceRequest", () => {
  test("the viewer's savings and one request by support reference, exactly as the books hold them", async () => {
    const { buyer, reference, cost } = await clearOnce(41);
    const r = await gql<{
      mySavings: { clears: number; faceValue: string; paid: string; savedVsFace: string; atCeiling: string };
      myInferenceRequest: { supportReference: string; cost: string; clearingPriceCents: number; status: string };
    }>(
      `query ($ref: String!) {
         mySavings { clears faceValue paid savedVsFace atCeiling savedVsCeiling }
         myInferenceRequest(supportReference: $ref) { supportReference cost clearingPriceCents status burn }
       }`,
      { cookie: buyer.user.cookie, variables: { ref: reference } },
    );
    expect(r.errors).toBeUndefined();
    const clear = await world.app.rt.db.clear.findFirstOrThrow({ where: { buyerAccountId: buyer.accountId } });
    expect(r.data?.mySavings.clears).toBe(1);
    expect(r.data?.mySavings.faceValue).toBe(clear.burnMicroDiem.toString());
    expect(r.data?.mySavings.paid).toBe(clear.grossMicroUsdc.toString());
    expect(BigInt(r.data?.mySavings.savedVsFace ?? "x")).toBe(clear.burnMicroDiem - clear.grossMicroUsdc);
    expect(r.data?.myInferenceRequest.supportReference).toBe(reference);
    expect(r.data?.myInferenceRequest.clearingPriceCents).toBe(41);
    expect(r.data?.myInferenceRequest.status).toBe("succeeded");
    // the REST header's six-decimal string and the GraphQL integer micro-USDC are one number
    expect(BigInt(r.data?.myInferenceRequest.cost ?? "x")).toBe(BigInt(cost.replace(".", "")));
  });

  test("another account's reference is not_found; a malformed one is invalid_request; anonymous is refused", async () => {
    const { reference } = await clearOnce(42);
    const stranger = await signIn(world.app);
    const q = "query ($ref: String!) { myInferenceRequest(supportReference: $ref) { status } }";
    const other = await gql(q, { cookie: stranger.cookie, variables: { ref: reference } });
    expect(other.errors?.[0]?.extensions?.code).toBe("not_found");
    const unknown = await gql(q, { cookie: stranger.cookie, variables: { ref: randomUUID() } });
    expect(unknown.errors?.[0]?.extensions?.code).toBe("not_found");
    const bad = await gql(q, { cookie: stranger.cookie, variables: { ref: "not-a-uuid" } });
    expect(bad.errors?.[0]?.extensions?.code).toBe("invalid_request");
    const anonymous = await gql(q, { variables: { ref: reference } });
    expect(anonymous.data).toBeNull();
    expect(anonymous.errors?.length).toBeGreaterThan(0);
    const savings = await gql("{ mySavings { clears } }");
    expect(savings.data).toBeNull();
    expect(savings.errors?.length).toBeGreaterThan(0);
  });
});
