// Issue 30: webhook deliveries through the BullMQ worker to a receiver the test starts on loopback
// (allowed in local mode: WEBHOOK_ALLOW_PRIVATE defaults to true there). Standard Webhooks
// signatures verify with the `standardwebhooks` package; a receiver that answers 500 three times
// then 200 gets the event once more with the same webhook-id; an endpoint whose event fails every
// attempt is disabled, with a `webhook.disabled` notice. Each attempt's outcome is counted on
// GET /metrics (`svc_webhook_deliveries_total{outcome}`), the disabled endpoints are a gauge.
import { afterAll, beforeAll, describe, expect } from "vitest";
import { call, type SignedInUser, signIn } from "../../../testkit/actors.js";
import { appTest as test } from "../../../testkit/app-test.js";
import { expectError } from "../../../testkit/errors.js";
import type { TestApp } from "../../../testkit/harness.js";
import {
  hasWebhookId,
  type Receiver,
  sendTestEvent,
  startReceiver,
  verifies,
  webhookFor,
} from "../../../testkit/webhooks.js";

// five attempts in all, 50 ms apart
test.override("appOptions", { workers: true, env: { WEBHOOK_RETRY_SCHEDULE_MS: "50,50,50,50" } });

let receiver: Receiver;
beforeAll(async () => {
  receiver = await startReceiver();
});
afterAll(async () => {
  await receiver.close();
});

const cookie = (u: SignedInUser) => ({ cookie: u.cookie });

type Delivery = {
  id: string;
  status: string;
  attempts: number;
  lastStatusCode: number | null;
  lastError: string | null;
};

async function deliveries(app: TestApp, user: SignedInUser, id: string): Promise<Delivery[]> {
  const r = await call(app, { method: "GET", path: `/v1/webhooks/${id}/deliveries`, headers: cookie(user) });
  expect(r.status).toBe(200);
  return (r.body as { data: Delivery[] }).data;
}

/** The delivery-log row of `eventId` once `done` holds for it (polled). */
async function settled(app: TestApp, user: SignedInUser, id: string, eventId: string, done: (d: Delivery) => boolean) {
  for (let i = 0; i < 150; i++) {
    const d = (await deliveries(app, user, id)).find((x) => x.id === eventId);
    if (d && done(d)) return d;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`delivery ${eventId} did not settle`);
}

async function endpoint(app: TestApp, user: SignedInUser, id: string) {
  const r = await call(app, { method: "GET", path: "/v1/webhooks", headers: cookie(user) });
  return (
    r.body as { data: { id: string; status: string; disabledReason: string | null; consecutiveFailures: number }[] }
  ).data.find((w) => w.id === id);
}

/** The operators' webhook figures on GET /metrics (a counter absent until its first count is 0). */
async function webhookMetrics(app: TestApp) {
  const res = await fetch(`${app.baseUrl}/metrics`);
  expect(res.status).toBe(200);
  const text = await res.text();
  const value = (line: string) => {
    const hit = text.split("\n").find((l) => l.startsWith(`${line} `));
    return hit ? Number(hit.slice(line.length + 1)) : 0;
  };
  const outcome = (o: string) => value(`svc_webhook_deliveries_total{outcome="${o}"}`);
  expect(text).toMatch(/^svc_webhook_endpoints_disabled \d+$/m);
  return {
    delivered: outcome("delivered"),
    retrying: outcome("retrying"),
    failed: outcome("failed"),
    endpointsDisabled: value("svc_webhook_endpoints_disabled"),
  };
}

function delta<T extends Record<string, number>>(after: T, before: T): T {
  return Object.fromEntries(Object.entries(after).map(([k, v]) => [k, v - (before[k] ?? 0)])) as T;
}

