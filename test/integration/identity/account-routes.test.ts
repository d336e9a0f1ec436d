import { randomUUID } from "node:crypto";
import { describe, expect } from "vitest";
import { call, type SignedInUser, signIn } from "../../../testkit/actors.js";
import { appTest as test } from "../../../testkit/app-test.js";
import { expectError } from "../../../testkit/errors.js";
import { createAccount, createInferenceRequest, createOffer, createUpstreamKey } from "../../../testkit/fixtures.js";
import type { TestApp } from "../../../testkit/harness.js";
import { maxPriceOf } from "../../../testkit/identity.js";
import { MARKET_ADD_IDS } from "../../../testkit/market-totals.js";

/** SPEC "Account (session)": /v1/me, /v1/account, max price, inference history, savings. */

const get = (app: TestApp, user: SignedInUser, path: string) =>
  call(app, { method: "GET", path, headers: { cookie: user.cookie } });
const patchMax = (app: TestApp, user: SignedInUser, body: unknown) =>
  call(app, { method: "PATCH", path: "/v1/account/max-price", body, headers: { cookie: user.cookie } });

interface HistoryPage {
  data: { requestId: string; supportReference: string; timings: { startedAt: string } }[];
  nextCursor: string | null;
}

describe("success: identity and summary", () => {
  test("GET /v1/me returns exactly accountId, walletAddress, authProvider", async ({ app }) => {
    const user = await signIn(app);
    const r = await get(app, user, "/v1/me");
    expect(r.status).toBe(200);
    expect(r.body).toEqual({
      accountId: user.accountId,
      walletAddress: user.walletAddress.toLowerCase(),
      authProvider: "idp",
    });
    expect((r.body as { walletAddress: string }).walletAddress).toMatch(/^0x[0-9a-f]{40}$/);
  });

  test("GET /v1/account of a new account: zero balances as six-decimal strings, ceiling 80, never funded", async ({
    app,
  }) => {
    const user = await signIn(app);
    const r = await get(app, user, "/v1/account");
    expect(r.status).toBe(200);
    const body = r.body as Record<string, unknown>;
    expect(body).toEqual({
      accountId: user.accountId,
      walletAddress: user.walletAddress.toLowerCase(),
      authProvider: "idp",
      maxPriceCentsPerDollar: 80,
      confirmedUsdc: "0.000000",
      pendingUsdc: "0.000000",
      reservedUsdc: "0.000000",
      availableUsdc: "0.000000",
      supplierPayableUsdc: "0.000000",
      hasEverFunded: false,
      firstFundedAt: null,
      createdAt: expect.any(String),
      recentLedger: [],
    });
    expect(Number.isNaN(Date.parse(body.createdAt as string))).toBe(false);
  });

  test("GET /v1/account renders balances and the account's own ledger lines (never another account's)", async ({
    app,
  }) => {
    const user = await signIn(app);
    const other = await signIn(app);
    const fundedAt = new Date("2026-01-02T03:04:05.678Z");
    const journal = async (accountId: string, amount: bigint, key: string) =>
      app.rt.db.ledgerTransaction.create({
        data: {
          kind: "top_up",
          idempotencyKey: key,
          entries: {
            create: [
              { accountId, book: "buyer_pending", kind: "top_up", amountMicroUsdc: amount },
              { accountId: null, book: "external", kind: "top_up", amountMicroUsdc: -amount },
            ],
          },
        },
      });
    const tx = await journal(user.accountId, 2_500_001n, `test:${randomUUID()}`);
    await journal(other.accountId, 7_000_000n, `test:${randomUUID()}`);
    await app.rt.db.account.update({
      where: { id: user.accountId },
      data: {
        pendingMicroUsdc: 2_500_001n,
        confirmedMicroUsdc: 12_345_678n,
        reservedMicroUsdc: 345_678n,
        hasEverFunded: true,
        firstFundedAt: fundedAt,
      },
    });
    const r = await get(app, user, "/v1/account");
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({
      confirmedUsdc: "12.345678",
      pendingUsdc: "2.500001",
      reservedUsdc: "0.345678",
      availableUsdc: "12.000000",
      hasEverFunded: true,
      firstFundedAt: "2026-01-02T03:04:05.678Z",
    });
    const ledger = (r.body as { recentLedger: Record<string, unknown>[] }).recentLedger;
    expect(ledger).toEqual([
      {
        id: expect.any(String),
        kind: "top_up",
        book: "buyer_pending",
        amountUsdc: "2.500001",
        transactionId: tx.id,
        transactionKind: "top_up",
        createdAt: expect.any(String),
      },
    ]);
  });
});

