// Issue 38 item 3: a webhook receiver cannot hold a delivery open, nor delay another account's.
// Receivers on loopback (WEBHOOK_ALLOW_PRIVATE, on in local mode) that stream a body forever, send a
// body far larger than 64 KiB, never answer, or trickle their headers forever: each connection is
// closed at the status line or at the attempt's deadline (counted on the receiver's side), a failed
// attempt says why, and while one account's endpoints hang, another account's credit.confirmed is
// delivered. `POST /v1/webhooks/{id}/test` is limited per account (429 `rate_limited`).
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect } from "vitest";
import { WEBHOOK_TESTS_PER_MINUTE } from "../../../src/contract/webhooks.js";
import { call, type SignedInUser, signIn } from "../../../testkit/actors.js";
import { appTest as test } from "../../../testkit/app-test.js";
import { expectError } from "../../../testkit/errors.js";
import type { TestApp } from "../../../testkit/harness.js";
import { movableClock } from "../../../testkit/harness.js";
import {
  LARGE_BODY_BYTES,
  type Receiver,
  startHostileReceiver,
  startReceiver,
  webhookFor,
} from "../../../testkit/webhooks.js";

// a 4 s deadline per attempt; a failed attempt's retry is 10 min away (after the file)
const DEADLINE_MS = 4_000;
const clock = movableClock();
test.override("appOptions", {
  workers: true,
  clock,
  env: { WEBHOOK_TIMEOUT_MS: String(DEADLINE_MS), WEBHOOK_RETRY_SCHEDULE_MS: "600000" },
});

let healthy: Receiver;
beforeAll(async () => {
  healthy = await startReceiver();
});
afterAll(async () => {
  await healthy.close();
});

const cookie = (u: SignedInUser) => ({ cookie: u.cookie });

async function sendTest(app: TestApp, user: SignedInUser, id: string) {
  return call(app, { method: "POST", path: `/v1/webhooks/${id}/test`, headers: cookie(user) });
}

/** The outbox row of `eventId` once `done` holds for it (polled, generous bound). */
async function row(app: TestApp, eventId: string, done: (r: { status: string; attempts: number }) => boolean) {
  for (let i = 0; i < 600; i++) {
    const r = await app.rt.db.webhookEvent.findUniqueOrThrow({ where: { id: eventId } });
    if (done(r)) return r;
    await new Promise((res) => setTimeout(res, 50));
  }
  throw new Error(`webhook event ${eventId} did not settle`);
}

/** The first of the rows `ids` for which `done` holds (polled, generous bound). */
async function anyRow(app: TestApp, ids: string[], done: (r: { status: string; attempts: number }) => boolean) {
  for (let i = 0; i < 600; i++) {
    const found = (await app.rt.db.webhookEvent.findMany({ where: { id: { in: ids } } })).find(done);
    if (found) return found;
    await new Promise((res) => setTimeout(res, 50));
  }
  throw new Error("no webhook event settled");
}

/** `credit.confirmed` for `accountId`, written through the outbox as the confirmations job writes it. */
async function creditConfirmed(app: TestApp, accountId: string): Promise<{ paymentId: string; ids: string[] }> {
  const outbox = app.rt.services.webhooks.outbox;
  const paymentId = randomUUID();
  const ids = await app.rt.db.$transaction((tx) =>
    outbox.emit(tx, accountId, "credit.confirmed", {
      paymentId,
      kind: "top_up",
      amountUsdc: "1.000000",
      transaction: null,
      confirmations: 20,
      confirmedAt: new Date().toISOString(),
    }),
  );
  await outbox.dispatch(ids);
  return { paymentId, ids };
}

