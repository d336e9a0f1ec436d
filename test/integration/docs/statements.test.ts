import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { decodePaymentRequiredHeader } from "@x402/core/http";
import { Webhook } from "standardwebhooks";
import { beforeAll, describe, expect } from "vitest";
import { PAID_ROUTES, PAY_PER_REQUEST_ROUTES } from "../../../src/contract/paid-routes.js";
import { ERROR_TABLE, type ErrorCode } from "../../../src/lib/errors.js";
import { burnMicroDiem, computeCharge, formatDecimal6, parseDecimal6 } from "../../../src/lib/money.js";
import { call, signIn } from "../../../testkit/actors.js";
import { fileWorld, appTest as test } from "../../../testkit/app-test.js";
import { flat, says } from "../../../testkit/doc-examples.js";
import { addSupply, fundedBuyerKey } from "../../../testkit/market.js";
import { frames } from "../../../testkit/sse.js";
import { postOfferCall, registerKey, simKey } from "../../../testkit/supply.js";
import { startReceiver } from "../../../testkit/webhooks.js";

/**
 * Statements of the served documents that describe behaviour, each checked against the running
 * service (issue 26 finding 8): the document must say it (`says`), and the service must do it.
 */

const MODEL = "zai-org-glm-5-1";
test.override("appOptions", {
  sim: {},
  syncCatalog: true,
  env: { PAY_TO: "0x00000000000000000000000000000000000000aa" },
});
const world = fileWorld(test);
const docs: Record<string, string> = {};

beforeAll(async () => {
  await addSupply(world.app, world.sim, [
    { priceCents: 40, quantityMicroDiem: 200_000_000n },
    { priceCents: 40, quantityMicroDiem: 200_000_000n },
  ]);
  world.app.rt.services.inference.invalidateBook();
  for (const path of ["/SKILL.md", "/llms.txt", "/pricing.md", "/MCP.md", "/marketplace.md"]) {
    docs[path] = await (await fetch(`${world.app.baseUrl}${path}`)).text();
  }
});

/** Markdown wraps lines anywhere: compare with runs of whitespace collapsed. */

function bearer(apiKey: string) {
  return { authorization: `Bearer ${apiKey}`, "content-type": "application/json" };
}

async function lookup(apiKey: string, ref: string) {
  return call(world.app, { method: "GET", path: `/v1/agent/requests/${ref}`, headers: bearer(apiKey) });
}

async function post(apiKey: string, path: string, body: unknown) {
  const res = await fetch(`${world.app.baseUrl}${path}`, {
    method: "POST",
    headers: bearer(apiKey),
    body: JSON.stringify(body),
  });
  return res;
}

describe("SKILL.md: looking a request up", () => {
  test("a stream still running answers 200 `in_progress`, then its record", async () => {
    says(
      docs,
      "/SKILL.md",
      "A stream still running answers 200 with `status` `in_progress` and `costUsdc` `null`; once it ends, the same reference answers its record.",
    );
    says(docs, "/SKILL.md", "`status` (`in_progress`, `succeeded`, `incomplete`, `failed`)");
    expect(flat(docs["/SKILL.md"] ?? "")).not.toContain("404 until it ends");

    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const res = await post(buyer.apiKey, "/v1/chat/completions", {
      model: MODEL,
      stream: true,
      messages: [{ role: "user", content: "[[sim:tokens=20]] [[sim:chunks=8]] [[sim:chunk_delay_ms=100]]" }],
    });
    expect(res.status).toBe(200);
    const ref = res.headers.get("x-svc-support-reference") ?? "";
    const running = await lookup(buyer.apiKey, ref);
    expect(running.status).toBe(200);
    expect(running.body).toMatchObject({ supportReference: ref, status: "in_progress", costUsdc: null });
    await res.text();
    await expect
      .poll(async () => ((await lookup(buyer.apiKey, ref)).body as { status?: string }).status)
      .toBe("succeeded");
  });

  test("a stream whose process stopped answers 404 once its lease has lapsed", async () => {
    says(
      docs,
      "/SKILL.md",
      "A stream whose service process stopped before it ended (a crash) leaves no record and costs you nothing: its reference answers 404 once that process's lease has lapsed, within 30 seconds.",
    );
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const res = await post(buyer.apiKey, "/v1/chat/completions", {
      model: MODEL,
      stream: true,
      messages: [{ role: "user", content: "[[sim:tokens=20]] [[sim:chunks=8]] [[sim:chunk_delay_ms=150]]" }],
    });
    expect(res.status).toBe(200);
    const ref = res.headers.get("x-svc-support-reference") ?? "";
    const { command: redis } = world.app.rt.redis;
    const holders = world.app.rt.keys.gateHolders();
    const stored = await redis.get(world.app.rt.keys.inFlightRequest(ref));
    const holder = (JSON.parse(stored ?? "{}") as { holder?: string }).holder ?? "";
    expect(await redis.zscore(holders, holder)).not.toBeNull();
    // the process's lease lapses (as if it had stopped heartbeating); its heartbeat may put it back
    // between the two steps, so the lapse is made again until the lookup follows it
    await redis.zadd(holders, 1, holder);
    let lapsed = await lookup(buyer.apiKey, ref);
    for (let i = 0; i < 3 && lapsed.status !== 404; i++) {
      await redis.zadd(holders, 1, holder);
      lapsed = await lookup(buyer.apiKey, ref);
    }
    expect(lapsed.status).toBe(404);
    // the process is alive after all (its heartbeat renews the lease): the stream is running again
    await redis.zadd(holders, Date.now() + 30_000, holder);
    expect((await lookup(buyer.apiKey, ref)).body).toMatchObject({ status: "in_progress" });
    await res.text();
    await expect
      .poll(async () => ((await lookup(buyer.apiKey, ref)).body as { status?: string }).status)
      .toBe("succeeded");
  });
});

