// One lock order for keys and offers (docs/decisions.md): the fold (svc_fold_holder) holds an offer and
// then updates its key; revoking a key and posting an offer on it locked the key first and then waited
// on its offers, a deadlock with a fold of that offer in between. Here a transaction takes the fold's
// locks in the fold's order around each supply path; the path must wait for it, never the other way.
import { describe, expect } from "vitest";
import type { Db } from "../../../src/adapters/db.js";
import { isDomainError } from "../../../src/lib/errors.js";
import { fileWorld, appTest as test } from "../../../testkit/app-test.js";
import { assertBooksBalance } from "../../../testkit/books.js";
import { addSupply } from "../../../testkit/market.js";
import { someoneWaitsOnARow } from "../../../testkit/row-locks.js";

test.override("appOptions", { sim: {} });
const world = fileWorld(test);

/**
 * The fold's locks around `path`: the offer (locked and updated, as the fold does its offers), then,
 * once `path` waits, an update of the offer's key (as the fold's key balance update). Answers how
 * the fold's transaction and the path ended.
 */
async function foldAround<T>(db: Db, offerId: string, keyId: string, path: () => Promise<T>) {
  let running: Promise<PromiseSettledResult<T>> | undefined;
  const fold = await db
    .$transaction(
      async (tx) => {
        await tx.$queryRaw`SELECT id FROM offers WHERE id = ${offerId}::uuid FOR NO KEY UPDATE`;
        await tx.$executeRaw`UPDATE offers SET reserved_micro_diem = reserved_micro_diem WHERE id = ${offerId}::uuid`;
        running = path().then(
          (value) => ({ status: "fulfilled", value }) as const,
          (reason: unknown) => ({ status: "rejected", reason }) as const,
        );
        await someoneWaitsOnARow(db);
        await tx.$executeRaw`
          UPDATE upstream_keys SET last_balance_micro_diem = last_balance_micro_diem WHERE id = ${keyId}::uuid`;
      },
      { timeout: 30_000 },
    )
    .then(
      () => "committed",
      (e: unknown) => String(e),
    );
  if (!running) throw new Error("the path never started");
  return { fold, path: await running };
}

describe("a supply path meets a fold of its key's offer", () => {
  test("revoking the key waits for the fold, then cancels the offer", async () => {
    const { app, sim } = world;
    const { supplierAccountId, keys } = await addSupply(app, sim, [{ priceCents: 40, quantityMicroDiem: 5_000_000n }]);
    const k = keys[0];
    if (!k) throw new Error("no key");
    const out = await foldAround(app.rt.db, k.offerId, k.upstreamKeyId, () =>
      app.rt.services.supply.revokeUpstreamKey({ accountId: supplierAccountId, upstreamKeyId: k.upstreamKeyId }),
    );
    expect(out.fold).toBe("committed");
    expect(out.path.status).toBe("fulfilled");
    expect(out.path.status === "fulfilled" ? out.path.value.cancelledOffers : -1).toBe(1);
    const offer = await app.rt.db.offer.findUniqueOrThrow({ where: { id: k.offerId } });
    expect(offer.status).toBe("cancelled");
    await assertBooksBalance(app.rt.db);
  });

  test("posting a second offer on the key waits for the fold, then is the usual 409", async () => {
    const { app, sim } = world;
    const { supplierAccountId, keys } = await addSupply(app, sim, [{ priceCents: 40, quantityMicroDiem: 5_000_000n }]);
    const k = keys[0];
    if (!k) throw new Error("no key");
    const out = await foldAround(app.rt.db, k.offerId, k.upstreamKeyId, () =>
      app.rt.services.offers.postOffer({
        accountId: supplierAccountId,
        upstreamKeyId: k.upstreamKeyId,
        priceCentsPerDollar: 45,
        quantityMicroDiem: 1_000_000n,
      }),
    );
    expect(out.fold).toBe("committed");
    expect(out.path.status).toBe("rejected");
    const reason = out.path.status === "rejected" ? out.path.reason : undefined;
    expect(isDomainError(reason) ? reason.code : String(reason)).toBe("conflict");
    expect(await app.rt.db.offer.count({ where: { upstreamKeyId: k.upstreamKeyId } })).toBe(1);
  });
});