describe("a receiver that would hold the connection open", () => {
  test("one answering 200 and streaming a body forever: delivered, and its connection closed", async ({ app }) => {
    const stream = await startHostileReceiver("stream");
    try {
      const user = await signIn(app);
      const hook = await webhookFor(app, cookie(user), { url: stream.url, events: ["credit.confirmed"] });
      const sent = await sendTest(app, user, hook.id);
      expect(sent.status).toBe(202);
      const eventId = (sent.body as { id: string }).id;
      // the status line decides (2xx: delivered); the body is never read
      expect(await row(app, eventId, (r) => r.status !== "pending")).toMatchObject({
        status: "delivered",
        attempts: 1,
        lastStatusCode: 200,
        lastError: null,
      });
      expect(stream.requests).toEqual([eventId]);
      // nothing of the connection remains (the receiver still streams: only our side can close it)
      await stream.until((r) => r.accepted === 1 && r.open === 0, 2 * DEADLINE_MS + 10_000);
    } finally {
      await stream.close();
    }
  });

  test("a body far larger than 64 KiB is not read: the connection closes before it is written", async ({ app }) => {
    const large = await startHostileReceiver("large");
    try {
      const user = await signIn(app);
      const hook = await webhookFor(app, cookie(user), { url: large.url, events: ["credit.confirmed"] });
      const sent = await sendTest(app, user, hook.id);
      const eventId = (sent.body as { id: string }).id;
      expect(await row(app, eventId, (r) => r.status !== "pending")).toMatchObject({
        status: "delivered",
        lastStatusCode: 200,
      });
      await large.until((r) => r.accepted === 1 && r.open === 0, 2 * DEADLINE_MS + 10_000);
      // the receiver could hand the connection only what socket buffers hold, never the 32 MiB
      expect(large.bodiesFinished).toBe(0);
      expect(large.bodyBytesWritten[0]).toBeLessThan(LARGE_BODY_BYTES);
    } finally {
      await large.close();
    }
  });
});

describe("receivers that never answer", () => {
  test("fail at the deadline with a reason, leave no connection open, and never delay another account", async ({
    app,
  }) => {
    const silent = await startHostileReceiver("silent");
    const trickle = await startHostileReceiver("trickle");
    try {
      // one account with nine endpoints that never answer (more than the worker runs at once) …
      const hostile = await signIn(app);
      const silentHooks: string[] = [];
      for (let i = 0; i < 9; i++) {
        const h = await webhookFor(app, cookie(hostile), { url: `${silent.url}?n=${i}`, events: ["credit.confirmed"] });
        silentHooks.push(h.id);
      }
      // … another whose endpoint answers a status line and then trickles header bytes forever …
      const trickler = await signIn(app);
      const trickleHook = await webhookFor(app, cookie(trickler), { url: trickle.url, events: ["credit.confirmed"] });
      // … and a third with a healthy receiver
      const other = await signIn(app);
      await webhookFor(app, cookie(other), { url: healthy.url, events: ["credit.confirmed"] });

      const hung = await creditConfirmed(app, hostile.accountId);
      const trickled = await creditConfirmed(app, trickler.accountId);
      expect(hung.ids).toHaveLength(9);
      await silent.until((r) => r.open >= 1);
      await trickle.until((r) => r.open === 1);

      // the other account's event arrives while every hung attempt is still waiting on its receiver
      const { paymentId } = await creditConfirmed(app, other.accountId);
      await healthy.waitFor((h) => h.json.type === "credit.confirmed" && h.json.data.paymentId === paymentId);
      const hostileRows = await app.rt.db.webhookEvent.findMany({
        where: { id: { in: [...hung.ids, ...trickled.ids] } },
      });
      expect(hostileRows.map((r) => r.attempts)).toEqual(hostileRows.map(() => 0));
      // and the hung account holds at most two connections at once, whatever its endpoints
      expect(silent.accepted).toBeLessThanOrEqual(2);

      // each hung attempt fails at the deadline, saying so; its retry is scheduled
      const reason = `no answer within ${DEADLINE_MS} ms`;
      const trickleRow = await row(app, trickled.ids[0] as string, (r) => r.attempts === 1);
      expect(trickleRow).toMatchObject({ status: "pending", lastStatusCode: null, lastError: reason });
      const firstHung = await anyRow(app, hung.ids, (r) => r.attempts === 1);
      expect(firstHung).toMatchObject({ status: "pending", lastStatusCode: null, lastError: reason });

      // once the endpoints are gone and the attempts under way reach their deadline, no connection remains
      for (const id of [...silentHooks, trickleHook.id]) {
        const del = await call(app, {
          method: "DELETE",
          path: `/v1/webhooks/${id}`,
          headers: cookie(silentHooks.includes(id) ? hostile : trickler),
        });
        expect(del.status).toBe(200);
      }
      await silent.until((r) => r.open === 0, 3 * DEADLINE_MS + 10_000);
      await trickle.until((r) => r.open === 0, 3 * DEADLINE_MS + 10_000);
      expect(trickle.accepted).toBe(1);
    } finally {
      await silent.close();
      await trickle.close();
    }
  });
});