describe("a delivery", () => {
  test("is a signed Standard Webhooks POST: headers, body, and a signature standardwebhooks verifies", async ({
    app,
  }) => {
    const user = await signIn(app);
    const hook = await webhookFor(app, cookie(user), { url: receiver.url, events: ["credit.confirmed"] });
    const eventId = await sendTestEvent(app, user, hook.id);
    const got = await receiver.waitFor(hasWebhookId(eventId));
    expect(got.headers["content-type"]).toBe("application/json");
    expect(got.headers["webhook-timestamp"]).toMatch(/^\d{10}$/);
    expect(got.headers["webhook-signature"]).toMatch(/^v1,[A-Za-z0-9+/]+=*$/);
    expect(got.json).toEqual({
      type: "webhook.test",
      timestamp: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      data: { webhookId: hook.id, message: expect.any(String) },
    });
    expect(verifies(hook.secret, got)).toBe(true);
    // a tampered body or another secret does not verify
    expect(verifies(hook.secret, { ...got, body: got.body.replace("webhook.test", "webhook.tset") })).toBe(false);
    expect(verifies("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", got)).toBe(false);
    const row = await settled(app, user, hook.id, eventId, (d) => d.status === "delivered");
    expect(row).toMatchObject({ attempts: 1, lastStatusCode: 200, lastError: null });

    // after a rotation, the next delivery verifies with the new secret only
    const rotated = await call(app, {
      method: "POST",
      path: `/v1/webhooks/${hook.id}/rotate-secret`,
      headers: cookie(user),
    });
    const secret = (rotated.body as { secret: string }).secret;
    const next = await receiver.waitFor(hasWebhookId(await sendTestEvent(app, user, hook.id)));
    expect([verifies(secret, next), verifies(hook.secret, next)]).toEqual([true, false]);
  });

  test("a receiver answering 500 three times then 200 gets the event once more, with the same webhook-id", async ({
    app,
  }) => {
    const user = await signIn(app);
    const hook = await webhookFor(app, cookie(user), { url: receiver.url, events: ["credit.confirmed"] });
    receiver.answer = (_n, h) =>
      receiver.all((x) => x.headers["webhook-id"] === h.headers["webhook-id"]).length < 3 ? 500 : 200;
    try {
      const before = await webhookMetrics(app);
      const eventId = await sendTestEvent(app, user, hook.id);
      const row = await settled(app, user, hook.id, eventId, (d) => d.status === "delivered");
      expect(row).toMatchObject({ attempts: 4, lastStatusCode: 200, lastError: null });
      // three failed attempts, each with a retry scheduled, then the one delivery
      expect(delta(await webhookMetrics(app), before)).toEqual({
        delivered: 1,
        retrying: 3,
        failed: 0,
        endpointsDisabled: 0,
      });
      const got = receiver.all(hasWebhookId(eventId));
      expect(got.map((h) => h.status)).toEqual([500, 500, 500, 200]);
      // one event, one id and one body on every attempt; each attempt signed afresh, and verifying
      expect(new Set(got.map((h) => h.body)).size).toBe(1);
      for (const h of got) expect(verifies(hook.secret, h)).toBe(true);
      expect((await endpoint(app, user, hook.id))?.consecutiveFailures).toBe(0);
    } finally {
      receiver.answer = () => 200;
    }
  });

  test("a redirect is not followed: a 3xx is a failed attempt", async ({ app }) => {
    const user = await signIn(app);
    const elsewhere = await startReceiver();
    try {
      const hook = await webhookFor(app, cookie(user), {
        url: `${receiver.url}?redirect`,
        events: ["credit.confirmed"],
      });
      receiver.answer = (_n, h) => (h.headers["webhook-id"] ? 302 : 200);
      const eventId = await sendTestEvent(app, user, hook.id);
      const row = await settled(app, user, hook.id, eventId, (d) => d.attempts >= 1);
      expect(row).toMatchObject({ lastStatusCode: 302, lastError: "HTTP 302" });
      expect(elsewhere.received).toEqual([]);
      // its retries end (delivered now) before the next test counts deliveries
      receiver.answer = () => 200;
      await settled(app, user, hook.id, eventId, (d) => d.status !== "pending");
    } finally {
      receiver.answer = () => 200;
      await elsewhere.close();
    }
  });
});

describe("repeated failure", () => {
  test("an event failing every attempt fails; its endpoint is disabled with a webhook.disabled notice", async ({
    app,
  }) => {
    const user = await signIn(app);
    const failing = await startReceiver();
    failing.answer = () => 503;
    try {
      const dead = await webhookFor(app, cookie(user), { url: failing.url, events: ["credit.confirmed"] });
      const watcher = await webhookFor(app, cookie(user), { url: receiver.url, events: ["webhook.disabled"] });
      const before = await webhookMetrics(app);
      const eventId = await sendTestEvent(app, user, dead.id);
      const row = await settled(app, user, dead.id, eventId, (d) => d.status === "failed");
      expect(row).toMatchObject({ attempts: 5, lastStatusCode: 503, lastError: "HTTP 503" });
      expect(failing.all(hasWebhookId(eventId))).toHaveLength(5);
      // four retries, then given up; the endpoint counts among the disabled ones
      const gaveUp = delta(await webhookMetrics(app), before);
      expect([gaveUp.retrying, gaveUp.failed, gaveUp.endpointsDisabled]).toEqual([4, 1, 1]);

      // the endpoint says why (REST and GraphQL), and the account's other endpoint heard of it
      const disabled = await endpoint(app, user, dead.id);
      expect(disabled?.status).toBe("disabled");
      expect(disabled?.disabledReason).toContain("Every attempt to deliver webhook.test");
      const gql = await call(app, {
        method: "POST",
        path: "/graphql",
        headers: cookie(user),
        body: { query: "{ myWebhooks { id status disabledReason } }" },
      });
      expect((gql.body as { data: { myWebhooks: unknown[] } }).data.myWebhooks).toContainEqual({
        id: dead.id,
        status: "DISABLED",
        disabledReason: disabled?.disabledReason,
      });
      const notice = await receiver.waitFor(
        (h) => h.json.type === "webhook.disabled" && h.json.data.webhookId === dead.id,
      );
      expect(notice.json.data).toMatchObject({ url: failing.url, status: "disabled" });
      expect(verifies(watcher.secret, notice)).toBe(true);

      // nothing is sent to a disabled endpoint; enabling it brings it back
      expectError(
        await call(app, { method: "POST", path: `/v1/webhooks/${dead.id}/test`, headers: cookie(user) }),
        409,
        "conflict",
      );
      failing.answer = () => 200;
      const enabled = await call(app, {
        method: "POST",
        path: `/v1/webhooks/${dead.id}/enable`,
        headers: cookie(user),
      });
      expect(enabled.body).toMatchObject({ status: "active", disabledReason: null, consecutiveFailures: 0 });
      expect((await webhookMetrics(app)).endpointsDisabled).toBe(before.endpointsDisabled);
      const again = await sendTestEvent(app, user, dead.id);
      await failing.waitFor(hasWebhookId(again));
      expect((await settled(app, user, dead.id, again, (d) => d.status === "delivered")).attempts).toBe(1);
    } finally {
      await failing.close();
    }
  });
});
