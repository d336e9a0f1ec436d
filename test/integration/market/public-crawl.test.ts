import { expect } from "vitest";
import { call } from "../../../testkit/actors.js";
import { fileWorld, appTest as test } from "../../../testkit/app-test.js";
import { createAccount, createInferenceRequest } from "../../../testkit/fixtures.js";
import { addSupply } from "../../../testkit/market.js";
import { MARKET_ADD_IDS } from "../../../testkit/market-totals.js";

/**
 * SPEC 13: supplier identity is never exposed in public data. Crawl every public route (REST and
 * GraphQL) over a market with suppliers, offers and enough clears for statistics, and look for any
 * supplier account id, wallet, upstream key id, key label, offer id or secret.
 */
test.override("appOptions", { sim: {}, syncCatalog: true });
const world = fileWorld(test);
const secrets: string[] = [];

test("no public route reveals a supplier", async () => {
  const db = world.app.rt.db;
  const s1 = await addSupply(world.app, world.sim, [
    { priceCents: 35, quantityMicroDiem: 40_000_000n },
    { priceCents: 55, quantityMicroDiem: 40_000_000n },
  ]);
  const s2 = await addSupply(world.app, world.sim, [{ priceCents: 70, quantityMicroDiem: 40_000_000n }]);
  await db.upstreamKey.updateMany({ data: { label: "SECRET-LABEL-do-not-leak" } });
  for (const s of [s1, s2]) for (const k of s.keys) secrets.push(k.secret);
  // enough clears from enough buyers for statistics to publish
  const buyers = await Promise.all([0, 1, 2, 3].map(() => createAccount(db)));
  const k = s1.keys[0];
  if (!k) throw new Error("no key");
  for (let i = 0; i < 24; i++) {
    const buyer = buyers[i % buyers.length];
    if (!buyer) continue;
    const req = await createInferenceRequest(db, buyer.id, { model: "zai-org-glm-5-1" });
    const made = await db.clear.create({
      data: {
        requestId: req.id,
        buyerAccountId: buyer.id,
        supplierAccountId: s1.supplierAccountId,
        offerId: k.offerId,
        upstreamKeyId: k.upstreamKeyId,
        model: i % 3 ? "zai-org-glm-5-1" : "llama-3.3-70b",
        modality: "text",
        priceCentsPerDollar: 35,
        ceilingCents: 80,
        burnMicroDiem: 1000n + BigInt(i),
        grossMicroUsdc: 350n,
        feeMicroUsdc: 35n,
        supplierMicroUsdc: 315n,
      },
    });
    await db.$executeRawUnsafe(MARKET_ADD_IDS, [made.id]);
  }

  const forbidden = [
    s1.supplierAccountId,
    s2.supplierAccountId,
    s1.supplierWallet,
    s2.supplierWallet,
    ...[...s1.keys, ...s2.keys].flatMap((x) => [x.upstreamKeyId, x.offerId, x.secret, x.secret.slice(-8)]),
    "SECRET-LABEL-do-not-leak",
    ...buyers.flatMap((b) => [b.id, b.walletAddress]),
  ];

  const rest = [
    "/healthz",
    "/v1/models",
    "/v1/models/zai-org-glm-5-1",
    "/v1/models/svc/zai-org-glm-5-1",
    "/v1/models/stats",
    "/v1/models/stats?window=24h",
    "/v1/models/stats?window=30d",
    "/v1/market/stats",
    "/v1/capacity",
    "/v1/capacity?maxPriceCents=50",
    "/v1/supply/pool/summary",
  ];
  const pages: string[] = [];
  for (const path of rest) {
    const r = await call(world.app, { method: "GET", path });
    expect(r.status, path).toBe(200);
    pages.push(`${path} ${JSON.stringify(r.body)} ${JSON.stringify([...r.headers])}`);
  }
  const gql = await call(world.app, {
    method: "POST",
    path: "/graphql",
    body: {
      query: `{
        market { cheapestPostedCents routableDiem prices { priceCentsPerDollar routableDiem usdcToBuyAll } }
        capacity { cheapestPostedCents routableDiem prices { priceCentsPerDollar } text { liveModels } }
        marketStats { clears faceValue paid todayClears corridor { routableDiem } }
        models { id status }
        modelStats(window: "7d") { hasSufficientVolume models { id rank usageShare } }
      }`,
    },
  });
  expect(gql.status).toBe(200);
  expect((gql.body as { errors?: unknown }).errors).toBeUndefined();
  pages.push(JSON.stringify(gql.body));

  // the crawl saw real data: depth, statistics
  const all = pages.join("\n");
  expect(all).toContain('"cheapestPostedCents":35');
  expect(all).toContain('"hasSufficientVolume":true');
  for (const f of forbidden) expect(all, `public data contains ${f}`).not.toContain(f);
  expect(all.toLowerCase()).not.toMatch(/supplier(account)?id|walletaddress|upstreamkeyid|"label"/);
});
