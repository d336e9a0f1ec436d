import { randomUUID } from "node:crypto";
import { describe, expect } from "vitest";
import { bearer, call, createKey, type SignedInUser, signIn } from "../../../testkit/actors.js";
import { appTest as test } from "../../../testkit/app-test.js";
import { expectError } from "../../../testkit/errors.js";
import { createInferenceRequest } from "../../../testkit/fixtures.js";
import type { TestApp } from "../../../testkit/harness.js";
import { maxPriceOf } from "../../../testkit/identity.js";

/** SPEC "Agent self-service (Bearer only)". */

interface Agent {
  user: SignedInUser;
  key: { id: string; apiKey: string };
}

async function agent(app: TestApp): Promise<Agent> {
  const user = await signIn(app);
  return { user, key: await createKey(app, user) };
}

const patchMax = (app: TestApp, a: Agent, body: unknown) =>
  call(app, { method: "PATCH", path: "/v1/agent/max-price", body, headers: bearer(a.key.apiKey) });

describe("success", () => {
  test("GET /v1/agent/me: wallet, balances, max price, confirmationBlocks 20", async ({ app }) => {
    const a = await agent(app);
    const r = await call(app, { method: "GET", path: "/v1/agent/me", headers: bearer(a.key.apiKey) });
    expect(r.status).toBe(200);
    expect(r.body).toEqual({
      accountId: a.user.accountId,
      walletAddress: a.user.walletAddress.toLowerCase(),
      confirmedUsdc: "0.000000",
      pendingUsdc: "0.000000",
      availableUsdc: "0.000000",
      maxPriceCentsPerDollar: 80,
      confirmationBlocks: 20,
      hasEverFunded: false,
      firstFundedAt: null,
    });
  });

  test("GET /v1/agent/me renders balances as six-decimal strings; pending never counts as available", async ({
    app,
  }) => {
    const a = await agent(app);
    await app.rt.db.account.update({
      where: { id: a.user.accountId },
      data: {
        confirmedMicroUsdc: 1_500_000n,
        pendingMicroUsdc: 250_000n,
        reservedMicroUsdc: 1n,
        hasEverFunded: true,
        firstFundedAt: new Date("2026-02-03T04:05:06.007Z"),
        maxPriceCentsPerDollar: 44,
      },
    });
    const r = await call(app, { method: "GET", path: "/v1/agent/me", headers: bearer(a.key.apiKey) });
    expect(r.body).toMatchObject({
      confirmedUsdc: "1.500000",
      pendingUsdc: "0.250000",
      availableUsdc: "1.499999",
      maxPriceCentsPerDollar: 44,
      hasEverFunded: true,
      firstFundedAt: "2026-02-03T04:05:06.007Z",
    });
  });

  test("PATCH /v1/agent/max-price → 200 {walletAddress, maxPriceCentsPerDollar} at 30 and 80", async ({ app }) => {
    const a = await agent(app);
    for (const v of [30, 80, 61]) {
      const r = await patchMax(app, a, { maxPriceCentsPerDollar: v });
      expect(r.status).toBe(200);
      expect(r.body).toEqual({ walletAddress: a.user.walletAddress.toLowerCase(), maxPriceCentsPerDollar: v });
      expect(await maxPriceOf(app, a.user.accountId)).toBe(v);
    }
  });

  test("GET /v1/agent/keys → {keys, cap: 10, active} with metadata only", async ({ app }) => {
    const a = await agent(app);
    const second = await createKey(app, a.user, "second");
    const r = await call(app, { method: "GET", path: "/v1/agent/keys", headers: bearer(a.key.apiKey) });
    expect(r.status).toBe(200);
    const body = r.body as { keys: Record<string, unknown>[]; cap: number; active: number };
    expect(Object.keys(body).sort()).toEqual(["active", "cap", "keys"]);
    expect(body.cap).toBe(10);
    expect(body.active).toBe(2);
    expect(body.keys.map((k) => k.id)).toEqual([second.id, a.key.id]);
    for (const k of body.keys) {
      expect(k).toEqual({
        id: expect.any(String),
        name: expect.any(String),
        keyPrefix: expect.stringMatching(/^svc_.{8}$/),
        source: "session",
        createdAt: expect.any(String),
        lastUsedAt: k.lastUsedAt === null ? null : expect.any(String),
        scopes: ["inference", "keys", "account"],
        parentId: null,
        limitUsdc: null,
        limitReset: "never",
        maxPriceCentsPerDollar: null,
        models: null,
        expiresAt: null,
        spentUsdc: "0.000000",
        remainingUsdc: null,
        resetsAt: null,
      });
    }
    expect(JSON.stringify(body)).not.toContain(a.key.apiKey);
    // another account's keys never appear
    const other = await agent(app);
    const r2 = await call(app, { method: "GET", path: "/v1/agent/keys", headers: bearer(other.key.apiKey) });
    expect((r2.body as { keys: { id: string }[] }).keys.map((k) => k.id)).toEqual([other.key.id]);
  });
});

