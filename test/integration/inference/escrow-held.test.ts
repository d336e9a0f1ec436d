// Issue 26, finding 9 (docs/decisions.md "Issue 26 — finding 9"): what a buyer sees as held and
// available with escrow slices lingering. An idle lingering slice's unused part is available, in the
// process that holds it and in any other; only requests actually in flight hold money; the held part
// is the same through REST, GraphQL and MCP; a slice given back publishes balanceChanged, so an open
// dashboard reads again; and the balance a lingering slice holds is spendable from another process at
// once. Books balanced throughout.
import { randomUUID } from "node:crypto";
import { createClient } from "graphql-sse";
import { describe, expect } from "vitest";
import { call } from "../../../testkit/actors.js";
import { fileWorld, appTest as test } from "../../../testkit/app-test.js";
import { assertBooksBalance } from "../../../testkit/books.js";
import type { TestApp } from "../../../testkit/harness.js";
import { addSupply, chat, confirmedOf, fundedBuyerKey, reservedOf, withdrawSupply } from "../../../testkit/market.js";

// long enough that every read below happens while the slice still lingers
const LINGER_MS = 4_000;
test.override("appOptions", { sim: {}, syncCatalog: true, peer: true, env: { ESCROW_LINGER_MS: String(LINGER_MS) } });
const world = fileWorld(test);
const MODEL = "zai-org-glm-5-1";
const MSG = { model: MODEL, messages: [{ role: "user", content: "hello" }], max_tokens: 64 };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const micro = (s: unknown) => BigInt(String(s).replace(".", ""));

async function supply() {
  const s = await addSupply(world.app, world.sim, [{ priceCents: 40, quantityMicroDiem: 200_000_000n }]);
  world.app.rt.services.inference.invalidateBook();
  world.peer.rt.services.inference.invalidateBook();
  return s;
}

/** The buyer's figures as every surface shows them: REST (agent and account), GraphQL, MCP. */
async function figures(app: TestApp, buyer: Awaited<ReturnType<typeof fundedBuyerKey>>) {
  const bearer = { authorization: `Bearer ${buyer.apiKey}` };
  const me = await call(app, { method: "GET", path: "/v1/agent/me", headers: bearer });
  expect(me.status).toBe(200);
  const account = await call(app, { method: "GET", path: "/v1/account", headers: { cookie: buyer.user.cookie } });
  expect(account.status).toBe(200);
  const gql = await call(app, {
    method: "POST",
    path: "/graphql",
    headers: bearer,
    body: { query: "{ viewer { confirmedUsdc reservedUsdc availableUsdc } }" },
  });
  expect(gql.status).toBe(200);
  const mcp = await app.rt.services.accounts.getSummary({ accountId: buyer.accountId });
  const m = me.body as { confirmedUsdc: string; availableUsdc: string };
  const a = account.body as { confirmedUsdc: string; reservedUsdc: string; availableUsdc: string };
  const v = (gql.body as { data: { viewer: Record<string, string> } }).data.viewer;
  return {
    me: { confirmed: micro(m.confirmedUsdc), available: micro(m.availableUsdc) },
    account: { confirmed: micro(a.confirmedUsdc), held: micro(a.reservedUsdc), available: micro(a.availableUsdc) },
    graphql: {
      confirmed: BigInt(v.confirmedUsdc ?? ""),
      held: BigInt(v.reservedUsdc ?? ""),
      available: BigInt(v.availableUsdc ?? ""),
    },
    mcp: { held: mcp.balances.reservedMicroUsdc, available: mcp.balances.availableMicroUsdc },
  };
}

function expectNothingHeld(f: Awaited<ReturnType<typeof figures>>, confirmed: bigint) {
  expect(f.me).toEqual({ confirmed, available: confirmed });
  expect(f.account).toEqual({ confirmed, held: 0n, available: confirmed });
  expect(f.graphql).toEqual({ confirmed, held: 0n, available: confirmed });
  expect(f.mcp).toEqual({ held: 0n, available: confirmed });
}

