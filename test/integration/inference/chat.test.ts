import { createClient } from "graphql-sse";
import OpenAI from "openai";
import { describe, expect } from "vitest";
import { burnMicroDiem, computeCharge, formatDecimal6 } from "../../../src/lib/money.js";
import { call } from "../../../testkit/actors.js";
import { fileWorld, appTest as test } from "../../../testkit/app-test.js";
import { assertBooksBalance } from "../../../testkit/books.js";
import { addSupply, chat, confirmedOf, fundedBuyerKey } from "../../../testkit/market.js";

const MODEL = "zai-org-glm-5-1";
test.override("appOptions", { sim: {}, syncCatalog: true });
const world = fileWorld(test);

describe("buffered chat", () => {
  test("clears at the cheapest offer, charges burn × price exactly, and the books balance", async () => {
    const supply = await addSupply(world.app, world.sim, [
      { priceCents: 55, quantityMicroDiem: 50_000_000n },
      { priceCents: 40, quantityMicroDiem: 50_000_000n },
    ]);
    const buyer = await fundedBuyerKey(world.app, 10_000_000n);
    const before = await confirmedOf(world.app, buyer.accountId);
    const r = await chat(world.app, buyer.apiKey, {
      model: `svc/${MODEL}`,
      messages: [{ role: "user", content: "Hello there [[sim:tokens=40]]" }],
    });
    expect(r.status).toBe(200);
    const body = r.body as {
      choices: { message: { content: string } }[];
      usage: { prompt_tokens: number; completion_tokens: number };
    };
    expect(body.choices[0]?.message.content.length).toBeGreaterThan(0);
    expect(body).not.toHaveProperty("cost");
    expect(r.headers.get("x-svc-clearing-price-cents")).toBe("40");
    const after = await confirmedOf(world.app, buyer.accountId);
    const cost = r.headers.get("x-svc-cost-usdc");
    expect(cost).toBe(formatDecimal6(before - after));
    expect(r.headers.get("x-balance-remaining")).toBe(formatDecimal6(after));
    // the burn equals the simulator's own accounting of the supplier key
    const simRecord = world.sim.state.listRequests({ key: supply.keys[1]?.secret }).at(-1);
    const model = await world.app.rt.services.catalog.getModel(MODEL);
    const burn = burnMicroDiem(
      {
        inputMicroPerM: model.inputMicroPerM ?? 0n,
        outputMicroPerM: model.outputMicroPerM ?? 0n,
        cacheMicroPerM: model.cacheMicroPerM,
      },
      { promptTokens: body.usage.prompt_tokens, completionTokens: body.usage.completion_tokens },
    );
    expect(simRecord?.burnMicroDiem).toBe(burn);
    expect(before - after).toBe(computeCharge(burn, 40, 1000).grossMicroUsdc);
    // records
    const ref = r.headers.get("x-svc-support-reference") ?? "";
    const detail = await call(world.app, {
      method: "GET",
      path: `/v1/agent/requests/${ref}`,
      headers: { authorization: `Bearer ${buyer.apiKey}` },
    });
    expect(detail.body).toMatchObject({ status: "succeeded", clearingPriceCents: 40, costUsdc: cost });
    const acct = await world.app.rt.db.account.findUniqueOrThrow({ where: { id: buyer.accountId } });
    expect(acct.reservedMicroUsdc).toBe(0n);
    const offer = await world.app.rt.db.offer.findUniqueOrThrow({ where: { id: supply.keys[1]?.offerId } });
    expect(offer.reservedMicroDiem).toBe(0n);
    expect(offer.remainingMicroDiem).toBe(50_000_000n - burn);
    await assertBooksBalance(world.app.rt.db);
  });

  test("the OpenAI SDK: buffered and streaming; the cost it reports equals the balance change", async () => {
    await addSupply(world.app, world.sim, [{ priceCents: 45, quantityMicroDiem: 50_000_000n }]);
    const buyer = await fundedBuyerKey(world.app, 10_000_000n);
    const client = new OpenAI({ baseURL: `${world.app.baseUrl}/v1`, apiKey: buyer.apiKey });
    let before = await confirmedOf(world.app, buyer.accountId);
    const { data, response } = await client.chat.completions
      .create({ model: MODEL, messages: [{ role: "user", content: "hi [[sim:tokens=20]]" }] })
      .withResponse();
    expect(data.choices[0]?.message.content).toBeTruthy();
    let after = await confirmedOf(world.app, buyer.accountId);
    expect(response.headers.get("x-svc-cost-usdc")).toBe(formatDecimal6(before - after));

    before = after;
    const stream = await client.chat.completions.create({
      model: MODEL,
      stream: true,
      messages: [{ role: "user", content: "stream please [[sim:tokens=30]]" }],
    });
    let text = "";
    let costUsdc: string | undefined;
    let usage: unknown;
    for await (const chunk of stream) {
      text += chunk.choices?.[0]?.delta?.content ?? "";
      if ((chunk as { object: string }).object === "svc.cost")
        costUsdc = (chunk as unknown as { costUsdc: string }).costUsdc;
      else {
        // the provider's own fields never reach the buyer (its usage chunk carries `cost`)
        expect(chunk).not.toHaveProperty("cost");
        expect(chunk).not.toHaveProperty("venice_parameters");
      }
      if (chunk.usage) usage = chunk.usage;
    }
    expect(text.length).toBeGreaterThan(0);
    expect(usage).toBeTruthy();
    after = await confirmedOf(world.app, buyer.accountId);
    expect(costUsdc).toBe(formatDecimal6(before - after));
    expect(before - after).toBeGreaterThan(0n);
    await assertBooksBalance(world.app.rt.db);
  });
});

