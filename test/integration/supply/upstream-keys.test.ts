import { randomUUID } from "node:crypto";
import { describe, expect } from "vitest";
import { SecretBox } from "../../../src/lib/secret-box.js";
import { call, type Res, signIn } from "../../../testkit/actors.js";
import { fileWorld, appTest as test } from "../../../testkit/app-test.js";
import { expectError } from "../../../testkit/errors.js";
import {
  as,
  deleteKey,
  type KeyBody,
  myKeys,
  offerStatus,
  postOffer,
  registerKey,
  sellOut,
  simKey,
  supplySnapshot,
} from "../../../testkit/supply.js";

test.override("appOptions", { sim: {}, catalogSyncKey: false });
const world = fileWorld(test);

function register(cookie: string, body: unknown): Promise<Res> {
  return call(world.app, { method: "POST", path: "/v1/supply/upstream-keys", headers: { cookie }, body });
}

describe("success", () => {
  test("registers a key the upstream accepts: 201 masked record with the balance just read", async () => {
    const user = await signIn(world.app);
    const secret = simKey(world.sim, 42_500_000n);
    const res = await register(user.cookie, { upstreamApiKey: secret, label: "main" });
    expect(res.status).toBe(201);
    const key = res.body as KeyBody;
    expect(key).toMatchObject({
      label: "main",
      status: "active",
      maskedKey: `…${secret.slice(-4)}`,
      balanceDiem: "42.500000",
      revokedAt: null,
      liveOfferId: null,
    });
    expect(key.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(key.lastBalanceAt).not.toBeNull();
    expect(JSON.stringify(res.body)).not.toContain(secret);
    expect(JSON.stringify(res.body)).not.toContain(secret.slice(0, 12));

    const listed = await myKeys(world.app, user);
    expect(listed).toHaveLength(1);
    expect(listed[0]).toEqual(key);
    expect(JSON.stringify(listed)).not.toContain(secret);
  });

  test("a key with no DIEM left (accessPermitted false) registers with balance 0", async () => {
    const user = await signIn(world.app);
    const key = await registerKey(world.app, user, simKey(world.sim, 0n));
    expect(key.balanceDiem).toBe("0.000000");
    expect(key.status).toBe("active");
  });

  test("the list shows the live offer id and revoked keys with revokedAt, newest first", async () => {
    const user = await signIn(world.app);
    const a = await registerKey(world.app, user, simKey(world.sim), "a");
    const b = await registerKey(world.app, user, simKey(world.sim), "b");
    const offer = await postOffer(world.app, user, a.id);
    expect((await deleteKey(world.app, user, b.id)).status).toBe(200);
    const keys = await myKeys(world.app, user);
    expect(keys.map((k) => k.label)).toEqual(["b", "a"]);
    expect(keys[0]).toMatchObject({ status: "revoked", liveOfferId: null });
    expect(keys[0]?.revokedAt).not.toBeNull();
    expect(keys[1]).toMatchObject({ status: "active", liveOfferId: offer.id });
  });

  test("a revoked secret can be registered again (uniqueness is among non-revoked keys)", async () => {
    const user = await signIn(world.app);
    const secret = simKey(world.sim);
    const first = await registerKey(world.app, user, secret);
    expect((await deleteKey(world.app, user, first.id)).status).toBe(200);
    const again = await registerKey(world.app, user, secret);
    expect(again.id).not.toBe(first.id);
  });
});

describe("encryption at rest", () => {
  test("the upstream key is unreadable in the database without the encryption key", async () => {
    const user = await signIn(world.app);
    const secret = simKey(world.sim);
    const key = await registerKey(world.app, user, secret);
    const [row] = await world.app.rt.db.$queryRaw<
      { secret_ciphertext: Uint8Array; secret_iv: Uint8Array; secret_tag: Uint8Array; encryption_key_id: string }[]
    >`SELECT secret_ciphertext, secret_iv, secret_tag, encryption_key_id FROM upstream_keys WHERE id = ${key.id}::uuid`;
    if (!row) throw new Error("row missing");
    const ciphertext = Buffer.from(row.secret_ciphertext);
    // no trace of the plaintext in any column of the row
    expect(ciphertext.includes(Buffer.from(secret))).toBe(false);
    expect(ciphertext.toString("utf8")).not.toContain(secret.slice(-8));
    const [whole] = await world.app.rt.db.$queryRaw<{ t: string }[]>`
      SELECT row_to_json(k)::text AS t FROM upstream_keys k WHERE id = ${key.id}::uuid`;
    expect(whole?.t).not.toContain(secret);
    expect(whole?.t).not.toContain(Buffer.from(secret).toString("hex"));

    const sealed = { ciphertext: row.secret_ciphertext, iv: row.secret_iv, tag: row.secret_tag };
    const right = new SecretBox(world.app.rt.config.secrets.keyEncryptionKey);
    const wrong = new SecretBox(Buffer.alloc(32, 7));
    // with the right key (and the owning account as AAD) it opens
    expect(right.open({ ...sealed, keyId: row.encryption_key_id } as never, user.accountId)).toBe(secret);
    expect(await world.app.rt.services.supply.openKey(key.id)).toBe(secret);
    // another encryption key cannot open it, even when told it is its own
    expect(() => wrong.open({ ...sealed, keyId: row.encryption_key_id } as never, user.accountId)).toThrow();
    expect(() => wrong.open({ ...sealed, keyId: wrong.keyId } as never, user.accountId)).toThrow();
    // the ciphertext is bound to its account: moved to another account it does not open
    expect(() => right.open({ ...sealed, keyId: row.encryption_key_id } as never, randomUUID())).toThrow();
  });

  test("the fingerprint is keyed: not a plain hash of the secret", async () => {
    const user = await signIn(world.app);
    const secret = simKey(world.sim);
    const key = await registerKey(world.app, user, secret);
    const row = await world.app.rt.db.upstreamKey.findUniqueOrThrow({ where: { id: key.id } });
    const { createHash } = await import("node:crypto");
    expect(row.secretFingerprint).not.toBe(createHash("sha256").update(secret).digest("hex"));
    expect(row.secretLast4).toBe(secret.slice(-4));
  });
});

describe("revocation", () => {
  test("revokes the row and cancels every non-cancelled offer; repeating still cancels leftovers", async () => {
    const user = await signIn(world.app);
    const key = await registerKey(world.app, user, simKey(world.sim));
    // one offer in each non-live end state, then a live paused one
    const depleted = await postOffer(world.app, user, key.id);
    await sellOut(world.app, depleted.id);
    expect(await world.app.rt.services.offers.markDepletedIfEmpty(depleted.id)).toBe(true);
    const expired = await postOffer(world.app, user, key.id);
    await world.app.rt.db.offer.update({ where: { id: expired.id }, data: { expiresAt: new Date(Date.now() - 1000) } });
    await world.app.rt.services.offers.expireDue();
    expect(await offerStatus(world.app, expired.id)).toBe("expired");
    const paused = await postOffer(world.app, user, key.id);
    const p = await call(world.app, {
      method: "PATCH",
      path: `/v1/supply/offers/${paused.id}`,
      headers: as(user),
      body: { status: "paused" },
    });
    expect(p.status).toBe(200);

    const res = await deleteKey(world.app, user, key.id);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      status: "ok",
      cancelledOffers: 3,
      upstreamKey: { id: key.id, status: "revoked" },
    });
    for (const id of [depleted.id, expired.id, paused.id]) expect(await offerStatus(world.app, id)).toBe("cancelled");
    const row = await world.app.rt.db.upstreamKey.findUniqueOrThrow({ where: { id: key.id } });
    expect(row.status).toBe("revoked");
    const revokedAt = row.revokedAt;
    expect(revokedAt).not.toBeNull();

    // a leftover appears on the revoked key (e.g. written by a process that raced the revocation)
    const leftover = await world.app.rt.db.offer.create({
      data: {
        accountId: user.accountId,
        upstreamKeyId: key.id,
        priceCentsPerDollar: 40,
        quantityMicroDiem: 1_000_000n,
        remainingMicroDiem: 1_000_000n,
        status: "active",
        expiresAt: new Date(Date.now() + 3_600_000),
      },
    });
    const again = await deleteKey(world.app, user, key.id);
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ status: "ok", cancelledOffers: 1 });
    expect(await offerStatus(world.app, leftover.id)).toBe("cancelled");
    // the first revocation time is kept
    expect((await world.app.rt.db.upstreamKey.findUniqueOrThrow({ where: { id: key.id } })).revokedAt).toEqual(
      revokedAt,
    );
    // a third call finds nothing left and is still 200
    const third = await deleteKey(world.app, user, key.id);
    expect(third.status).toBe(200);
    expect(third.body).toMatchObject({ cancelledOffers: 0 });
  });

  test("a revoked key's offers leave the market", async () => {
    const user = await signIn(world.app);
    const key = await registerKey(world.app, user, simKey(world.sim));
    await postOffer(world.app, user, key.id, 13, "7.000000");
    let ladder = await world.app.rt.services.market.getLadder();
    expect(ladder.prices.find((l) => l.priceCentsPerDollar === 13)?.routableMicroDiem).toBe(7_000_000n);
    await deleteKey(world.app, user, key.id);
    ladder = await world.app.rt.services.market.getLadder();
    expect(ladder.prices.find((l) => l.priceCentsPerDollar === 13)).toBeUndefined();
  });
});

