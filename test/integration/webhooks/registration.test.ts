// Issue 30, deliverables 3 and 4: registering webhook endpoints (REST and GraphQL), the SSRF rule at
// registration with private addresses NOT allowed (WEBHOOK_ALLOW_PRIVATE=false), the 10-endpoint
// cap, ownership, the secret shown once and sealed at rest.

import { Webhook } from "standardwebhooks";
import { describe, expect } from "vitest";
import {
  createdWebhookResponse,
  webhookDelivery,
  webhookDeliveryList,
  webhookList,
} from "../../../src/contract/webhooks.js";
import { bearer, call, type SignedInUser, signIn } from "../../../testkit/actors.js";
import { appTest as test } from "../../../testkit/app-test.js";
import { expectAuthFailed, expectError } from "../../../testkit/errors.js";
import type { TestApp } from "../../../testkit/harness.js";
import { hostsResolver, registerWebhook, webhookFor } from "../../../testkit/webhooks.js";

/** The names this file's app resolves (a test changes one: DNS rebinding). */
const HOSTS: Record<string, string[]> = {
  "hooks.example.test": ["93.184.216.34"],
  "internal.example.test": ["10.0.0.1"],
  "dual.example.test": ["93.184.216.34", "::1"],
  "rebind.example.test": ["93.184.216.34"],
};
test.override("appOptions", { env: { WEBHOOK_ALLOW_PRIVATE: "false" }, resolveHost: hostsResolver(HOSTS) });

const URL_OK = "https://hooks.example.test/svc";
const cookie = (u: SignedInUser) => ({ cookie: u.cookie });

async function listOf(app: TestApp, headers: Record<string, string>) {
  const r = await call(app, { method: "GET", path: "/v1/webhooks", headers });
  expect(r.status).toBe(200);
  return r.body as {
    data: { id: string; url: string; events: string[]; status: string; secret?: string }[];
    cap: number;
  };
}

type GqlError = { message: string; extensions?: { code?: string; details?: { field?: string } } };

async function gql(app: TestApp, headers: Record<string, string>, query: string, variables: object = {}) {
  const r = await call(app, { method: "POST", path: "/graphql", headers, body: { query, variables } });
  return r.body as { data?: Record<string, unknown> | null; errors?: GqlError[] };
}

describe("registration: the URL, with private addresses not allowed", () => {
  test.for([
    ["http to loopback", "http://127.0.0.1:8080/hook", "must use https"],
    ["https to loopback", "https://127.0.0.1/hook", "127.0.0.1"],
    ["the cloud metadata address", "https://169.254.169.254/latest/meta-data/", "169.254.169.254"],
    ["a name resolving to 10.0.0.1", "https://internal.example.test/hook", "10.0.0.1"],
    ["a name with one loopback address among public ones", "https://dual.example.test/hook", "::1"],
    ["a name that does not resolve", "https://nowhere.example.test/hook", "does not resolve"],
    ["an IPv6 link-local literal", "https://[fe80::1]/hook", "fe80::1"],
    ["not a URL", "hooks.example.test/svc", "url must be an absolute https URL"],
    ["another scheme", "ftp://hooks.example.test/svc", "url must be an absolute https URL"],
  ] as const)("%s is 400 naming url; nothing created", async ([, url, says], { app, agent }) => {
    const r = await registerWebhook(app, bearer(agent.apiKey), { url, events: ["credit.confirmed"] });
    expectError(r, 400, "invalid_request");
    const err = (r.body as { error: { message: string; field: string } }).error;
    expect(err.field).toBe("url");
    expect(err.message).toContain(says);
    expect((await listOf(app, bearer(agent.apiKey))).data.filter((w) => w.url === url)).toEqual([]);
  });

  test("a public https URL registers: 201 with the secret once (whsec_ + base64 of 32 bytes)", async ({ app }) => {
    const user = await signIn(app);
    const r = await registerWebhook(app, cookie(user), {
      url: URL_OK,
      events: ["credit.confirmed", "offer.depleted", "credit.confirmed"],
      description: "ops",
    });
    expect(r.status).toBe(201);
    const body = r.body as Record<string, unknown>;
    expect(body).toMatchObject({
      url: URL_OK,
      events: ["credit.confirmed", "offer.depleted"],
      description: "ops",
      status: "active",
      disabledReason: null,
      balanceLowThresholdUsdc: null,
      consecutiveFailures: 0,
    });
    // the answer is what /openapi.json documents, field for field
    createdWebhookResponse.strict().parse(body);
    webhookList.strict().parse((await call(app, { method: "GET", path: "/v1/webhooks", headers: cookie(user) })).body);
    const secret = String(body.secret);
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]+=*$/);
    expect(Buffer.from(secret.slice(6), "base64").length).toBeGreaterThanOrEqual(24);
    expect(() => new Webhook(secret)).not.toThrow();
    // never again: not in the list, and not stored in the clear
    const listed = await listOf(app, cookie(user));
    expect(listed.data.find((w) => w.id === body.id)).not.toHaveProperty("secret");
    expect(JSON.stringify(listed)).not.toContain(secret);
    const row = await app.rt.db.webhookEndpoint.findUniqueOrThrow({ where: { id: String(body.id) } });
    expect(Buffer.from(row.secretCiphertext).toString("utf8")).not.toContain(secret.slice(6));
    expect(Buffer.from(row.secretCiphertext).toString("base64")).not.toContain(secret.slice(6, 20));
  });
});

