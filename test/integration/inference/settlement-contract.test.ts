// The end-item contract (src/domain/inference/settlement/end-item-row.ts): the row the settlement's
// store writes for an `EndItem` (`EndItemRow`, `endItemRow`) and the SQL composite type
// `svc_end_item` that `svc_end_batch` reads it into by name must agree, field for field and type for type. jsonb_populate_recordset would silently drop a key the type lacks and
// leave a field the JSON lacks null, so a mismatch would lose data rather than fail: this test fails.
//
// The two records below are typed against the TypeScript interfaces (`-?` makes every field
// required), so `npm run typecheck` fails when a field is added or removed there without being
// added here; the tests then compare them with what Postgres has.
import { describe, expect } from "vitest";
import type { AttemptRecord } from "../../../src/domain/inference/pipeline/session.js";
import { type EndCharge, type EndItem, endItem } from "../../../src/domain/inference/settlement/end-item.js";
import { type EndItemRow, endItemRow } from "../../../src/domain/inference/settlement/end-item-row.js";
import { fileWorld, appTest as test } from "../../../testkit/app-test.js";
import { assertBooksBalance } from "../../../testkit/books.js";
import { endedItem } from "../../../testkit/end-items.js";
import { expectHoldsReleased } from "../../../testkit/holds.js";
import { addSupply, confirmedOf, fundedBuyerKey, openSession } from "../../../testkit/market.js";

test.override("appOptions", { sim: {}, syncCatalog: true });
const world = fileWorld(test);

/** Each EndItemRow field and the SQL type of its `svc_end_item` attribute. */
const END_ITEM_SQL: { [K in keyof EndItemRow]-?: string } = {
  request: "uuid",
  support: "uuid",
  account: "uuid",
  api_key: "uuid",
  route: "inference_route",
  modality: "modality",
  model: "text",
  stream: "boolean",
  status: "inference_status",
  error_code: "text",
  ceiling: "integer",
  admitted: "integer",
  attempt_count: "integer",
  started: "timestamp with time zone",
  first_byte: "timestamp with time zone",
  now: "timestamp with time zone",
  offer: "uuid",
  key: "uuid",
  supplier: "uuid",
  price: "integer",
  burn: "bigint",
  gross: "bigint",
  fee: "bigint",
  share: "bigint",
  clear: "uuid",
  prompt: "integer",
  completion: "integer",
  cached: "integer",
  cache_write: "integer",
  buyer_holder: "uuid",
  offer_holder: "uuid",
  returns: "jsonb",
  attempts: "jsonb",
  video: "jsonb",
  payment: "uuid",
};

/** Each AttemptRecord field and the SQL type `svc_end_items` reads it as (jsonb_to_recordset). */
const ATTEMPT_SQL: { [K in keyof AttemptRecord]-?: string } = {
  ordinal: "integer",
  key: "uuid",
  offer: "uuid",
  price: "integer",
  outcome: "attempt_outcome",
  status: "integer",
  detail: "text",
  started: "timestamptz",
  ended: "timestamptz",
};

/** An ended video request with every field set plainly (no charge, no rows). */
function sampleItem(): EndItem {
  return endedItem({
    requestId: "00000000-0000-4000-8000-000000000010",
    supportReference: "00000000-0000-4000-8000-000000000011",
    accountId: "00000000-0000-4000-8000-000000000012",
    route: "video_queue",
    modality: "video",
  });
}

