import { describe, expect } from "vitest";
import { createPrisma, type Db } from "../../../src/adapters/db.js";
import { appTest } from "../../../testkit/app-test.js";
import { assertBooksBalance } from "../../../testkit/books.js";
import { createAccount, createInferenceRequest, createOffer, createUpstreamKey } from "../../../testkit/fixtures.js";

/** a Prisma client of its own (30 connections) on the file's isolated database; no app runs */
const test = appTest.extend("db", { scope: "file" }, async ({ database }, { onCleanup }) => {
  const db = createPrisma(database.databaseUrl, { max: 30 });
  onCleanup(() => db.$disconnect());
  return db;
});

/** Writes one journal with the given entries in one transaction. */
async function journal(
  db: Db,
  entries: {
    book: "buyer_confirmed" | "buyer_pending" | "platform_fee" | "external";
    accountId?: string;
    amount: bigint;
  }[],
  key: string,
) {
  await db.$transaction(async (tx) => {
    const t = await tx.ledgerTransaction.create({ data: { kind: "top_up", idempotencyKey: key } });
    for (const e of entries) {
      await tx.ledgerEntry.create({
        data: {
          transactionId: t.id,
          accountId: e.accountId ?? null,
          book: e.book,
          kind: "top_up",
          amountMicroUsdc: e.amount,
        },
      });
    }
  });
}

