import { describe, expect, test } from "vitest";
import { Holder } from "../../../src/domain/inference/escrow/escrow.js";
import { type BookEntry, chooseOffer, MAX_ATTEMPTS, routable } from "../../../src/domain/inference/routing/clearing.js";

const NOW = 1_800_000_000_000;
const sealed = { ciphertext: new Uint8Array(), iv: new Uint8Array(), tag: new Uint8Array(), keyId: "k" };

function entry(id: string, price: number, over: Partial<BookEntry> = {}): BookEntry {
  return {
    offerId: `offer-${id}`,
    upstreamKeyId: `key-${id}`,
    supplierAccountId: "supplier",
    priceCentsPerDollar: price,
    priceChangesAt: null,
    expiresAt: NOW + 60_000,
    routableMicroDiem: 1_000_000n,
    keyBalanceMicroDiem: null,
    eligible: true,
    cooldownUntil: null,
    sealed,
    ...over,
  };
}

const ask = (over: Partial<Parameters<typeof chooseOffer>[1]> = {}) => ({
  holder: new Holder("holder"),
  ceilingCents: 50,
  maxBurnMicroDiem: 1_000n,
  tried: [] as string[],
  isBusy: () => false,
  nowMs: NOW,
  ...over,
});

describe("routable: the in-memory mirror of svc_eligible plus the ceiling", () => {
  test("priced at or below the ceiling, unexpired, eligible, not cooling down", () => {
    expect(routable(entry("a", 50), 50, NOW)).toBe(true);
    expect(routable(entry("a", 51), 50, NOW)).toBe(false);
    expect(routable(entry("a", 40, { expiresAt: NOW }), 50, NOW)).toBe(false);
    expect(routable(entry("a", 40, { eligible: false }), 50, NOW)).toBe(false);
  });

  test("a cooldown ends exactly at its time (moved by the clock, not by sleeping)", () => {
    const cooling = entry("a", 40, { cooldownUntil: NOW + 1_000 });
    expect(routable(cooling, 50, NOW)).toBe(false);
    expect(routable(cooling, 50, NOW + 999)).toBe(false);
    expect(routable(cooling, 50, NOW + 1_000)).toBe(true);
  });
});

describe("chooseOffer", () => {
  test("takes the first routable entry in book order (the book is in clearing order: cheapest, oldest, id)", () => {
    const book = [entry("a", 60), entry("b", 35), entry("c", 45)];
    const { pick } = chooseOffer(book, ask());
    expect(pick?.entry.offerId).toBe("offer-b");
    // the slice is empty: it is short by the whole maximum burn, which the offer's depth covers
    expect(pick?.short).toBe(1_000n);
  });

  test("skips tried keys, and notes busy keys it passed over", () => {
    const book = [entry("a", 30), entry("b", 35), entry("c", 45)];
    const r = chooseOffer(book, ask({ tried: ["key-a"], isBusy: (k) => k === "key-b" }));
    expect(r.pick?.entry.offerId).toBe("offer-c");
    expect(r.waitingOnBusy).toBe(true);
    const none = chooseOffer(book, ask({ tried: ["key-a", "key-c"], isBusy: (k) => k === "key-b" }));
    expect(none).toEqual({ pick: null, waitingOnBusy: true });
  });

  test("passes over an offer too shallow for the maximum burn unless its slice already covers it", () => {
    const holder = new Holder("holder");
    const book = [entry("a", 30, { routableMicroDiem: 999n }), entry("b", 40)];
    expect(chooseOffer(book, ask({ holder })).pick?.entry.offerId).toBe("offer-b");
    // the process already holds enough of offer a: it clears there, in memory (short ≤ 0)
    holder.slice("offer", "offer-a").grant(1_000n);
    const { pick } = chooseOffer(book, ask({ holder }));
    expect(pick?.entry.offerId).toBe("offer-a");
    expect(pick?.short).toBe(0n);
  });

  test(`at most MAX_ATTEMPTS (${MAX_ATTEMPTS}) distinct keys: the sixth cheapest is never reached by fall-forward`, () => {
    const book = Array.from({ length: 8 }, (_, i) => entry(String(i), 30 + i));
    const tried: string[] = [];
    for (let i = 0; i < MAX_ATTEMPTS; i++) {
      const { pick } = chooseOffer(book, ask({ tried }));
      expect(pick?.entry.upstreamKeyId).toBe(`key-${i}`);
      tried.push(pick?.entry.upstreamKeyId ?? "");
    }
    expect(new Set(tried).size).toBe(MAX_ATTEMPTS);
    expect(MAX_ATTEMPTS).toBe(5);
  });
});
