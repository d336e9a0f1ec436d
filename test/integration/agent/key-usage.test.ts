import { beforeAll, describe, expect } from "vitest";
import { mcpPathOf } from "../../../src/contract/openapi.js";
import { formatDecimal6, parseDecimal6 } from "../../../src/lib/money.js";
import { call, type SignedInUser, signIn } from "../../../testkit/actors.js";
import { fileWorld, appTest as test } from "../../../testkit/app-test.js";
import { assertBooksBalance } from "../../../testkit/books.js";
import { addSupply, chat, confirmedOf, fundConfirmed } from "../../../testkit/market.js";

/**
 * Issue 28 deliverables 2 and 6 against real paid chats: every key listing (REST session and agent
 * routes, GET /v1/agent/key, GraphQL, MCP) shows what each key spent this period, equal to the sum of
 * the `X-Svc-Cost-Usdc` (and stream cost frames) of that key's requests and to the books; and the
 * buyer history filters by key and period and answers CSV.
 */

const MODEL = "zai-org-glm-5-1";
test.override("appOptions", { sim: {}, syncCatalog: true });
const world = fileWorld(test);
const app = () => world.app;

const INJECTED_NAME = '=HYPERLINK("http://x","y")';

interface Key {
  id: string;
  apiKey: string;
}
let user: SignedInUser;
let keyA: Key; // daily limit 5 USDC, minted on the session route
let keyB: Key; // no limit, minted on the agent route by an account-level key (so beside key A, not below it)
let keyC: Key; // a hostile name, for the CSV guard
const costs = new Map<string, bigint[]>();
let confirmedBefore: bigint;

const bearer = (k: Key) => ({ authorization: `Bearer ${k.apiKey}` });
const session = () => ({ cookie: user.cookie });
const sum = (xs: bigint[] = []) => xs.reduce((a, b) => a + b, 0n);
const spentOf = (k: Key) => sum(costs.get(k.id));

function record(k: Key, cost: string | null | undefined) {
  const micro = parseDecimal6(cost ?? "");
  if (micro === undefined) throw new Error(`no cost: ${cost}`);
  costs.set(k.id, [...(costs.get(k.id) ?? []), micro]);
}

async function buffered(k: Key, tokens: number) {
  const r = await chat(app(), k.apiKey, {
    model: MODEL,
    messages: [{ role: "user", content: `usage [[sim:tokens=${tokens}]]` }],
  });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  record(k, r.headers.get("x-svc-cost-usdc"));
}

/** A streamed chat: its cost is the `svc.cost` frame's `costUsdc`. */
async function streamed(k: Key, tokens: number) {
  const res = await fetch(`${app().baseUrl}/v1/chat/completions`, {
    method: "POST",
    headers: { ...bearer(k), "content-type": "application/json" },
    body: JSON.stringify({
      model: MODEL,
      stream: true,
      messages: [{ role: "user", content: `stream [[sim:tokens=${tokens}]]` }],
    }),
  });
  expect(res.status).toBe(200);
  const text = await res.text();
  const frame = text
    .split("\n")
    .filter((l) => l.startsWith("data: ") && l.includes('"svc.cost"'))
    .map((l) => JSON.parse(l.slice(6)) as { costUsdc: string })[0];
  record(k, frame?.costUsdc);
}

const mcp = async (k: Key, name: string) => {
  const res = await fetch(`${app().baseUrl}${mcpPathOf(app().rt.config.urls)}`, {
    method: "POST",
    headers: { ...bearer(k), "content-type": "application/json", accept: "application/json, text/event-stream" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name, arguments: {} } }),
  });
  const body = (await res.json()) as { result: { structuredContent: Record<string, unknown>; isError?: boolean } };
  expect(body.result.isError ?? false).toBe(false);
  return body.result.structuredContent;
};

/** What the books charged each key: the gross of the clears of its requests (refunds left out). */
async function booksSpentOf(k: Key): Promise<bigint> {
  const [row] = await app().rt.db.$queryRaw<{ gross: bigint }[]>`
    SELECT COALESCE(SUM(c.gross_micro_usdc), 0)::bigint AS gross
      FROM clears c JOIN inference_requests r ON r.id = c.request_id
     WHERE r.api_key_id = ${k.id}::uuid AND c.refunded_at IS NULL`;
  return BigInt(row?.gross ?? 0n);
}

function nextUtcMidnight(): string {
  const d = new Date(app().rt.clock.now());
  d.setUTCHours(24, 0, 0, 0);
  return d.toISOString();
}

