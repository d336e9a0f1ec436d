import { describe, expect } from "vitest";
import type { Db } from "../../../src/adapters/db.js";
import { accountLedgerLines } from "../../../src/domain/ledger/ledger-lines.js";
import { formatDecimal6 } from "../../../src/lib/money.js";
import { call, type SignedInUser, signIn } from "../../../testkit/actors.js";
import { appTest as test } from "../../../testkit/app-test.js";
import { assertBooksBalance } from "../../../testkit/books.js";
import type { TestApp } from "../../../testkit/harness.js";
import { chat, emptyBook, endedRequest, fundedBuyerKey } from "../../../testkit/market.js";
import { as, postOffer, registerKey, simKey } from "../../../testkit/supply.js";

/**
 * View `ledger_lines` (migration 20261202000000_clear_transfers, docs/decisions.md "Clears are
 * transfers"): a clear writes no journal; its three lines derive from it, and every reader of the
 * ledger (GET /v1/account, GET /v1/supply/ledger, GraphQL `Account.ledger`) shows them. The clear
 * itself is append-only in what it says about money.
 */
test.override("appOptions", { sim: {}, syncCatalog: true });

const MODEL = "zai-org-glm-5-1";

interface Line {
  id: string;
  kind: string;
  book?: string;
  amountUsdc: string;
  transactionId: string;
  transactionKind: string;
  createdAt: string;
}

/** A supplier signed in, with a simulator key registered and an offer on it: the only live one. */
async function newSupplier(app: TestApp, sim: Parameters<typeof simKey>[0]): Promise<SignedInUser> {
  await emptyBook(app);
  const supplier = await signIn(app);
  const key = await registerKey(app, supplier, simKey(sim));
  await postOffer(app, supplier, key.id, 50, "50.000000");
  return supplier;
}

/** A paid buffered chat: its cost (X-Svc-Cost-Usdc) and its clear. */
async function paidChat(app: TestApp, apiKey: string) {
  const r = await chat(app, apiKey, { model: MODEL, messages: [{ role: "user", content: "hi [[sim:tokens=20]]" }] });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  const cost = r.headers.get("x-svc-cost-usdc") ?? "";
  const request = await endedRequest(app, r.headers.get("x-svc-support-reference") ?? "");
  const clear = await app.rt.db.clear.findFirstOrThrow({ where: { requestId: request.id } });
  return { cost, clear };
}

async function recentLedger(app: TestApp, user: SignedInUser): Promise<Line[]> {
  const r = await call(app, { method: "GET", path: "/v1/account", headers: as(user) });
  expect(r.status).toBe(200);
  return (r.body as { recentLedger: Line[] }).recentLedger;
}

async function supplierLedger(app: TestApp, user: SignedInUser, query = "") {
  const r = await call(app, { method: "GET", path: `/v1/supply/ledger${query}`, headers: as(user) });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body as { data: Line[]; nextCursor: string | null };
}

interface GqlLine {
  id: string;
  kind: string;
  book: string;
  amount: string;
  transactionId: string;
  createdAt: string;
}
interface GqlPage {
  edges: { cursor: string; node: GqlLine }[];
  pageInfo: { hasNextPage: boolean; hasPreviousPage: boolean; endCursor: string | null; startCursor: string | null };
}

async function gqlLedger(app: TestApp, user: SignedInUser, args: string): Promise<GqlPage> {
  const query = `{ viewer { ledger(${args}) { edges { cursor node { id kind book amount transactionId createdAt } }
    pageInfo { hasNextPage hasPreviousPage startCursor endCursor } } } }`;
  const r = await call(app, { method: "POST", path: "/graphql", headers: as(user), body: { query } });
  const body = r.body as { data?: { viewer: { ledger: GqlPage } }; errors?: unknown };
  expect(body.errors, JSON.stringify(body.errors)).toBeUndefined();
  return (body.data as { viewer: { ledger: GqlPage } }).viewer.ledger;
}

/** Every line of the account as the view has it, newest first. */
async function viewLines(db: Db, accountId: string) {
  return db.$queryRaw<
    {
      id: string;
      transactionId: string;
      transactionKind: string;
      book: string;
      kind: string;
      amount: bigint;
      createdAt: Date;
    }[]
  >`SELECT id::text AS id, transaction_id::text AS "transactionId", transaction_kind::text AS "transactionKind",
           book::text AS book, kind::text AS kind, amount_micro_usdc AS amount, created_at AS "createdAt"
      FROM ledger_lines() WHERE account_id = ${accountId}::uuid ORDER BY created_at DESC, id DESC`;
}