describe("llms.txt and SKILL.md: which answers carry a support reference", () => {
  test("paid answers and failures after routing opened carry one; refusals before it, quotes and polls do not", async () => {
    says(
      docs,
      "/llms.txt",
      "A support reference (`X-Svc-Support-Reference`; `supportReference` in the cost frame and in error bodies) comes with every paid inference answer and every failure after the request was opened for routing (402 `insufficient_balance`, 500 `settle_failed`, 502, the 503 supply codes)",
    );
    says(
      docs,
      "/llms.txt",
      "Video quotes, video retrieve polls and requests refused before routing (an invalid body, a bad key, an unknown model, a concurrency limit) have none.",
    );
    expect(flat(docs["/llms.txt"] ?? "")).not.toContain("Every request has a support reference");
    says(
      docs,
      "/SKILL.md",
      "Requests refused before routing (an invalid body, a bad key, an unknown model, a concurrency limit: 400, 401, 404, 429), video quotes and video retrieve polls have none.",
    );

    const rich = await fundedBuyerKey(world.app, 5_000_000n);
    const chat = (apiKey: string, body: Record<string, unknown>) => post(apiKey, "/v1/chat/completions", body);
    const hi = { model: MODEL, messages: [{ role: "user", content: "hi" }], max_tokens: 20 };

    // carries one that resolves: a paid answer, a 402 for the balance, a 503 of the market
    const paid = await chat(rich.apiKey, hi);
    expect(paid.status).toBe(200);
    const paidRef = paid.headers.get("x-svc-support-reference") ?? "";
    expect((await lookup(rich.apiKey, paidRef)).body).toMatchObject({ status: "succeeded" });

    const broke = await fundedBuyerKey(world.app, 0n);
    const poor = await chat(broke.apiKey, hi);
    const poorBody = (await poor.json()) as { error: { code: string; supportReference?: string } };
    expect([poor.status, poorBody.error.code]).toEqual([402, "insufficient_balance"]);
    const poorRef = poor.headers.get("x-svc-support-reference") ?? "";
    expect(poorBody.error.supportReference).toBe(poorRef);
    expect((await lookup(broke.apiKey, poorRef)).body).toMatchObject({
      status: "failed",
      errorCode: "insufficient_balance",
    });

    const low = await fundedBuyerKey(world.app, 5_000_000n, 30); // every offer is at 40
    const refused = await chat(low.apiKey, hi);
    expect([refused.status, refused.headers.get("x-svc-error-code")]).toEqual([503, "no_eligible_supply"]);
    const refusedRef = refused.headers.get("x-svc-support-reference") ?? "";
    expect((await lookup(low.apiKey, refusedRef)).body).toMatchObject({
      status: "failed",
      errorCode: "no_eligible_supply",
    });

    // none: refused before routing
    const none = [
      await chat(rich.apiKey, { model: MODEL, messages: "hi" }), // 400
      await chat("svc_not_a_key", hi), // 401
      await chat(rich.apiKey, { ...hi, model: "no-such-model" }), // 404
    ];
    expect(none.map((r) => r.status)).toEqual([400, 401, 404]);
    for (const r of none) expect(r.headers.get("x-svc-support-reference")).toBeNull();
  });

  test("a concurrency refusal (429) carries none", async () => {
    says(docs, "/SKILL.md", "a concurrency limit: 400, 401, 404, 429");
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const limit = world.app.rt.config.limits.keyMaxInFlight;
    const slow = {
      model: MODEL,
      stream: true,
      messages: [{ role: "user", content: "[[sim:tokens=8]] [[sim:chunks=4]] [[sim:chunk_delay_ms=300]]" }],
    };
    const streams = await Promise.all(
      Array.from({ length: limit }, () => post(buyer.apiKey, "/v1/chat/completions", slow)),
    );
    expect(streams.map((s) => s.status)).toEqual(Array(limit).fill(200));
    const over = await post(buyer.apiKey, "/v1/chat/completions", slow);
    expect([over.status, over.headers.get("x-svc-error-code")]).toEqual([429, "key_concurrency_limit"]);
    expect(over.headers.get("x-svc-support-reference")).toBeNull();
    await over.text();
    await Promise.all(streams.map((s) => s.text()));
  });

  test("a video job: the queue answer has one; the quote and the retrieve polls do not; 410 after delivery", async () => {
    world.sim.state.setVideoConfig({ processingPolls: 1, renderMs: 0, defaultOutcome: "mp4" });
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const job = { model: "wan-2.6-text-to-video", prompt: "a fox in the snow", duration: "5s", resolution: "720p" };
    const quote = await post(buyer.apiKey, "/v1/video/quote", job);
    expect(quote.status).toBe(200);
    expect(quote.headers.get("x-svc-support-reference")).toBeNull();
    const queued = await post(buyer.apiKey, "/v1/video/queue", job);
    expect(queued.status).toBe(200);
    expect(queued.headers.get("x-svc-support-reference")).toMatch(/^[0-9a-f-]{36}$/);
    const { queue_id } = (await queued.json()) as { queue_id: string };
    const types: string[] = [];
    for (;;) {
      const poll = await post(buyer.apiKey, "/v1/video/retrieve", { queue_id });
      expect(poll.headers.get("x-svc-support-reference")).toBeNull();
      const type = poll.headers.get("content-type") ?? "";
      types.push(type);
      await poll.arrayBuffer();
      if (type.startsWith("video/")) break;
      expect(types.length).toBeLessThan(10);
    }
    // SKILL.md's error table: 410 `gone` once delivered
    const gone = await post(buyer.apiKey, "/v1/video/retrieve", { queue_id });
    expect([gone.status, gone.headers.get("x-svc-error-code")]).toEqual([410, "gone"]);
    expect(skillTable().find((r) => r.codes.includes("gone"))?.advice).toContain("already delivered");
  });
});

describe("llms.txt: every paid answer says what it cost", () => {
  test("a Responses stream: `costUsdc` on `response.completed`", async () => {
    says(docs, "/llms.txt", "`costUsdc` on `response.completed` (Responses streams)");
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const res = await post(buyer.apiKey, "/v1/responses", { model: MODEL, input: "hi", stream: true });
    expect(res.status).toBe(200);
    const completed = frames(await res.text())
      .map((d) => JSON.parse(d) as { type?: string; costUsdc?: string })
      .find((e) => e.type === "response.completed");
    expect(completed?.costUsdc).toMatch(/^\d+\.\d{6}$/);
    const ref = res.headers.get("x-svc-support-reference") ?? "";
    expect((await lookup(buyer.apiKey, ref)).body).toMatchObject({ costUsdc: completed?.costUsdc });
  });
});

