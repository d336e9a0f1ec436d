import { describe, expect } from "vitest";
import { SecretBox } from "../../../src/lib/secret-box.js";
import { fileWorld, appTest as test } from "../../../testkit/app-test.js";
import { createAccount, createUpstreamKey } from "../../../testkit/fixtures.js";
import { sealedKey } from "../../../testkit/market.js";

/** Without CATALOG_SYNC_KEY the sync reads the catalog with a registered supplier key. */
test.override("appOptions", {
  catalogSyncKey: false,
  sim: { keys: [{ key: "VENICE_INFERENCE_KEY_supplier", diemMicro: 0n }] },
});
const world = fileWorld(test);

async function registerKey(secret: string, status: "active" | "revoked" = "active") {
  const box = new SecretBox(world.app.rt.config.secrets.keyEncryptionKey);
  const owner = await createAccount(world.app.rt.db);
  return world.app.rt.db.upstreamKey.create({
    data: {
      ...sealedKey(box, owner.id, secret),
      label: "supplier key",
      status,
      revokedAt: status === "revoked" ? new Date() : null,
    },
  });
}

describe("catalog sync key", () => {
  test("no sync key and no supplier key: the catalog is read anonymously", async () => {
    expect(world.app.rt.config.upstream.catalogSyncKey).toBeUndefined();
    const r = await world.app.rt.services.catalog.sync();
    expect(r.upserted).toBeGreaterThan(0);
  });

  test("the first active supplier key that decrypts is sent (an unknown key is refused upstream)", async () => {
    // undecryptable junk (wrong key material) and a revoked key are skipped
    const owner = await createAccount(world.app.rt.db);
    await createUpstreamKey(world.app.rt.db, owner.id);
    await registerKey("VENICE_INFERENCE_KEY_revoked", "revoked");
    // a decryptable key the upstream does not know: the upstream answers 401, proving it was sent
    const unknown = await registerKey("VENICE_INFERENCE_KEY_unknown");
    await expect(world.app.rt.services.catalog.sync()).rejects.toMatchObject({ code: "upstream_error" });

    await world.app.rt.db.upstreamKey.update({ where: { id: unknown.id }, data: { status: "auth_failed" } });
    await registerKey("VENICE_INFERENCE_KEY_supplier");
    const r = await world.app.rt.services.catalog.sync();
    expect(r.unlisted).toBe(0);
    expect(r.upserted).toBeGreaterThan(0);
  });
});
