// The pipeline's SQL stores (src/domain/inference/settlement/sql-stores.ts: the stored functions in Postgres),
// port by port, on fixed rows: the offer book and eligibility (svc_eligible, svc_routable, the
// clearing order), ceilings, escrow top-ups (svc_escrow_take, each outcome), give-backs, the
// sweeper and the endings (svc_end_batch: effects and guards), with the rows afterwards. The
// pipeline's tests and the seeded money simulation run on these same stores (testkit/market-db.ts).
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { createSql, type Sql } from "../../../src/adapters/sql.js";
import type { EndItem } from "../../../src/domain/inference/settlement/end-item.js";
import { sqlStores } from "../../../src/domain/inference/settlement/sql-stores.js";
import type { InferenceStores, TakeRequest } from "../../../src/domain/inference/settlement/stores.js";
import { createTestDatabase } from "../../../testkit/db.js";
import { endedItem } from "../../../testkit/end-items.js";

const NOW = new Date("2030-01-15T12:00:00.000Z");
const at = (ms: number) => new Date(NOW.getTime() + ms);
const id = (n: number) => `00000000-0000-4000-8000-${n.toString(16).padStart(12, "0")}`;

// ─────────────────────────── the rows the stores start from ───────────────────────────

const BUYER = id(1);
const POOR = id(2);
const SUPPLIER = id(3);
const KEY = id(101);
const REVOKED = id(102);
const POOR_KEY = id(103);

interface KeyRow {
  id: string;
  status: "active" | "auth_failed" | "revoked";
  balance: bigint | null;
  cooldownUntil: Date | null;
}
interface OfferRow {
  id: string;
  key: KeyRow;
  price: number;
  quantity: bigint;
  status: "active" | "paused";
  expiresAt: Date;
  createdAt: Date;
}

const key = (n: number, o: Partial<KeyRow> = {}): KeyRow => ({
  id: id(n),
  status: "active",
  balance: 100_000_000n,
  cooldownUntil: null,
  ...o,
});
const offer = (n: number, price: number, o: Partial<OfferRow> = {}): OfferRow => ({
  id: id(n),
  key: key(n + 1000),
  price,
  quantity: 10_000_000n,
  status: "active",
  expiresAt: at(86_400_000),
  createdAt: at(-60_000 + n),
  ...o,
});

const OFFERS: OfferRow[] = [
  offer(0x20, 30),
  offer(0x21, 30), // same price, a little younger
  offer(0x22, 35, { key: key(0x1022, { cooldownUntil: at(1_000) }) }),
  offer(0x23, 25, { key: key(0x1023, { status: "auth_failed" }) }),
  offer(0x24, 28, { expiresAt: NOW }),
  offer(0x25, 33, { status: "paused" }),
  offer(0x26, 40, { key: key(0x1026, { balance: null }) }),
  offer(0x27, 45, { key: key(0x1027, { balance: 500n }) }),
  offer(0x28, 50, { quantity: 1_000n }),
  offer(0x2a, 60, { createdAt: at(-1_000) }), // same price and age: by id
  offer(0x29, 60, { createdAt: at(-1_000) }),
  offer(0x2b, 75, { key: key(0x102b, { status: "revoked" }) }),
];
const [CHEAP, TWIN, COOLING] = OFFERS as [OfferRow, OfferRow, OfferRow];
const ABOVE = OFFERS[9] as OfferRow;
const H1 = id(0x501);
const H2 = id(0x502);
const GONE = id(0x503);
const SEALED = { ciphertext: randomBytes(24), iv: randomBytes(12), tag: randomBytes(16), keyId: "k1" };