describe("request detail by support reference", () => {
  test("own reference → 200 with cost, clearing price, status and timings", async ({ app }) => {
    const a = await agent(app);
    const startedAt = new Date("2026-05-01T10:00:00.000Z");
    const req = await createInferenceRequest(app.rt.db, a.user.accountId, {
      startedAt,
      firstByteAt: new Date("2026-05-01T10:00:00.250Z"),
      completedAt: new Date("2026-05-01T10:00:01.500Z"),
      status: "succeeded",
      stream: true,
      clearingPriceCents: 45,
      burnMicroDiem: 27_434n,
      costMicroUsdc: 12_345n,
      promptTokens: 1200,
      completionTokens: 340,
      cachedTokens: 700,
      cacheWriteTokens: 300,
      attemptCount: 2,
      model: "llama-3.3-70b",
      apiKeyId: a.key.id,
    });
    const r = await call(app, {
      method: "GET",
      path: `/v1/agent/requests/${req.supportReference}`,
      headers: bearer(a.key.apiKey),
    });
    expect(r.status).toBe(200);
    expect(r.body).toEqual({
      requestId: req.id,
      supportReference: req.supportReference,
      keyId: a.key.id,
      keyName: "test key",
      route: "chat",
      modality: "text",
      model: "llama-3.3-70b",
      stream: true,
      status: "succeeded",
      errorCode: null,
      maxPriceCents: 80,
      clearingPriceCents: 45,
      costUsdc: "0.012345",
      burnDiem: "0.027434",
      usage: { promptTokens: 1200, completionTokens: 340, cachedTokens: 700, cacheWriteTokens: 300 },
      attempts: 2,
      timings: {
        startedAt: "2026-05-01T10:00:00.000Z",
        firstByteAt: "2026-05-01T10:00:00.250Z",
        completedAt: "2026-05-01T10:00:01.500Z",
        durationMs: 1500,
      },
    });
  });

  test("a failed request reports its error code and no cost", async ({ app }) => {
    const a = await agent(app);
    const req = await createInferenceRequest(app.rt.db, a.user.accountId, {
      status: "failed",
      errorCode: "pool_empty",
    });
    const r = await call(app, {
      method: "GET",
      path: `/v1/agent/requests/${req.supportReference}`,
      headers: bearer(a.key.apiKey),
    });
    expect(r.body).toMatchObject({
      status: "failed",
      errorCode: "pool_empty",
      costUsdc: null,
      clearingPriceCents: null,
    });
  });

  test("an upper-case reference resolves the same request", async ({ app }) => {
    const a = await agent(app);
    const req = await createInferenceRequest(app.rt.db, a.user.accountId);
    const r = await call(app, {
      method: "GET",
      path: `/v1/agent/requests/${req.supportReference.toUpperCase()}`,
      headers: bearer(a.key.apiKey),
    });
    expect(r.status).toBe(200);
    expect((r.body as { requestId: string }).requestId).toBe(req.id);
  });

  test("another account's reference → 404 (indistinguishable from unknown); unknown → 404", async ({ app }) => {
    const a = await agent(app);
    const b = await agent(app);
    const theirs = await createInferenceRequest(app.rt.db, b.user.accountId, {
      status: "succeeded",
      costMicroUsdc: 1n,
    });
    const r = await call(app, {
      method: "GET",
      path: `/v1/agent/requests/${theirs.supportReference}`,
      headers: bearer(a.key.apiKey),
    });
    expectError(r, 404, "not_found");
    expect(JSON.stringify(r.body)).not.toContain(theirs.id);
    const unknown = await call(app, {
      method: "GET",
      path: `/v1/agent/requests/${randomUUID()}`,
      headers: bearer(a.key.apiKey),
    });
    expectError(unknown, 404, "not_found");
    expect((unknown.body as { error: { message: string } }).error.message).toBe(
      (r.body as { error: { message: string } }).error.message,
    );
  });

  test("the support reference is the request id; an older record's stored reference and its id both resolve", async ({
    app,
  }) => {
    const a = await agent(app);
    const own = await createInferenceRequest(app.rt.db, a.user.accountId);
    expect(own.supportReference).toBe(own.id);
    const get = (ref: string) =>
      call(app, { method: "GET", path: `/v1/agent/requests/${ref}`, headers: bearer(a.key.apiKey) });
    const byId = await get(own.id);
    expect(byId.status).toBe(200);
    expect(byId.body).toMatchObject({ requestId: own.id, supportReference: own.id });
    // written before the change: a random id and a reference of its own, both of which find it
    const older = await createInferenceRequest(app.rt.db, a.user.accountId, {
      id: randomUUID(),
      supportReference: randomUUID(),
    });
    for (const ref of [older.supportReference, older.id]) {
      const r = await get(ref);
      expect(r.status).toBe(200);
      expect(r.body).toMatchObject({ requestId: older.id, supportReference: older.supportReference });
    }
  });

  test("a non-uuid reference → 400 invalid_request", async ({ app }) => {
    const a = await agent(app);
    for (const bad of ["abc", "12345678-1234-1234-1234-12345678901", "00000000-0000-0000-0000-00000000000g"]) {
      expectError(
        await call(app, { method: "GET", path: `/v1/agent/requests/${bad}`, headers: bearer(a.key.apiKey) }),
        400,
        "invalid_request",
        bad,
      );
    }
  });
});