describe("at delivery", () => {
  test("the addresses are checked again: a name that now resolves to the metadata address is not reached", async ({
    app,
  }) => {
    const user = await signIn(app);
    const hook = await webhookFor(app, cookie(user), {
      url: "https://rebind.example.test/x",
      events: ["credit.confirmed"],
    });
    HOSTS["rebind.example.test"] = ["169.254.169.254"];
    const sent = await call(app, { method: "POST", path: `/v1/webhooks/${hook.id}/test`, headers: cookie(user) });
    const eventId = (sent.body as { id: string }).id;
    // this file runs no worker: one attempt, as the worker's job would make it
    expect(await app.rt.services.webhooks.deliver(eventId, 0)).toBe("retrying");
    const row = await app.rt.db.webhookEvent.findUniqueOrThrow({ where: { id: eventId } });
    expect(row).toMatchObject({ status: "pending", attempts: 1, lastStatusCode: null });
    expect(row.lastError).toContain("address refused");
    expect(row.lastError).toContain("169.254.169.254");
    // a stale job (the same attempt again) changes nothing
    expect(await app.rt.services.webhooks.deliver(eventId, 0)).toBe("stale");
  });
});

describe("registration: the other fields", () => {
  test.for([
    ["no events", "events", { url: URL_OK, events: [] }],
    ["an unknown event", "events", { url: URL_OK, events: ["credit.confirmed", "credit.stolen"] }],
    ["events not a list", "events", { url: URL_OK, events: "credit.confirmed" }],
    ["no url", "url", { events: ["credit.confirmed"] }],
    [
      "a description too long",
      "description",
      { url: URL_OK, events: ["credit.confirmed"], description: "x".repeat(257) },
    ],
    ["balance.low without a threshold", "balanceLowThresholdUsdc", { url: URL_OK, events: ["balance.low"] }],
    [
      "a threshold not six decimals",
      "balanceLowThresholdUsdc",
      { url: URL_OK, events: ["balance.low"], balanceLowThresholdUsdc: "5" },
    ],
    [
      "a threshold of zero",
      "balanceLowThresholdUsdc",
      { url: URL_OK, events: ["balance.low"], balanceLowThresholdUsdc: "0.000000" },
    ],
    ["a supplier event with a Bearer key", "events", { url: URL_OK, events: ["credit.confirmed", "offer.depleted"] }],
  ] as const)("%s is 400 naming %s; nothing created", async ([, field, body], { app }) => {
    const buyer = await signIn(app);
    const key = await call(app, {
      method: "POST",
      path: "/v1/account/api-keys",
      headers: cookie(buyer),
      body: { name: "k" },
    });
    const apiKey = (key.body as { apiKey: string }).apiKey;
    const r = await registerWebhook(app, bearer(apiKey), body as Record<string, unknown>);
    expectError(r, 400, "invalid_request");
    expect((r.body as { error: { field: string } }).error.field).toBe(field);
    expect((await listOf(app, bearer(apiKey))).data).toEqual([]);
  });

  test("a Bearer key takes buyer events; balance.low with its threshold", async ({ app, agent }) => {
    const r = await registerWebhook(app, bearer(agent.apiKey), {
      url: URL_OK,
      events: ["balance.low", "video.completed"],
      balanceLowThresholdUsdc: "2.500000",
    });
    expect(r.status).toBe(201);
    expect(r.body).toMatchObject({ balanceLowThresholdUsdc: "2.500000", events: ["balance.low", "video.completed"] });
  });
});

describe("credentials", () => {
  test("no credential, a bad key, or both credentials at once: 401", async ({ app, agent }) => {
    const body = { url: URL_OK, events: ["credit.confirmed"] };
    expectAuthFailed(await registerWebhook(app, {}, body));
    expectAuthFailed(await registerWebhook(app, bearer("svc_nope"), body));
    expectAuthFailed(await registerWebhook(app, { ...bearer(agent.apiKey), cookie: agent.user.cookie }, body));
    expectAuthFailed(await call(app, { method: "GET", path: "/v1/webhooks" }));
  });

  test("a cookie-authenticated write from another origin is 403 csrf_rejected", async ({ app }) => {
    const user = await signIn(app);
    const r = await registerWebhook(
      app,
      { ...cookie(user), origin: "https://evil.example" },
      {
        url: URL_OK,
        events: ["credit.confirmed"],
      },
    );
    expectError(r, 403, "csrf_rejected");
  });
});