describe("held and available with lingering escrow slices", () => {
  test("after three serial chats with none in flight, everything is available, read in the holding process or another", async () => {
    const s = await supply();
    const buyer = await fundedBuyerKey(world.app, 1_000_000n);
    for (let i = 0; i < 3; i++) expect((await chat(world.app, buyer.apiKey, MSG)).status).toBe(200);
    const confirmed = await confirmedOf(world.app, buyer.accountId);
    expect(confirmed).toBeLessThan(1_000_000n);
    // the process still holds the buyer's slice, idle
    expect(await reservedOf(world.app, buyer.accountId)).toBeGreaterThan(0n);
    expectNothingHeld(await figures(world.app, buyer), confirmed);
    expectNothingHeld(await figures(world.peer, buyer), confirmed);
    // the slice was lingering all along (the reads did not give it back)
    expect(await reservedOf(world.app, buyer.accountId)).toBeGreaterThan(0n);
    await assertBooksBalance(world.app.rt.db);
    await withdrawSupply(world.app, s);
  });

  test("a request in flight on a lingering slice holds its maximum, seen from both processes; once it ends nothing is held", async () => {
    const s = await supply();
    const buyer = await fundedBuyerKey(world.app, 2_000_000n);
    expect((await chat(world.app, buyer.apiKey, MSG)).status).toBe(200);
    const confirmed = await confirmedOf(world.app, buyer.accountId);
    const slow = chat(world.app, buyer.apiKey, {
      ...MSG,
      messages: [{ role: "user", content: "slow [[sim:chunks=8]] [[sim:chunk_delay_ms=250]]" }],
    });
    // wait until it is admitted (held in memory only: the lingering slice covers it)
    let during = await figures(world.peer, buyer);
    for (let i = 0; i < 100 && during.account.held === 0n; i++) {
      await sleep(20);
      during = await figures(world.peer, buyer);
    }
    const local = await figures(world.app, buyer);
    const held = during.account.held;
    expect(held).toBeGreaterThan(0n);
    // the request's maximum at the ceiling: far less than the slice the process holds
    expect(held).toBeLessThan(await reservedOf(world.app, buyer.accountId));
    for (const f of [during, local]) {
      expect(f.account).toEqual({ confirmed, held, available: confirmed - held });
      expect(f.graphql).toEqual({ confirmed, held, available: confirmed - held });
      expect(f.me).toEqual({ confirmed, available: confirmed - held });
      expect(f.mcp).toEqual({ held, available: confirmed - held });
    }
    expect((await slow).status).toBe(200);
    const after = await confirmedOf(world.app, buyer.accountId);
    expect(await reservedOf(world.app, buyer.accountId)).toBeGreaterThan(0n);
    expectNothingHeld(await figures(world.peer, buyer), after);
    expectNothingHeld(await figures(world.app, buyer), after);
    await assertBooksBalance(world.app.rt.db);
    await withdrawSupply(world.app, s);
  });

  test("a holder that cannot answer counts its whole slice as held (never more available than is free)", async () => {
    const s = await supply();
    const buyer = await fundedBuyerKey(world.app, 1_000_000n);
    expect((await chat(world.app, buyer.apiKey, MSG)).status).toBe(200);
    const confirmed = await confirmedOf(world.app, buyer.accountId);
    const slice = await reservedOf(world.app, buyer.accountId);
    expect(slice).toBeGreaterThan(0n);
    // a slice of a holder that no process answers for (one that stalled or died)
    const ghost = await world.app.rt.db.escrowHolder.create({
      data: { id: randomUUID(), expiresAt: new Date(Date.now() + 60_000) },
    });
    await world.app.rt.db.$transaction([
      world.app.rt.db.buyerEscrow.create({
        data: { accountId: buyer.accountId, holder: ghost.id, amountMicroUsdc: 1_000n },
      }),
      world.app.rt.db.account.update({
        where: { id: buyer.accountId },
        data: { reservedMicroUsdc: { increment: 1_000n } },
      }),
    ]);
    const f = await figures(world.peer, buyer);
    expect(f.account).toEqual({ confirmed, held: 1_000n, available: confirmed - 1_000n });
    await world.app.rt.db.$transaction([
      world.app.rt.db.buyerEscrow.delete({
        where: { accountId_holder: { accountId: buyer.accountId, holder: ghost.id } },
      }),
      world.app.rt.db.account.update({
        where: { id: buyer.accountId },
        data: { reservedMicroUsdc: { decrement: 1_000n } },
      }),
      world.app.rt.db.escrowHolder.delete({ where: { id: ghost.id } }),
    ]);
    await assertBooksBalance(world.app.rt.db);
    await withdrawSupply(world.app, s);
  });

  test("a lingering slice given back publishes balanceChanged (another process's subscriber hears it)", async () => {
    const s = await supply();
    const buyer = await fundedBuyerKey(world.app, 1_000_000n);
    const client = createClient({
      url: `${world.peer.baseUrl}/graphql`,
      headers: { authorization: `Bearer ${buyer.apiKey}` },
      retryAttempts: 0,
    });
    const kinds: string[] = [];
    const it = client.iterate<{ balanceChanged: { kind: string } }>({
      query: "subscription { balanceChanged { kind at } }",
    });
    const reader = (async () => {
      for await (const r of it) if (r.data) kinds.push(r.data.balanceChanged.kind);
    })().catch(() => undefined);
    try {
      // no acknowledgement of the subscription: chat until its clear event arrives (bounded)
      for (let i = 0; i < 20 && !kinds.includes("clear"); i++) {
        expect((await chat(world.app, buyer.apiKey, MSG)).status).toBe(200);
        await sleep(100);
      }
      expect(kinds).toContain("clear");
      expect(kinds).not.toContain("escrow_returned");
      expect(await reservedOf(world.app, buyer.accountId)).toBeGreaterThan(0n);
      // the timer gives the idle slice back after the linger period, and says so
      await expect.poll(() => kinds.includes("escrow_returned"), { timeout: 3 * LINGER_MS, interval: 50 }).toBe(true);
      expect(await reservedOf(world.app, buyer.accountId)).toBe(0n);
    } finally {
      await it.return?.();
      client.dispose();
      await reader;
    }
    await assertBooksBalance(world.app.rt.db);
    await withdrawSupply(world.app, s);
  });

  test("what a lingering slice holds is spendable from another process at once, in full", async () => {
    const s = await supply();
    // the first request's slice takes nearly all of the balance and lingers in the first process
    const buyer = await fundedBuyerKey(world.app, 60_000n);
    const body = { ...MSG, max_tokens: 4_000 };
    const first = await chat(world.app, buyer.apiKey, body);
    expect(first.status, JSON.stringify(first.body)).toBe(200);
    const confirmed = await confirmedOf(world.app, buyer.accountId);
    expect(await reservedOf(world.app, buyer.accountId)).toBe(confirmed);
    const seen = await figures(world.peer, buyer);
    expect(seen.me.available).toBe(confirmed);
    // the other process admits a request as large as the first at once (escrow pressure)
    const second = await chat(world.peer, buyer.apiKey, body);
    expect(second.status, JSON.stringify(second.body)).toBe(200);
    expect(await reservedOf(world.app, buyer.accountId)).toBeGreaterThan(0n);
    await assertBooksBalance(world.app.rt.db);
    await withdrawSupply(world.app, s);
  });

  test("a request that fits in availableUsdc only with another process's idle slice is admitted in full there, not shrunk", async () => {
    const s = await supply();
    const body = { ...MSG, max_tokens: 4_000 };
    // how large a slice one such request takes with plenty of balance (eight of its maxima)
    const probe = await fundedBuyerKey(world.app, 10_000_000n);
    expect((await chat(world.app, probe.apiKey, body)).status).toBe(200);
    const slice = await reservedOf(world.app, probe.accountId);
    const max = slice / 8n;
    // a buyer whose first request leaves that slice lingering and only half a maximum outside it
    const buyer = await fundedBuyerKey(world.app, slice + max / 2n);
    expect((await chat(world.app, buyer.apiKey, body)).status).toBe(200);
    const confirmed = await confirmedOf(world.app, buyer.accountId);
    expect(confirmed - (await reservedOf(world.app, buyer.accountId))).toBeLessThan(max);
    expect((await figures(world.peer, buyer)).me.available).toBe(confirmed);
    // the other process: a request whose maximum is more than the balance no slice holds, and less
    // than availableUsdc, gets the completion it asked for (not a cap sized to what was left)
    const second = await chat(world.peer, buyer.apiKey, {
      ...body,
      messages: [{ role: "user", content: "hello [[sim:tokens=3000]]" }],
    });
    expect(second.status, JSON.stringify(second.body)).toBe(200);
    expect((second.body as { usage: { completion_tokens: number } }).usage.completion_tokens).toBe(3_000);
    await assertBooksBalance(world.app.rt.db);
    await withdrawSupply(world.app, s);
  });
});