describe("pricing.md: a content-policy answer", () => {
  test("is delivered and charged what the provider burned on the key, flagged; nothing when it burned nothing", async () => {
    says(
      docs,
      "/pricing.md",
      "An answer the provider flags under its content policy is delivered (blacked out) and charged what the provider burned on the supplier's key for it, never more than the job's price: `X-Svc-Flagged: content_violation` when it burned something, `X-Svc-Uncharged: content_violation` (nothing charged) when it burned nothing",
    );
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const billed = await post(buyer.apiKey, "/v1/image/generate", {
      model: "venice-sd35",
      prompt: "x [[sim:content_violation]]",
    });
    expect(billed.status).toBe(200);
    expect(billed.headers.get("x-svc-flagged")).toBe("content_violation");
    // venice-sd35: 0.01 DIEM per image, cleared at 40 cents
    expect(billed.headers.get("x-svc-cost-usdc")).toBe(
      formatDecimal6(computeCharge(10_000n, 40, world.app.rt.config.fees.platformFeeBps).grossMicroUsdc),
    );
    const free = await post(buyer.apiKey, "/v1/image/generate", {
      model: "venice-sd35",
      prompt: "x [[sim:content_violation_free]]",
    });
    expect(free.status).toBe(200);
    expect(free.headers.get("x-svc-uncharged")).toBe("content_violation");
    expect(free.headers.get("x-svc-cost-usdc")).toBe("0.000000");
  });
});

