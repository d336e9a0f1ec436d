import { describe, expect } from "vitest";
import { PUBLIC_DOCUMENTS } from "../../../src/http/docs-site.js";
import { TOOLS } from "../../../src/mcp/tools.js";
import { appTest } from "../../../testkit/app-test.js";
import { fencedBlocks } from "../../../testkit/doc-examples.js";
import type { TestApp } from "../../../testkit/harness.js";
import { startWorld } from "../../../testkit/world.js";

/** SPEC "Public": the agent-facing documents, their content types, and the deployment's URLs in them. */

/** a deployment with URLs of its own: another world */
// biome-ignore lint/correctness/noEmptyPattern: vitest reads a fixture's dependencies from this pattern
const test = appTest.extend("deployment", { scope: "file" }, async ({}, { onCleanup }) => {
  const world = await startWorld({
    env: {
      BASE_URL: "https://api.example.test",
      MCP_URL: "https://mcp.example.test",
      WEB_URL: "https://app.example.test",
      DOCS_URL: "https://docs.example.test/handbook",
    },
  });
  onCleanup(() => world.close());
  return world.app;
});

const SERVED = PUBLIC_DOCUMENTS.flatMap((d) => d.paths.map((path) => ({ path, type: d.contentType, file: d.file })));
/** `{name}` left in a document may only be an API path parameter (or TypeScript's `${…}`), never a placeholder */
const PATH_PARAMETERS = new Set(["{support_reference}", "{id}"]);

async function get(app: TestApp, path: string, method = "GET") {
  const res = await fetch(`${app.baseUrl}${path}`, { method });
  return { status: res.status, type: res.headers.get("content-type"), text: await res.text() };
}

function leftovers(text: string): string[] {
  return [...text.matchAll(/(?<!\$)\{[a-z_]+\}/g)].map((m) => m[0]).filter((p) => !PATH_PARAMETERS.has(p));
}

describe("the public documents", () => {
  test.for(SERVED)("GET $path: 200 $type", async ({ path, type }, { app }) => {
    const r = await get(app, path);
    expect(r.status).toBe(200);
    expect(r.type).toBe(type);
    expect(r.text.length).toBeGreaterThan(500);
    const head = await fetch(`${app.baseUrl}${path}`, { method: "HEAD" });
    expect(head.status).toBe(200);
    expect(head.headers.get("content-type")).toBe(type);
  });

  test("SPEC: /SKILL.md and /skill.md are the same document", async ({ app }) => {
    const upper = await get(app, "/SKILL.md");
    const lower = await get(app, "/skill.md");
    expect(lower.text).toBe(upper.text);
  });

  test.for(SERVED)("$path: every placeholder is substituted with this deployment's URLs", async ({ path }, { app }) => {
    const { text } = await get(app, path);
    expect(leftovers(text)).toEqual([]);
    expect(text).not.toMatch(/\{(base|mcp|web|docs)_url\}/);
    expect(text).toContain(app.rt.config.urls.base);
  });

  test("every JSON block in a document is valid JSON", async ({ app }) => {
    for (const d of PUBLIC_DOCUMENTS) {
      const { text } = await get(app, d.paths[0] as string);
      for (const b of fencedBlocks(text).filter((x) => x.lang === "json")) {
        expect(() => JSON.parse(b.code), `${d.file}:${b.line}`).not.toThrow();
      }
    }
  });

  test("llms.txt: an llmstxt.org guide (title, summary, links to the documents and /openapi.json)", async ({ app }) => {
    const { text } = await get(app, "/llms.txt");
    const base = app.rt.config.urls.base;
    expect(text.split("\n")[0]).toMatch(/^# \S/);
    expect(text).toMatch(/\n> \S/);
    for (const link of ["/SKILL.md", "/pricing.md", "/marketplace.md", "/MCP.md", "/openapi.json"]) {
      expect(text).toContain(`](${base}${link})`);
    }
    expect(text).toContain(`](${app.rt.config.urls.docs})`);
  });

  test("SKILL.md: an agent skill with name and description front matter, both x402 clients", async ({ app }) => {
    const { text } = await get(app, "/SKILL.md");
    const fm = /^---\nname: ([^\n]+)\ndescription: ([^\n]+)\n---\n/.exec(text);
    expect(fm).not.toBeNull();
    expect(fm?.[1]).toMatch(/^[a-z0-9-]{1,64}$/);
    expect((fm?.[2] ?? "").length).toBeLessThanOrEqual(1024);
    expect(text).toContain('from "x402-fetch"');
    expect(text).toContain("wrapFetchWithPayment(fetch, account, ");
    expect(text).toContain('from "@x402/fetch"');
    // the v2 client as it comes: no v1 registration, the v2 challenge paid with PAYMENT-SIGNATURE
    expect(text).toContain("registerExactEvmScheme(client, { signer: account });");
    expect(text).not.toContain("registerV1");
    expect(text).toContain("maxAmountPerPayment");
    expect(text).toContain("svc.cost");
  });

  test("MCP.md: the connector URL, the Bearer header, every tool the connector has", async ({ app }) => {
    const { text } = await get(app, "/MCP.md");
    const mcp = `${app.rt.config.urls.mcp}/mcp`;
    expect(text).toContain(`claude mcp add --transport http svc ${mcp} --header "Authorization: Bearer`);
    expect(text).toContain(`"url": "${mcp}"`);
    // exactly the connector's tools, each in the table
    const listed = [...text.matchAll(/^\| `([a-z_]+)` +\|/gm)].map((m) => m[1]);
    expect(listed.sort()).toEqual(TOOLS.map((t) => t.name).sort());
    expect(listed).toHaveLength(12);
  });
});

describe("a deployment with its own URLs", () => {
  test("the documents carry them, and nothing of the default", async ({ deployment }) => {
    const all = (await Promise.all(SERVED.map((s) => get(deployment, s.path)))).map((r) => r.text).join("\n");
    expect(all).toContain("https://api.example.test/v1");
    expect(all).toContain("https://mcp.example.test/mcp");
    expect(all).toContain("https://app.example.test");
    expect(all).toContain("](https://docs.example.test/handbook)");
    expect(all).not.toContain("127.0.0.1");
    expect(leftovers(all)).toEqual([]);
  });

  test("the docs site is served at DOCS_URL's path, and links to the API on its own origin", async ({ deployment }) => {
    expect((await get(deployment, "/docs")).status).toBe(404);
    const home = await get(deployment, "/handbook");
    expect(home.status).toBe(200);
    expect(home.text).toContain('href="/handbook/pricing"');
    const api = await get(deployment, "/handbook/api");
    expect(api.text).toContain('data-spec-url="https://api.example.test/openapi.json"');
  });
});