describe("rejection", () => {
  test("the upstream rejects the key: 400, nothing stored", async () => {
    const user = await signIn(world.app);
    const res = await register(user.cookie, { upstreamApiKey: `vk-unknown-${randomUUID()}`, label: "x" });
    expectError(res, 400, "invalid_request");
    expect((res.body as { error: { message: string } }).error.message).toMatch(/upstream rejected the key/i);
    expect(await world.app.rt.db.upstreamKey.count({ where: { accountId: user.accountId } })).toBe(0);
  });

  test("a key revoked at the upstream is rejected the same way", async () => {
    const user = await signIn(world.app);
    const secret = simKey(world.sim);
    world.sim.state.revokeKey(secret);
    expectError(await register(user.cookie, { upstreamApiKey: secret, label: "x" }), 400, "invalid_request");
  });

  test("the upstream cannot be asked (5xx, dropped connection): 502 upstream_error, nothing stored", async () => {
    const user = await signIn(world.app);
    const secret = simKey(world.sim);
    world.sim.state.injectFault(secret, { kind: "http_500", route: "/api_keys/rate_limits", count: 1 });
    expectError(await register(user.cookie, { upstreamApiKey: secret, label: "x" }), 502, "upstream_error");
    world.sim.state.injectFault(secret, { kind: "drop", route: "/api_keys/rate_limits", count: 1 });
    expectError(await register(user.cookie, { upstreamApiKey: secret, label: "x" }), 502, "upstream_error");
    expect(await world.app.rt.db.upstreamKey.count({ where: { accountId: user.accountId } })).toBe(0);
    // the fault is gone: the same key now registers
    await registerKey(world.app, user, secret);
  });

  test("the same secret twice: 409 conflict, on this account and on another", async () => {
    const user = await signIn(world.app);
    const other = await signIn(world.app);
    const secret = simKey(world.sim);
    await registerKey(world.app, user, secret);
    expectError(await register(user.cookie, { upstreamApiKey: secret, label: "again" }), 409, "conflict");
    expectError(await register(other.cookie, { upstreamApiKey: secret, label: "mine?" }), 409, "conflict");
    expect(await world.app.rt.db.upstreamKey.count({ where: { accountId: other.accountId } })).toBe(0);
  });

  test("concurrent registrations of one secret: exactly one 201", async () => {
    const user = await signIn(world.app);
    const secret = simKey(world.sim);
    const results = await Promise.all(
      Array.from({ length: 8 }, () => register(user.cookie, { upstreamApiKey: secret, label: "race" })),
    );
    expect(results.filter((r) => r.status === 201)).toHaveLength(1);
    for (const r of results.filter((x) => x.status !== 201)) expectError(r, 409, "conflict");
  });

  test.each([
    ["missing upstreamApiKey", { label: "x" }, "upstreamApiKey"],
    ["empty upstreamApiKey", { upstreamApiKey: "", label: "x" }, "upstreamApiKey"],
    ["numeric upstreamApiKey", { upstreamApiKey: 1234, label: "x" }, "upstreamApiKey"],
    ["upstreamApiKey with spaces", { upstreamApiKey: "vk abc def", label: "x" }, "upstreamApiKey"],
    ["missing label", { upstreamApiKey: "vk-x-123456789" }, "label"],
    ["empty label", { upstreamApiKey: "vk-x-123456789", label: "  " }, "label"],
    ["label too long", { upstreamApiKey: "vk-x-123456789", label: "x".repeat(65) }, "label"],
    ["not an object", "hello", undefined],
  ])("%s: 400 naming the field, nothing stored, the upstream not asked", async (_label, body, field) => {
    const user = await signIn(world.app);
    const before = await supplySnapshot(world.app.rt.db, user.accountId);
    const asked = world.sim.state.listRequests({ route: "/api_keys/rate_limits" }).length;
    const res = await register(user.cookie, body);
    expectError(res, 400, "invalid_request");
    if (field) expect((res.body as { error: { field?: string } }).error.field).toBe(field);
    expect(await supplySnapshot(world.app.rt.db, user.accountId)).toBe(before);
    expect(world.sim.state.listRequests({ route: "/api_keys/rate_limits" }).length).toBe(asked);
  });

  test("DELETE with a non-uuid id is 400; an unknown id is 404", async () => {
    const user = await signIn(world.app);
    expectError(await deleteKey(world.app, user, "not-a-uuid"), 400, "invalid_request");
    expectError(await deleteKey(world.app, user, randomUUID()), 404, "not_found");
  });
});

