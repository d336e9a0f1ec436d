import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdir, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { beforeAll, describe, expect } from "vitest";
import { formatDecimal6 } from "../../../src/lib/money.js";
import { fileWorld, appTest as test } from "../../../testkit/app-test.js";
import { fencedBlocks, says } from "../../../testkit/doc-examples.js";
import { addSupply, confirmedOf, fundedBuyerKey } from "../../../testkit/market.js";

/**
 * What llms.txt and SKILL.md section 10 ("Use it from Anthropic's SDK and Claude Code") say about
 * `/v1/messages`, each statement checked against the running service, and the section's SDK
 * program run as a reader would run it.
 */

const MODEL = "zai-org-glm-5-1";
const REPO_ROOT = fileURLToPath(new URL("../../../", import.meta.url));
test.override("appOptions", { sim: {}, syncCatalog: true });
const world = fileWorld(test);
const docs: Record<string, string> = {};

beforeAll(async () => {
  await addSupply(world.app, world.sim, [
    { priceCents: 40, quantityMicroDiem: 200_000_000n },
    { priceCents: 40, quantityMicroDiem: 200_000_000n },
  ]);
  world.app.rt.services.inference.invalidateBook();
  for (const path of ["/SKILL.md", "/llms.txt"]) docs[path] = await (await fetch(`${world.app.baseUrl}${path}`)).text();
});

type Json = Record<string, unknown>;

