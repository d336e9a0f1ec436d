// Issue 30: no event is lost when a process dies between the event and its delivery. The event's
// outbox row commits with the event; a worker that was down when it happened delivers it when it
// starts (its queued job), and so does one started after the job itself was lost (the process died
// after the commit, before queueing it: the worker's start-up sweep queues the row). Once each.
import { afterAll, beforeAll, describe, expect } from "vitest";
import { type SignedInUser, signIn } from "../../../testkit/actors.js";
import { appTest as test } from "../../../testkit/app-test.js";
import {
  hasWebhookId,
  type Receiver,
  sendTestEvent,
  startReceiver,
  verifies,
  webhookFor,
} from "../../../testkit/webhooks.js";
import { withApp } from "../../../testkit/world.js";

// the app runs no worker: its events wait in the outbox (and its job in Redis) for one
test.override("appOptions", { workers: false });

let receiver: Receiver;
beforeAll(async () => {
  receiver = await startReceiver();
});
afterAll(async () => {
  await receiver.close();
});

const cookie = (u: SignedInUser) => ({ cookie: u.cookie });

describe("the outbox", () => {
  test("an event while no worker runs is delivered once by the worker that starts later", async ({ app }) => {
    const user = await signIn(app);
    const hook = await webhookFor(app, cookie(user), { url: receiver.url, events: ["credit.confirmed"] });
    const eventId = await sendTestEvent(app, user, hook.id);
    await new Promise((r) => setTimeout(r, 300));
    expect(receiver.all(hasWebhookId(eventId))).toEqual([]);
    expect(await app.rt.queues.webhooks.getJob(`wh-${eventId}-0`)).toBeDefined();

    await withApp({ beside: app, workers: true }, async () => {
      const got = await receiver.waitFor(hasWebhookId(eventId));
      expect(verifies(hook.secret, got)).toBe(true);
      await new Promise((r) => setTimeout(r, 300));
    });
    // its queued job and the start-up sweep name the same job: one delivery
    expect(receiver.all(hasWebhookId(eventId))).toHaveLength(1);
    const row = await app.rt.db.webhookEvent.findUniqueOrThrow({ where: { id: eventId } });
    expect([row.status, row.attempts]).toEqual(["delivered", 1]);
  });

  test("an event whose job was lost (the process died after the commit) is delivered by a restarted worker", async ({
    app,
  }) => {
    const user = await signIn(app);
    const hook = await webhookFor(app, cookie(user), { url: receiver.url, events: ["credit.confirmed"] });
    const eventId = await sendTestEvent(app, user, hook.id);
    // the crash: the row committed, its job never reached Redis
    await app.rt.queues.webhooks.remove(`wh-${eventId}-0`);
    expect(await app.rt.queues.webhooks.getJob(`wh-${eventId}-0`)).toBeUndefined();
    expect((await app.rt.db.webhookEvent.findUniqueOrThrow({ where: { id: eventId } })).status).toBe("pending");

    await withApp({ beside: app, workers: true }, async () => {
      const got = await receiver.waitFor(hasWebhookId(eventId));
      expect(got.json.type).toBe("webhook.test");
      expect(verifies(hook.secret, got)).toBe(true);
    });
    expect(receiver.all(hasWebhookId(eventId))).toHaveLength(1);
    expect((await app.rt.db.webhookEvent.findUniqueOrThrow({ where: { id: eventId } })).status).toBe("delivered");
  });

  test("an event rolled back with its transaction leaves nothing to deliver", async ({ app }) => {
    const user = await signIn(app);
    const hook = await webhookFor(app, cookie(user), { url: receiver.url, events: ["credit.confirmed"] });
    const outbox = app.rt.services.webhooks.outbox;
    await expect(
      app.rt.db.$transaction(async (tx) => {
        const ids = await outbox.emit(tx, user.accountId, "credit.confirmed", { paymentId: "x" });
        expect(ids).toHaveLength(1);
        throw new Error("the event's own transaction fails");
      }),
    ).rejects.toThrow("the event's own transaction fails");
    expect(await app.rt.db.webhookEvent.count({ where: { endpointId: hook.id } })).toBe(0);
  });
});
