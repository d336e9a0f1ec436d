import { QueueEvents } from "bullmq";
import { describe, expect } from "vitest";
import { createRedis } from "../../../src/adapters/redis/client.js";
import {
  PAYMENT_IDENTIFIER_RETENTION_MS,
  SESSION_RETENTION_MS,
} from "../../../src/domain/maintenance/maintenance-service.js";
import { appTest as test } from "../../../testkit/app-test.js";
import { createAccount } from "../../../testkit/fixtures.js";

test.override("appOptions", { workers: true });

describe("workers (BullMQ)", () => {
  test("the maintenance worker purges expired nonces, long-dead sessions and old payment ids, and keeps live ones", async ({
    app,
  }) => {
    const db = app.rt.db;
    const now = Date.now();
    const account = await createAccount(db);
    await db.siweNonce.createMany({
      data: [
        { nonce: "expired", expiresAt: new Date(now - 1000) },
        { nonce: "live", expiresAt: new Date(now + 600_000) },
      ],
    });
    const old = new Date(now - SESSION_RETENTION_MS - 60_000);
    const base = { accountId: account.id, authProvider: "siwe" as const };
    await db.session.createMany({
      data: [
        { ...base, tokenHash: "dead", expiresAt: old, absoluteExpiresAt: old },
        {
          ...base,
          tokenHash: "live",
          expiresAt: new Date(now + 3600_000),
          absoluteExpiresAt: new Date(now + 86_400_000),
        },
        {
          ...base,
          tokenHash: "recently-expired",
          expiresAt: new Date(now - 1000),
          absoluteExpiresAt: new Date(now + 86_400_000),
        },
      ],
    });
    // payment-identifier ids: one claimed a day ago and answered, one a day ago and never answered
    // (its request died), one claimed just now; only the last stays bound
    const id = (identifier: string, createdAt: Date, answered: boolean) => ({
      payerAddress: "0x00000000000000000000000000000000000000aa",
      identifier,
      route: "POST /x402/v1/chat/completions",
      fingerprint: "f".repeat(64),
      claimToken: crypto.randomUUID(),
      createdAt,
      ...(answered ? { responseStatus: 200, responseBody: {}, responseHeaders: [], completedAt: createdAt } : {}),
    });
    const dayOld = new Date(now - PAYMENT_IDENTIFIER_RETENTION_MS - 60_000);
    await db.paymentIdentifier.createMany({
      data: [
        id("old-answered-0000000", dayOld, true),
        id("old-unanswered-00000", dayOld, false),
        id("recent-answered-0000", new Date(now - 60_000), true),
      ],
    });

    const connection = createRedis(app.rt.config.redis.url, "worker");
    const events = new QueueEvents("maintenance", { connection, prefix: app.rt.keys.bullPrefix() });
    await events.waitUntilReady();
    try {
      const job = await app.rt.queues.maintenance.add("purge-expired", {});
      const result = await job.waitUntilFinished(events, 10_000);
      expect(result).toEqual({ siweNonces: 1, sessions: 1, paymentIdentifiers: 2 });
    } finally {
      await events.close();
      connection.disconnect();
    }
    expect((await db.siweNonce.findMany()).map((n) => n.nonce)).toEqual(["live"]);
    expect((await db.session.findMany({ orderBy: { tokenHash: "asc" } })).map((s) => s.tokenHash)).toEqual([
      "live",
      "recently-expired",
    ]);
    expect((await db.paymentIdentifier.findMany()).map((i) => i.identifier)).toEqual(["recent-answered-0000"]);
  });

  test("ensure-partitions (maintenance) and retention (its own queue) run as jobs", async ({ app }) => {
    const connection = createRedis(app.rt.config.redis.url, "worker");
    const maintenance = new QueueEvents("maintenance", { connection, prefix: app.rt.keys.bullPrefix() });
    const retention = new QueueEvents("retention", { connection, prefix: app.rt.keys.bullPrefix() });
    await Promise.all([maintenance.waitUntilReady(), retention.waitUntilReady()]);
    try {
      // start-up made this month and the next three already: nothing to make
      const ensure = await app.rt.queues.maintenance.add("ensure-partitions", {});
      expect(await ensure.waitUntilFinished(maintenance, 10_000)).toEqual({ created: [] });
      // RETENTION_MONTHS unset: every month is kept
      const run = await app.rt.queues.retention.add("retention", {});
      expect(await run.waitUntilFinished(retention, 10_000)).toEqual({ enabled: false, months: [] });
    } finally {
      await maintenance.close();
      await retention.close();
      connection.disconnect();
    }
  });

  test("queues live under the deployment's Redis prefix", async ({ app }) => {
    const keys = await app.rt.redis.command.keys(`${app.rt.keys.bullPrefix()}:maintenance:*`);
    expect(keys.length).toBeGreaterThan(0);
  });
});
