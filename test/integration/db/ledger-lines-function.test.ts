import { createHash } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { afterAll, describe, expect } from "vitest";
import { refundClear } from "../../../src/domain/ledger/ledger.js";
import { type AccountLedgerLine, accountLedgerLines } from "../../../src/domain/ledger/ledger-lines.js";
import { RetentionService } from "../../../src/domain/maintenance/retention.js";
import { appTest } from "../../../testkit/app-test.js";
import { assertBooksBalance } from "../../../testkit/books.js";
import {
  chargedRequest,
  fund,
  monthStart,
  releaseHeldShare,
  type Seller,
  seller,
} from "../../../testkit/month-rows.js";

/**
 * The function `ledger_lines` (prisma/functions/ledger_lines.sql, the ledger lines' one definition)
 * against the books' expectations, stated here on their own: a written entry is its line; a clear
 * implies the buyer's debit (on the receivable when paid per request), the supplier's credit (held
 * for a video job) and the platform's fee, with ids md5('<clear>:buyer' | ':supplier' | ':fee'); a
 * retired month's clear lines become one closing line per account and book. Over a scenario in three
 * months: funding, plain, video (held, then released) and paid-per-request clears, a refund, a
 * supplier buying from itself, two clears either side of this month's first instant; then the
 * oldest month retired. Every line, a month's lines (the bound at the boundary), each account's
 * pages newest and oldest first, and one book's, equal the expectation; the books balance.
 */
const EXPORT_DIR = mkdtempSync(join(tmpdir(), "svc-ledger-fn-"));
afterAll(() => rmSync(EXPORT_DIR, { recursive: true, force: true }));

const test = appTest.extend("client", { scope: "file" }, async ({ app }, { onCleanup }) => {
  const c = new pg.Client({ connectionString: app.rt.config.database.url });
  await c.connect();
  onCleanup(() => c.end());
  return c;
});

const NOW = new Date();
const THIS = monthStart(NOW, 0);
const LAST = monthStart(NOW, -1);
const OLDEST = monthStart(NOW, -2);
const DAY = 86_400_000;

interface Line {
  id: string;
  transactionId: string;
  transactionKind: string;
  accountId: string | null;
  book: string;
  kind: string;
  amount: bigint;
  at: number;
}

/** md5 of a text as Postgres casts it to uuid. */
function md5uuid(text: string): string {
  const h = createHash("md5").update(text).digest("hex");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

interface MadeClear {
  id: string;
  buyer: string;
  supplier: string;
  gross: bigint;
  video: boolean;
  paid: boolean;
  /** created_at: a second after the request's start (month-rows.ts) */
  at: number;
}

/** The lines a clear implies, as the books say (docs/decisions.md "Books"). */
function clearLines(k: MadeClear): Line[] {
  const fee = k.gross / 10n;
  const share = k.gross - fee;
  const line = (side: string, accountId: string | null, book: string, kind: string, amount: bigint): Line => ({
    id: md5uuid(`${k.id}:${side}`),
    transactionId: k.id,
    transactionKind: "clear",
    accountId,
    book,
    kind,
    amount,
    at: k.at,
  });
  return [
    line("buyer", k.buyer, k.paid ? "payment_receivable" : "buyer_confirmed", "buyer_debit", -k.gross),
    line("supplier", k.supplier, k.video ? "supplier_held" : "supplier_payable", "supplier_credit", share),
    line("fee", null, "platform_fee", "platform_fee", fee),
  ];
}

/** A retired month's clear lines summed per account and book, as the closing lines say. */
function closingLines(month: Date, lines: Line[]): Line[] {
  const day = month.toISOString().slice(0, 10);
  const sums = new Map<string, Line>();
  for (const l of lines) {
    const key = `${l.accountId ?? "platform"}:${l.book}`;
    const s = sums.get(key);
    if (s) s.amount += l.amount;
    else
      sums.set(key, {
        id: md5uuid(`closing:${day}:${key}`),
        transactionId: md5uuid(`closing:${day}`),
        transactionKind: "closing",
        accountId: l.accountId,
        book: l.book,
        kind: "closing",
        amount: l.amount,
        at: monthStart(month, 1).getTime() - 1,
      });
  }
  return [...sums.values()].filter((l) => l.amount !== 0n);
}

const byId = (a: Line, b: Line) => a.id.localeCompare(b.id);
const newestFirst = (a: { at: number; id: string }, b: { at: number; id: string }) =>
  b.at - a.at || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0);