async function seedSql(sql: Sql): Promise<void> {
  const account = (aid: string, confirmed: bigint, ceiling: number) =>
    sql.query(
      `INSERT INTO accounts (id, wallet_address, auth_provider, max_price_cents_per_dollar, confirmed_micro_usdc)
       VALUES ($1, $2, 'siwe', $3, $4)`,
      [aid, `0x${aid.replaceAll("-", "").padEnd(40, "0")}`, ceiling, confirmed.toString()],
    );
  await account(BUYER, 10_000_000n, 50);
  await account(POOR, 1_000n, 80);
  await account(SUPPLIER, 0n, 80);
  for (const [kid, owner, status] of [
    [KEY, BUYER, "active"],
    [REVOKED, BUYER, "revoked"],
    [POOR_KEY, POOR, "active"],
  ]) {
    await sql.query(
      `INSERT INTO api_keys (id, account_id, name, key_prefix, key_hash, status, source, revoked_at)
       VALUES ($1, $2, 'k', 'svc_x', $4, $3::api_key_status, 'session', CASE WHEN $3::text = 'revoked' THEN now() END)`,
      [kid, owner, status, kid],
    );
  }
  for (const o of OFFERS) {
    await sql.query(
      `INSERT INTO upstream_keys (id, account_id, label, secret_ciphertext, secret_iv, secret_tag, encryption_key_id,
                                  secret_fingerprint, secret_last4, status, last_balance_micro_diem, cooldown_until,
                                  revoked_at)
       VALUES ($1, $2, 'k', $3, $4, $5, $6, $10, 'abcd', $7::upstream_key_status, $8, $9, CASE WHEN $7::text = 'revoked' THEN now() END)`,
      [
        o.key.id,
        SUPPLIER,
        SEALED.ciphertext,
        SEALED.iv,
        SEALED.tag,
        SEALED.keyId,
        o.key.status,
        o.key.balance?.toString() ?? null,
        o.key.cooldownUntil,
        o.key.id,
      ],
    );
    await sql.query(
      `INSERT INTO offers (id, account_id, upstream_key_id, price_cents_per_dollar, quantity_micro_diem,
                           remaining_micro_diem, status, expires_at, created_at)
       VALUES ($1, $2, $3, $4, $5, $5, $6, $7, $8)`,
      [o.id, SUPPLIER, o.key.id, o.price, o.quantity.toString(), o.status, o.expiresAt, o.createdAt],
    );
  }
}

// ─────────────────────────── the rows afterwards ───────────────────────────

async function rows(sql: Sql) {
  const q = async (text: string) => (await sql.query(text)).rows.map((r) => ({ ...r }));
  return {
    accounts: await q(
      `SELECT id, confirmed_micro_usdc::text AS confirmed, reserved_micro_usdc::text AS reserved,
              supplier_payable_micro_usdc::text AS payable, supplier_held_micro_usdc::text AS held
         FROM accounts ORDER BY id`,
    ),
    offers: await q(
      `SELECT id, remaining_micro_diem::text AS remaining, reserved_micro_diem::text AS reserved, status::text AS status
         FROM offers ORDER BY id`,
    ),
    keys: await q(`SELECT id, last_balance_micro_diem::text AS balance FROM upstream_keys ORDER BY id`),
    holders: (await q(`SELECT id FROM escrow_holders ORDER BY id`)).map((r) => r.id),
    buyerEscrows: await q(
      `SELECT account_id AS id, holder, amount_micro_usdc::text AS amount FROM buyer_escrows ORDER BY 1, 2`,
    ),
    offerEscrows: await q(
      `SELECT offer_id AS id, holder, amount_micro_diem::text AS amount FROM offer_escrows ORDER BY 1, 2`,
    ),
    requests: await q(
      `SELECT id, status::text AS status, error_code, prompt_tokens AS prompt, completion_tokens AS completion,
              cached_tokens AS cached, cache_write_tokens AS cache_write FROM inference_requests ORDER BY id`,
    ),
    clears: await q(
      `SELECT id, offer_id AS offer, burn_micro_diem::text AS burn, gross_micro_usdc::text AS gross FROM clears ORDER BY id`,
    ),
  };
}

// ─────────────────────────── the stores ───────────────────────────

let drop: () => Promise<void>;
let sql: Sql;
let stores: InferenceStores;

beforeAll(async () => {
  const db = await createTestDatabase();
  drop = db.drop;
  sql = createSql(db.url, 2);
  await seedSql(sql);
  stores = sqlStores(sql);
});

afterAll(async () => {
  await sql?.end();
  await drop?.();
});

/** Asks the stores. */
const ask = <T>(fn: (s: InferenceStores) => Promise<T>): Promise<T> => fn(stores);
const sameRows = () => rows(sql);