describe("the end-item contract", () => {
  test("svc_end_item has exactly EndItemRow's fields, with the types the TypeScript side sends", async () => {
    const rows = await world.app.rt.db.$queryRaw<{ name: string; type: string }[]>`
      SELECT attname::text AS name, format_type(atttypid, atttypmod) AS type
        FROM pg_attribute
       WHERE attrelid = 'svc_end_item'::regclass AND attnum > 0 AND NOT attisdropped
       ORDER BY attnum`;
    expect(Object.fromEntries(rows.map((r) => [r.name, r.type]))).toEqual(END_ITEM_SQL);
  });

  test("svc_end_items reads an attempt with exactly AttemptRecord's fields", async () => {
    const [fn] = await world.app.rt.db.$queryRaw<{ body: string }[]>`
      SELECT pg_get_functiondef('svc_end_items(svc_end_item[])'::regprocedure) AS body`;
    const m = /jsonb_to_recordset\(COALESCE\(i\.attempts, '\[\]'\)\) AS a\(([^)]*)\)/.exec(fn?.body ?? "");
    expect(m, "svc_end_items reads attempts with jsonb_to_recordset").not.toBeNull();
    const columns = Object.fromEntries(
      (m?.[1] ?? "").split(",").map((c) => {
        const [name, ...type] = c.trim().split(/\s+/);
        return [name, type.join(" ")];
      }),
    );
    expect(columns).toEqual(ATTEMPT_SQL);
  });

  test("a video job's row has exactly the keys svc_end_items reads of `video`, in the domain's figures", async () => {
    const [fn] = await world.app.rt.db.$queryRaw<{ body: string }[]>`
      SELECT pg_get_functiondef('svc_end_items(svc_end_item[])'::regprocedure) AS body`;
    const read = new Set([...(fn?.body ?? "").matchAll(/i\.video->>?'(\w+)'/g)].map((m) => m[1]));
    const videoJob = {
      id: "00000000-0000-4000-8000-000000000002",
      queueId: "00000000-0000-4000-8000-000000000003",
      upstreamQueueId: "up-1",
      upstreamQuoteMicroDiem: 630_000n,
      body: { model: "m", duration: "5s" },
      downloadUrl: null,
    };
    const row = endItemRow({ ...sampleItem(), rows: { videoJob } }).video;
    expect(Object.keys(row ?? {}).sort()).toEqual([...read].sort());
    expect(row).toEqual({
      id: videoJob.id,
      queue_id: videoJob.queueId,
      upstream_queue_id: "up-1",
      upstream_quote: "630000",
      body: videoJob.body,
      download_url: null,
    });
    // no rows: no video part
    expect(endItemRow(sampleItem()).video).toBeNull();
  });

  test("a real ending's item goes into svc_end_item and back with every key and value intact", async () => {
    await addSupply(world.app, world.sim, [{ priceCents: 40, quantityMicroDiem: 50_000_000n }]);
    world.app.rt.services.inference.invalidateBook();
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const session = await openSession(world.app, buyer.accountId);
    const attempt = session.attempt;
    if (!attempt) throw new Error("open admits the first attempt");
    const now = new Date();
    const record: AttemptRecord = {
      ordinal: 1,
      key: attempt.upstreamKeyId,
      offer: attempt.offerId,
      price: attempt.priceCentsPerDollar,
      outcome: "succeeded",
      status: 200,
      detail: null,
      started: now.toISOString(),
      ended: now.toISOString(),
    };
    // every field of a charge set (a charged ending), built the way the pipeline's `charge` builds it
    const charge: EndCharge = {
      offerId: attempt.offerId,
      upstreamKeyId: attempt.upstreamKeyId,
      supplierAccountId: attempt.supplierAccountId,
      priceCentsPerDollar: attempt.priceCentsPerDollar,
      burnMicroDiem: 123n,
      grossMicroUsdc: 49n,
      feeMicroUsdc: 4n,
      supplierMicroUsdc: 45n,
      clearId: "00000000-0000-4000-8000-000000000001",
      promptTokens: 10,
      completionTokens: 5,
      cachedTokens: 0,
      cacheWriteTokens: 7,
      buyerHolder: session.buyerHold?.slice.holder ?? null,
      offerHolder: attempt.offerHold.slice.holder,
    };
    // `end` is pure: building the item moves nothing (the settlement applies its escrow plan)
    const ending = endItem(session, now, { status: "succeeded", errorCode: null, charge, attempt: null });
    const item = endItemRow({ ...ending.item, attempts: [record] });
    // the row carries the domain's figures, as decimal strings
    expect([item.burn, item.gross, item.fee, item.share, item.cache_write]).toEqual(["123", "49", "4", "45", 7]);
    try {
      expect(Object.keys(item).sort()).toEqual(Object.keys(END_ITEM_SQL).sort());
      const [back] = await world.app.rt.db.$queryRawUnsafe<{ j: Record<string, unknown> }[]>(
        "SELECT to_jsonb(jsonb_populate_record(NULL::svc_end_item, $1::jsonb)) AS j",
        JSON.stringify(item),
      );
      const j = back?.j ?? {};
      expect(Object.keys(j).sort()).toEqual(Object.keys(item).sort());
      for (const [k, v] of Object.entries(item)) {
        const got = j[k];
        if (v === null) expect(got, k).toBeNull();
        else if (END_ITEM_SQL[k as keyof EndItemRow].startsWith("timestamp")) {
          expect(new Date(String(got)).toISOString(), k).toBe(v);
        } else if (typeof v === "object") expect(got, k).toEqual(v);
        else expect(String(got), k).toBe(String(v));
      }
      const [a] = await world.app.rt.db.$queryRawUnsafe<Record<string, unknown>[]>(
        `SELECT to_jsonb(a) AS j FROM jsonb_to_recordset($1::jsonb) AS a(${Object.entries(ATTEMPT_SQL)
          .map(([n, t]) => `${n} ${t}`)
          .join(", ")})`,
        JSON.stringify(item.attempts),
      );
      expect(Object.keys((a?.j ?? {}) as object).sort()).toEqual(Object.keys(ATTEMPT_SQL).sort());
    } finally {
      await world.app.rt.services.inference.abort(session, "aborted");
    }
    // the ending the test made was aborted for real: nothing charged, nothing held
    expect(await confirmedOf(world.app, buyer.accountId)).toBe(5_000_000n);
    await expectHoldsReleased(world.app, buyer.accountId);
    await assertBooksBalance(world.app.rt.db);
  });
});