describe("max price", () => {
  test("PATCH 30 and 80 → 200 {walletAddress, maxPriceCentsPerDollar}, persisted", async ({ app }) => {
    const user = await signIn(app);
    for (const v of [30, 80, 55]) {
      const r = await patchMax(app, user, { maxPriceCentsPerDollar: v });
      expect(r.status).toBe(200);
      expect(r.body).toEqual({ walletAddress: user.walletAddress.toLowerCase(), maxPriceCentsPerDollar: v });
      expect(await maxPriceOf(app, user.accountId)).toBe(v);
      expect((await get(app, user, "/v1/account")).body).toMatchObject({ maxPriceCentsPerDollar: v });
    }
  });

  test.for([
    ["29", { maxPriceCentsPerDollar: 29 }],
    ["81", { maxPriceCentsPerDollar: 81 }],
    ["50.5", { maxPriceCentsPerDollar: 50.5 }],
    ['"50"', { maxPriceCentsPerDollar: "50" }],
    ["missing", {}],
    ["null", { maxPriceCentsPerDollar: null }],
    ["0", { maxPriceCentsPerDollar: 0 }],
    ["-40", { maxPriceCentsPerDollar: -40 }],
    ["true", { maxPriceCentsPerDollar: true }],
    ["[50]", { maxPriceCentsPerDollar: [50] }],
    ["1e3", { maxPriceCentsPerDollar: 1e3 }],
  ] as const)("PATCH %s → 400 invalid_request, value unchanged (not clamped)", async ([_label, body], { app }) => {
    const user = await signIn(app);
    expect((await patchMax(app, user, { maxPriceCentsPerDollar: 47 })).status).toBe(200);
    const r = await patchMax(app, user, body);
    expectError(r, 400, "invalid_request");
    expect((r.body as { error: { field?: string } }).error.field).toBe("maxPriceCentsPerDollar");
    expect(await maxPriceOf(app, user.accountId)).toBe(47);
    expect((await get(app, user, "/v1/account")).body).toMatchObject({ maxPriceCentsPerDollar: 47 });
  });

  test("PATCH with a non-object or malformed body → 400, value unchanged", async ({ app }) => {
    const user = await signIn(app);
    for (const raw of ["[]", '"x"', "42", '{"maxPriceCentsPerDollar":']) {
      const res = await fetch(`${app.baseUrl}/v1/account/max-price`, {
        method: "PATCH",
        headers: { "content-type": "application/json", cookie: user.cookie },
        body: raw,
      });
      expect(res.status, raw).toBe(400);
      expect(res.headers.get("x-svc-error-code")).toBe("invalid_request");
    }
    expect(await maxPriceOf(app, user.accountId)).toBe(80);
  });

  test("PATCH changes only the caller's account", async ({ app }) => {
    const user = await signIn(app);
    const other = await signIn(app);
    expect((await patchMax(app, user, { maxPriceCentsPerDollar: 33 })).status).toBe(200);
    expect(await maxPriceOf(app, other.accountId)).toBe(80);
  });
});

