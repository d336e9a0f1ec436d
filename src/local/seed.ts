import { secretLast4 } from "../domain/supply/supply-rules.js";
import { nextUtcMidnight } from "../lib/clock.js";
import { logger } from "../lib/logger.js";
import { SecretBox } from "../lib/secret-box.js";
import type { Runtime } from "../runtime.js";

/** Upstream secrets of the seeded supplier's keys (simulator-only; meaningless elsewhere). */
export const LOCAL_SUPPLIER_KEYS = [
  { secret: "VENICE_INFERENCE_KEY_local_supplier_1", label: "local key 1", priceCents: 40, diemMicro: 50_000_000n },
  { secret: "VENICE_INFERENCE_KEY_local_supplier_2", label: "local key 2", priceCents: 55, diemMicro: 50_000_000n },
  { secret: "VENICE_INFERENCE_KEY_local_supplier_3", label: "local key 3", priceCents: 70, diemMicro: 50_000_000n },
] as const;

/**
 * Local-mode seed data (idempotent, run at every `npm run dev` boot): one supplier with three
 * registered upstream keys, each with one live offer at 40, 55 and 70 cents. Expired offers are
 * replaced by fresh ones for today.
 */
export async function seedLocalData(rt: Runtime, opts: { supplierWallet: string }): Promise<void> {
  const db = rt.db;
  const now = rt.clock.now();
  const box = new SecretBox(rt.config.secrets.keyEncryptionKey);
  const wallet = opts.supplierWallet.toLowerCase();
  const supplier = await db.account.upsert({
    where: { walletAddress: wallet },
    create: { walletAddress: wallet, authProvider: "siwe" },
    update: {},
  });
  for (const k of LOCAL_SUPPLIER_KEYS) {
    const fingerprint = box.fingerprint(k.secret);
    let key = await db.upstreamKey.findFirst({ where: { secretFingerprint: fingerprint, status: { not: "revoked" } } });
    if (!key) {
      const sealed = box.seal(k.secret, supplier.id); // AAD: the owning account
      key = await db.upstreamKey.create({
        data: {
          accountId: supplier.id,
          label: k.label,
          secretCiphertext: sealed.ciphertext,
          secretIv: sealed.iv,
          secretTag: sealed.tag,
          encryptionKeyId: sealed.keyId,
          secretFingerprint: fingerprint,
          secretLast4: secretLast4(k.secret),
        },
      });
    }
    await db.upstreamKey.update({
      where: { id: key.id },
      data: { status: "active", lastBalanceMicroDiem: k.diemMicro, lastBalanceAt: now, cooldownUntil: null },
    });
    await db.offer.updateMany({
      where: { upstreamKeyId: key.id, status: { in: ["active", "paused"] }, expiresAt: { lte: now } },
      data: { status: "expired", endedAt: now },
    });
    const live = await db.offer.findFirst({ where: { upstreamKeyId: key.id, status: { in: ["active", "paused"] } } });
    if (!live) {
      await db.offer.create({
        data: {
          accountId: supplier.id,
          upstreamKeyId: key.id,
          priceCentsPerDollar: k.priceCents,
          quantityMicroDiem: 40_000_000n,
          remainingMicroDiem: 40_000_000n,
          expiresAt: nextUtcMidnight(now),
        },
      });
    }
  }
  const catalog = await rt.services.catalog.sync().catch((e: unknown) => {
    logger.warn({ err: e }, "local catalog sync failed");
    return undefined;
  });
  logger.info({ supplier: supplier.walletAddress, keys: LOCAL_SUPPLIER_KEYS.length, catalog }, "local seed data ready");
}
