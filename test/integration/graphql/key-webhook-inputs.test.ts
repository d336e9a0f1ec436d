import { describe, expect } from "vitest";
import { gql, gqlParts, type Reply, rest } from "../../../testkit/access/transports.js";
import { type SignedInUser, signIn } from "../../../testkit/actors.js";
import { appTest as test } from "../../../testkit/app-test.js";
import type { TestApp } from "../../../testkit/harness.js";
import { hostsResolver } from "../../../testkit/webhooks.js";

/**
 * `createApiKey`, `updateApiKey` and `createWebhook` parse their input with the contract's twins of
 * REST's bodies: a bad field is refused with the code, message and field of REST's 400 for the same
 * value (GraphQL in its units: micro-USDC, enum names), and no key or webhook row is written or
 * changed; a good input still mints, changes and registers.
 */

test.override("appOptions", { resolveHost: hostsResolver({ "hooks.example.test": ["93.184.216.34"] }) });

const URL_OK = "https://hooks.example.test/svc";

const CREATE_KEY = `mutation($input: CreateApiKeyInput!) {
  createApiKey(input: $input) { apiKey key { id name limitUsdc limitReset maxPriceCentsPerDollar expiresAt scopes } } }`;
const UPDATE_KEY = `mutation($input: UpdateApiKeyInput!) {
  updateApiKey(input: $input) { key { id name limitUsdc maxPriceCentsPerDollar } } }`;
const CREATE_WEBHOOK = `mutation($input: CreateWebhookInput!) {
  createWebhook(input: $input) { secret webhook { id url events balanceLowThresholdUsdc } } }`;

/** Same-origin session headers (cookie-authenticated writes need the origin on both transports). */
function session(app: TestApp, u: SignedInUser) {
  return { cookie: u.cookie, origin: new URL(app.baseUrl).origin };
}

interface Refusal {
  code: string | undefined;
  message: string | undefined;
  field: string | undefined;
}

function restRefusal(r: Reply): Refusal {
  expect(r.status, r.text).toBe(400);
  const e = (r.body as { error: { code: string; message: string; field?: string } }).error;
  return { code: e.code, message: e.message, field: e.field };
}

function gqlRefusal(r: Reply, mutation: string): Refusal {
  const { data, errors } = gqlParts(r);
  expect(errors, r.text).toHaveLength(1);
  expect(data?.[mutation] ?? null).toBeNull();
  const e = errors?.[0] as { message: string; extensions?: { code?: string; details?: { field?: string } } };
  return { code: e.extensions?.code, message: e.message, field: e.extensions?.details?.field };
}

/** The account's key rows as they stand (every column that a create or an update writes). */
async function keyRows(app: TestApp, accountId: string) {
  return app.rt.db.apiKey.findMany({ where: { accountId }, orderBy: { id: "asc" } });
}