describe("authorisation: max price", () => {
  test("a walletAddress of another account in the body is ignored: only the caller's ceiling changes", async ({
    app,
  }) => {
    const a = await agent(app);
    const victim = await agent(app);
    const r = await patchMax(app, a, { maxPriceCentsPerDollar: 35, walletAddress: victim.user.walletAddress });
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ walletAddress: a.user.walletAddress.toLowerCase(), maxPriceCentsPerDollar: 35 });
    expect(await maxPriceOf(app, a.user.accountId)).toBe(35);
    expect(await maxPriceOf(app, victim.user.accountId)).toBe(80);
    // also ignored: accountId
    const r2 = await patchMax(app, a, { maxPriceCentsPerDollar: 36, accountId: victim.user.accountId });
    expect(r2.status).toBe(200);
    expect(await maxPriceOf(app, victim.user.accountId)).toBe(80);
  });

  test.for([
    ["29", { maxPriceCentsPerDollar: 29 }],
    ["81", { maxPriceCentsPerDollar: 81 }],
    ["0", { maxPriceCentsPerDollar: 0 }],
    ["100", { maxPriceCentsPerDollar: 100 }],
    ["50.5", { maxPriceCentsPerDollar: 50.5 }],
    ['"50"', { maxPriceCentsPerDollar: "50" }],
    ["null", { maxPriceCentsPerDollar: null }],
    ["missing", {}],
    ["missing, walletAddress only", { walletAddress: "0x0000000000000000000000000000000000000001" }],
  ] as const)("%s → 400 invalid_request, nothing changed, nothing clamped", async ([_label, body], { app }) => {
    const a = await agent(app);
    expect((await patchMax(app, a, { maxPriceCentsPerDollar: 52 })).status).toBe(200);
    const r = await patchMax(app, a, body);
    expectError(r, 400, "invalid_request");
    expect(await maxPriceOf(app, a.user.accountId)).toBe(52);
    const me = await call(app, { method: "GET", path: "/v1/agent/me", headers: bearer(a.key.apiKey) });
    expect((me.body as { maxPriceCentsPerDollar: number }).maxPriceCentsPerDollar).toBe(52);
  });

  test("the ceiling set by the agent route is the one the session route reads, and vice versa", async ({ app }) => {
    const a = await agent(app);
    expect((await patchMax(app, a, { maxPriceCentsPerDollar: 41 })).status).toBe(200);
    const acct = await call(app, { method: "GET", path: "/v1/account", headers: { cookie: a.user.cookie } });
    expect((acct.body as { maxPriceCentsPerDollar: number }).maxPriceCentsPerDollar).toBe(41);
    const viaSession = await call(app, {
      method: "PATCH",
      path: "/v1/account/max-price",
      body: { maxPriceCentsPerDollar: 66 },
      headers: { cookie: a.user.cookie },
    });
    expect(viaSession.status).toBe(200);
    const me = await call(app, { method: "GET", path: "/v1/agent/me", headers: bearer(a.key.apiKey) });
    expect((me.body as { maxPriceCentsPerDollar: number }).maxPriceCentsPerDollar).toBe(66);
  });
});