async function functionLines(c: pg.Client, args = "", params: unknown[] = []): Promise<Line[]> {
  const r = await c.query<{
    id: string;
    transaction_id: string;
    transaction_kind: string;
    account_id: string | null;
    book: string;
    kind: string;
    amount: string;
    at: Date;
  }>(
    `SELECT id::text, transaction_id::text, transaction_kind::text, account_id::text, book::text, kind::text,
            amount_micro_usdc::text AS amount, created_at AS at
       FROM ledger_lines(${args})`,
    params,
  );
  return r.rows
    .map((x) => ({
      id: x.id,
      transactionId: x.transaction_id,
      transactionKind: x.transaction_kind,
      accountId: x.account_id,
      book: x.book,
      kind: x.kind,
      amount: BigInt(x.amount),
      at: x.at.getTime(),
    }))
    .sort(byId);
}

/** The written entries, each its line. */
async function entryLines(c: pg.Client): Promise<Line[]> {
  const r = await c.query<{
    id: string;
    transaction_id: string;
    kind_t: string;
    account_id: string | null;
    book: string;
    kind: string;
    amount: string;
    at: Date;
  }>(
    `SELECT e.id::text, e.transaction_id::text, t.kind::text AS kind_t, e.account_id::text, e.book::text,
            e.kind::text, e.amount_micro_usdc::text AS amount, e.created_at AS at
       FROM ledger_entries e JOIN ledger_transactions t ON t.id = e.transaction_id`,
  );
  return r.rows.map((x) => ({
    id: x.id,
    transactionId: x.transaction_id,
    transactionKind: x.kind_t,
    accountId: x.account_id,
    book: x.book,
    kind: x.kind,
    amount: BigInt(x.amount),
    at: x.at.getTime(),
  }));
}

const asLine = (accountId: string) => (l: AccountLedgerLine) => ({
  id: l.id,
  transactionId: l.transactionId,
  transactionKind: l.transactionKind,
  accountId,
  book: l.book,
  kind: l.kind,
  amount: l.amountMicroUsdc,
  at: l.createdAt.getTime(),
});

