// Issue 18 finding 5: admission never refuses a buyer whose balance covers the request many times
// over. Unbounded requests (no max_tokens) on a model with a large completion cap reserve a share of
// a short balance instead of all of it, and an absurd max_tokens is a 400, not a reservation.
import { describe, expect } from "vitest";
import { parseDecimal6 } from "../../../src/lib/money.js";
import { fileWorld, appTest as test } from "../../../testkit/app-test.js";
import { assertBooksBalance } from "../../../testkit/books.js";
import { expectHoldsReleased } from "../../../testkit/holds.js";
import { addSupply, chat, confirmedOf, fundedBuyerKey } from "../../../testkit/market.js";

test.override("appOptions", { sim: {}, syncCatalog: true });
const world = fileWorld(test);

// claude-sonnet-4-6: 18 DIEM per 1M output tokens and a 64,000-token cap: one unbounded request's
// full cap costs about 0.92 USDC at the 80-cent ceiling, so eight of them need more than 4.92
const MODEL = "claude-sonnet-4-6";

describe("admission with a short balance (issue 18 finding 5)", () => {
  test("8 concurrent chats without max_tokens from a buyer with 4.92 USDC: all 200", async () => {
    await addSupply(world.app, world.sim, [{ priceCents: 40, quantityMicroDiem: 100_000_000n }]);
    world.app.rt.services.inference.invalidateBook();
    const buyer = await fundedBuyerKey(world.app, 4_920_000n);
    const results = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        chat(world.app, buyer.apiKey, { model: MODEL, messages: [{ role: "user", content: `hello ${i}` }] }),
      ),
    );
    expect(results.map((r) => r.status)).toEqual(Array(8).fill(200));
    const spent = results.reduce((a, r) => a + (parseDecimal6(r.headers.get("x-svc-cost-usdc") ?? "") ?? 0n), 0n);
    expect(spent).toBeGreaterThan(0n);
    expect(await confirmedOf(world.app, buyer.accountId)).toBe(4_920_000n - spent);
    await expectHoldsReleased(world.app, buyer.accountId);
    await assertBooksBalance(world.app.rt.db);
  });

  test("max_tokens beyond 10,000,000 (e.g. 1e21) is a 400 naming the field; nothing reserved or charged", async () => {
    const buyer = await fundedBuyerKey(world.app, 4_920_000n);
    for (const field of ["max_tokens", "max_completion_tokens"]) {
      const r = await chat(world.app, buyer.apiKey, {
        model: MODEL,
        [field]: 1e21,
        messages: [{ role: "user", content: "hi" }],
      });
      expect([r.status, (r.body as { error?: { code: string; field: string } }).error]).toMatchObject([
        400,
        { code: "invalid_request", field },
      ]);
    }
    expect(await confirmedOf(world.app, buyer.accountId)).toBe(4_920_000n);
  });

  test("a large valid max_tokens reserves a share of the balance: a concurrent request still clears", async () => {
    const buyer = await fundedBuyerKey(world.app, 300_000n); // 0.3 USDC: less than one full cap
    const [big, small] = await Promise.all([
      chat(world.app, buyer.apiKey, {
        model: MODEL,
        max_tokens: 10_000_000,
        messages: [{ role: "user", content: "a long one [[sim:chunk_delay_ms=20]]" }],
      }),
      chat(world.app, buyer.apiKey, { model: MODEL, messages: [{ role: "user", content: "short" }] }),
    ]);
    expect([big.status, small.status]).toEqual([200, 200]);
    await expectHoldsReleased(world.app, buyer.accountId);
    await assertBooksBalance(world.app.rt.db);
  });
});
