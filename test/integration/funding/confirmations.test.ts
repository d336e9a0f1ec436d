import { QueueEvents } from "bullmq";
import { createClient } from "graphql-sse";
import { describe, expect } from "vitest";
import { createRedis } from "../../../src/adapters/redis/client.js";
import type { LocalChain } from "../../../src/local/chain/index.js";
import { call } from "../../../testkit/actors.js";
import { assertBooksBalance } from "../../../testkit/books.js";
import { chainEnv, fundedBuyer, post, signedPayment } from "../../../testkit/funding.js";
import { fundingTest as test } from "../../../testkit/funding-test.js";
import { movableClock, type TestApp } from "../../../testkit/harness.js";

const clock = movableClock();
test.override("appOptions", ({ chain }) => ({ env: chainEnv(chain), workers: true, clock }));

async function rpc(chain: LocalChain, method: string, params: unknown[] = []): Promise<unknown> {
  const res = await fetch(chain.rpcUrl, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
  });
  return ((await res.json()) as { result: unknown }).result;
}

async function signup(app: TestApp, chain: LocalChain, amount: number) {
  const buyer = await fundedBuyer(chain, 10_000_000n);
  const c = { path: "/v1/x402/signup" as const, body: { amountMicroUsdc: amount } };
  const r = await post(app, c, await signedPayment(app, buyer, c));
  expect(r.status).toBe(200);
  return { buyer, apiKey: String(r.body.apiKey) };
}

async function runJob(app: TestApp, queue: "confirmations", name: string) {
  const connection = createRedis(app.rt.config.redis.url, "worker");
  const events = new QueueEvents(queue, { connection, prefix: app.rt.keys.bullPrefix() });
  await events.waitUntilReady();
  try {
    const job = await app.rt.queues[queue].add(name, {});
    return await job.waitUntilFinished(events, 15_000);
  } finally {
    await events.close();
    connection.disconnect();
  }
}

type Viewer = {
  viewer: {
    confirmedUsdc: string;
    pendingUsdc: string;
    payments: {
      edges: { node: { status: string; confirmations: number; confirmationsRequired: number; amount: string } }[];
    };
  };
};

async function viewer(app: TestApp, apiKey: string): Promise<Viewer["viewer"]> {
  const r = await call(app, {
    method: "POST",
    path: "/graphql",
    headers: { authorization: `Bearer ${apiKey}` },
    body: {
      query:
        "{ viewer { confirmedUsdc pendingUsdc payments(first: 5) { edges { node { status confirmations confirmationsRequired amount } } } } }",
    },
  });
  return (r.body as { data: Viewer }).data.viewer;
}

describe("confirmations worker", () => {
  test("pending becomes confirmed at depth through the BullMQ worker; GraphQL shows it; paymentConfirmed fires", async ({
    app,
    chain,
  }) => {
    const { apiKey } = await signup(app, chain, 3_000_000);
    let v = await viewer(app, apiKey);
    expect(v).toMatchObject({ confirmedUsdc: "0", pendingUsdc: "3000000" });
    expect(v.payments.edges[0]?.node).toMatchObject({ status: "PENDING", confirmationsRequired: 5, amount: "3000000" });

    const client = createClient({
      url: `${app.baseUrl}/graphql`,
      headers: { authorization: `Bearer ${apiKey}` },
      retryAttempts: 0,
    });
    const it = client.iterate<{ paymentConfirmed: { paymentId: string } }>({
      query: "subscription { paymentConfirmed { paymentId at } }",
    });
    const first = it.next();
    await new Promise((r) => setTimeout(r, 300)); // let the subscription reach Redis

    expect(await runJob(app, "confirmations", "confirm-pending")).toMatchObject({ confirmed: 0 });
    await chain.mine(5);
    expect(await runJob(app, "confirmations", "confirm-pending")).toMatchObject({ confirmed: 1 });
    v = await viewer(app, apiKey);
    expect(v).toMatchObject({ confirmedUsdc: "3000000", pendingUsdc: "0" });
    expect(v.payments.edges[0]?.node.status).toBe("CONFIRMED");
    expect(v.payments.edges[0]?.node.confirmations).toBeGreaterThanOrEqual(5);

    const event = await Promise.race([first, new Promise((r) => setTimeout(() => r(null), 5000))]);
    expect(event).not.toBeNull();
    const payment = await app.rt.db.payment.findFirstOrThrow({ where: { status: "confirmed" } });
    expect(
      (event as { value: { data: { paymentConfirmed: { paymentId: string } } } }).value.data.paymentConfirmed.paymentId,
    ).toBe(payment.id);
    await it.return?.();
    client.dispose();
    await assertBooksBalance(app.rt.db);
  });

  // last in the file: it moves the chain's clock past the authorizations' validBefore
  test("a transfer that left the canonical chain is never confirmed; its credit is reversed once its authorization expired unused", async ({
    app,
    chain,
  }) => {
    const snapshot = await rpc(chain, "evm_snapshot");
    const { apiKey } = await signup(app, chain, 2_000_000);
    expect((await viewer(app, apiKey)).pendingUsdc).toBe("2000000");
    // the block with the settlement is dropped (a reorg), then the chain grows past the depth
    await rpc(chain, "evm_revert", [snapshot]);
    await chain.mine(10);
    let r = await app.rt.services.payments.confirmPending();
    expect(r).toMatchObject({ confirmed: 0, reversed: 0 });
    expect((await viewer(app, apiKey)).pendingUsdc).toBe("2000000");
    // however late the app's clock says it is, the chain decides: the authorization is unused, but
    // still valid on chain
    clock.advance(3_600_000);
    r = await app.rt.services.payments.confirmPending();
    expect(r).toMatchObject({ confirmed: 0, reversed: 0 });
    // the chain passes the authorization's validBefore (300 s after signing) by more than the depth
    await rpc(chain, "evm_increaseTime", [600]);
    await chain.mine(10);
    r = await app.rt.services.payments.confirmPending();
    expect(r.reversed).toBe(1);
    const v = await viewer(app, apiKey);
    expect(v).toMatchObject({ confirmedUsdc: "0", pendingUsdc: "0" });
    expect(v.payments.edges[0]?.node.status).toBe("FAILED");
    await assertBooksBalance(app.rt.db);
  });
});