/** An ended request, as the pipeline sends it (`endItem`); failed and without a charge unless told. */
const item = (n: number, o: Partial<EndItem> = {}): EndItem =>
  endedItem({
    requestId: id(0x900 + n),
    supportReference: id(0x950 + n),
    accountId: BUYER,
    apiKeyId: KEY,
    startedAt: NOW,
    endedAt: NOW,
    ...o,
  });
/** A charged ending on H1's slices (fee 10%). */
const charge = (n: number, o: { gross: bigint; burn: bigint; offer?: OfferRow; fee?: bigint }) =>
  item(n, {
    status: "succeeded",
    errorCode: null,
    charge: {
      offerId: (o.offer ?? CHEAP).id,
      upstreamKeyId: (o.offer ?? CHEAP).key.id,
      supplierAccountId: SUPPLIER,
      priceCentsPerDollar: 30,
      burnMicroDiem: o.burn,
      grossMicroUsdc: o.gross,
      feeMicroUsdc: o.fee ?? o.gross / 10n,
      supplierMicroUsdc: o.gross - o.gross / 10n,
      clearId: id(0xa00 + n),
      promptTokens: 10,
      completionTokens: 5,
      cachedTokens: 2,
      cacheWriteTokens: 3,
      buyerHolder: H1,
      offerHolder: H1,
    },
    attemptCount: 1,
    attempts: [
      {
        ordinal: 1,
        key: (o.offer ?? CHEAP).key.id,
        offer: (o.offer ?? CHEAP).id,
        price: 30,
        outcome: "succeeded",
        status: null,
        detail: null,
        started: NOW.toISOString(),
        ended: NOW.toISOString(),
      },
    ],
  });

const withoutSecrets = <T extends { sealed: unknown }>(entries: T[]) => entries.map(({ sealed: _s, ...e }) => e);

describe("the offer book and eligibility", () => {
  test("the book: eligible offers only, in clearing order (price, age, id), with routable, balance and cooldown", async () => {
    const book = await ask(async (s) => withoutSecrets(await s.offers.book(NOW)));
    expect(book.map((e) => e.offerId)).toEqual([CHEAP.id, TWIN.id, id(0x26), id(0x27), id(0x28), id(0x29), id(0x2a)]);
    expect(book.find((e) => e.offerId === id(0x26))?.routableMicroDiem).toBe(0n);
    expect(book.find((e) => e.offerId === id(0x27))?.routableMicroDiem).toBe(500n);
    // the cooldown ends exactly at its time
    const later = await ask(async (s) => withoutSecrets(await s.offers.book(at(1_000))));
    expect(later.map((e) => e.offerId)).toContain(COOLING.id);
    // the sealed secret comes back as stored
    const [first] = await stores.offers.book(NOW);
    expect(Buffer.from(first?.sealed.ciphertext ?? [])).toEqual(SEALED.ciphertext);
  });

  test.each([
    ["at any price (something routable)", { maxPriceCents: 80 }, [0x20, 0x21, 0x27, 0x28, 0x29, 0x2a]],
    ["at or below 35", { maxPriceCents: 35 }, [0x20, 0x21]],
    ["at least 600 routable", { maxPriceCents: 80, minRoutableMicroDiem: 600n }, [0x20, 0x21, 0x28, 0x29, 0x2a]],
    [
      "keys excluded",
      { maxPriceCents: 80, excludeKeyIds: [CHEAP.key.id, (OFFERS[8] as OfferRow).key.id] },
      [0x21, 0x27, 0x29, 0x2a],
    ],
    ["the first two", { maxPriceCents: 80, limit: 2 }, [0x20, 0x21]],
    ["nothing that cheap", { maxPriceCents: 10 }, []],
  ])("eligible offers %s", async (_name, q, expected) => {
    const offers = await ask((s) => s.offers.eligible({ now: NOW, ...q }));
    expect(offers.map((o) => o.offerId)).toEqual(expected.map(id));
    expect(offers.find((o) => o.offerId === id(0x27))?.routableMicroDiem ?? 500n).toBe(500n);
  });

  test("ceilings: the account's, or null for no account", async () => {
    expect(await ask((s) => s.ceilings.ceilingOf(BUYER))).toBe(50);
    expect(await ask((s) => s.ceilings.ceilingOf(id(999)))).toBeNull();
  });
});