describe("the lanes", () => {
  test("an endpoint's burst goes one attempt at a time, each handed on by the one before", async ({ app }) => {
    const slow = await startHostileReceiver("slow");
    try {
      const user = await signIn(app);
      await webhookFor(app, cookie(user), { url: slow.url, events: ["credit.confirmed"] });
      const burst: string[] = [];
      for (let i = 0; i < 6; i++) burst.push(...(await creditConfirmed(app, user.accountId)).ids);
      // well inside the sweeper's first period (30 s): the lanes hand each row on, none waits for a sweep
      await slow.until((r) => r.requests.length >= burst.length, 20_000);
      // each once (order is not promised: a row's own job may take a freed lane before the hand-off)
      expect([...slow.requests].sort()).toEqual([...burst].sort());
      expect(slow.maxConcurrent).toBe(1);
      for (const id of burst) expect((await row(app, id, (r) => r.status !== "pending")).status).toBe("delivered");
    } finally {
      await slow.close();
    }
  });
});

describe("POST /v1/webhooks/{id}/test", () => {
  test(`at most ${WEBHOOK_TESTS_PER_MINUTE} a minute per account: the next is 429 rate_limited, nothing sent`, async ({
    app,
  }) => {
    // at the start of a minute: the window cannot turn while the test runs
    clock.set(new Date(Math.ceil((Date.now() + 1000) / 60_000) * 60_000));
    const user = await signIn(app);
    const hook = await webhookFor(app, cookie(user), { url: healthy.url, events: ["credit.confirmed"] });
    const sent: string[] = [];
    for (let i = 0; i < WEBHOOK_TESTS_PER_MINUTE; i++) {
      const r = await sendTest(app, user, hook.id);
      expect(r.status).toBe(202);
      sent.push((r.body as { id: string }).id);
    }
    const refused = await sendTest(app, user, hook.id);
    expectError(refused, 429, "rate_limited");
    const retryAfter = Number(refused.headers.get("retry-after"));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    // GraphQL's sendTestWebhook is the same service call, under the same limit
    const gql = await call(app, {
      method: "POST",
      path: "/graphql",
      headers: cookie(user),
      body: {
        query: "mutation($input: WebhookIdInput!) { sendTestWebhook(input: $input) { id } }",
        variables: { input: { id: hook.id } },
      },
    });
    expect((gql.body as { errors?: { extensions?: { code?: string } }[] }).errors?.[0]?.extensions?.code).toBe(
      "rate_limited",
    );

    // nothing was written for the refused ones: five rows, five deliveries
    for (const id of sent) await healthy.waitFor((h) => h.headers["webhook-id"] === id);
    expect(await app.rt.db.webhookEvent.count({ where: { endpointId: hook.id } })).toBe(WEBHOOK_TESTS_PER_MINUTE);
    expect(healthy.all((h) => h.json.data.webhookId === hook.id)).toHaveLength(WEBHOOK_TESTS_PER_MINUTE);

    // another account is not limited by this one's tests
    const other = await signIn(app);
    const otherHook = await webhookFor(app, cookie(other), { url: healthy.url, events: ["credit.confirmed"] });
    expect((await sendTest(app, other, otherHook.id)).status).toBe(202);

    // the next minute, the account may test again
    clock.advance(60_000);
    expect((await sendTest(app, user, hook.id)).status).toBe(202);
  });
});