beforeAll(async () => {
  await addSupply(app(), world.sim, [{ priceCents: 40, quantityMicroDiem: 200_000_000n }]);
  app().rt.services.inference.invalidateBook();
  user = await signIn(app());
  await fundConfirmed(app(), user.accountId, 20_000_000n);
  confirmedBefore = await confirmedOf(app(), user.accountId);
  const mint = async (path: string, headers: Record<string, string>, body: Record<string, unknown>) => {
    const r = await call(app(), { method: "POST", path, headers, body });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    return r.body as Key;
  };
  keyA = await mint("/v1/account/api-keys", session(), {
    name: "agent-a",
    limitUsdc: "5.000000",
    limitReset: "daily",
    scopes: ["inference", "keys", "account"],
  });
  const owner = await mint("/v1/account/api-keys", session(), { name: "owner" });
  keyB = await mint("/v1/agent/keys", bearer(owner), { name: "agent-b" });
  keyC = await mint("/v1/agent/keys", bearer(owner), { name: INJECTED_NAME });
  await buffered(keyA, 20);
  await buffered(keyB, 30);
  await buffered(keyA, 45);
  await streamed(keyB, 25);
  await buffered(keyC, 10);
});

describe("a key's spend this period, wherever keys are listed", () => {
  test("REST session and agent listings: spentUsdc = the sum of that key's costs; remaining and resetsAt", async () => {
    expect(spentOf(keyA)).toBeGreaterThan(0n);
    expect(spentOf(keyB)).toBeGreaterThan(0n);
    for (const [path, headers] of [
      ["/v1/account/api-keys", session()],
      ["/v1/agent/keys", bearer(keyB)],
    ] as const) {
      const r = await call(app(), { method: "GET", path, headers });
      expect(r.status).toBe(200);
      const keys = (r.body as { keys: Record<string, unknown>[] }).keys;
      expect(
        keys.find((k) => k.id === keyA.id),
        path,
      ).toMatchObject({
        limitUsdc: "5.000000",
        limitReset: "daily",
        spentUsdc: formatDecimal6(spentOf(keyA)),
        remainingUsdc: formatDecimal6(5_000_000n - spentOf(keyA)),
        resetsAt: nextUtcMidnight(),
      });
      expect(
        keys.find((k) => k.id === keyB.id),
        path,
      ).toMatchObject({
        limitUsdc: null,
        spentUsdc: formatDecimal6(spentOf(keyB)),
        remainingUsdc: null,
        resetsAt: null,
      });
    }
  });

  test("the spend is the books' and the balance's: charged totals agree to the micro-USDC", async () => {
    for (const k of [keyA, keyB, keyC]) expect(await booksSpentOf(k)).toBe(spentOf(k));
    const spentAll = spentOf(keyA) + spentOf(keyB) + spentOf(keyC);
    expect(confirmedBefore - (await confirmedOf(app(), user.accountId))).toBe(spentAll);
    await assertBooksBalance(app().rt.db);
  });

  test("GET /v1/agent/key answers the calling key: id, name, prefix, policy and usage", async () => {
    const a = await call(app(), { method: "GET", path: "/v1/agent/key", headers: bearer(keyA) });
    expect(a.status).toBe(200);
    expect(a.body).toEqual({
      id: keyA.id,
      name: "agent-a",
      keyPrefix: keyA.apiKey.slice(0, 12),
      source: "session",
      createdAt: expect.any(String),
      lastUsedAt: expect.any(String),
      scopes: ["inference", "keys", "account"],
      parentId: null,
      limitUsdc: "5.000000",
      limitReset: "daily",
      maxPriceCentsPerDollar: null,
      models: null,
      expiresAt: null,
      spentUsdc: formatDecimal6(spentOf(keyA)),
      remainingUsdc: formatDecimal6(5_000_000n - spentOf(keyA)),
      resetsAt: nextUtcMidnight(),
    });
    const b = await call(app(), { method: "GET", path: "/v1/agent/key", headers: bearer(keyB) });
    expect(b.body).toMatchObject({
      id: keyB.id,
      name: "agent-b",
      source: "agent",
      spentUsdc: formatDecimal6(spentOf(keyB)),
    });
    // a session cookie is not a key
    const cookie = await call(app(), { method: "GET", path: "/v1/agent/key", headers: session() });
    expect(cookie.status).toBe(401);
  });

  test("GraphQL viewer.apiKeys: the same figures as MicroUsdc", async () => {
    const r = await call(app(), {
      method: "POST",
      path: "/graphql",
      headers: bearer(keyC),
      body: { query: "{ viewer { apiKeys { id limitUsdc limitReset spentUsdc remainingUsdc resetsAt } } }" },
    });
    const keys = (r.body as { data: { viewer: { apiKeys: Record<string, unknown>[] } } }).data.viewer.apiKeys;
    expect(keys.find((k) => k.id === keyA.id)).toEqual({
      id: keyA.id,
      limitUsdc: "5000000",
      limitReset: "DAILY",
      spentUsdc: spentOf(keyA).toString(),
      remainingUsdc: (5_000_000n - spentOf(keyA)).toString(),
      resetsAt: nextUtcMidnight(),
    });
    expect(keys.find((k) => k.id === keyB.id)).toMatchObject({
      spentUsdc: spentOf(keyB).toString(),
      remainingUsdc: null,
    });
  });

  test("MCP agent_key and list_keys: the same figures", async () => {
    expect(await mcp(keyA, "agent_key")).toMatchObject({
      id: keyA.id,
      spentUsdc: formatDecimal6(spentOf(keyA)),
      remainingUsdc: formatDecimal6(5_000_000n - spentOf(keyA)),
    });
    const listed = (await mcp(keyB, "list_keys")) as { keys: Record<string, unknown>[]; cap: number };
    expect(listed.cap).toBe(10);
    expect(listed.keys.find((k) => k.id === keyB.id)).toMatchObject({ spentUsdc: formatDecimal6(spentOf(keyB)) });
  });

  test("a request counts in the period it started in: yesterday's charge is out of today's, back in all-time", async () => {
    const first = await app().rt.db.inferenceRequest.findFirstOrThrow({
      where: { apiKeyId: keyA.id },
      orderBy: { startedAt: "asc" },
    });
    const [firstCost = 0n] = costs.get(keyA.id) ?? [];
    const spent = async () =>
      (await call(app(), { method: "GET", path: "/v1/agent/key", headers: bearer(keyA) })).body as {
        spentUsdc: string;
        remainingUsdc: string | null;
      };
    // the request started a day earlier: its record, and its charge in the key's spend per UTC day
    // (api_key_spend, which every ending writes with its charge)
    const moveCharge = (from: Date, to: Date) => app().rt.db.$executeRaw`
      WITH moved AS (
        UPDATE api_key_spend SET spent_micro_usdc = spent_micro_usdc - ${firstCost}
         WHERE api_key_id = ${keyA.id}::uuid AND day = (${from}::timestamptz AT TIME ZONE 'UTC')::date RETURNING 1)
      INSERT INTO api_key_spend (api_key_id, day, spent_micro_usdc)
      SELECT ${keyA.id}::uuid, (${to}::timestamptz AT TIME ZONE 'UTC')::date, ${firstCost} FROM moved
      ON CONFLICT (api_key_id, day) DO UPDATE SET spent_micro_usdc = api_key_spend.spent_micro_usdc + EXCLUDED.spent_micro_usdc`;
    const dayBefore = new Date(first.startedAt.getTime() - 86_400_000);
    await app().rt.db.inferenceRequest.updateMany({ where: { id: first.id }, data: { startedAt: dayBefore } });
    await moveCharge(first.startedAt, dayBefore);
    try {
      expect(await spent()).toMatchObject({
        spentUsdc: formatDecimal6(spentOf(keyA) - firstCost),
        remainingUsdc: formatDecimal6(5_000_000n - spentOf(keyA) + firstCost),
      });
      // its owner changes its period (a key never changes its own policy: issue 38)
      const never = await call(app(), {
        method: "PATCH",
        path: `/v1/account/api-keys/${keyA.id}`,
        headers: session(),
        body: { limitReset: "never" },
      });
      expect(never.body).toMatchObject({ spentUsdc: formatDecimal6(spentOf(keyA)), resetsAt: null });
    } finally {
      await app().rt.db.inferenceRequest.updateMany({ where: { id: first.id }, data: { startedAt: first.startedAt } });
      await moveCharge(dayBefore, first.startedAt);
      await app().rt.db.apiKey.update({ where: { id: keyA.id }, data: { limitReset: "daily" } });
    }
  });
});

