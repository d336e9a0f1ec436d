import { randomUUID } from "node:crypto";
import { nextUtcMidnight } from "../../src/lib/clock.js";
import { SecretBox } from "../../src/lib/secret-box.js";
import type { FileWorld } from "../app-test.js";
import { sealedKey } from "../market.js";

/**
 * Supply of the fuzzing account itself, so its writes have real targets: a free upstream key (no
 * offer: a valid offer on it would post) and a key with a live offer (a valid patch or cancel would
 * apply). Both keys are funded in the upstream simulator and sealed the way the service seals them.
 */
export async function ownSupply(
  world: FileWorld,
  accountId: string,
): Promise<{ freeKeyId: string; offeredKeyId: string; offerId: string }> {
  const db = world.app.rt.db;
  const box = new SecretBox(world.app.rt.config.secrets.keyEncryptionKey);
  const key = async (label: string) => {
    const secret = `VENICE_INFERENCE_KEY_${randomUUID().replaceAll("-", "")}`;
    world.sim.state.addKey({ key: secret, diemMicro: 100_000_000n });
    const row = await db.upstreamKey.create({
      data: {
        ...sealedKey(box, accountId, secret),
        label,
        lastBalanceMicroDiem: 100_000_000n,
        lastBalanceAt: new Date(),
      },
    });
    return row.id;
  };
  const freeKeyId = await key("fuzz free key");
  const offeredKeyId = await key("fuzz offered key");
  const offer = await db.offer.create({
    data: {
      accountId,
      upstreamKeyId: offeredKeyId,
      priceCentsPerDollar: 60,
      quantityMicroDiem: 10_000_000n,
      remainingMicroDiem: 10_000_000n,
      expiresAt: nextUtcMidnight(new Date()),
    },
  });
  return { freeKeyId, offeredKeyId, offerId: offer.id };
}