describe("the lines a clear implies", () => {
  test("a paid chat: the buyer's debit, the supplier's credit, a balanced clear, stable ids", async ({ app, sim }) => {
    const supplier = await newSupplier(app, sim);
    const buyer = await fundedBuyerKey(app, 10_000_000n);
    const { cost, clear } = await paidChat(app, buyer.apiKey);
    expect(cost).toBe(formatDecimal6(clear.grossMicroUsdc));
    expect(clear.grossMicroUsdc).toBeGreaterThan(0n);
    expect(clear.feeMicroUsdc).toBeGreaterThan(0n);

    // no journal was written for it
    expect(await app.rt.db.ledgerTransaction.count({ where: { clearId: clear.id } })).toBe(0);

    const first = await recentLedger(app, buyer.user);
    expect(first[0]).toEqual({
      id: expect.any(String),
      kind: "buyer_debit",
      book: "buyer_confirmed",
      amountUsdc: `-${cost}`,
      transactionId: clear.id,
      transactionKind: "clear",
      createdAt: clear.createdAt.toISOString(),
    });
    // the funding's lines follow it
    expect(
      first
        .slice(1)
        .map((l) => `${l.transactionKind} ${l.book}`)
        .sort(),
    ).toEqual(["confirmation buyer_confirmed", "confirmation buyer_pending", "top_up buyer_pending"]);

    const earned = await supplierLedger(app, supplier);
    expect(earned.data).toEqual([
      {
        id: expect.any(String),
        book: "supplier_payable",
        kind: "supplier_credit",
        amountUsdc: formatDecimal6(clear.supplierMicroUsdc),
        transactionId: clear.id,
        transactionKind: "clear",
        createdAt: clear.createdAt.toISOString(),
      },
    ]);

    // GraphQL shows the same line, with the same id
    const g = await gqlLedger(app, buyer.user, "first: 1");
    expect(g.edges[0]?.node).toEqual({
      id: first[0]?.id,
      kind: "buyer_debit",
      book: "buyer_confirmed",
      amount: String(-clear.grossMicroUsdc), // the MicroUsdc scalar: micro-USDC
      transactionId: clear.id,
      createdAt: clear.createdAt.toISOString(),
    });

    // the clear's lines: three (buyer, supplier, platform), summing to zero
    const lines = await app.rt.db.$queryRaw<{ id: string; account: string | null; book: string; amount: bigint }[]>`
      SELECT id::text AS id, account_id::text AS account, book::text AS book, amount_micro_usdc AS amount
        FROM ledger_lines() WHERE transaction_id = ${clear.id}::uuid ORDER BY book`;
    expect(lines.map((l) => [l.book, l.account, l.amount])).toEqual([
      ["buyer_confirmed", buyer.accountId, -clear.grossMicroUsdc],
      ["platform_fee", null, clear.feeMicroUsdc],
      ["supplier_payable", supplier.accountId, clear.supplierMicroUsdc],
    ]);
    expect(lines.reduce((s, l) => s + BigInt(l.amount), 0n)).toBe(0n);
    expect(lines.map((l) => l.id)).toContain(first[0]?.id);
    expect(lines.map((l) => l.id)).toContain(earned.data[0]?.id);

    // read again: the same ids
    expect(await recentLedger(app, buyer.user)).toEqual(first);
    expect((await supplierLedger(app, supplier)).data).toEqual(earned.data);
    await assertBooksBalance(app.rt.db);
  });

  test("keyset pages over several chats return every line once, in order", async ({ app, sim }) => {
    const supplier = await newSupplier(app, sim);
    const buyer = await fundedBuyerKey(app, 10_000_000n);
    for (let i = 0; i < 5; i++) await paidChat(app, buyer.apiKey);
    const db = app.rt.db;
    const buyerAll = await viewLines(db, buyer.accountId);
    const supplierAll = await viewLines(db, supplier.accountId);
    expect(buyerAll).toHaveLength(3 + 5); // the funding's three lines, five debits
    expect(supplierAll).toHaveLength(5);
    // the funding's lines share one time (one transaction): pages of two cut through the tie,
    // which the id orders
    expect(new Set(buyerAll.map((l) => l.createdAt.getTime())).size).toBeLessThan(buyerAll.length);

    // REST: the supplier's ledger, two at a time
    const rest: Line[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const page = await supplierLedger(app, supplier, `?limit=2${cursor ? `&cursor=${cursor}` : ""}`);
      expect(page.data.length).toBeLessThanOrEqual(2);
      rest.push(...page.data);
      cursor = page.nextCursor;
      pages++;
    } while (cursor);
    expect(pages).toBe(3);
    expect(rest.map((l) => l.id)).toEqual(supplierAll.map((l) => l.id));

    // GraphQL forward: first 2 after each end cursor
    const forward: GqlLine[] = [];
    let after: string | null = null;
    for (;;) {
      const page = await gqlLedger(app, buyer.user, `first: 2${after ? `, after: "${after}"` : ""}`);
      forward.push(...page.edges.map((e) => e.node));
      if (!page.pageInfo.hasNextPage) break;
      after = page.pageInfo.endCursor;
    }
    expect(forward.map((l) => l.id)).toEqual(buyerAll.map((l) => l.id));
    expect(forward.map((l) => l.amount)).toEqual(buyerAll.map((l) => String(l.amount)));

    // GraphQL backward: last 2 before each start cursor, from the oldest line's end
    const last = await gqlLedger(app, buyer.user, "last: 2");
    const backward: GqlLine[] = last.edges.map((e) => e.node);
    let before = last.pageInfo.startCursor;
    let more = last.pageInfo.hasPreviousPage;
    while (more) {
      const page = await gqlLedger(app, buyer.user, `last: 2, before: "${before}"`);
      backward.unshift(...page.edges.map((e) => e.node));
      before = page.pageInfo.startCursor;
      more = page.pageInfo.hasPreviousPage;
    }
    expect(backward.map((l) => l.id)).toEqual(buyerAll.map((l) => l.id));

    // the domain reader says what the view says, for each book too
    for (const accountId of [buyer.accountId, supplier.accountId]) {
      const all = await viewLines(db, accountId);
      const read = await accountLedgerLines(db, { accountId, now: new Date(), limit: 100 });
      expect(read.map((l) => [l.id, l.transactionId, l.transactionKind, l.book, l.kind, l.amountMicroUsdc])).toEqual(
        all.map((l) => [l.id, l.transactionId, l.transactionKind, l.book, l.kind, BigInt(l.amount)]),
      );
      for (const book of ["buyer_confirmed", "buyer_pending", "supplier_payable"] as const) {
        const inBook = await accountLedgerLines(db, { accountId, now: new Date(), book, limit: 100 });
        expect(inBook.map((l) => l.id)).toEqual(all.filter((l) => l.book === book).map((l) => l.id));
      }
      const oldest = await accountLedgerLines(db, { accountId, now: new Date(), limit: 100, oldestFirst: true });
      expect(oldest.map((l) => l.id)).toEqual(all.map((l) => l.id).reverse());
    }
    await assertBooksBalance(db);
  });
});