// ───────────────────────────── history by key and period ─────────────────────────────

interface Row {
  requestId: string;
  supportReference: string;
  keyId: string | null;
  keyName: string | null;
  costUsdc: string | null;
  timings: { startedAt: string };
}

async function history(path: string, headers: Record<string, string>, query = "") {
  const r = await call(app(), { method: "GET", path: `${path}${query}`, headers });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body as { data: Row[]; nextCursor: string | null };
}

const ROUTES = [
  ["GET /v1/agent/requests", "/v1/agent/requests", () => bearer(keyC)],
  ["GET /v1/account/inference-history", "/v1/account/inference-history", session],
] as const;

describe("history by key and period", () => {
  test.each(ROUTES)("%s: keyId keeps one key's requests, each naming its key", async (_label, path, headers) => {
    const all = await history(path, headers());
    expect(all.data).toHaveLength(5);
    for (const k of [keyA, keyB, keyC]) {
      const rows = (await history(path, headers(), `?keyId=${k.id.toUpperCase()}`)).data;
      expect(rows).toHaveLength(costs.get(k.id)?.length ?? 0);
      expect(new Set(rows.map((r) => r.keyId))).toEqual(new Set([k.id]));
      expect(sum(rows.map((r) => parseDecimal6(r.costUsdc ?? "") ?? 0n))).toBe(spentOf(k));
    }
    expect((await history(path, headers(), `?keyId=${keyA.id}`)).data[0]?.keyName).toBe("agent-a");
  });

  test.each(ROUTES)("%s: from (inclusive) and to (exclusive) on the start time", async (_label, path, headers) => {
    const rows = (await history(path, headers())).data;
    const starts = rows.map((r) => r.timings.startedAt).sort();
    const t = starts[2] ?? "";
    const from = (await history(path, headers(), `?from=${encodeURIComponent(t)}`)).data;
    const to = (await history(path, headers(), `?to=${encodeURIComponent(t)}`)).data;
    expect(from.map((r) => r.timings.startedAt).sort()).toEqual(starts.filter((s) => s >= t));
    expect(to.map((r) => r.timings.startedAt).sort()).toEqual(starts.filter((s) => s < t));
    const window = await history(
      path,
      headers(),
      `?from=${encodeURIComponent(starts[1] ?? "")}&to=${encodeURIComponent(starts[3] ?? "")}&keyId=${keyB.id}`,
    );
    expect(window.data.every((r) => r.keyId === keyB.id && r.timings.startedAt >= (starts[1] ?? ""))).toBe(true);
  });

  test("GET /v1/agent/requests pages with the cursor: every request once", async () => {
    const seen: string[] = [];
    let cursor: string | null = null;
    for (let page = 0; page < 5; page++) {
      const q: string = `?limit=2${cursor ? `&cursor=${cursor}` : ""}`;
      const p = await history("/v1/agent/requests", bearer(keyA), q);
      expect(p.data.length).toBeLessThanOrEqual(2);
      seen.push(...p.data.map((r) => r.requestId));
      cursor = p.nextCursor;
      if (!cursor) break;
    }
    expect(cursor).toBeNull();
    expect(seen).toHaveLength(5);
    expect(new Set(seen).size).toBe(5);
  });

  test("GraphQL myInferenceHistory filters by keyId and period too", async () => {
    const r = await call(app(), {
      method: "POST",
      path: "/graphql",
      headers: bearer(keyB),
      body: {
        query:
          "query($k: ID, $f: DateTime) { myInferenceHistory(keyId: $k, from: $f) { items { keyId keyName cost } } }",
        variables: { k: keyB.id, f: "2020-01-01T00:00:00Z" },
      },
    });
    const items = (
      r.body as { data: { myInferenceHistory: { items: { keyId: string; keyName: string; cost: string }[] } } }
    ).data.myInferenceHistory.items;
    expect(items).toHaveLength(2);
    expect(items.every((i) => i.keyId === keyB.id && i.keyName === "agent-b")).toBe(true);
    expect(sum(items.map((i) => BigInt(i.cost)))).toBe(spentOf(keyB));
  });

  test.each(ROUTES)("%s: bad filters → 400 naming the parameter", async (_label, path, headers) => {
    for (const [query, field] of [
      ["?keyId=not-a-uuid", "keyId"],
      ["?from=yesterday", "from"],
      ["?to=2026-13-01T00:00:00Z", "to"],
      ["?from=2026-02-02T00:00:00Z&to=2026-02-01T00:00:00Z", "to"],
      ["?format=xml", "format"],
      ["?limit=101", "limit"],
      ["?limit=10001&format=csv", "limit"],
    ] as const) {
      const r = await call(app(), { method: "GET", path: `${path}${query}`, headers: headers() });
      expect(r.status, query).toBe(400);
      expect((r.body as { error: { code: string; field?: string } }).error, query).toMatchObject({
        code: "invalid_request",
        field,
      });
    }
  });

  test("another account's key id filters to nothing (never its requests)", async () => {
    const other = await signIn(app());
    const otherKey = await call(app(), {
      method: "POST",
      path: "/v1/account/api-keys",
      headers: { cookie: other.cookie },
      body: { name: "other" },
    });
    const rows = await history("/v1/agent/requests", bearer(keyA), `?keyId=${(otherKey.body as Key).id}`);
    expect(rows.data).toEqual([]);
    const theirs = await history("/v1/account/inference-history", { cookie: other.cookie }, `?keyId=${keyA.id}`);
    expect(theirs.data).toEqual([]);
  });
});