describe("authorisation", () => {
  test("another account's key is 404 on DELETE and absent from its list; nothing changes", async () => {
    const owner = await signIn(world.app);
    const other = await signIn(world.app);
    const key = await registerKey(world.app, owner, simKey(world.sim));
    const offer = await postOffer(world.app, owner, key.id);
    const before = await supplySnapshot(world.app.rt.db, owner.accountId);
    expectError(await deleteKey(world.app, other, key.id), 404, "not_found");
    expect(await myKeys(world.app, other)).toEqual([]);
    expect(await supplySnapshot(world.app.rt.db, owner.accountId)).toBe(before);
    expect(await offerStatus(world.app, offer.id)).toBe("active");
  });

  test("every route needs the session cookie: none or a Bearer is 401; a foreign Origin is 403", async () => {
    const user = await signIn(world.app);
    const id = randomUUID();
    const routes: [string, string, unknown?][] = [
      ["POST", "/v1/supply/upstream-keys", { upstreamApiKey: "vk-x-1234567890", label: "x" }],
      ["GET", "/v1/supply/upstream-keys/mine"],
      ["DELETE", `/v1/supply/upstream-keys/${id}`],
      ["POST", "/v1/supply/offers", { upstreamKeyId: id, priceCentsPerDollar: 50, quantityDiem: "1.000000" }],
      ["GET", "/v1/supply/offers/mine"],
      ["PATCH", `/v1/supply/offers/${id}`, { status: "paused" }],
      ["DELETE", `/v1/supply/offers/${id}`],
      ["GET", "/v1/supply/ledger"],
      ["GET", "/v1/supply/inference-history"],
    ];
    for (const [method, path, body] of routes) {
      expectError(
        await call(world.app, { method, path, body }),
        401,
        "authentication_failed",
        `${method} ${path} anonymous`,
      );
      expectError(
        await call(world.app, { method, path, body, headers: { authorization: "Bearer svc_nope" } }),
        401,
        "authentication_failed",
        `${method} ${path} bearer`,
      );
      if (method !== "GET") {
        expectError(
          await call(world.app, {
            method,
            path,
            body,
            headers: { cookie: user.cookie, origin: "https://evil.example" },
          }),
          403,
          "csrf_rejected",
          `${method} ${path} cross-origin`,
        );
      }
    }
  });
});