describe("the public clears subscription", () => {
  test("an anonymous dashboard receives each clear, with no identities", async () => {
    const supply = await addSupply(world.app, world.sim, [{ priceCents: 42, quantityMicroDiem: 50_000_000n }]);
    const buyer = await fundedBuyerKey(world.app, 10_000_000n);
    const client = createClient({ url: `${world.app.baseUrl}/graphql`, retryAttempts: 0 });
    const it = client.iterate<{ clears: Record<string, unknown> }>({
      query: "subscription { clears { at model modality priceCentsPerDollar burnDiem grossUsdc } }",
    });
    const next = it.next();
    await new Promise((r) => setTimeout(r, 300));
    const r = await chat(world.app, buyer.apiKey, {
      model: MODEL,
      messages: [{ role: "user", content: "dash [[sim:tokens=10]]" }],
    });
    expect(r.status).toBe(200);
    const ev = (await Promise.race([next, new Promise((res) => setTimeout(() => res(null), 5000))])) as {
      value: { data: { clears: Record<string, unknown> } };
    } | null;
    expect(ev).not.toBeNull();
    const clear = ev?.value.data.clears ?? {};
    expect(clear).toMatchObject({
      model: MODEL,
      modality: "text",
      priceCentsPerDollar: Number(r.headers.get("x-svc-clearing-price-cents")),
    });
    expect(String(clear.grossUsdc)).toBe(
      String(r.headers.get("x-svc-cost-usdc"))
        .replace(".", "")
        .replace(/^0+(?=\d)/, ""),
    );
    const text = JSON.stringify(clear);
    for (const id of [
      buyer.accountId,
      supply.supplierAccountId,
      supply.keys[0]?.upstreamKeyId ?? "x",
      supply.keys[0]?.offerId ?? "x",
    ]) {
      expect(text).not.toContain(id);
    }
    await it.return?.();
    client.dispose();
  });

  test("clears settled together (one batch, one Redis message) reach the dashboard one event each", async () => {
    // eight at once: the API key's in-flight limit
    await addSupply(world.app, world.sim, [{ priceCents: 42, quantityMicroDiem: 50_000_000n }]);
    const buyer = await fundedBuyerKey(world.app, 10_000_000n);
    const client = createClient({ url: `${world.app.baseUrl}/graphql`, retryAttempts: 0 });
    const it = client.iterate<{ clears: { grossUsdc: string } }>({ query: "subscription { clears { grossUsdc } }" });
    const seen: string[] = [];
    const reading = (async () => {
      for await (const ev of it) {
        seen.push(String(ev.data?.clears.grossUsdc));
        if (seen.length === 8) break;
      }
    })();
    await new Promise((r) => setTimeout(r, 300));
    const results = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        chat(world.app, buyer.apiKey, {
          model: MODEL,
          messages: [{ role: "user", content: `dash ${i} [[sim:tokens=${5 + i}]]` }],
        }),
      ),
    );
    expect(results.map((r) => r.status)).toEqual(Array(8).fill(200));
    await Promise.race([reading, new Promise((r) => setTimeout(r, 5000))]);
    const shown = results.map((r) =>
      String(r.headers.get("x-svc-cost-usdc"))
        .replace(".", "")
        .replace(/^0+(?=\d)/, ""),
    );
    expect([...seen].sort()).toEqual([...shown].sort());
    client.dispose();
  });
});

describe("Server-Timing", () => {
  function phases(header: string | null): Record<string, number> {
    const out: Record<string, number> = {};
    for (const part of (header ?? "").split(",")) {
      const m = /^\s*(\w+);dur=(\d+(?:\.\d+)?)\s*$/.exec(part);
      if (m?.[1] && m[2]) out[m[1]] = Number(m[2]);
    }
    return out;
  }

  test("a buffered answer says where its time went: admit, upstream, settle", async () => {
    await addSupply(world.app, world.sim, [{ priceCents: 40, quantityMicroDiem: 50_000_000n }]);
    const buyer = await fundedBuyerKey(world.app, 10_000_000n);
    const t0 = performance.now();
    const r = await chat(world.app, buyer.apiKey, {
      model: MODEL,
      messages: [{ role: "user", content: "time [[sim:tokens=8]]" }],
    });
    const wall = performance.now() - t0;
    expect(r.status).toBe(200);
    const p = phases(r.headers.get("server-timing"));
    expect(Object.keys(p)).toEqual(["admit", "upstream", "settle"]);
    for (const ms of Object.values(p)) expect(ms).toBeGreaterThan(0);
    expect((p.admit ?? 0) + (p.upstream ?? 0) + (p.settle ?? 0)).toBeLessThan(wall);
  });

  test("a stream's headers leave before settlement: admit and upstream only", async () => {
    await addSupply(world.app, world.sim, [{ priceCents: 40, quantityMicroDiem: 50_000_000n }]);
    const buyer = await fundedBuyerKey(world.app, 10_000_000n);
    const res = await fetch(`${world.app.baseUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${buyer.apiKey}`, "content-type": "application/json" },
      body: JSON.stringify({
        model: MODEL,
        stream: true,
        messages: [{ role: "user", content: "time [[sim:tokens=8]]" }],
      }),
    });
    expect(res.status).toBe(200);
    await res.text();
    expect(Object.keys(phases(res.headers.get("server-timing")))).toEqual(["admit", "upstream"]);
  });
});