// ───────────────────────────── CSV ─────────────────────────────

/** RFC 4180 records (quoted fields, doubled quotes, CRLF). */
function parseCsv(text: string): string[][] {
  const records: string[][] = [];
  let field = "";
  let record: string[] = [];
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') {
        field += '"';
        i++;
      } else if (c === '"') quoted = false;
      else field += c;
    } else if (c === '"') quoted = true;
    else if (c === ",") {
      record.push(field);
      field = "";
    } else if (c === "\r" && text[i + 1] === "\n") {
      record.push(field);
      records.push(record);
      record = [];
      field = "";
      i++;
    } else field += c;
  }
  expect(field, "the text ends with CRLF").toBe("");
  return records;
}

const HEADER = [
  "time",
  "key_name",
  "model",
  "modality",
  "status",
  "cost_usdc",
  "clearing_price_cents",
  "burn_diem",
  "support_reference",
];

describe("history as CSV (?format=csv)", () => {
  test.each(ROUTES)(
    "%s: text/csv, a header, one row per request; the same figures as JSON",
    async (_l, path, headers) => {
      const res = await fetch(`${app().baseUrl}${path}?format=csv`, { headers: headers() });
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toMatch(/^text\/csv; charset=utf-8/);
      expect(res.headers.get("content-disposition")).toContain("attachment");
      expect(res.headers.get("x-svc-next-cursor")).toBeNull();
      const text = await res.text();
      const [header, ...rows] = parseCsv(text);
      expect(header).toEqual(HEADER);
      const json = (await history(path, headers())).data;
      expect(rows).toHaveLength(json.length);
      for (const [i, row] of rows.entries()) {
        const j = json[i] as Row & {
          model: string;
          modality: string;
          status: string;
          clearingPriceCents: number;
          burnDiem: string;
        };
        expect(row).toEqual([
          j.timings.startedAt,
          j.keyName === INJECTED_NAME ? `'${INJECTED_NAME}` : (j.keyName ?? ""),
          j.model,
          j.modality,
          j.status,
          j.costUsdc ?? "",
          String(j.clearingPriceCents),
          j.burnDiem ?? "",
          j.supportReference,
        ]);
      }
      // the total cost column is what the keys spent
      expect(sum(rows.map((r) => parseDecimal6(r[5] ?? "") ?? 0n))).toBe(spentOf(keyA) + spentOf(keyB) + spentOf(keyC));
    },
  );

  test("a key name that would run as a spreadsheet formula is written as text, quoted per RFC 4180", async () => {
    const res = await fetch(`${app().baseUrl}/v1/agent/requests?format=csv&keyId=${keyC.id}`, {
      headers: bearer(keyA),
    });
    const text = await res.text();
    expect(text).toContain(`,"'=HYPERLINK(""http://x"",""y"")",`);
    expect(text).not.toMatch(/(^|,)=HYPERLINK/m);
    expect(parseCsv(text)).toHaveLength(2);
  });

  test("CSV pages too: limit, then X-Svc-Next-Cursor to the next page", async () => {
    const first = await fetch(`${app().baseUrl}/v1/account/inference-history?format=csv&limit=3`, {
      headers: session(),
    });
    const cursor = first.headers.get("x-svc-next-cursor");
    expect(cursor).toEqual(expect.any(String));
    const a = parseCsv(await first.text()).slice(1);
    const second = await fetch(`${app().baseUrl}/v1/account/inference-history?format=csv&limit=3&cursor=${cursor}`, {
      headers: session(),
    });
    expect(second.headers.get("x-svc-next-cursor")).toBeNull();
    const b = parseCsv(await second.text()).slice(1);
    expect(a).toHaveLength(3);
    expect(b).toHaveLength(2);
    expect(new Set([...a, ...b].map((r) => r[8])).size).toBe(5);
  });

  test("an error is still JSON", async () => {
    const res = await fetch(`${app().baseUrl}/v1/agent/requests?format=csv&keyId=nope`, { headers: bearer(keyA) });
    expect(res.status).toBe(400);
    expect(res.headers.get("content-type")).toMatch(/^application\/json/);
  });
});
