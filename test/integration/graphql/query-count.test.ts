import { describe, expect } from "vitest";
import { call, createKey, signIn } from "../../../testkit/actors.js";
import { appTest as test } from "../../../testkit/app-test.js";
import type { TestApp } from "../../../testkit/harness.js";
import { fundConfirmed } from "../../../testkit/market.js";

/**
 * N+1 guard (STYLE §6): the number of SQL statements a GraphQL list query issues does not grow with
 * the number of rows it returns.
 */
let queries: string[] = [];
test.override("appOptions", { onQuery: (q) => queries.push(q) });

const VIEWER = `{ viewer { accountId confirmedUsdc apiKeys { id name keyPrefix lastUsedAt limitUsdc limitReset
    maxPriceCentsPerDollar models expiresAt spentUsdc remainingUsdc resetsAt }
  ledger(first: 20) { edges { node { id amount kind } } }
  payments(first: 20) { edges { node { id status amount } } } } }`;

async function countFor(app: TestApp, cookie: string): Promise<number> {
  queries = [];
  const r = await call(app, { method: "POST", path: "/graphql", headers: { cookie }, body: { query: VIEWER } });
  expect((r.body as { errors?: unknown }).errors).toBeUndefined();
  return queries.filter((q) => !/^\s*(BEGIN|COMMIT|ROLLBACK)/i.test(q) && !/sessions/i.test(q)).length;
}

describe("GraphQL query counts", () => {
  test("viewer with its keys, ledger and payments: the same statements for 1 row or 8", async ({ app }) => {
    const small = await signIn(app);
    await createKey(app, small, "k0");
    await fundConfirmed(app, small.accountId, 1_000_000n);
    const big = await signIn(app);
    for (let i = 0; i < 8; i++) {
      const k = await createKey(app, big, `k${i}`);
      await fundConfirmed(app, big.accountId, 1_000_000n);
      // keys of every period: one statement reads the spend of all of them
      const limitReset = (["daily", "weekly", "monthly", "never"] as const)[i % 4];
      await app.rt.db.apiKey.update({ where: { id: k.id }, data: { limitMicroUsdc: 1_000_000n, limitReset } });
    }
    const few = await countFor(app, small.cookie);
    const many = await countFor(app, big.cookie);
    expect(few).toBeGreaterThan(0);
    expect(many).toBe(few);
  });
});