describe("SKILL.md: what a request's cost says about cache reads and writes", () => {
  test("usage.cost_details carries cached_tokens and cache_write_tokens; the lookup's usage too", async () => {
    says(docs, "/SKILL.md", "and `cached_tokens` and `cache_write_tokens` (the prompt tokens priced at the model's");
    says(docs, "/SKILL.md", "`usage` (`promptTokens`, `completionTokens`, `cachedTokens`, `cacheWriteTokens`)");
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const res = await post(buyer.apiKey, "/v1/chat/completions", {
      model: "claude-sonnet-4-6",
      messages: [{ role: "user", content: `${"p".repeat(400)} [[sim:cached_tokens=20]] [[sim:cache_write=30]]` }],
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { usage: { cost_details: Record<string, unknown> } };
    expect(body.usage.cost_details).toMatchObject({ cached_tokens: 20, cache_write_tokens: 30 });
    const detail = await lookup(buyer.apiKey, res.headers.get("x-svc-support-reference") ?? "");
    expect(detail.body).toMatchObject({ usage: { cachedTokens: 20, cacheWriteTokens: 30 } });
  });
});

describe("pricing.md: what the catalog rates are, and what is debited", () => {
  test("catalog rates are micro-USDC per 1M tokens at face value, informational; the debit is burn × clearing price", async () => {
    says(
      docs,
      "/pricing.md",
      "The catalog's `pricing.input_per_million`, `cache_per_million` and `output_per_million` are integer **micro-USDC per 1M tokens at face value**",
    );
    says(docs, "/pricing.md", "They are **informational**: no request is debited at them.");
    says(
      docs,
      "/pricing.md",
      "`debit = floor(burn × clearing price / 100)` micro-USDC, with `burn` in micro-DIEM and the clearing price in cents per dollar",
    );
    expect(flat(docs["/pricing.md"] ?? "")).not.toMatch(/output_per_million`: micro-DIEM/);

    // one request: the debit is the metered burn at the clearing price (40), well below the
    // catalog amount of the same usage (what it would cost at face)
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const res = await post(buyer.apiKey, "/v1/chat/completions", {
      model: MODEL,
      messages: [{ role: "user", content: "[[sim:tokens=146]] a question" }],
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { usage: { prompt_tokens: number; completion_tokens: number } };
    const row = (await (await fetch(`${world.app.baseUrl}/v1/models/${MODEL}`)).json()) as {
      pricing: { input_per_million: number; cache_per_million: number; output_per_million: number };
    };
    const faceMicroUsdc = burnMicroDiem(
      {
        inputMicroPerM: BigInt(row.pricing.input_per_million),
        cacheMicroPerM: BigInt(row.pricing.cache_per_million),
        outputMicroPerM: BigInt(row.pricing.output_per_million),
      },
      { promptTokens: body.usage.prompt_tokens, completionTokens: body.usage.completion_tokens },
    );
    const detail = (await lookup(buyer.apiKey, res.headers.get("x-svc-support-reference") ?? "")).body as {
      burnDiem: string;
      costUsdc: string;
      clearingPriceCents: number;
    };
    expect(detail.clearingPriceCents).toBe(40);
    expect(detail.burnDiem).toBe(formatDecimal6(faceMicroUsdc));
    const debit = computeCharge(faceMicroUsdc, 40, world.app.rt.config.fees.platformFeeBps).grossMicroUsdc;
    expect(detail.costUsdc).toBe(formatDecimal6(debit));
    expect(res.headers.get("x-svc-cost-usdc")).toBe(formatDecimal6(debit));
    expect(debit).toBeLessThan(faceMicroUsdc);
  });

  test("an incomplete stream: an estimate capped at the admitted max_tokens (and the key's balance before the call)", async () => {
    says(
      docs,
      "/pricing.md",
      "billed on an estimate, capped at the admitted `max_tokens` and at the supplier key's balance before the call (the balance the upstream reported, less what other requests in flight on that key may burn)",
    );
    says(
      docs,
      "/pricing.md",
      "the completion is estimated from the characters streamed to you (one token per 4 characters, rounded up)",
    );
    says(docs, "/SKILL.md", "`stream_incomplete`: the stream ended early and was billed on an estimate");

    const run = async (maxTokens: number) => {
      const supply = await addSupply(world.app, world.sim, [{ priceCents: 35, quantityMicroDiem: 50_000_000n }]);
      world.app.rt.services.inference.invalidateBook();
      const secret = supply.keys[0]?.secret ?? "";
      world.sim.state.injectFault(secret, { kind: "truncate_stream", afterChunks: 1, count: 1 });
      const buyer = await fundedBuyerKey(world.app, 5_000_000n);
      const res = await post(buyer.apiKey, "/v1/chat/completions", {
        model: MODEL,
        stream: true,
        max_tokens: maxTokens,
        messages: [{ role: "user", content: "[[sim:tokens=40]] [[sim:chunks=1]]" }],
      });
      const data = frames(await res.text());
      await world.app.rt.services.offers.cancelOffer({
        accountId: supply.supplierAccountId,
        offerId: supply.keys[0]?.offerId ?? "",
      });
      world.app.rt.services.inference.invalidateBook();
      const relayed = data
        .filter((d) => d.startsWith("{") && d.includes('"delta"'))
        .map((d) => (JSON.parse(d) as { choices: { delta: { content?: string } }[] }).choices[0]?.delta.content ?? "")
        .join("");
      expect(data.at(-1)).toContain('"stream_incomplete"');
      const ref = res.headers.get("x-svc-support-reference") ?? "";
      const detail = (await lookup(buyer.apiKey, ref)).body as {
        status: string;
        clearingPriceCents: number;
        usage: { completionTokens: number };
      };
      expect(detail).toMatchObject({ status: "incomplete", clearingPriceCents: 35 });
      return { estimate: Math.ceil(relayed.length / 4), billed: detail.usage.completionTokens };
    };

    // below the cap: the estimate itself
    const loose = await run(1_000);
    expect(loose.estimate).toBeLessThan(1_000);
    expect(loose.billed).toBe(loose.estimate);
    // above the cap: the admitted max_tokens
    const capped = await run(12);
    expect(capped.estimate).toBeGreaterThan(12);
    expect(capped.billed).toBe(12);
  });
});

/** SKILL.md section 6's table: one row per line, its status and the `codes` in its second column. */
function skillTable(): { status: number; codes: string[]; advice: string }[] {
  const text = docs["/SKILL.md"] ?? "";
  const section = text.slice(text.indexOf("## 6. Errors"), text.indexOf("## 7."));
  return [...section.matchAll(/^\| (\d{3}) +\| ([^|]+)\| ([^|]+)\|$/gm)].map((m) => ({
    status: Number(m[1]),
    // the codes, not what a parenthesis says about them ("(no `accepts`)")
    codes: [...(m[2] ?? "").replace(/\([^)]*\)/g, "").matchAll(/`([a-z_]+)`/g)].map((c) => c[1] as string),
    advice: (m[3] ?? "").trim(),
  }));
}

/**
 * The codes of ERROR_TABLE that no REST route answers, each with why and the only files that may
 * name it (so a new use elsewhere fails here and is decided, not missed).
 */
const NOT_ON_REST: Partial<Record<ErrorCode, { reason: string; files: string[] }>> = {
  method_not_allowed: {
    reason: "only the MCP endpoint answers 405; a REST path answers a method it lacks with 404 `not_found`",
    files: ["src/mcp/routes.ts"],
  },
  not_acceptable: {
    reason: "an Accept header the GraphQL or MCP transport cannot answer; REST routes ignore Accept",
    files: ["src/graphql/limits.ts", "src/mcp/routes.ts"],
  },
  stream_incomplete: {
    reason: "in-band only: an error frame inside a 200 stream, never a status (SKILL.md section 3 names it)",
    files: [
      "src/domain/inference/modalities/chat/chat.ts",
      "src/domain/inference/settlement/ending.ts",
      "src/domain/inference/modalities/messages/messages-stream.ts",
      "src/domain/inference/modalities/responses/responses-stream.ts",
    ],
  },
};

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return name === "generated" ? [] : sourceFiles(path);
    return path.endsWith(".ts") ? [path] : [];
  });
}

describe("SKILL.md and llms.txt: the funding challenge in both x402 versions", () => {
  test("one 402 carries v1 in the body and v2 in PAYMENT-REQUIRED; both payment headers at once is 400", async () => {
    says(
      docs,
      "/SKILL.md",
      "the `PAYMENT-REQUIRED` header carries the same requirement as x402 v2 (network `eip155:8453`, `amount` = your amount)",
    );
    says(docs, "/SKILL.md", "repeats the same request with `X-PAYMENT` (v1) or `PAYMENT-SIGNATURE` (v2), never both");
    says(docs, "/SKILL.md", "or both `X-PAYMENT` and `PAYMENT-SIGNATURE` were sent");
    says(docs, "/llms.txt", "v2 in the `PAYMENT-REQUIRED` header (network `eip155:8453`)");

    const signup = (headers: Record<string, string> = {}) =>
      fetch(`${world.app.baseUrl}/v1/x402/signup`, {
        method: "POST",
        headers: { "content-type": "application/json", ...headers },
        body: JSON.stringify({ amountMicroUsdc: 5_000_000 }),
      });
    const challenge = await signup();
    expect(challenge.status).toBe(402);
    const body = (await challenge.json()) as {
      x402Version: number;
      accepts: { network: string; maxAmountRequired: string }[];
    };
    expect([body.x402Version, body.accepts[0]?.network, body.accepts[0]?.maxAmountRequired]).toEqual([
      1,
      "base",
      "5000000",
    ]);
    const v2 = decodePaymentRequiredHeader(challenge.headers.get("payment-required") ?? "");
    expect([v2.x402Version, v2.accepts[0]?.network, v2.accepts[0]?.amount]).toEqual([2, "eip155:8453", "5000000"]);

    const both = await signup({ "x-payment": "eA==", "payment-signature": "eA==" });
    expect([both.status, both.headers.get("x-svc-error-code")]).toEqual([400, "invalid_request"]);
  });
});

describe("SKILL.md: the error table", () => {
  test("lists every code a REST route can answer, under its status (ERROR_TABLE)", () => {
    const rows = skillTable();
    expect(rows.length).toBeGreaterThan(10);
    const listed = new Map<string, number>();
    for (const r of rows) for (const c of r.codes) listed.set(c, r.status);
    for (const [code, { status }] of Object.entries(ERROR_TABLE)) {
      if (NOT_ON_REST[code as ErrorCode]) {
        expect(listed.has(code), `${code} is not a REST answer: ${NOT_ON_REST[code as ErrorCode]?.reason}`).toBe(false);
        continue;
      }
      expect(listed.get(code), `SKILL.md's error table lacks ${status} \`${code}\``).toBe(status);
    }
    for (const code of listed.keys()) expect(Object.keys(ERROR_TABLE), `${code} is not a code`).toContain(code);
    says(docs, "/SKILL.md", "`stream_incomplete`");
  });

  test("the codes left out are named only where their reason says", () => {
    const root = join(__dirname, "../../..");
    const files = sourceFiles(join(root, "src")).filter((f) => !f.endsWith("src/lib/errors.ts"));
    for (const [code, why] of Object.entries(NOT_ON_REST)) {
      const naming = files.filter((f) => readFileSync(f, "utf8").includes(`"${code}"`)).map((f) => relative(root, f));
      expect(naming.sort(), `${code}: ${why?.reason}`).toEqual([...(why?.files ?? [])].sort());
    }
  });

  test("every 429 and 503 carries Retry-After in whole seconds (issue 40)", async () => {
    says(docs, "/SKILL.md", "Every 429 and 503 carries `Retry-After` in whole seconds");
    const limited = skillTable().filter((r) => r.status === 429 || r.status === 503);
    expect(limited.length).toBeGreaterThan(5);
    for (const r of limited) {
      for (const code of r.codes) {
        const row = ERROR_TABLE[code as ErrorCode] as { retryAfterSeconds?: number };
        expect(Number.isInteger(row.retryAfterSeconds), `${code} has a Retry-After`).toBe(true);
      }
    }
    // and the service sends it: a ceiling below every offer is 503 no_eligible_supply
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const r = await post(buyer.apiKey, "/v1/chat/completions", {
      model: MODEL,
      messages: [{ role: "user", content: "hi" }],
      svc: { maxPriceCentsPerDollar: 30 },
    });
    expect([r.status, r.headers.get("x-svc-error-code")]).toEqual([503, "no_eligible_supply"]);
    expect(r.headers.get("retry-after")).toMatch(/^[1-9][0-9]*$/);
  });

  test("a REST path answers a method it lacks with 404, and ignores Accept", async () => {
    const put = await fetch(`${world.app.baseUrl}/v1/models`, { method: "PUT" });
    expect([put.status, put.headers.get("x-svc-error-code")]).toEqual([404, "not_found"]);
    const png = await fetch(`${world.app.baseUrl}/v1/models`, { headers: { accept: "image/png" } });
    expect(png.status).toBe(200);
  });

  test("409 `key_limit_reached`: minting past 10 active keys creates nothing", async () => {
    const row = skillTable().find((r) => r.codes.includes("key_limit_reached"));
    expect(row?.advice).toContain("10 active keys");
    const buyer = await fundedBuyerKey(world.app, 0n);
    const mint = (name: string) =>
      call(world.app, { method: "POST", path: "/v1/agent/keys", headers: bearer(buyer.apiKey), body: { name } });
    for (let i = 2; i <= 10; i++) expect((await mint(`k${i}`)).status).toBe(201);
    const over = await mint("k11");
    expect([over.status, (over.body as { error: { code: string } }).error.code]).toEqual([409, "key_limit_reached"]);
    const list = await call(world.app, { method: "GET", path: "/v1/agent/keys", headers: bearer(buyer.apiKey) });
    expect((list.body as { active: number }).active).toBe(10);
  });
});

describe("SKILL.md section 8: keys for sub-agents", () => {
  test("a key's policy and spend as GET /v1/agent/key answers them; expiry is a 401; the CSV formula guard", async () => {
    says(docs, "/SKILL.md", "after it the key answers 401 `authentication_failed`, as a revoked key does.");
    says(
      docs,
      "/SKILL.md",
      "A cell that would begin with `=`, `+`, `-` or `@` (a key's name) begins with `'`, so no spreadsheet runs it as a formula.",
    );
    says(docs, "/SKILL.md", "only the fields you send change, `null` removes a setting");
    says(
      docs,
      "/llms.txt",
      "`GET {base_url}/v1/agent/key` shows the calling key's policy with `spentUsdc`, `remainingUsdc` and `resetsAt`".replace(
        "{base_url}",
        world.app.rt.config.urls.base,
      ),
    );

    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const minted = await call(world.app, {
      method: "POST",
      path: "/v1/agent/keys",
      headers: bearer(buyer.apiKey),
      body: { name: "=1+1", limitUsdc: "2.000000", limitReset: "daily", models: [MODEL] },
    });
    expect(minted.status).toBe(201);
    const sub = minted.body as { id: string; apiKey: string };
    const paid = await post(sub.apiKey, "/v1/chat/completions", {
      model: MODEL,
      messages: [{ role: "user", content: "hi" }],
    });
    expect(paid.status).toBe(200);
    const cost = paid.headers.get("x-svc-cost-usdc") ?? "";
    const own = await call(world.app, { method: "GET", path: "/v1/agent/key", headers: bearer(sub.apiKey) });
    expect(own.body).toMatchObject({
      id: sub.id,
      name: "=1+1",
      limitUsdc: "2.000000",
      spentUsdc: cost,
      remainingUsdc: formatDecimal6(2_000_000n - (parseDecimal6(cost) ?? 0n)),
    });
    const csv = await fetch(`${world.app.baseUrl}/v1/agent/requests?keyId=${sub.id}&format=csv`, {
      headers: bearer(buyer.apiKey),
    });
    expect(csv.headers.get("content-type")).toMatch(/^text\/csv/);
    const lines = (await csv.text()).split("\r\n");
    expect(lines[0]).toBe(
      "time,key_name,model,modality,status,cost_usdc,clearing_price_cents,burn_diem,support_reference",
    );
    expect(lines[1]?.split(",")[1]).toBe("'=1+1");
    expect(lines[1]?.split(",")[5]).toBe(cost);

    await world.app.rt.db.apiKey.update({ where: { id: sub.id }, data: { expiresAt: new Date(Date.now() - 1) } });
    const expired = await call(world.app, { method: "GET", path: "/v1/agent/key", headers: bearer(sub.apiKey) });
    expect([expired.status, (expired.body as { error: { code: string } }).error.code]).toEqual([
      401,
      "authentication_failed",
    ]);
  });
});

describe("SKILL.md: what goes upstream", () => {
  test("undocumented fields are dropped, not refused; `fallbacks` is 400 naming it; instructions become a system message", async () => {
    says(docs, "/SKILL.md", "Fields the upstream does not document are dropped, not refused");
    says(docs, "/SKILL.md", "`fallbacks` is refused (400 naming it)");
    says(docs, "/SKILL.md", "`instructions` goes upstream as a leading system message");

    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const chat = { model: MODEL, messages: [{ role: "user", content: "hi" }] };
    const dropped = await post(buyer.apiKey, "/v1/chat/completions", { ...chat, logit_bias: { "1": 1 } });
    expect(dropped.status).toBe(200);
    expect(world.sim.state.listRequests({ route: "/chat/completions" }).at(-1)?.body).not.toHaveProperty("logit_bias");
    const refused = await post(buyer.apiKey, "/v1/chat/completions", { ...chat, fallbacks: [{ model: "qwen3-4b" }] });
    expect([refused.status, ((await refused.json()) as { error: { field: string } }).error.field]).toEqual([
      400,
      "fallbacks",
    ]);
    const r = await post(buyer.apiKey, "/v1/responses", { model: MODEL, instructions: "Be brief.", input: "hi" });
    expect(r.status).toBe(200);
    const sent = world.sim.state.listRequests({ route: "/responses" }).at(-1)?.body as { input: unknown } | undefined;
    expect(sent?.input).toEqual([
      { role: "system", content: "Be brief." },
      { role: "user", content: "hi" },
    ]);
  });
});

describe("SKILL.md: cost in usage, the per-request ceiling and how a key's limit holds", () => {
  test("usage.cost is X-Svc-Cost-Usdc; svc.maxPriceCentsPerDollar lowers the ceiling; limits refuse before upstream", async () => {
    says(docs, "/SKILL.md", "`usage.cost`, a number in USD equal to `X-Svc-Cost-Usdc`");
    says(docs, "/SKILL.md", "`usage.cost_details` with `cost_usdc` (the exact six-decimal string)");
    says(docs, "/SKILL.md", "the final usage chunk's `usage` already carries `cost` and `cost_details`");
    says(docs, "/SKILL.md", "It only lowers the ceiling for that request");
    says(docs, "/SKILL.md", "402 `key_budget_exceeded`, no `accepts`, with `error.remainingUsdc` and `error.resetsAt`");
    says(docs, "/SKILL.md", "a model outside `models`: 403 `model_not_allowed`");
    says(docs, "/SKILL.md", "503 `no_eligible_supply` with `buyerMaxCents` the key's ceiling");

    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const paid = await post(buyer.apiKey, "/v1/chat/completions", {
      model: MODEL,
      messages: [{ role: "user", content: "hi" }],
    });
    expect(paid.status).toBe(200);
    const body = (await paid.json()) as { usage: { cost: number; cost_details: { cost_usdc: string } } };
    expect(body.usage.cost_details.cost_usdc).toBe(paid.headers.get("x-svc-cost-usdc"));
    expect(body.usage.cost.toFixed(6)).toBe(paid.headers.get("x-svc-cost-usdc"));

    const streamed = await post(buyer.apiKey, "/v1/chat/completions", {
      model: MODEL,
      stream: true,
      messages: [{ role: "user", content: "hi" }],
    });
    const parsed = frames(await streamed.text())
      .filter((f) => f !== "[DONE]")
      .map((f) => JSON.parse(f) as { object?: string; usage?: { cost: number }; costUsdc?: string });
    const cost = parsed.find((f) => f.object === "svc.cost");
    expect(parsed.find((f) => f.usage)?.usage?.cost.toFixed(6)).toBe(cost?.costUsdc);

    // every offer is at 40: a request asking for 35 at most is refused at its own ceiling
    const lowered = await post(buyer.apiKey, "/v1/chat/completions", {
      model: MODEL,
      messages: [{ role: "user", content: "hi" }],
      svc: { maxPriceCentsPerDollar: 35 },
    });
    expect(lowered.status).toBe(503);
    expect(((await lowered.json()) as { error: { buyerMaxCents: number } }).error.buyerMaxCents).toBe(35);

    const mint = async (policy: Record<string, unknown>) => {
      const r = await call(world.app, {
        method: "POST",
        path: "/v1/agent/keys",
        headers: bearer(buyer.apiKey),
        body: { name: `sub-${Object.keys(policy).join("-")}`, ...policy },
      });
      expect(r.status).toBe(201);
      return (r.body as { apiKey: string }).apiKey;
    };
    const before = world.sim.state.listRequests({ route: "/chat/completions" }).length;
    const tight = await mint({ limitUsdc: "0.000010", limitReset: "daily" });
    const refused = await post(tight, "/v1/chat/completions", {
      model: MODEL,
      messages: [{ role: "user", content: "hi" }],
      max_tokens: 4000,
    });
    const refusal = (await refused.json()) as { error: Record<string, unknown>; accepts?: unknown };
    expect([refused.status, refusal.error.code]).toEqual([402, "key_budget_exceeded"]);
    expect(refusal.error.remainingUsdc).toBe("0.000010");
    expect(refusal.error.resetsAt).toMatch(/T00:00:00\.000Z$/);
    expect(refusal.accepts).toBeUndefined();
    expect(world.sim.state.listRequests({ route: "/chat/completions" }).length).toBe(before);

    const narrow = await mint({ models: ["qwen3-4b"] });
    const outside = await post(narrow, "/v1/chat/completions", {
      model: MODEL,
      messages: [{ role: "user", content: "hi" }],
    });
    expect([outside.status, ((await outside.json()) as { error: { code: string } }).error.code]).toEqual([
      403,
      "model_not_allowed",
    ]);

    const cheap = await mint({ maxPriceCentsPerDollar: 30 });
    const none = await post(cheap, "/v1/chat/completions", {
      model: MODEL,
      messages: [{ role: "user", content: "hi" }],
    });
    const noneBody = (await none.json()) as { error: { code: string; buyerMaxCents: number } };
    expect([none.status, noneBody.error.code, noneBody.error.buyerMaxCents]).toEqual([503, "no_eligible_supply", 30]);
  });
});

describe("llms.txt and SKILL.md: x402 discovery", () => {
  test("/.well-known/x402 lists the paid routes as POST <url>, with instructions; the routes ask for payment", async () => {
    const base = world.app.rt.config.urls.base;
    says(
      docs,
      "/llms.txt",
      `[x402 discovery](${base}/.well-known/x402): the paid routes (signup, top-up, refill, and the pay-per-request routes under \`/x402/v1\`) as \`POST <url>\`, with instructions for an agent`,
    );
    says(
      docs,
      "/SKILL.md",
      `\`GET ${base}/.well-known/x402\` lists the paid routes (\`POST\` signup, top-up, refill, and the pay-per-request routes under \`/x402/v1\`) with instructions`,
    );

    const res = await fetch(`${world.app.baseUrl}/.well-known/x402`);
    expect(res.status).toBe(200);
    const doc = (await res.json()) as { version: number; resources: string[]; instructions: string };
    expect(doc.version).toBe(1);
    expect(doc.resources).toEqual([
      ...["signup", "top-up", "refill"].map((r) => `POST ${base}/v1/x402/${r}`),
      ...PAY_PER_REQUEST_ROUTES.map((r) => `POST ${base}${r.path}`),
    ]);
    expect(doc.instructions).toContain(`${base}/v1 `);
    // the first one is where an agent starts: unpaid, it answers the x402 challenge
    const signup = await fetch(`${world.app.baseUrl}/v1/x402/signup`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ amountMicroUsdc: 5_000_000 }),
    });
    expect(signup.status).toBe(402);
    expect(((await signup.json()) as { accepts: { resource: string }[] }).accepts[0]?.resource).toBe(
      `${base}/v1/x402/signup`,
    );
  });

  test("/openapi.json prices every paid route; /.well-known/x402.json is the per-site manifest", async () => {
    const base = world.app.rt.config.urls.base;
    says(docs, "/SKILL.md", `\`${base}/openapi.json\` marks every paid route with \`x-payment-info\``);
    says(
      docs,
      "/SKILL.md",
      `\`GET ${base}/.well-known/x402.json\` is the x402 per-site discovery manifest of the same routes`,
    );
    says(docs, "/llms.txt", `the x402 per-site manifest at \`${base}/.well-known/x402.json\``);
    const doc = (await (await fetch(`${world.app.baseUrl}/openapi.json`)).json()) as {
      paths: Record<string, { post?: { "x-payment-info"?: unknown; responses: Record<string, unknown> } }>;
    };
    const manifest = (await (await fetch(`${world.app.baseUrl}/.well-known/x402.json`)).json()) as {
      items: { resource: { url: string } }[];
    };
    for (const route of PAID_ROUTES) {
      expect(doc.paths[route.path]?.post?.["x-payment-info"], route.path).toBeDefined();
      expect(doc.paths[route.path]?.post?.responses, route.path).toHaveProperty("402");
    }
    expect(manifest.items.map((i) => i.resource.url)).toEqual(PAID_ROUTES.map((r) => `${base}${r.path}`));
  });
});