describe("the cap and ownership", () => {
  test("at most 10 endpoints per account: the 11th is 409 webhook_limit_reached and creates nothing", async ({
    app,
  }) => {
    const user = await signIn(app);
    const body = { url: URL_OK, events: ["credit.confirmed"] };
    const made = await Promise.all(Array.from({ length: 10 }, () => registerWebhook(app, cookie(user), body)));
    expect(made.map((r) => r.status)).toEqual(Array(10).fill(201));
    const over = await registerWebhook(app, cookie(user), body);
    expectError(over, 409, "webhook_limit_reached");
    const listed = await listOf(app, cookie(user));
    expect([listed.data.length, listed.cap]).toEqual([10, 10]);
    // one deleted frees a place
    const del = await call(app, {
      method: "DELETE",
      path: `/v1/webhooks/${listed.data[0]?.id}`,
      headers: cookie(user),
    });
    expect(del.status).toBe(200);
    expect((await registerWebhook(app, cookie(user), body)).status).toBe(201);
  });

  test("concurrent registrations never pass the cap", async ({ app }) => {
    const user = await signIn(app);
    const body = { url: URL_OK, events: ["credit.confirmed"] };
    const all = await Promise.all(Array.from({ length: 14 }, () => registerWebhook(app, cookie(user), body)));
    expect(all.filter((r) => r.status === 201)).toHaveLength(10);
    expect(all.filter((r) => r.status === 409)).toHaveLength(4);
    expect(await app.rt.db.webhookEndpoint.count({ where: { accountId: user.accountId } })).toBe(10);
  });

  test("another account's endpoint is 404 on every route; a non-uuid id is 400", async ({ app }) => {
    const owner = await signIn(app);
    const other = await signIn(app);
    const hook = await webhookFor(app, cookie(owner), { url: URL_OK, events: ["credit.confirmed"] });
    const routes = [
      { method: "DELETE", path: `/v1/webhooks/${hook.id}` },
      { method: "POST", path: `/v1/webhooks/${hook.id}/rotate-secret` },
      { method: "POST", path: `/v1/webhooks/${hook.id}/test` },
      { method: "POST", path: `/v1/webhooks/${hook.id}/enable` },
      { method: "GET", path: `/v1/webhooks/${hook.id}/deliveries` },
    ];
    for (const r of routes) {
      expectError(await call(app, { ...r, headers: cookie(other) }), 404, "not_found", `${r.method} ${r.path}`);
    }
    expect((await listOf(app, cookie(other))).data).toEqual([]);
    expectError(
      await call(app, { method: "DELETE", path: "/v1/webhooks/not-a-uuid", headers: cookie(owner) }),
      400,
      "invalid_request",
    );
    // the owner's endpoint is untouched
    expect((await listOf(app, cookie(owner))).data.map((w) => w.id)).toEqual([hook.id]);
    const gone = await gql(app, cookie(other), "mutation($id: ID!) { deleteWebhook(input: { id: $id }) { id } }", {
      id: hook.id,
    });
    expect(gone.errors?.[0]?.extensions?.code).toBe("not_found");
  });

  test("rotate-secret answers a new secret once; the old one is gone", async ({ app }) => {
    const user = await signIn(app);
    const hook = await webhookFor(app, cookie(user), { url: URL_OK, events: ["credit.confirmed"] });
    const r = await call(app, { method: "POST", path: `/v1/webhooks/${hook.id}/rotate-secret`, headers: cookie(user) });
    expect(r.status).toBe(200);
    const rotated = r.body as { id: string; secret: string };
    expect(rotated.id).toBe(hook.id);
    expect(rotated.secret).toMatch(/^whsec_/);
    expect(rotated.secret).not.toBe(hook.secret);
  });

  test("delete: the endpoint and its log are gone; a second delete is 404", async ({ app }) => {
    const user = await signIn(app);
    const hook = await webhookFor(app, cookie(user), { url: URL_OK, events: ["credit.confirmed"] });
    const test = await call(app, { method: "POST", path: `/v1/webhooks/${hook.id}/test`, headers: cookie(user) });
    expect(test.status).toBe(202);
    expect(test.body).toMatchObject({ webhookId: hook.id, type: "webhook.test", status: "pending", attempts: 0 });
    webhookDelivery.strict().parse(test.body);
    const log = await call(app, { method: "GET", path: `/v1/webhooks/${hook.id}/deliveries`, headers: cookie(user) });
    webhookDeliveryList.strict().parse(log.body);
    expect(
      (await call(app, { method: "DELETE", path: `/v1/webhooks/${hook.id}`, headers: cookie(user) })).body,
    ).toEqual({
      status: "ok",
    });
    expect(await app.rt.db.webhookEvent.count({ where: { endpointId: hook.id } })).toBe(0);
    expectError(
      await call(app, { method: "DELETE", path: `/v1/webhooks/${hook.id}`, headers: cookie(user) }),
      404,
      "not_found",
    );
  });
});