describe("escrow", () => {
  const take = (o: Partial<TakeRequest>): TakeRequest => ({
    holder: H1,
    accountId: BUYER,
    apiKeyId: KEY,
    ceilingCents: 50,
    usdcMin: 0n,
    usdcWant: 0n,
    offerId: null,
    diemMin: 0n,
    diemWant: 0n,
    now: NOW,
    ...o,
  });

  test("holders: enrol, renew, and a lease that expired or never was is lost", async () => {
    await ask((s) => s.escrow.enrol(H1, at(60_000)));
    await ask((s) => s.escrow.enrol(H2, at(30_000)));
    await ask((s) => s.escrow.enrol(GONE, at(-1)));
    expect(await ask((s) => s.escrow.renew(H1, at(90_000)))).toBe(true);
    expect(await ask((s) => s.escrow.renew(id(0x5ff), at(90_000)))).toBe(false);
    expect((await ask((s) => s.escrow.take(take({ holder: GONE, usdcMin: 1n })))).outcome).toBe("holder_lost");
    expect((await ask((s) => s.escrow.take(take({ holder: id(0x5ff), usdcMin: 1n })))).outcome).toBe("holder_lost");
    await sameRows();
  });

  test("top-ups: each outcome of svc_escrow_take, with what it grants and reads", async () => {
    const outcomes: string[] = [];
    const top = async (o: Partial<TakeRequest>) => {
      const r = await stores.escrow.take(take(o));
      outcomes.push(r.outcome);
      return r;
    };
    // the buyer's slice: at least the minimum, the want when the balance allows
    expect(await top({ usdcMin: 1_000n, usdcWant: 8_000n })).toMatchObject({ outcome: "ok", grantedUsdc: 8_000n });
    // both slices at once
    await top({ usdcMin: 100n, usdcWant: 100n, offerId: CHEAP.id, diemMin: 500n, diemWant: 4_000n });
    // the offer's slice alone, on a second holder
    await top({ holder: H2, accountId: null, offerId: CHEAP.id, diemMin: 1_000n, diemWant: 1_000n });
    await top({ holder: H2, accountId: null, offerId: TWIN.id, diemMin: 200n, diemWant: 9_000_000n });
    // refusals
    await top({ ceilingCents: 60, usdcMin: 1n });
    await top({ accountId: POOR, apiKeyId: POOR_KEY, ceilingCents: 80, usdcMin: 5_000n });
    await top({ apiKeyId: REVOKED, usdcMin: 1n });
    await top({ apiKeyId: POOR_KEY, usdcMin: 1n });
    // the offer part short: too little routable, not eligible, above the ceiling, unknown; the
    // buyer part before it commits anyway
    await top({ accountId: null, offerId: id(0x27), diemMin: 600n, diemWant: 600n });
    await top({ accountId: null, offerId: COOLING.id, diemMin: 1n, diemWant: 1n });
    await top({ usdcMin: 10n, usdcWant: 10n, offerId: ABOVE.id, diemMin: 1n, diemWant: 1n });
    await top({ accountId: null, offerId: id(0x777), diemMin: 1n, diemWant: 1n });
    expect(outcomes).toEqual([
      "ok",
      "ok",
      "ok",
      "ok",
      "stale_ceiling",
      "insufficient_balance",
      "key_inactive",
      "key_inactive",
      "offer_short",
      "offer_short",
      "offer_short",
      "offer_short",
    ]);
    const rows = await sameRows();
    expect(rows.buyerEscrows).toEqual([{ id: BUYER, holder: H1, amount: "8110" }]);
    // what a holder took is no longer routable on the book
    const book = await ask(async (s) => withoutSecrets(await s.offers.book(NOW)));
    expect(book.find((e) => e.offerId === TWIN.id)?.routableMicroDiem).toBe(10_000_000n - 9_000_000n);
  });

  test("buyer slices elsewhere, give-backs (by at most what a slice holds), the sweeper and a clean release", async () => {
    await ask((s) => s.escrow.enrol(id(0x504), at(60_000)));
    await ask((s) => s.escrow.take(take({ holder: id(0x504), usdcMin: 500n, usdcWant: 500n })));
    expect(await ask((s) => s.escrow.buyerSlices(BUYER, H1))).toEqual([{ holder: id(0x504), amountMicroUsdc: 500n }]);
    await ask(async (s) => (await s.escrow.buyerSlices(BUYER, null)).length);
    await ask((s) =>
      s.escrow.giveBack(H1, [
        { kind: "buyer", id: BUYER, amount: 110n },
        { kind: "offer", id: CHEAP.id, amount: 4_000n },
        { kind: "offer", id: TWIN.id, amount: 1n }, // H1 holds none of it
      ]),
    );
    // more than the slice holds: left alone
    await ask((s) => s.escrow.giveBack(id(0x504), [{ kind: "buyer", id: BUYER, amount: 501n }]));
    await sameRows();
    expect(await ask((s) => s.escrow.releaseExpired(at(45_000), 500))).toBe(2); // H2 and GONE
    await ask((s) => s.escrow.release(id(0x504), NOW));
    await ask((s) => s.escrow.release(id(0x5ff), NOW));
    const rows = await sameRows();
    expect(rows.holders).toEqual([H1]);
  });

  test("endings: a charge and a failure in one batch; each buyer's balance after; a guard that fails commits nothing", async () => {
    await ask((s) =>
      s.escrow.take(take({ usdcMin: 1_000n, usdcWant: 1_000n, offerId: CHEAP.id, diemMin: 2_000n, diemWant: 2_000n })),
    );
    const balances = await ask((s) =>
      s.settlement.commit([
        charge(1, { gross: 300n, burn: 1_000n }),
        item(2, { returns: [{ holder: H1, accountId: BUYER, amountMicroUsdc: 100n }] }),
      ]),
    );
    expect(balances).toEqual([10_000_000n - 300n, 10_000_000n - 300n]);
    await sameRows();
    // guards: a charge its slice cannot cover, a request twice, a charge not balanced — nothing commits
    await expect(ask((s) => s.settlement.commit([charge(3, { gross: 9_000_000n, burn: 1n })]))).rejects.toThrow();
    await expect(ask((s) => s.settlement.commit([item(4), item(4)]))).rejects.toThrow();
    await expect(ask((s) => s.settlement.commit([charge(5, { gross: 10n, burn: 10n, fee: 9n })]))).rejects.toThrow();
    await expect(ask((s) => s.settlement.commit([item(1)]))).rejects.toThrow();
    // the parties no foreign key checks: a charge naming another supplier or supplier key than its
    // offer's, a request on another account's API key, an account not on record
    const named = charge(6, { gross: 10n, burn: 10n });
    const party = named.charge as NonNullable<EndItem["charge"]>;
    for (const wrong of [
      { ...named, charge: { ...party, supplierAccountId: POOR } },
      { ...named, charge: { ...party, upstreamKeyId: TWIN.key.id } },
      { ...named, apiKeyId: POOR_KEY },
      item(7, { accountId: id(0x5fe), apiKeyId: null }),
    ]) {
      await expect(ask((s) => s.settlement.commit([wrong]))).rejects.toThrow(/not on record/);
    }
    const rows = await sameRows();
    expect(rows.requests.map((r) => r.id)).toEqual([id(0x901), id(0x902)]);
    expect(rows.clears).toEqual([{ id: id(0xa01), offer: CHEAP.id, burn: "1000", gross: "300" }]);
  });

  test("the append's guards: each refuses with its own reason and commits nothing", async () => {
    const before = await sameRows();
    const hold = async () => {
      const r = await sql.query<{ t: Date }>("SELECT folded_through AS t FROM escrow_holders WHERE id = $1", [H1]);
      return r.rows[0]?.t;
    };
    const foldedThrough = await hold();
    const c = (n: number) => charge(n, { gross: 10n, burn: 10n });
    const part = (i: EndItem) => i.charge as NonNullable<EndItem["charge"]>;
    const refused = (items: EndItem[], reason: RegExp) =>
      expect(ask((s) => s.settlement.commit(items))).rejects.toThrow(reason);
    await refused([item(11), item(11)], /a request appears twice in one batch/);
    await refused([charge(12, { gross: 10n, burn: 10n, fee: 9n })], /a charge without its slices or not balanced/);
    await refused([{ ...c(13), charge: { ...part(c(13)), offerHolder: H2 } }], /a charge funded by two holders/);
    await refused(
      [{ ...c(14), charge: { ...part(c(14)), buyerHolder: GONE, offerHolder: GONE } }],
      /whose holder is gone/,
    );
    await sql.query("UPDATE escrow_holders SET folded_through = $2 WHERE id = $1", [H1, NOW]);
    await refused(
      [charge(15, { gross: 10n, burn: 10n })].map((i) => ({ ...i, endedAt: at(-2 * 86_400_000) })),
      /a day older than its holder's last fold/,
    );
    await sql.query("UPDATE escrow_holders SET folded_through = $2 WHERE id = $1", [H1, foldedThrough]);
    await refused(
      [{ ...c(16), paymentId: id(0x5fd), charge: { ...part(c(16)), buyerHolder: null } }],
      /a payment-funded charge its payment cannot take/,
    );
    const videoJob = {
      id: id(0xb17),
      queueId: "q",
      upstreamQueueId: "uq",
      upstreamQuoteMicroDiem: 1n,
      body: {},
      downloadUrl: null,
    };
    await refused([item(17, { rows: { videoJob } })], /a video job without its charge/);
    await refused([charge(18, { gross: 9_000_000n, burn: 1n })], /a buyer slice is missing or short/);
    await refused([charge(19, { gross: 10n, burn: 5_000_000n })], /an offer slice is missing or short/);
    await sql.query(
      "INSERT INTO key_budget_holds (request_id, api_key_id, holder, amount_micro_usdc) VALUES ($1, $2, $3, 5)",
      [id(0x900 + 20), KEY, H1],
    );
    await refused([c(20)], /a charge beyond its key budget hold/);
    // the hold's deletion rolled back with the rest
    const held = await sql.query("SELECT 1 FROM key_budget_holds WHERE request_id = $1", [id(0x900 + 20)]);
    expect(held.rowCount).toBe(1);
    await sql.query("DELETE FROM key_budget_holds WHERE request_id = $1", [id(0x900 + 20)]);
    expect(await hold()).toEqual(foldedThrough);
    expect(await sameRows()).toEqual(before);
  });

  test("ended: whether a request's ending committed, with its buyer's balance now (a lost commit answer)", async () => {
    expect(await ask((s) => s.settlement.ended(id(0x901)))).toEqual({
      status: "succeeded",
      confirmed: 10_000_000n - 300n,
    });
    expect(await ask((s) => s.settlement.ended(id(0x902)))).toMatchObject({ status: "failed" });
    // refused batches left nothing to find
    expect(await ask((s) => s.settlement.ended(id(0x903)))).toBeNull();
    expect(await ask((s) => s.settlement.ended(id(0x904)))).toBeNull();
  });

  test("an ending that empties an offer is appended; the holder's fold sells it out and lowers its key's balance", async () => {
    const small = OFFERS[8] as OfferRow;
    await ask((s) =>
      s.escrow.take(take({ usdcMin: 500n, usdcWant: 500n, offerId: small.id, diemMin: 1_000n, diemWant: 1_000n })),
    );
    await ask((s) => s.settlement.commit([charge(6, { gross: 300n, burn: 1_000n, offer: small })]));
    // appended: the offer's row is as it was, its live remaining is 0
    const appended = await sameRows();
    expect(appended.offers.find((o) => o.id === small.id)).toMatchObject({ remaining: "1000", status: "active" });
    const live = await sql.query<{ burn: string }>("SELECT burn::text FROM svc_offers_unfolded(ARRAY[$1::uuid])", [
      small.id,
    ]);
    expect(live.rows).toEqual([{ burn: "1000" }]);
    // the fold applies it and names the offer it sold out (OfferService marks it depleted)
    expect(await ask((s) => s.escrow.fold(H1))).toEqual([{ offerId: small.id, accountId: SUPPLIER }]);
    expect(await ask((s) => s.escrow.fold(H1))).toEqual([]);
    const rows = await sameRows();
    expect(rows.offers.find((o) => o.id === small.id)).toMatchObject({ remaining: "0", reserved: "0" });
    expect(rows.keys.find((k) => k.id === small.key.id)?.balance).toBe((100_000_000n - 1_000n).toString());
    // nothing of it is routable (until OfferService marks it depleted and it leaves the book)
    const book = await ask(async (s) => withoutSecrets(await s.offers.book(NOW)));
    expect(book.find((e) => e.offerId === small.id)?.routableMicroDiem ?? 0n).toBe(0n);
  });
});