describe("inference history", () => {
  let user: SignedInUser;
  let mine: { id: string; startedAt: Date }[];
  let others: Set<string>;

  test.beforeAll(async ({ app }) => {
    user = await signIn(app);
    const stranger = await signIn(app);
    const t0 = Date.parse("2026-03-01T00:00:00.000Z");
    mine = [];
    others = new Set();
    for (let i = 0; i < 25; i++) {
      const startedAt = new Date(t0 + i * 60_000);
      const r = await createInferenceRequest(app.rt.db, user.accountId, { startedAt, model: `m-${i}` });
      mine.push({ id: r.id, startedAt });
      // the stranger's rows interleave in time with the user's
      const s = await createInferenceRequest(app.rt.db, stranger.accountId, {
        startedAt: new Date(t0 + i * 60_000 + 30_000),
      });
      others.add(s.id);
    }
  });

  test("limit=10 pages 10, 10, 5 newest first, nextCursor null at the end, no duplicates, only own rows", async ({
    app,
  }) => {
    const pages: HistoryPage[] = [];
    let cursor: string | null = null;
    for (let i = 0; i < 5; i++) {
      const q: string = cursor ? `?limit=10&cursor=${encodeURIComponent(cursor)}` : "?limit=10";
      const r = await get(app, user, `/v1/account/inference-history${q}`);
      expect(r.status).toBe(200);
      const page = r.body as HistoryPage;
      pages.push(page);
      cursor = page.nextCursor;
      if (!cursor) break;
    }
    expect(pages.map((p) => p.data.length)).toEqual([10, 10, 5]);
    expect(pages[0]?.nextCursor).toEqual(expect.any(String));
    expect(pages[1]?.nextCursor).toEqual(expect.any(String));
    expect(pages[2]?.nextCursor).toBeNull();

    const ids = pages.flatMap((p) => p.data.map((d) => d.requestId));
    expect(new Set(ids).size).toBe(25);
    for (const id of ids) expect(others.has(id)).toBe(false);
    const expected = [...mine].sort((a, b) => b.startedAt.getTime() - a.startedAt.getTime()).map((m) => m.id);
    expect(ids).toEqual(expected);
    const times = pages.flatMap((p) => p.data.map((d) => Date.parse(d.timings.startedAt)));
    for (let i = 1; i < times.length; i++) expect(times[i]).toBeLessThan(times[i - 1] as number);
  });

  test("a row looks like a buyer history row", async ({ app }) => {
    const r = await get(app, user, "/v1/account/inference-history?limit=1");
    const row = (r.body as HistoryPage).data[0] as unknown as Record<string, unknown>;
    expect(row).toEqual({
      requestId: mine[24]?.id,
      supportReference: expect.stringMatching(/^[0-9a-f-]{36}$/),
      keyId: null,
      keyName: null,
      route: "chat",
      modality: "text",
      model: "m-24",
      stream: false,
      status: "in_progress",
      errorCode: null,
      maxPriceCents: 80,
      clearingPriceCents: null,
      costUsdc: null,
      burnDiem: null,
      usage: { promptTokens: null, completionTokens: null, cachedTokens: null, cacheWriteTokens: null },
      attempts: 0,
      timings: { startedAt: mine[24]?.startedAt.toISOString(), firstByteAt: null, completedAt: null, durationMs: null },
    });
  });

  test("default page size is 20", async ({ app }) => {
    const r = await get(app, user, "/v1/account/inference-history");
    expect(r.status).toBe(200);
    expect((r.body as HistoryPage).data).toHaveLength(20);
    expect((r.body as HistoryPage).nextCursor).toEqual(expect.any(String));
  });

  test("exactly one full page leaves no empty trailing page", async ({ app }) => {
    const r = await get(app, user, "/v1/account/inference-history?limit=25");
    expect((r.body as HistoryPage).data).toHaveLength(25);
    expect((r.body as HistoryPage).nextCursor).toBeNull();
  });

  test("rows sharing one startedAt page without duplicates or gaps (id tiebreak)", async ({ app }) => {
    const tied = await signIn(app);
    const at = new Date("2026-04-01T12:00:00.000Z");
    const inserted = new Set<string>();
    for (let i = 0; i < 5; i++)
      inserted.add((await createInferenceRequest(app.rt.db, tied.accountId, { startedAt: at })).id);
    const seen: string[] = [];
    let cursor: string | null = null;
    for (let i = 0; i < 10; i++) {
      const q: string = cursor ? `?limit=2&cursor=${encodeURIComponent(cursor)}` : "?limit=2";
      const page = (await get(app, tied, `/v1/account/inference-history${q}`)).body as HistoryPage;
      seen.push(...page.data.map((d) => d.requestId));
      cursor = page.nextCursor;
      if (!cursor) break;
    }
    expect(seen).toHaveLength(5);
    expect(new Set(seen)).toEqual(inserted);
  });

  test("a new account's history is empty", async ({ app }) => {
    const fresh = await signIn(app);
    const r = await get(app, fresh, "/v1/account/inference-history");
    expect(r.body).toEqual({ data: [], nextCursor: null });
  });

  test.for([
    ["limit=0"],
    ["limit=101"],
    ["limit=abc"],
    ["limit=-1"],
    ["limit=10.5"],
    ["limit=10&limit=20"],
    ["cursor=garbage"],
    ["cursor=%21%21%21"],
    [`cursor=${Buffer.from("2026-03-01T00:00:00.000Z|not-a-uuid").toString("base64url")}`],
    [`cursor=${"A".repeat(201)}`],
  ] as const)("?%s → 400 invalid_request", async ([q], { app }) => {
    expectError(await get(app, user, `/v1/account/inference-history?${q}`), 400, "invalid_request", q);
  });

  // regression: fixed bug in src/lib/cursor.ts
  test.for([
    ["id of 36 dashes", `2026-03-01T00:00:00.000Z|${"-".repeat(36)}`],
    ["id of 36 hex digits without dashes", `2026-03-01T00:00:00.000Z|${"f".repeat(36)}`],
    ["year 0000", "0000-01-01T00:00:00.000Z|00000000-0000-0000-0000-000000000000"],
  ] as const)("a well-formed but bogus cursor (%s) → 400, never 500", async ([_label, raw], { app }) => {
    const cursor = Buffer.from(raw).toString("base64url");
    expectError(await get(app, user, `/v1/account/inference-history?cursor=${cursor}`), 400, "invalid_request");
  });

  test("limit=1 and limit=100 are accepted", async ({ app }) => {
    expect(((await get(app, user, "/v1/account/inference-history?limit=1")).body as HistoryPage).data).toHaveLength(1);
    expect(((await get(app, user, "/v1/account/inference-history?limit=100")).body as HistoryPage).data).toHaveLength(
      25,
    );
  });
});