describe("the function ledger_lines: the books' expectations", () => {
  const made: MadeClear[] = [];
  let buyer = "";
  let payer = "";
  let s: Seller;

  async function charge(
    c: pg.Client,
    opts: { accountId: string; at: Date; video?: boolean; paymentId?: string; gross?: bigint },
  ): Promise<string> {
    const r = await chargedRequest(c, { ...opts, seller: s, grossMicroUsdc: opts.gross });
    made.push({
      id: r.clearId,
      buyer: opts.accountId,
      supplier: s.supplierAccountId,
      gross: r.grossMicroUsdc,
      video: opts.video === true,
      paid: opts.paymentId !== undefined,
      at: opts.at.getTime() + 1000,
    });
    return r.clearId;
  }

  test.beforeAll(async ({ app, client: c }) => {
    // month partitions from the oldest month on (the template's begin at its own month), so that
    // month can be retired; the partition for anything older ends where they begin
    for (const t of ["inference_requests", "clears"]) {
      await c.query(`ALTER TABLE ${t} DETACH PARTITION ${t}_before`);
      await c.query(`DROP TABLE ${t}_before`);
      await c.query(
        `CREATE TABLE ${t}_before PARTITION OF ${t} FOR VALUES FROM (MINVALUE) TO ('${OLDEST.toISOString()}')`,
      );
    }
    await c.query("SELECT svc_partitions_ensure($1, 3)", [OLDEST]);
    s = await seller(c);
    const account = async (n: number) =>
      (
        await c.query<{ id: string }>(
          `INSERT INTO accounts (id, wallet_address, auth_provider) VALUES (gen_random_uuid(), $1, 'siwe') RETURNING id`,
          [`0x00000000000000000000000000000000000f${String(n).padStart(4, "0")}`],
        )
      ).rows[0]?.id as string;
    buyer = await account(1);
    payer = await account(2);
    await fund(c, buyer, 10_000_000n, OLDEST);
    await fund(c, s.supplierAccountId, 1_000_000n, OLDEST);
    // the oldest month: plain clears, a video clear released within it, the supplier buying from itself
    await charge(c, { accountId: buyer, at: new Date(OLDEST.getTime() + DAY) });
    await charge(c, { accountId: buyer, at: new Date(OLDEST.getTime() + 2 * DAY), gross: 12_345n });
    const video = await charge(c, { accountId: buyer, at: new Date(OLDEST.getTime() + 3 * DAY), video: true });
    await releaseHeldShare(c, video, new Date(OLDEST.getTime() + 4 * DAY));
    await charge(c, { accountId: s.supplierAccountId, at: new Date(OLDEST.getTime() + 5 * DAY), gross: 777n });
    // last month: a clear paid per request whose payment settled, a refunded clear, one at its last millisecond
    const payment = (
      await c.query<{ id: string }>(
        `INSERT INTO request_payments (account_id, route, status, payer_address, pay_to_address, asset_address,
                                       facilitator_address, permit2_nonce, max_micro_usdc, deadline, charge_micro_usdc,
                                       settled_micro_usdc, fingerprint, payload, requirements, charged_at, settled_at)
         VALUES ($1, 'chat', 'settled', '0x00000000000000000000000000000000000f0002',
                 '0x00000000000000000000000000000000000000f0', '0x00000000000000000000000000000000000000f1',
                 '0x00000000000000000000000000000000000000f2', '1', 1000000, $2, 40000, 40000, 'fp', '{}', '{}', $2, $2)
         RETURNING id`,
        [payer, new Date(LAST.getTime() + DAY)],
      )
    ).rows[0]?.id as string;
    await charge(c, { accountId: payer, at: new Date(LAST.getTime() + DAY), paymentId: payment });
    await c.query("BEGIN");
    const j = await c.query<{ id: string }>(
      `INSERT INTO ledger_transactions (kind, request_payment_id, idempotency_key, created_at)
       VALUES ('request_payment', $1, $2, $3) RETURNING id`,
      [payment, `request_payment:${payment}`, new Date(LAST.getTime() + 2 * DAY)],
    );
    await c.query(
      `INSERT INTO ledger_entries (transaction_id, account_id, book, kind, amount_micro_usdc, created_at)
       VALUES ($1, NULL, 'external', 'request_payment', -40000, $3), ($1, $2, 'payment_receivable', 'request_payment', 40000, $3)`,
      [j.rows[0]?.id, payer, new Date(LAST.getTime() + 2 * DAY)],
    );
    await c.query("COMMIT");
    const refunded = await charge(c, { accountId: buyer, at: new Date(LAST.getTime() + 3 * DAY) });
    await app.rt.db.$transaction((tx) =>
      refundClear(tx, { clearId: refunded, at: new Date(LAST.getTime() + 4 * DAY) }),
    );
    // either side of this month's first instant: created at its last millisecond before, and at it
    await charge(c, { accountId: buyer, at: new Date(THIS.getTime() - 1001), gross: 20_001n });
    await charge(c, { accountId: buyer, at: new Date(THIS.getTime() - 1000), gross: 20_002n });
    // this month: a video clear still held
    await charge(c, { accountId: buyer, at: new Date(Math.max(THIS.getTime(), NOW.getTime() - 60_000)), video: true });
    await c.query("ANALYZE");
    await assertBooksBalance(app.rt.db);
  }, 120_000);

  /** The expected ledger: the written entries, and each clear's lines or its month's closing lines. */
  async function expected(c: pg.Client, retired: Date[] = []): Promise<Line[]> {
    const inMonth = (m: Date) => (k: MadeClear) => k.at >= m.getTime() && k.at < monthStart(m, 1).getTime();
    const kept = made.filter((k) => !retired.some((m) => inMonth(m)(k)));
    const closings = retired.flatMap((m) => closingLines(m, made.filter(inMonth(m)).flatMap(clearLines)));
    return [...(await entryLines(c)), ...kept.flatMap(clearLines), ...closings].sort(byId);
  }

  async function pagesOf(app: { rt: { db: Parameters<typeof accountLedgerLines>[0] } }, accountId: string) {
    const read = (q: Partial<Parameters<typeof accountLedgerLines>[1]>) =>
      accountLedgerLines(app.rt.db, { accountId, now: new Date(), limit: 2, ...q });
    const newest: AccountLedgerLine[] = [];
    for (let page = await read({}); page.length > 0; ) {
      newest.push(...page);
      const last = page[page.length - 1] as AccountLedgerLine;
      page = await read({ olderThan: { at: last.createdAt, id: last.id } });
    }
    const oldest: AccountLedgerLine[] = [];
    for (let page = await read({ oldestFirst: true }); page.length > 0; ) {
      oldest.push(...page);
      const last = page[page.length - 1] as AccountLedgerLine;
      page = await read({ oldestFirst: true, newerThan: { at: last.createdAt, id: last.id } });
    }
    return { newest: newest.map(asLine(accountId)), oldest: oldest.map(asLine(accountId)) };
  }

  async function checkAll(app: Parameters<typeof pagesOf>[0], c: pg.Client, want: Line[]) {
    expect(await functionLines(c)).toEqual(want);
    for (const accountId of [buyer, payer, s.supplierAccountId]) {
      const mine = want.filter((l) => l.accountId === accountId).sort(newestFirst);
      expect(mine.length).toBeGreaterThan(0);
      expect(await functionLines(c, "p_account => $1::uuid", [accountId])).toEqual([...mine].sort(byId));
      const { newest, oldest } = await pagesOf(app, accountId);
      expect(newest).toEqual(mine);
      expect(oldest).toEqual([...mine].reverse());
      const held = await accountLedgerLines(app.rt.db, {
        accountId,
        now: new Date(),
        book: "supplier_held",
        limit: 50,
      });
      expect(held.map(asLine(accountId))).toEqual(mine.filter((l) => l.book === "supplier_held"));
    }
  }

  test("every line, each account's pages and a month's lines are the books' expectations", async ({
    app,
    client: c,
  }) => {
    const want = await expected(c);
    // nine clears: three lines each, one self-dealt (its buyer and supplier lines on one account)
    expect(want.filter((l) => l.transactionKind === "clear")).toHaveLength(3 * made.length);
    await checkAll(app, c, want);
    // last month alone: [its first instant, this month's first instant), the boundary's later clear outside
    const month = await functionLines(c, "p_since => $1::timestamptz, p_until => $2::timestamptz", [LAST, THIS]);
    expect(month).toEqual(want.filter((l) => l.at >= LAST.getTime() && l.at < THIS.getTime()));
    expect(month.some((l) => l.at === THIS.getTime() - 1)).toBe(true);
    expect(want.some((l) => l.at === THIS.getTime())).toBe(true);
    expect((await c.query("SELECT * FROM svc_books_check()")).rows).toEqual([]);
  });

  test("once the oldest month is retired: its clear lines are its closing lines, the rest as before", async ({
    app,
    client: c,
  }) => {
    const run = await new RetentionService({
      sql: app.rt.sql,
      clock: app.rt.clock,
      months: 1,
      exportDir: EXPORT_DIR,
    }).run();
    expect(run.months.map((m) => [m.month, m.state])).toEqual([[OLDEST.toISOString().slice(0, 7), "dropped"]]);
    const want = await expected(c, [OLDEST]);
    const closings = want.filter((l) => l.kind === "closing");
    // the buyer's debits, the supplier's payable (its credits and its own debit on one account, each
    // book its line) and the platform's fee
    expect(
      closings
        .map((l) => `${l.accountId === null ? "platform" : l.accountId === buyer ? "buyer" : "supplier"} ${l.book}`)
        .sort(),
    ).toEqual([
      "buyer buyer_confirmed",
      "platform platform_fee",
      "supplier buyer_confirmed",
      "supplier supplier_held",
      "supplier supplier_payable",
    ]);
    await checkAll(app, c, want);
    await assertBooksBalance(app.rt.db);
    expect((await c.query("SELECT * FROM svc_books_check()")).rows).toEqual([]);
  });
});