describe("GraphQL", () => {
  const CREATE = `mutation($input: CreateWebhookInput!) {
    createWebhook(input: $input) { secret webhook { id url events status balanceLowThresholdUsdc } } }`;

  test("createWebhook, myWebhooks, rotateWebhookSecret, sendTestWebhook, myWebhookDeliveries, deleteWebhook", async ({
    app,
  }) => {
    const user = await signIn(app);
    const created = await gql(app, cookie(user), CREATE, {
      input: {
        url: URL_OK,
        events: ["BALANCE_LOW", "OFFER_DEPLETED"],
        balanceLowThresholdUsdc: "1000000",
      },
    });
    expect(created.errors).toBeUndefined();
    const c = (created.data?.createWebhook ?? {}) as { secret: string; webhook: { id: string } };
    expect(c.secret).toMatch(/^whsec_/);
    expect(c.webhook).toMatchObject({
      url: URL_OK,
      events: ["BALANCE_LOW", "OFFER_DEPLETED"],
      status: "ACTIVE",
      balanceLowThresholdUsdc: "1000000",
    });
    // REST shows the same endpoint
    expect((await listOf(app, cookie(user))).data[0]).toMatchObject({
      id: c.webhook.id,
      events: ["balance.low", "offer.depleted"],
    });
    const listed = await gql(app, cookie(user), "{ myWebhooks { id status disabledReason } }");
    expect(listed.data?.myWebhooks).toEqual([{ id: c.webhook.id, status: "ACTIVE", disabledReason: null }]);
    const rotated = await gql(
      app,
      cookie(user),
      "mutation($id: ID!) { rotateWebhookSecret(input: { id: $id }) { secret webhook { id } } }",
      { id: c.webhook.id },
    );
    expect((rotated.data as { rotateWebhookSecret: { secret: string } }).rotateWebhookSecret.secret).not.toBe(c.secret);
    const sent = await gql(
      app,
      cookie(user),
      "mutation($id: ID!) { sendTestWebhook(input: { id: $id }) { id type status } }",
      {
        id: c.webhook.id,
      },
    );
    const test = (sent.data as { sendTestWebhook: { id: string } }).sendTestWebhook;
    expect(test).toMatchObject({ type: "webhook.test", status: "PENDING" });
    const log = await gql(
      app,
      cookie(user),
      "query($id: ID!) { myWebhookDeliveries(webhookId: $id, limit: 5) { nodes { id type attempts data } nextCursor } }",
      { id: c.webhook.id },
    );
    expect(log.data?.myWebhookDeliveries).toMatchObject({
      nodes: [{ id: test.id, type: "webhook.test", attempts: 0 }],
      nextCursor: null,
    });
    const rest = await call(app, {
      method: "GET",
      path: `/v1/webhooks/${c.webhook.id}/deliveries`,
      headers: cookie(user),
    });
    expect((rest.body as { data: { id: string }[] }).data.map((d) => d.id)).toEqual([test.id]);
    const deleted = await gql(app, cookie(user), "mutation($id: ID!) { deleteWebhook(input: { id: $id }) { id } }", {
      id: c.webhook.id,
    });
    expect(deleted.data?.deleteWebhook).toEqual({ id: c.webhook.id });
  });

  test("the same refusals: a private URL (url), a supplier event with a Bearer key (events), a bad page size", async ({
    app,
    agent,
  }) => {
    const privateUrl = await gql(app, bearer(agent.apiKey), CREATE, {
      input: { url: "https://internal.example.test/x", events: ["CREDIT_CONFIRMED"] },
    });
    expect(privateUrl.errors?.[0]?.extensions).toMatchObject({ code: "invalid_request", details: { field: "url" } });
    const supplier = await gql(app, bearer(agent.apiKey), CREATE, {
      input: { url: URL_OK, events: ["PAYOUT_SENT"] },
    });
    expect(supplier.errors?.[0]?.extensions).toMatchObject({ code: "invalid_request", details: { field: "events" } });
    const page = await gql(
      app,
      bearer(agent.apiKey),
      "query($id: ID!) { myWebhookDeliveries(webhookId: $id, limit: 0) { nextCursor } }",
      { id: "0b4f3a52-5d0e-4f43-9a43-8d6d5d3c1a11" },
    );
    expect(page.errors?.[0]?.extensions).toMatchObject({ code: "invalid_request", details: { field: "limit" } });
  });
});