describe("SKILL.md section 1: the payment identifier", () => {
  test("the 402 declares it; a malformed id is 400 before anything is charged", async () => {
    says(docs, "/SKILL.md", "The 402's `PAYMENT-REQUIRED` declares x402's `payment-identifier` extension");
    says(
      docs,
      "/SKILL.md",
      "the same id with another payment (signed again) or another body is 409 `payment_identifier_conflict` and charges nothing",
    );
    says(docs, "/SKILL.md", "An id whose payment moved nothing (a 402) may be used again. A malformed id is 400.");
    const signup = (headers: Record<string, string> = {}) =>
      fetch(`${world.app.baseUrl}/v1/x402/signup`, {
        method: "POST",
        headers: { "content-type": "application/json", ...headers },
        body: JSON.stringify({ amountMicroUsdc: 5_000_000 }),
      });
    const challenge = await signup();
    const v2 = decodePaymentRequiredHeader(challenge.headers.get("payment-required") ?? "");
    expect(v2.extensions?.["payment-identifier"]).toMatchObject({ info: { required: false } });
    // a payment for this challenge with a short id (its signature is not even looked at): 400
    const payment = {
      x402Version: 2,
      resource: v2.resource,
      accepted: v2.accepts[0],
      payload: {
        signature: `0x${"11".repeat(65)}`,
        authorization: {
          from: "0x00000000000000000000000000000000000000bb",
          to: v2.accepts[0]?.payTo,
          value: "5000000",
          validAfter: "0",
          validBefore: "99999999999",
          nonce: `0x${"22".repeat(32)}`,
        },
      },
      extensions: { "payment-identifier": { info: { required: false, id: "short" } } },
    };
    const bad = await signup({ "payment-signature": Buffer.from(JSON.stringify(payment)).toString("base64") });
    expect([bad.status, bad.headers.get("x-svc-error-code")]).toEqual([400, "invalid_request"]);
  });
});