describe("rejection: a bad input is REST's 400 and writes nothing", () => {
  // [label, REST body, GraphQL input, the field named]
  const createCases: [string, Record<string, unknown>, Record<string, unknown>, string][] = [
    ["an empty name", { name: "" }, { name: "" }, "name"],
    ["a 65-character name", { name: "n".repeat(65) }, { name: "n".repeat(65) }, "name"],
    ["a limit of 0", { name: "k", limitUsdc: "0.000000" }, { name: "k", limitUsdc: "0" }, "limitUsdc"],
    [
      "a limit above the bound",
      { name: "k", limitUsdc: "1000000000.000001" },
      { name: "k", limitUsdc: "1000000000000001" },
      "limitUsdc",
    ],
    [
      "a ceiling of 90",
      { name: "k", maxPriceCentsPerDollar: 90 },
      { name: "k", maxPriceCentsPerDollar: 90 },
      "maxPriceCentsPerDollar",
    ],
    ["an empty models list", { name: "k", models: [] }, { name: "k", models: [] }, "models"],
    ["an empty scopes list", { name: "k", scopes: [] }, { name: "k", scopes: [] }, "scopes"],
  ];

  test.for(createCases)("createApiKey with %s", async ([_l, restBody, input, field], { app }) => {
    const user = await signIn(app);
    const h = session(app, user);
    const fromRest = restRefusal(await rest(app, "POST", "/v1/account/api-keys", h, restBody));
    expect(fromRest.field).toBe(field);
    const before = await keyRows(app, user.accountId);
    const fromGql = gqlRefusal(await gql(app, CREATE_KEY, { input }, h), "createApiKey");
    expect(fromGql).toEqual(fromRest);
    expect(fromGql.code).toBe("invalid_request");
    expect(await keyRows(app, user.accountId)).toEqual(before);
  });

  // [label, REST body, GraphQL input besides the id, the field named]
  const updateCases: [string, Record<string, unknown>, Record<string, unknown>, string][] = [
    ["an empty name", { name: "" }, { name: "" }, "name"],
    ["a null name", { name: null }, { name: null }, "name"],
    ["a limit above the bound", { limitUsdc: "1000000000.000001" }, { limitUsdc: "1000000000000001" }, "limitUsdc"],
    ["a ceiling of 20", { maxPriceCentsPerDollar: 20 }, { maxPriceCentsPerDollar: 20 }, "maxPriceCentsPerDollar"],
    ["an empty model id", { models: [""] }, { models: [""] }, "models"],
  ];

  test.for(updateCases)("updateApiKey with %s", async ([_l, restBody, change, field], { app }) => {
    const user = await signIn(app);
    const h = session(app, user);
    const minted = await rest(app, "POST", "/v1/account/api-keys", h, { name: "kept", maxPriceCentsPerDollar: 50 });
    expect(minted.status, minted.text).toBe(201);
    const id = (minted.body as { id: string }).id;
    const fromRest = restRefusal(await rest(app, "PATCH", `/v1/account/api-keys/${id}`, h, restBody));
    expect(fromRest.field).toBe(field);
    const before = await keyRows(app, user.accountId);
    const fromGql = gqlRefusal(await gql(app, UPDATE_KEY, { input: { id, ...change } }, h), "updateApiKey");
    expect(fromGql).toEqual(fromRest);
    expect(fromGql.code).toBe("invalid_request");
    expect(await keyRows(app, user.accountId)).toEqual(before);
    expect(before.find((k) => k.id === id)).toMatchObject({ name: "kept", maxPriceCentsPerDollar: 50 });
  });

  test("updateApiKey with an id that is not a uuid: REST's path refusal", async ({ app }) => {
    const user = await signIn(app);
    const h = session(app, user);
    const fromRest = restRefusal(await rest(app, "PATCH", "/v1/account/api-keys/not-a-uuid", h, { name: "x" }));
    const fromGql = gqlRefusal(
      await gql(app, UPDATE_KEY, { input: { id: "not-a-uuid", name: "x" } }, h),
      "updateApiKey",
    );
    expect(fromGql).toEqual(fromRest);
    expect(fromGql).toMatchObject({ code: "invalid_request", field: "id" });
  });

  // [label, REST body, GraphQL input, the field named]
  const webhookCases: [string, Record<string, unknown>, Record<string, unknown>, string][] = [
    [
      "a URL that is not http(s)",
      { url: "ftp://x", events: ["credit.confirmed"] },
      { url: "ftp://x", events: ["CREDIT_CONFIRMED"] },
      "url",
    ],
    ["no events", { url: URL_OK, events: [] }, { url: URL_OK, events: [] }, "events"],
    [
      "a 257-character description",
      { url: URL_OK, events: ["credit.confirmed"], description: "d".repeat(257) },
      { url: URL_OK, events: ["CREDIT_CONFIRMED"], description: "d".repeat(257) },
      "description",
    ],
    [
      "a threshold of 0",
      { url: URL_OK, events: ["balance.low"], balanceLowThresholdUsdc: "0.000000" },
      { url: URL_OK, events: ["BALANCE_LOW"], balanceLowThresholdUsdc: "0" },
      "balanceLowThresholdUsdc",
    ],
  ];

  test.for(webhookCases)("createWebhook with %s", async ([_l, restBody, input, field], { app }) => {
    const user = await signIn(app);
    const h = session(app, user);
    const fromRest = restRefusal(await rest(app, "POST", "/v1/webhooks", h, restBody));
    expect(fromRest.field).toBe(field);
    const fromGql = gqlRefusal(await gql(app, CREATE_WEBHOOK, { input }, h), "createWebhook");
    expect(fromGql).toEqual(fromRest);
    expect(fromGql.code).toBe("invalid_request");
    expect(await app.rt.db.webhookEndpoint.count({ where: { accountId: user.accountId } })).toBe(0);
  });
});