describe("savings", () => {
  test("a new account has zero savings", async ({ app }) => {
    const user = await signIn(app);
    const r = await get(app, user, "/v1/account/savings");
    expect(r.status).toBe(200);
    expect(r.body).toEqual({
      clears: 0,
      faceValueUsdc: "0.000000",
      atCeilingUsdc: "0.000000",
      paidUsdc: "0.000000",
      savedVsFaceUsdc: "0.000000",
      savedVsCeilingUsdc: "0.000000",
    });
  });

  test("savings vs face and vs ceiling over the account's clears (refunds and other buyers excluded)", async ({
    app,
  }) => {
    const user = await signIn(app);
    const stranger = await signIn(app);
    const supplier = await createAccount(app.rt.db);
    const upstreamKey = await createUpstreamKey(app.rt.db, supplier.id);
    const offer = await createOffer(app.rt.db, {
      accountId: supplier.id,
      upstreamKeyId: upstreamKey.id,
      priceCentsPerDollar: 30,
      quantityMicroDiem: 100_000_000n,
    });
    const clear = async (
      buyerAccountId: string,
      c: { burn: bigint; price: number; ceiling: number; gross: bigint; fee: bigint; refunded?: boolean },
    ) => {
      const req = await createInferenceRequest(app.rt.db, buyerAccountId, { status: "succeeded" });
      const made = await app.rt.db.clear.create({
        data: {
          requestId: req.id,
          buyerAccountId,
          supplierAccountId: supplier.id,
          offerId: offer.id,
          upstreamKeyId: upstreamKey.id,
          model: "llama-3.3-70b",
          modality: "text",
          priceCentsPerDollar: c.price,
          ceilingCents: c.ceiling,
          burnMicroDiem: c.burn,
          grossMicroUsdc: c.gross,
          feeMicroUsdc: c.fee,
          supplierMicroUsdc: c.gross - c.fee,
          refundedAt: c.refunded ? new Date() : null,
        },
      });
      await app.rt.db.$executeRawUnsafe(MARKET_ADD_IDS, [made.id]);
    };
    // clear 1: burn 1.234567 at 45¢, ceiling 80: gross floor(1234567×45/100) = 555555
    await clear(user.accountId, { burn: 1_234_567n, price: 45, ceiling: 80, gross: 555_555n, fee: 55_555n });
    // clear 2: burn 2.000001 at 30¢, ceiling 50: gross floor(2000001×30/100) = 600000
    await clear(user.accountId, { burn: 2_000_001n, price: 30, ceiling: 50, gross: 600_000n, fee: 60_000n });
    // refunded: excluded
    await clear(user.accountId, {
      burn: 9_000_000n,
      price: 40,
      ceiling: 80,
      gross: 3_600_000n,
      fee: 360_000n,
      refunded: true,
    });
    // another buyer: excluded
    await clear(stranger.accountId, { burn: 5_000_000n, price: 40, ceiling: 60, gross: 2_000_000n, fee: 200_000n });

    // face = 1234567 + 2000001 = 3234568
    // atCeiling = floor(1234567×80/100) + floor(2000001×50/100) = 987653 + 1000000 = 1987653
    // paid = 555555 + 600000 = 1155555
    // savedVsFace = 3234568 − 1155555 = 2079013; savedVsCeiling = 1987653 − 1155555 = 832098
    const r = await get(app, user, "/v1/account/savings");
    expect(r.status).toBe(200);
    expect(r.body).toEqual({
      clears: 2,
      faceValueUsdc: "3.234568",
      atCeilingUsdc: "1.987653",
      paidUsdc: "1.155555",
      savedVsFaceUsdc: "2.079013",
      savedVsCeilingUsdc: "0.832098",
    });

    // the stranger sees only their own clear: face 5.0, atCeiling 3.0, paid 2.0
    expect((await get(app, stranger, "/v1/account/savings")).body).toEqual({
      clears: 1,
      faceValueUsdc: "5.000000",
      atCeilingUsdc: "3.000000",
      paidUsdc: "2.000000",
      savedVsFaceUsdc: "3.000000",
      savedVsCeilingUsdc: "1.000000",
    });
  });
});