describe("SKILL.md section 9 and marketplace.md: webhooks", () => {
  test("the secret once, the URL rule, supplier events, signatures standardwebhooks verifies, the schedule, the cap", async () => {
    says(
      docs,
      "/SKILL.md",
      "The 201 answer is the endpoint with its signing secret `secret` (`whsec_…`), shown this once",
    );
    says(
      docs,
      "/SKILL.md",
      "must not resolve to a loopback, private, link-local or metadata address (400 naming `url`); it is checked again, after DNS, before every delivery",
    );
    says(docs, "/SKILL.md", "The `webhook-id` is the same on every retry of an event");
    says(docs, "/SKILL.md", "is retried after 5 s, 5 min, 30 min, 2 h, 5 h, 10 h and 10 h");
    says(docs, "/SKILL.md", "at most 10 endpoints per account");
    says(docs, "/SKILL.md", "Verify every delivery with the `standardwebhooks` package");
    says(docs, "/marketplace.md", "a Bearer key is refused them, 400 naming `events`");
    expect(skillTable().find((r) => r.codes.includes("webhook_limit_reached"))?.advice).toContain("10 endpoints");

    const receiver = await startReceiver();
    try {
      const buyer = await fundedBuyerKey(world.app, 0n);
      const register = (body: Record<string, unknown>) =>
        call(world.app, { method: "POST", path: "/v1/webhooks", headers: bearer(buyer.apiKey), body });
      // local mode allows a loopback receiver (WEBHOOK_ALLOW_PRIVATE); never the metadata address
      const metadata = await register({ url: "https://169.254.169.254/latest", events: ["credit.confirmed"] });
      expect([metadata.status, (metadata.body as { error: { field: string } }).error.field]).toEqual([400, "url"]);
      const supplierEvent = await register({ url: receiver.url, events: ["offer.depleted"] });
      expect([supplierEvent.status, (supplierEvent.body as { error: { field: string } }).error.field]).toEqual([
        400,
        "events",
      ]);
      const made = await register({ url: receiver.url, events: ["credit.confirmed"] });
      expect(made.status).toBe(201);
      const { id, secret } = made.body as { id: string; secret: string };
      expect(secret).toMatch(/^whsec_/);

      // a test event, delivered as the worker would deliver it, verifies as the document shows
      const sent = await call(world.app, {
        method: "POST",
        path: `/v1/webhooks/${id}/test`,
        headers: bearer(buyer.apiKey),
      });
      const eventId = (sent.body as { id: string }).id;
      expect(await world.app.rt.services.webhooks.deliver(eventId, 0)).toBe("delivered");
      const got = await receiver.waitFor((h) => h.headers["webhook-id"] === eventId);
      const event = new Webhook(secret).verify(got.body, {
        "webhook-id": got.headers["webhook-id"] ?? "",
        "webhook-timestamp": got.headers["webhook-timestamp"] ?? "",
        "webhook-signature": got.headers["webhook-signature"] ?? "",
      });
      expect(event).toMatchObject({ type: "webhook.test", data: { webhookId: id } });
      expect(world.app.rt.config.webhooks.retryScheduleMs).toEqual([
        5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000,
      ]);

      for (let i = 2; i <= 10; i++)
        expect(
          (await register({ url: receiver.url, events: ["balance.low"], balanceLowThresholdUsdc: "1.000000" })).status,
        ).toBe(201);
      const over = await register({ url: receiver.url, events: ["credit.confirmed"] });
      expect([over.status, (over.body as { error: { code: string } }).error.code]).toEqual([
        409,
        "webhook_limit_reached",
      ]);
    } finally {
      await receiver.close();
    }
  });
});