async function post(path: string, headers: Record<string, string>, body: unknown) {
  const res = await fetch(`${world.app.baseUrl}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  });
  return { res, text: await res.text() };
}

const SAY_HI = { model: MODEL, max_tokens: 200, messages: [{ role: "user", content: "Say hi" }] };

describe("llms.txt and SKILL.md: Anthropic's Messages API", () => {
  test("the key as x-api-key or Bearer; the same key twice is fine, two different keys are not", async () => {
    says(docs, "/llms.txt", "Send the key as `x-api-key` or `Authorization: Bearer`.");
    says(docs, "/SKILL.md", "both at once must be the same key.");
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const other = await fundedBuyerKey(world.app, 5_000_000n);
    expect((await post("/v1/messages", { "x-api-key": buyer.apiKey }, SAY_HI)).res.status).toBe(200);
    expect((await post("/v1/messages", { authorization: `Bearer ${buyer.apiKey}` }, SAY_HI)).res.status).toBe(200);
    const two = await post(
      "/v1/messages",
      { authorization: `Bearer ${buyer.apiKey}`, "x-api-key": other.apiKey },
      SAY_HI,
    );
    expect(two.res.status).toBe(401);
  });

  test("the cost: usage.cost on a message; costUsdc on the closing message_delta, before message_stop", async () => {
    says(
      docs,
      "/llms.txt",
      "`costUsdc` on the closing `message_delta` (Messages streams); chat, Responses and Messages also put it in `usage.cost`",
    );
    says(
      docs,
      "/SKILL.md",
      "The exact cost is in the `message_delta`, before `message_stop`: its `usage` carries `cost` and `cost_details`",
    );
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    let before = await confirmedOf(world.app, buyer.accountId);
    const buffered = await post("/v1/messages", { "x-api-key": buyer.apiKey }, SAY_HI);
    let after = await confirmedOf(world.app, buyer.accountId);
    const usage = (JSON.parse(buffered.text) as { usage: { cost: number } }).usage;
    expect(usage.cost.toFixed(6)).toBe(formatDecimal6(before - after));
    expect(buffered.res.headers.get("x-svc-cost-usdc")).toBe(formatDecimal6(before - after));

    before = after;
    const streamed = await post("/v1/messages", { "x-api-key": buyer.apiKey }, { ...SAY_HI, stream: true });
    after = await confirmedOf(world.app, buyer.accountId);
    const events = streamed.text
      .split("\n\n")
      .filter(Boolean)
      .map((b) => JSON.parse(/^data: (.*)$/m.exec(b)?.[1] ?? "{}") as Json);
    const types = events.map((e) => e.type);
    expect(types.slice(-2)).toEqual(["message_delta", "message_stop"]);
    const delta = events.at(-2) as Json & { usage: { cost: number; cost_details: { cost_usdc: string } } };
    expect(delta.costUsdc).toBe(formatDecimal6(before - after));
    expect(delta.usage.cost_details.cost_usdc).toBe(formatDecimal6(before - after));
  });

  test("count_tokens: UTF-8 bytes / 3 plus 16 per message over what goes upstream; free", async () => {
    says(
      docs,
      "/SKILL.md",
      "the estimate the service reserves a request's prompt at (UTF-8 bytes / 3, plus 16 per message, over the messages, the tool definitions and the tool choice as they go upstream), not a tokenizer's count; it is free and needs a live model.",
    );
    says(
      docs,
      "/llms.txt",
      "answers the estimate the service reserves for (bytes / 3 + 16 per message), not a tokenizer's count.",
    );
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const before = await confirmedOf(world.app, buyer.accountId);
    const r = await post("/v1/messages/count_tokens", { "x-api-key": buyer.apiKey }, SAY_HI);
    // what goes upstream: the one user message, as chat
    const upstream = JSON.stringify([{ role: "user", content: "Say hi" }]);
    expect(JSON.parse(r.text)).toEqual({ input_tokens: Math.ceil(Buffer.byteLength(upstream) / 3) + 16 });
    expect(await confirmedOf(world.app, buyer.accountId)).toBe(before);
    const unknown = await post(
      "/v1/messages/count_tokens",
      { "x-api-key": buyer.apiKey },
      { ...SAY_HI, model: "nope" },
    );
    expect(unknown.res.status).toBe(404);
  });

  test("errors: Anthropic's shape with the service's code; a 503 no_eligible_supply says not to retry", async () => {
    says(
      docs,
      "/SKILL.md",
      'Errors have Anthropic\'s shape, `{"type":"error","error":{"type","message",…},"request_id"}`, with the service\'s `error.code`',
    );
    says(docs, "/SKILL.md", "503 `overloaded_error`. `x-should-retry` says whether a retry can help");
    says(docs, "/SKILL.md", "(a 503 `no_eligible_supply` is `false`: raise the ceiling instead, section 5)");
    says(
      docs,
      "/llms.txt",
      '(on `/v1/messages` inside Anthropic\'s error shape, `{"type":"error","error":{"type":…,"code":…}}`)',
    );
    const buyer = await fundedBuyerKey(world.app, 5_000_000n, 30);
    const r = await post("/v1/messages", { "x-api-key": buyer.apiKey }, SAY_HI);
    expect(r.res.status).toBe(503);
    expect(r.res.headers.get("x-should-retry")).toBe("false");
    expect(r.res.headers.get("x-svc-error-code")).toBe("no_eligible_supply");
    expect(JSON.parse(r.text)).toMatchObject({
      type: "error",
      error: { type: "overloaded_error", code: "no_eligible_supply", details: { error_code: "no_eligible_supply" } },
      request_id: r.res.headers.get("x-svc-request-id"),
    });
  });

  test("SKILL.md's Anthropic SDK program runs as written: the message, usage.cost equal to X-Svc-Cost-Usdc", async () => {
    const block = fencedBlocks(docs["/SKILL.md"] ?? "").find(
      (b) => b.lang === "ts" && b.code.includes('from "@anthropic-ai/sdk"'),
    );
    expect(block?.annotation, "a program of its own").toBe("standalone");
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const dir = join(REPO_ROOT, ".cache", "anthropic-skill", randomUUID());
    await mkdir(dir, { recursive: true });
    try {
      const file = join(dir, "sdk.mts");
      await writeFile(file, block?.code ?? "");
      const out = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
        const child = spawn(process.execPath, ["--import", "tsx", file], {
          cwd: REPO_ROOT,
          env: { PATH: process.env.PATH, SVC_API_KEY: buyer.apiKey },
        });
        let stdout = "";
        let stderr = "";
        child.stdout.on("data", (d: Buffer) => {
          stdout += d.toString();
        });
        child.stderr.on("data", (d: Buffer) => {
          stderr += d.toString();
        });
        child.on("close", (code) => resolve({ code, stdout, stderr }));
      });
      expect(out.code, out.stderr).toBe(0);
      expect(out.stdout).toContain("type: 'text'");
      const [cost, header] = out.stdout.trim().split(/\s+/).slice(-2);
      expect(header).toMatch(/^\d+\.\d{6}$/);
      expect(Number(cost).toFixed(6)).toBe(header);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