describe("a clear is a ledger record", () => {
  test("its money is append-only, its refund mark is not; no clear journal can be written", async ({ app, sim }) => {
    await newSupplier(app, sim);
    const buyer = await fundedBuyerKey(app, 10_000_000n);
    const { clear } = await paidChat(app, buyer.apiKey);
    const db = app.rt.db;
    await expect(
      db.$executeRaw`UPDATE clears SET gross_micro_usdc = gross_micro_usdc + 1, fee_micro_usdc = fee_micro_usdc + 1
                      WHERE id = ${clear.id}::uuid`,
    ).rejects.toThrow(/the ledger is append-only \(clears\)/);
    await expect(db.$executeRaw`DELETE FROM clears WHERE id = ${clear.id}::uuid`).rejects.toThrow(
      /the ledger is append-only \(clears\)/,
    );
    expect(await db.clear.findFirstOrThrow({ where: { id: clear.id } })).toEqual(clear);

    // refunded_at may change (a refund writes its own journal beside it)
    const at = new Date("2026-11-26T00:00:00.000Z");
    await db.clear.updateMany({ where: { id: clear.id }, data: { refundedAt: at } });
    expect((await db.clear.findFirstOrThrow({ where: { id: clear.id } })).refundedAt).toEqual(at);
    await db.clear.updateMany({ where: { id: clear.id }, data: { refundedAt: null } });

    await expect(
      db.ledgerTransaction.create({ data: { kind: "clear", clearId: clear.id, idempotencyKey: `clear:${clear.id}` } }),
    ).rejects.toThrow(/ledger_transactions_no_clear_journal/);
    await assertBooksBalance(db);
  });
});
