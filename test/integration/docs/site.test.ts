import { describe, expect } from "vitest";
import { PUBLIC_DOCUMENTS } from "../../../src/http/docs-site.js";
import { fileWorld, appTest as test } from "../../../testkit/app-test.js";

/**
 * The documentation site at `{docs_url}` (default `{base_url}/docs`): the documents as HTML pages,
 * the API reference on Swagger UI, GraphiQL at /graphql, every asset from this process.
 * (The same pages in a real browser: test/browser/docs-site.test.ts.)
 */

test.override("appOptions", {});
const world = fileWorld(test);

async function get(path: string, headers: Record<string, string> = {}) {
  const res = await fetch(`${world.app.baseUrl}${path}`, { headers, redirect: "manual" });
  return { status: res.status, type: res.headers.get("content-type"), headers: res.headers, text: await res.text() };
}

const PAGES = [
  { path: "/docs", title: "Overview" },
  ...PUBLIC_DOCUMENTS.map((d) => ({ path: `/docs/${d.slug}`, title: d.title })),
  { path: "/docs/api", title: "API reference" },
];

/** Every URL the page makes the browser load or link to: they must all stay on this origin. */
function references(html: string): string[] {
  return [...html.matchAll(/\s(?:href|src|action|data-spec-url)="([^"]*)"/g)].map((m) => m[1] as string);
}

describe("the documentation site", () => {
  test("the docs URL is served at its path, with and without a trailing slash", () => {
    expect(new URL(world.app.rt.config.urls.docs).pathname).toBe("/docs");
  });

  test.each(PAGES)("$path: an accessible HTML page titled $title", async ({ path, title }) => {
    const r = await get(path);
    expect(r.status).toBe(200);
    expect(r.type).toBe("text/html; charset=utf-8");
    expect(r.text).toMatch(/^<!doctype html>\n<html lang="en">/);
    expect(r.text).toContain(`<title>${title} · svc docs</title>`);
    expect(r.text).toContain('<meta name="viewport"');
    expect(r.text).toContain('<nav aria-label="Documentation">');
    expect(r.text).toContain('<main id="main">');
    expect(r.text.match(/<h1[ >]/g)).toHaveLength(1);
    expect(r.text).toContain('aria-current="page"');
    for (const ref of references(r.text)) {
      expect(ref.startsWith("/") || ref.startsWith("#"), `${path} references ${ref}`).toBe(true);
    }
  });

  test("the index links every page, the raw documents, /openapi.json and GraphiQL", async () => {
    const { text } = await get("/docs/");
    for (const p of PAGES) expect(text).toContain(`href="${p.path}"`);
    for (const d of PUBLIC_DOCUMENTS) for (const p of d.paths) expect(text).toContain(`href="${p}"`);
    expect(text).toContain('href="/openapi.json"');
    expect(text).toContain('href="/graphql"');
  });

  test("markdown is rendered (headings with ids, tables, code), links between documents go to their pages", async () => {
    const market = await get("/docs/marketplace");
    expect(market.text).toContain('<h2 id="clearing">Clearing</h2>');
    expect(market.text).toContain("<table>");
    expect(market.text).toContain('<code class="language-sh">');
    expect(market.text).toContain('href="/docs/pricing"');
    const skill = await get("/docs/skill");
    // the front matter is not rendered as text; its description leads the page
    expect(skill.text).not.toContain("name: svc-inference-market");
    expect(skill.text).toContain('<p class="lead">Buy AI inference');
    expect(skill.text).toContain('href="/docs/mcp"');
  });

  test("the API reference loads Swagger UI from this process and reads /openapi.json", async () => {
    const { text } = await get("/docs/api");
    expect(text).toContain('<link rel="stylesheet" href="/docs/assets/swagger-ui/swagger-ui.css">');
    expect(text).toContain('<script src="/docs/assets/swagger-ui/swagger-ui-bundle.js"></script>');
    expect(text).toContain('data-spec-url="/openapi.json"');
    const init = await get("/docs/assets/api-reference.js");
    expect(init.type).toBe("text/javascript; charset=utf-8");
    expect(init.text).toContain("validatorUrl: null");
  });

  test.each([
    { path: "/docs/assets/swagger-ui/swagger-ui-bundle.js", type: /javascript/ },
    { path: "/docs/assets/swagger-ui/swagger-ui.css", type: /^text\/css/ },
    { path: "/docs/assets/swagger-ui/favicon-32x32.png", type: /^image\/png/ },
    { path: "/docs/assets/site.css", type: /^text\/css/ },
    { path: "/docs/assets/favicon.svg", type: /^image\/svg\+xml/ },
  ])("asset $path is served from the installed package", async ({ path, type }) => {
    const r = await get(path);
    expect(r.status).toBe(200);
    expect(r.type).toMatch(type);
  });

  test.each([
    "/docs/assets/swagger-ui/index.html",
    "/docs/assets/swagger-ui/swagger-initializer.js",
    "/docs/assets/swagger-ui/package.json",
    "/docs/assets/swagger-ui/",
    "/docs/assets/swagger-ui/..%2Fpackage.json",
    "/docs/nope",
  ])("%s is not served", async (path) => {
    const r = await get(path);
    expect(r.status).toBe(404);
  });

  test("/docs/graphql sends the browser to GraphiQL", async () => {
    const r = await get("/docs/graphql");
    expect(r.status).toBe(302);
    expect(r.headers.get("location")).toBe("/graphql");
  });

  test("GraphiQL at /graphql carries its own scripts: nothing from a CDN", async () => {
    const r = await get("/graphql", { accept: "text/html" });
    expect(r.status).toBe(200);
    expect(r.type).toMatch(/^text\/html/);
    expect(r.text).toContain("<title>svc GraphiQL</title>");
    expect(r.text).toContain("renderYogaGraphiQL");
    expect(r.text).not.toMatch(/<script[^>]+src=/);
    expect(r.text).not.toMatch(/unpkg\.com|jsdelivr|cdnjs/);
  });
});
