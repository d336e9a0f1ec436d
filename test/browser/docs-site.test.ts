import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect } from "vitest";
import { fileWorld, appTest as test } from "../../testkit/app-test.js";
import { launchChromium } from "../../testkit/browser.js";

/**
 * The documentation site in a real browser: Debian's chromium driven by playwright-core (no browser
 * download; .ci/run installs the package). Each page must render with no request leaving this
 * machine and no console error; a screenshot of each goes to artifacts/screenshots/ (CI keeps it).
 */

const SCREENSHOTS = join(process.cwd(), "artifacts", "screenshots");

test.override("appOptions", {});
const world = fileWorld(test);
let profile: string;
let context: BrowserContext;

beforeAll(async () => {
  mkdirSync(SCREENSHOTS, { recursive: true });
  profile = mkdtempSync(join(tmpdir(), "svc-docs-browser-"));
  // a persistent context is how playwright takes a fresh --user-data-dir of our own
  context = await launchChromium(profile);
}, 60_000);

afterAll(async () => {
  await context?.close();
  if (profile) rmSync(profile, { recursive: true, force: true });
});

interface Visit {
  page: Page;
  requests: string[];
  problems: string[];
}

/** Opens `path` on a fresh page that records every request and every console error. */
async function open(path: string): Promise<Visit> {
  const page = await context.newPage();
  const requests: string[] = [];
  const problems: string[] = [];
  page.on("request", (r) => {
    requests.push(r.url());
  });
  page.on("console", (m) => {
    if (m.type() === "error") problems.push(`console: ${m.text()}`);
  });
  page.on("pageerror", (e) => {
    problems.push(`page error: ${e.message}`);
  });
  page.on("requestfailed", (r) => {
    problems.push(`request failed: ${r.url()} ${r.failure()?.errorText ?? ""}`);
  });
  const res = await page.goto(`${world.app.baseUrl}${path}`, { waitUntil: "load" });
  expect(res?.status(), path).toBe(200);
  return { page, requests, problems };
}

/** Every request went to the app on 127.0.0.1 (or stayed inside the page: data: and blob: URLs). */
function assertLocal(v: Visit) {
  const origin = new URL(world.app.baseUrl).origin;
  const outside = v.requests.filter((u) => !u.startsWith(`${origin}/`) && !/^(data|blob):/.test(u));
  expect(outside).toEqual([]);
  expect(new URL(world.app.baseUrl).hostname).toBe("127.0.0.1");
  expect(v.problems).toEqual([]);
}

async function shoot(v: Visit, name: string) {
  await v.page.screenshot({ path: join(SCREENSHOTS, `${name}.png`) });
  await v.page.close();
}

describe("the documentation site in chromium", () => {
  test("the index: headings, navigation, links to every document", async () => {
    const v = await open("/docs");
    expect(await v.page.locator("html").getAttribute("lang")).toBe("en");
    expect(await v.page.title()).toBe("Overview · svc docs");
    await expect.poll(() => v.page.locator("h1").textContent()).toBe("svc documentation");
    const nav = v.page.getByRole("navigation", { name: "Documentation" });
    for (const label of ["Agent skill", "Pricing", "Marketplace", "MCP connector", "API reference", "GraphiQL"]) {
      expect(await nav.getByRole("link", { name: label }).count(), label).toBe(1);
    }
    assertLocal(v);
    await shoot(v, "docs-index");
  });

  test("the pricing page: the markdown rendered, the worked examples shown", async () => {
    const v = await open("/docs/pricing");
    expect(await v.page.locator("h1").textContent()).toBe("Pricing");
    expect(await v.page.locator("h2#worked-examples").count()).toBe(1);
    expect(await v.page.locator("pre code.language-json").count()).toBeGreaterThanOrEqual(6);
    expect(await v.page.locator('nav a[aria-current="page"]').textContent()).toBe("Pricing");
    assertLocal(v);
    await shoot(v, "docs-pricing");
  });

  test("the API reference: Swagger UI renders the operations of /openapi.json", async () => {
    const spec = await fetch(`${world.app.baseUrl}/openapi.json`);
    expect(spec.status).toBe(200);
    const doc = (await spec.json()) as { paths: Record<string, unknown> };
    const v = await open("/docs/api");
    await v.page.locator(".swagger-ui .opblock").first().waitFor({ timeout: 20_000 });
    const operations = await v.page.locator(".swagger-ui .opblock").count();
    expect(operations).toBeGreaterThanOrEqual(Object.keys(doc.paths).length);
    // exactly one operation at the keyed path (its pay-per-request twin is /x402/v1/chat/completions)
    expect(await v.page.locator('.swagger-ui .opblock-summary-path[data-path="/v1/chat/completions"]').count()).toBe(1);
    assertLocal(v);
    await shoot(v, "docs-api-reference");
  }, 60_000);

  test("GraphiQL: the editor loads from this process and runs its default query", async () => {
    const v = await open("/graphql");
    await v.page.locator(".graphiql-container").first().waitFor({ timeout: 20_000 });
    await v.page.locator(".graphiql-query-editor .monaco-editor, .graphiql-query-editor .CodeMirror").first().waitFor({
      timeout: 20_000,
    });
    expect(await v.page.title()).toBe("svc GraphiQL");
    // the default query runs against /graphql and its answer is shown
    await v.page.locator(".graphiql-execute-button").click();
    await v.page.locator(".graphiql-response", { hasText: "cheapestPostedCents" }).waitFor({ timeout: 20_000 });
    assertLocal(v);
    await shoot(v, "graphiql");
  }, 60_000);
});