describe("marketplace.md: price schedules and standing offers", () => {
  test("the effective price is the step most recently passed today; capacity prices with it; a bad step names its field", async () => {
    says(
      docs,
      "/marketplace.md",
      "The effective price is the price of the step whose `fromUtc` most recently passed today (UTC), else the offer's `priceCentsPerDollar`.",
    );
    says(
      docs,
      "/marketplace.md",
      "Validation errors are 400 `invalid_request` naming the field, e.g. `schedule.1.fromUtc` for a step that is not later than the one before it; nothing is changed.",
    );
    const supplier = await signIn(world.app);
    const key = await registerKey(world.app, supplier, simKey(world.sim, 30_000_000n));
    const post = (schedule: unknown) =>
      postOfferCall(world.app, supplier, {
        upstreamKeyId: key.id,
        priceCentsPerDollar: 70,
        quantityDiem: "5.000000",
        schedule,
      });
    const bad = await post([
      { fromUtc: "10:00", priceCentsPerDollar: 40 },
      { fromUtc: "09:00", priceCentsPerDollar: 30 },
    ]);
    expect([bad.status, (bad.body as { error: { field: string } }).error.field]).toEqual([400, "schedule.1.fromUtc"]);
    // a step at 00:00 has passed at any time of the day
    const ok = await post([{ fromUtc: "00:00", priceCentsPerDollar: 33 }]);
    expect(ok.status).toBe(201);
    expect(ok.body).toMatchObject({ priceCentsPerDollar: 70, effectivePriceCentsPerDollar: 33 });
    const ladder = await world.app.rt.services.market.getLadder();
    expect(ladder.prices.map((p) => p.priceCentsPerDollar)).toContain(33);
    expect(ladder.prices.map((p) => p.priceCentsPerDollar)).not.toContain(70);
  });

  test("a standing offer is posted again once, however many runs, with its settings and repostedFromId", async () => {
    says(
      docs,
      "/marketplace.md",
      "It happens once per offer, however many workers run, and it never leaves two live offers on a key.",
    );
    const supplier = await signIn(world.app);
    const key = await registerKey(world.app, supplier, simKey(world.sim, 30_000_000n));
    const res = await postOfferCall(world.app, supplier, {
      upstreamKeyId: key.id,
      priceCentsPerDollar: 66,
      quantityDiem: "5.000000",
      repostDaily: true,
      dailyQuantityDiem: "12.000000",
    });
    expect(res.status).toBe(201);
    const old = res.body as { id: string };
    // its DIEM expired (as at midnight): the key's balance was read today
    await world.app.rt.db.offer.update({ where: { id: old.id }, data: { expiresAt: new Date(Date.now() - 1_000) } });
    const runs = await Promise.all(Array.from({ length: 4 }, () => world.app.rt.services.standing.repostDue()));
    expect(runs.reduce((a, r) => a + r.reposted, 0)).toBe(1);
    const offers = await world.app.rt.db.offer.findMany({ where: { upstreamKeyId: key.id } });
    const fresh = offers.find((o) => o.repostedFromId === old.id);
    expect(offers).toHaveLength(2);
    expect(fresh).toMatchObject({ status: "active", priceCentsPerDollar: 66, quantityMicroDiem: 12_000_000n });
  });
});
