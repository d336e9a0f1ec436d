import fc from "fast-check";
import pg from "pg";
import { describe, expect } from "vitest";
import { effectivePrice, type PriceStep } from "../../../src/domain/supply/price-schedule.js";
import { appTest } from "../../../testkit/app-test.js";
import { instantArb, scheduleArb } from "../../../testkit/schedules.js";

// One rule for the effective price (issue 30): the SQL readers (the offer book, eligibleOffers, the
// escrow top-up) use svc_effective_price, the views and GraphQL effectivePrice. They must agree on
// every schedule at every instant.

/** a pg client of its own on the file's isolated database; no app runs */
const test = appTest.extend("client", { scope: "file" }, async ({ database }, { onCleanup }) => {
  const c = new pg.Client({ connectionString: database.databaseUrl });
  await c.connect();
  onCleanup(() => c.end());
  return c;
});

interface Case {
  price: number;
  schedule: PriceStep[] | null;
  at: Date;
}

/** svc_effective_price of each case, in one query (an `offers` row built from the case). */
async function sqlPrices(c: pg.Client, cases: Case[]): Promise<number[]> {
  const payload = cases.map((x) => ({
    offer: { price_cents_per_dollar: x.price, schedule: x.schedule },
    at: x.at.toISOString(),
  }));
  const r = await c.query<{ price: number }>(
    `SELECT svc_effective_price(jsonb_populate_record(NULL::offers, x.c->'offer'), (x.c->>'at')::timestamptz) AS price
       FROM jsonb_array_elements($1::jsonb) WITH ORDINALITY AS x(c, n)
      ORDER BY x.n`,
    [JSON.stringify(payload)],
  );
  return r.rows.map((row) => Number(row.price));
}

const caseArb: fc.Arbitrary<Case> = fc
  .tuple(fc.integer({ min: 1, max: 80 }), fc.option(scheduleArb, { freq: 6 }))
  .chain(([price, schedule]) => instantArb(schedule ?? undefined).map((at) => ({ price, schedule, at })));

describe("svc_effective_price and effectivePrice", () => {
  test("agree on random schedules and instants (step minutes and their edges included)", async ({ client }) => {
    await fc.assert(
      fc.asyncProperty(fc.array(caseArb, { minLength: 1, maxLength: 60 }), async (cases) => {
        const sql = await sqlPrices(client, cases);
        const ts = cases.map((x) => effectivePrice({ priceCentsPerDollar: x.price, schedule: x.schedule }, x.at));
        expect(sql).toEqual(ts);
      }),
      { numRuns: 60 },
    );
  });

  test("the worked cases: before the first step, on a step's minute, between steps, late in the day", async ({
    client,
  }) => {
    const schedule = [
      { fromUtc: "18:00", priceCentsPerDollar: 40 },
      { fromUtc: "22:00", priceCentsPerDollar: 25 },
    ];
    const at = (t: string) => new Date(`2026-12-01T${t}Z`);
    const cases: Case[] = ["00:00:00", "17:59:59.999", "18:00:00", "21:59:00", "22:00:00", "23:59:59.999"].map((t) => ({
      price: 60,
      schedule,
      at: at(t),
    }));
    expect(await sqlPrices(client, cases)).toEqual([60, 60, 40, 40, 25, 25]);
    expect(await sqlPrices(client, [{ price: 33, schedule: null, at: at("12:00:00") }])).toEqual([33]);
  });
});