describe("success: a good input still works", () => {
  test("createApiKey mints the key with its policy and scopes", async ({ app }) => {
    const user = await signIn(app);
    const h = session(app, user);
    const expiresAt = new Date(Date.now() + 86_400_000).toISOString();
    const r = await gql(
      app,
      CREATE_KEY,
      {
        input: {
          name: "gql policy",
          limitUsdc: "5000000",
          limitReset: "DAILY",
          maxPriceCentsPerDollar: 45,
          expiresAt,
          scopes: ["INFERENCE"],
        },
      },
      h,
    );
    const { data, errors } = gqlParts(r);
    expect(errors, r.text).toBeUndefined();
    const created = data?.createApiKey as { apiKey: string; key: Record<string, unknown> };
    expect(created.apiKey).toMatch(/^svc_/);
    expect(created.key).toMatchObject({
      name: "gql policy",
      limitUsdc: "5000000",
      limitReset: "DAILY",
      maxPriceCentsPerDollar: 45,
      expiresAt,
      scopes: ["INFERENCE"],
    });
    const row = await app.rt.db.apiKey.findUniqueOrThrow({ where: { id: created.key.id as string } });
    expect(row).toMatchObject({ accountId: user.accountId, limitMicroUsdc: 5_000_000n, maxPriceCentsPerDollar: 45 });
  });

  test("createApiKey with null scopes takes the default", async ({ app }) => {
    const user = await signIn(app);
    const r = await gql(app, CREATE_KEY, { input: { name: "defaults", scopes: null } }, session(app, user));
    const { data, errors } = gqlParts(r);
    expect(errors, r.text).toBeUndefined();
    expect((data?.createApiKey as { key: { scopes: string[] } } | undefined)?.key.scopes).toEqual([
      "INFERENCE",
      "KEYS",
      "ACCOUNT",
    ]);
  });

  test("updateApiKey renames the key and removes its limit", async ({ app }) => {
    const user = await signIn(app);
    const h = session(app, user);
    const minted = await rest(app, "POST", "/v1/account/api-keys", h, { name: "before", limitUsdc: "2.000000" });
    const id = (minted.body as { id: string }).id;
    const r = await gql(app, UPDATE_KEY, { input: { id: id.toUpperCase(), name: "after", limitUsdc: null } }, h);
    const { data, errors } = gqlParts(r);
    expect(errors, r.text).toBeUndefined();
    expect(data?.updateApiKey).toEqual({ key: { id, name: "after", limitUsdc: null, maxPriceCentsPerDollar: null } });
    expect(await app.rt.db.apiKey.findUniqueOrThrow({ where: { id } })).toMatchObject({
      name: "after",
      limitMicroUsdc: null,
    });
  });

  test("createWebhook registers the endpoint (a repeated event once)", async ({ app }) => {
    const user = await signIn(app);
    const r = await gql(
      app,
      CREATE_WEBHOOK,
      { input: { url: URL_OK, events: ["BALANCE_LOW", "BALANCE_LOW"], balanceLowThresholdUsdc: "1500000" } },
      session(app, user),
    );
    const { data, errors } = gqlParts(r);
    expect(errors, r.text).toBeUndefined();
    const created = data?.createWebhook as { secret: string; webhook: Record<string, unknown> };
    expect(created.secret).toMatch(/^whsec_/);
    expect(created.webhook).toMatchObject({ url: URL_OK, events: ["BALANCE_LOW"], balanceLowThresholdUsdc: "1500000" });
    expect(await app.rt.db.webhookEndpoint.count({ where: { accountId: user.accountId } })).toBe(1);
  });
});