describe("database invariants", () => {
  test("an unbalanced journal cannot commit; a balanced one can", async ({ db }) => {
    const a = await createAccount(db);
    await expect(journal(db, [{ book: "buyer_pending", accountId: a.id, amount: 5n }], "unbalanced")).rejects.toThrow(
      /unbalanced/,
    );
    expect(await db.ledgerTransaction.count({ where: { idempotencyKey: "unbalanced" } })).toBe(0);

    await db.$transaction(async (tx) => {
      const t = await tx.ledgerTransaction.create({ data: { kind: "top_up", idempotencyKey: "balanced" } });
      await tx.ledgerEntry.createMany({
        data: [
          { transactionId: t.id, accountId: a.id, book: "buyer_pending", kind: "top_up", amountMicroUsdc: 5n },
          { transactionId: t.id, book: "external", kind: "top_up", amountMicroUsdc: -5n },
        ],
      });
      await tx.account.update({ where: { id: a.id }, data: { pendingMicroUsdc: { increment: 5n } } });
    });
    await assertBooksBalance(db);
  });

  test("the ledger is append-only", async ({ db }) => {
    const e = await db.ledgerEntry.findFirstOrThrow();
    await expect(db.ledgerEntry.update({ where: { id: e.id }, data: { amountMicroUsdc: 6n } })).rejects.toThrow();
    await expect(db.ledgerEntry.delete({ where: { id: e.id } })).rejects.toThrow();
  });

  test("an idempotency key is used once", async ({ db }) => {
    await expect(
      db.ledgerTransaction.create({ data: { kind: "top_up", idempotencyKey: "balanced" } }),
    ).rejects.toThrow();
  });

  test("account entries need an account; platform entries must not have one", async ({ db }) => {
    const a = await createAccount(db);
    await expect(
      journal(
        db,
        [
          { book: "buyer_confirmed", amount: 1n },
          { book: "external", amount: -1n },
        ],
        "no-account",
      ),
    ).rejects.toThrow();
    await expect(
      journal(
        db,
        [
          { book: "platform_fee", accountId: a.id, amount: 1n },
          { book: "external", amount: -1n },
        ],
        "platform-with-account",
      ),
    ).rejects.toThrow();
  });

  test("balances cannot go negative and reserved cannot exceed confirmed", async ({ db }) => {
    const a = await createAccount(db);
    await expect(db.account.update({ where: { id: a.id }, data: { confirmedMicroUsdc: -1n } })).rejects.toThrow();
    await expect(db.account.update({ where: { id: a.id }, data: { pendingMicroUsdc: -1n } })).rejects.toThrow();
    await expect(db.account.update({ where: { id: a.id }, data: { reservedMicroUsdc: 1n } })).rejects.toThrow();
    await expect(db.account.update({ where: { id: a.id }, data: { maxPriceCentsPerDollar: 81 } })).rejects.toThrow();
    await expect(db.account.update({ where: { id: a.id }, data: { maxPriceCentsPerDollar: 29 } })).rejects.toThrow();
  });

  test("wallets are stored lower-case and unique", async ({ db }) => {
    await expect(createAccount(db, { walletAddress: "0xABCDEFabcdefABCDEFabcdefABCDEFabcdefABCD" })).rejects.toThrow();
    const a = await createAccount(db);
    await expect(createAccount(db, { walletAddress: a.walletAddress })).rejects.toThrow();
  });

  test("offer bounds: price 1-80, quantity > 0, remaining within quantity", async ({ db }) => {
    const a = await createAccount(db);
    const k = await createUpstreamKey(db, a.id);
    await expect(
      createOffer(db, { accountId: a.id, upstreamKeyId: k.id, priceCentsPerDollar: 81, quantityMicroDiem: 1n }),
    ).rejects.toThrow();
    await expect(
      createOffer(db, { accountId: a.id, upstreamKeyId: k.id, priceCentsPerDollar: 0, quantityMicroDiem: 1n }),
    ).rejects.toThrow();
    await expect(
      createOffer(db, { accountId: a.id, upstreamKeyId: k.id, priceCentsPerDollar: 50, quantityMicroDiem: 0n }),
    ).rejects.toThrow();
    const o = await createOffer(db, {
      accountId: a.id,
      upstreamKeyId: k.id,
      priceCentsPerDollar: 50,
      quantityMicroDiem: 10n,
    });
    await expect(db.offer.update({ where: { id: o.id }, data: { remainingMicroDiem: 11n } })).rejects.toThrow();
    await expect(db.offer.update({ where: { id: o.id }, data: { reservedMicroDiem: 11n } })).rejects.toThrow();
  });

  test("one live offer per upstream key, even under 20 concurrent posts", async ({ db }) => {
    const a = await createAccount(db);
    const k = await createUpstreamKey(db, a.id);
    const results = await Promise.allSettled(
      Array.from({ length: 20 }, (_, i) =>
        createOffer(db, {
          accountId: a.id,
          upstreamKeyId: k.id,
          priceCentsPerDollar: 40 + (i % 10),
          quantityMicroDiem: 1_000_000n,
          status: i % 2 ? "paused" : "active",
        }),
      ),
    );
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(1);
    // a cancelled offer frees the slot
    const live = await db.offer.findFirstOrThrow({ where: { upstreamKeyId: k.id } });
    await db.offer.update({ where: { id: live.id }, data: { status: "cancelled", endedAt: new Date() } });
    await expect(
      createOffer(db, { accountId: a.id, upstreamKeyId: k.id, priceCentsPerDollar: 50, quantityMicroDiem: 1n }),
    ).resolves.toBeTruthy();
  });

  test("a clear's split must add up and stay within the ceiling", async ({ db }) => {
    const buyer = await createAccount(db);
    const supplier = await createAccount(db);
    const k = await createUpstreamKey(db, supplier.id);
    const o = await createOffer(db, {
      accountId: supplier.id,
      upstreamKeyId: k.id,
      priceCentsPerDollar: 50,
      quantityMicroDiem: 10_000_000n,
    });
    const req = await createInferenceRequest(db, buyer.id);
    const base = {
      requestId: req.id,
      buyerAccountId: buyer.id,
      supplierAccountId: supplier.id,
      offerId: o.id,
      upstreamKeyId: k.id,
      model: "m",
      modality: "text" as const,
      priceCentsPerDollar: 50,
      ceilingCents: 80,
      burnMicroDiem: 100n,
    };
    await expect(
      db.clear.create({ data: { ...base, grossMicroUsdc: 50n, feeMicroUsdc: 5n, supplierMicroUsdc: 44n } }),
    ).rejects.toThrow();
    await expect(
      db.clear.create({
        data: { ...base, ceilingCents: 40, grossMicroUsdc: 50n, feeMicroUsdc: 5n, supplierMicroUsdc: 45n },
      }),
    ).rejects.toThrow();
    await expect(
      db.clear.create({ data: { ...base, grossMicroUsdc: 50n, feeMicroUsdc: 5n, supplierMicroUsdc: 45n } }),
    ).resolves.toBeTruthy();
    // one clear per request: the ending writes a request's record and its clear in one statement, so
    // a second ending of the request collides on the record's key (its id and start; clears are
    // partitioned by month and no longer carry a unique index on request_id)
    await expect(createInferenceRequest(db, buyer.id, { id: req.id, startedAt: req.startedAt })).rejects.toThrow(
      /inference_requests_pkey|Unique constraint/,
    );
  });

  test("payments are unique by (payer, authorization nonce) and by settlement transaction", async ({ db }) => {
    const a = await createAccount(db);
    const nonce = `0x${"1".repeat(64)}`;
    const tx = `0x${"2".repeat(64)}`;
    const p = {
      accountId: a.id,
      kind: "top_up" as const,
      status: "pending" as const,
      payerAddress: a.walletAddress,
      payToAddress: a.walletAddress,
      assetAddress: a.walletAddress,
      amountMicroUsdc: 1_000_000n,
    };
    await db.payment.create({ data: { ...p, authorizationNonce: nonce, settlementTxHash: tx } });
    await expect(
      db.payment.create({ data: { ...p, authorizationNonce: nonce, settlementTxHash: `0x${"3".repeat(64)}` } }),
    ).rejects.toThrow();
    // EIP-3009 nonces are the authorizer's: another payer may sign the same one
    const b = await createAccount(db);
    await db.payment.create({
      data: {
        ...p,
        accountId: b.id,
        payerAddress: b.walletAddress,
        authorizationNonce: nonce,
        settlementTxHash: `0x${"6".repeat(64)}`,
      },
    });
    await expect(
      db.payment.create({ data: { ...p, authorizationNonce: `0x${"4".repeat(64)}`, settlementTxHash: tx } }),
    ).rejects.toThrow();
    // a credited payment needs its settlement transaction
    await expect(db.payment.create({ data: { ...p, authorizationNonce: `0x${"5".repeat(64)}` } })).rejects.toThrow();
  });

  test("API key names are 1-64 characters and key hashes are unique", async ({ db }) => {
    const a = await createAccount(db);
    const k = { accountId: a.id, keyPrefix: "svc_abc", source: "session" as const };
    await expect(db.apiKey.create({ data: { ...k, name: "", keyHash: "h1" } })).rejects.toThrow();
    await expect(db.apiKey.create({ data: { ...k, name: "x".repeat(65), keyHash: "h2" } })).rejects.toThrow();
    await db.apiKey.create({ data: { ...k, name: "ok", keyHash: "h3" } });
    await expect(db.apiKey.create({ data: { ...k, name: "dup", keyHash: "h3" } })).rejects.toThrow();
  });

  test("a COMMIT that fails returns its connection to the pool (no leak)", async ({ database }) => {
    const small = createPrisma(database.databaseUrl, { max: 2 });
    try {
      const a = await small.account.create({ data: { walletAddress: `0x${"c".repeat(40)}`, authProvider: "siwe" } });
      for (let i = 0; i < 6; i++) {
        const failed = small.$transaction(async (tx) => {
          const t = await tx.ledgerTransaction.create({ data: { kind: "top_up", idempotencyKey: `leak-${i}` } });
          await tx.ledgerEntry.create({
            data: { transactionId: t.id, accountId: a.id, book: "buyer_pending", kind: "top_up", amountMicroUsdc: 1n },
          });
        });
        await expect(failed).rejects.toThrow(/unbalanced/);
      }
      // with a pool of 2, a leak would hang here
      await expect(small.account.count()).resolves.toBeGreaterThan(0);
    } finally {
      await small.$disconnect();
    }
  });

  test("the hot-path pool survives the server dropping its idle connections", async ({ db, database }) => {
    const { createSql } = await import("../../../src/adapters/sql.js");
    const sql = createSql(database.databaseUrl, 2);
    try {
      const pid = (await sql.query<{ pid: number }>("SELECT pg_backend_pid() AS pid")).rows[0]?.pid;
      await db.$executeRawUnsafe(`SELECT pg_terminate_backend(${Number(pid)})`);
      await new Promise((r) => setTimeout(r, 200));
      const again = await sql.query<{ one: number }>("SELECT 1 AS one");
      expect(again.rows[0]?.one).toBe(1);
    } finally {
      await sql.end();
    }
  });
});
