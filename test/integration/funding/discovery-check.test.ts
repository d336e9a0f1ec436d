import { execFile } from "node:child_process";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import {
  type AuditWarning,
  checkEndpointSchema,
  checkL2ForOpenAPI,
  checkL4ForOpenAPI,
  discoverOriginSchema,
  getOpenAPI,
  getWarningsForL2,
  getWarningsForL3,
  getWarningsForL4,
  getWarningsForOpenAPI,
  isOpenApiParseFailure,
  validatePaymentRequiredDetailed,
} from "@agentcash/discovery";
import { decodePaymentRequiredHeader } from "@x402/core/http";
import { describe, expect } from "vitest";
import { PAID_ROUTES, PAY_PER_REQUEST_ROUTES } from "../../../src/contract/paid-routes.js";
import { payPerRequestTest as test } from "../../../testkit/pay-per-request.js";

/**
 * Issue 41 acceptance: the discovery library x402scan uses (`@agentcash/discovery`) run against the
 * live origin lists the paid routes with their prices and reports no missing-paid-routes warning —
 * the library's functions as its CLI audit (`discovery <origin>`) composes them, and the CLI itself.
 */

// the app on a local chain with the in-process facilitator (its upto signer goes into the 402) and
// the catalog synced from the upstream simulator: the pay-per-request routes size their 402 from the
// model's price (the examples name live models)

const FUNDING_PRICE = "1.000000-1000.000000 USD";
const PAY_PER_REQUEST_PRICE = "0.000000-1000.000000 USD";

/**
 * The warnings an origin audit may still give, none about a paid route: the document lists more
 * than 40 routes (the whole API), and the routes whose only credential is the Bearer key have no
 * auth mode (agentcash 1.7.5 counts `apiKey` schemes only; the key stays an HTTP bearer scheme).
 */
const TOLERATED = new Set(["L2_ROUTE_COUNT_HIGH", "L2_AUTH_MODE_MISSING"]);
const PAID_PATHS = new Set(PAID_ROUTES.map((r) => r.path));

/** The warnings that are not tolerated, or that concern a paid route. */
function unexpected(warnings: AuditWarning[]): string[] {
  return warnings
    .filter((w) => !TOLERATED.has(w.code) || (w.path !== undefined && PAID_PATHS.has(w.path)))
    .map((w) => `${w.code} ${w.path ?? ""}`);
}

describe("@agentcash/discovery on the origin", () => {
  test("lists every paid route as paid, priced, x402; no missing-paid-routes or pricing warning", async ({ app }) => {
    const origin = app.baseUrl;
    const found = await discoverOriginSchema({ target: origin });
    if (!found.found) throw new Error(`not found: ${found.cause}`);
    expect(found.source).toBe("openapi");
    for (const route of PAID_ROUTES) {
      const endpoint = found.endpoints.find((e) => e.method === "POST" && e.path === route.path);
      expect(endpoint, route.path).toMatchObject({
        resourceKey: `${origin} POST ${route.path}`,
        authMode: route.caller === "session" ? "apiKey+paid" : "paid",
        price: route.scheme === "exact" ? FUNDING_PRICE : PAY_PER_REQUEST_PRICE,
        pricingMode: "dynamic",
        currency: "USD",
        protocols: ["x402"],
      });
    }
    // nothing else is priced
    expect(found.endpoints.filter((e) => e.price !== undefined)).toHaveLength(PAID_ROUTES.length);
    expect(found.guidance).toContain("/x402/v1/chat/completions");

    // the audit's document-level warnings, as `discovery <origin>` gathers them
    const openApi = (await getOpenAPI(origin)).unwrapOr(null);
    if (!openApi || isOpenApiParseFailure(openApi)) throw new Error("no OpenAPI document");
    const warnings: AuditWarning[] = [
      ...getWarningsForOpenAPI(openApi),
      ...getWarningsForL2(checkL2ForOpenAPI(openApi)),
      ...getWarningsForL4(checkL4ForOpenAPI(openApi)),
    ];
    expect(unexpected(warnings)).toEqual([]);
  });

  test("each funding route's live 402 (probed with the example body) is a valid x402 v2 challenge with schemas", async ({
    app,
  }) => {
    for (const route of PAID_ROUTES.filter((r) => r.caller === "anyone" && r.scheme === "exact")) {
      const url = `${app.baseUrl}${route.path}`;
      const checked = await checkEndpointSchema({ url, sampleInputBody: route.example.input });
      if (!checked.found) throw new Error(`${route.path}: ${checked.cause}`);
      const post = checked.advisories.find((a) => a.method === "POST");
      expect(post, route.path).toMatchObject({ source: "probe", authMode: "paid" });
      expect(post?.paymentOptions).toEqual([
        expect.objectContaining({
          protocol: "x402",
          version: 2,
          scheme: "exact",
          network: "eip155:8453",
          amount: String(route.example.input.amountMicroUsdc),
        }),
      ]);
      expect(post?.inputSchema).toBeDefined();
      expect(post?.outputSchema).toBeDefined();
      const issues = getWarningsForL3(post ?? null).filter((w) => w.severity !== "info");
      expect(issues, route.path).toEqual([]);
      expect(validatePaymentRequiredDetailed(post?.paymentRequiredBody)).toMatchObject({ valid: true, version: 2 });
    }
  });

  test("the v1 challenge in the body carries its schemas in `outputSchema`", async ({ app }) => {
    const res = await fetch(`${app.baseUrl}/v1/x402/signup`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ amountMicroUsdc: 5_000_000 }),
    });
    expect(res.status).toBe(402);
    const v1 = validatePaymentRequiredDetailed(await res.json());
    expect(v1).toMatchObject({ version: 1, normalized: { hasInputSchema: true, hasOutputSchema: true } });
    // agentcash pays v2 only, and says so of the v1 form; the body's `error` is the service's error
    // envelope, not x402 v1's string (docs/decisions.md "Funding": a v2 reader takes PAYMENT-REQUIRED)
    expect(v1.issues.map((i) => `${i.code} ${i.path}`)).toEqual([
      "COINBASE_SCHEMA_INVALID error",
      "X402_VERSION_V1_NOT_SUPPORTED x402Version",
    ]);
    const v2 = validatePaymentRequiredDetailed(decodePaymentRequiredHeader(res.headers.get("payment-required") ?? ""));
    expect(v2).toMatchObject({ valid: true, version: 2, issues: [] });
  });

  // each pay-per-request route answers its example with a v2 `upto` 402 the library reads
  test("each pay-per-request route: a v2 upto 402 with schemas", async ({ app }) => {
    const answers = await Promise.all(
      PAY_PER_REQUEST_ROUTES.map(async (route) => {
        const url = `${app.baseUrl}${route.path}`;
        const res = await fetch(url, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify(route.example.input),
        });
        return { route, url, status: res.status };
      }),
    );
    expect(answers.map((a) => [a.route.path, a.status])).toEqual(answers.map((a) => [a.route.path, 402]));
    for (const { route, url } of answers) {
      const checked = await checkEndpointSchema({ url, sampleInputBody: route.example.input });
      if (!checked.found) throw new Error(`${route.path}: ${checked.cause}`);
      const post = checked.advisories.find((a) => a.method === "POST");
      expect(post?.paymentOptions?.[0], route.path).toMatchObject({ protocol: "x402", version: 2, scheme: "upto" });
      expect(
        getWarningsForL3(post ?? null).filter((w) => w.severity !== "info"),
        route.path,
      ).toEqual([]);
    }
  });

  test("its CLI audit (`discovery <origin> --json`): the paid routes with prices, no missing-paid-routes warning", async ({
    app,
  }) => {
    const main = createRequire(import.meta.url).resolve("@agentcash/discovery"); // …/dist/index.cjs
    const bin = join(dirname(main), "..", "bin", "discovery.js");
    const { stdout } = await promisify(execFile)(process.execPath, [bin, app.baseUrl, "--json"], {
      timeout: 120_000,
      maxBuffer: 20 * 1024 * 1024,
    });
    const audit = JSON.parse(stdout) as {
      ok: boolean;
      resources: { method: string; path: string; authHint?: string; priceHint?: string }[];
      warnings: AuditWarning[];
    };
    expect(audit.ok).toBe(true);
    const priced = audit.resources
      .filter((r) => r.priceHint !== undefined)
      .map((r) => `${r.method} ${r.path} ${r.priceHint}`);
    expect(priced.sort()).toEqual(
      PAID_ROUTES.map((r) => `POST ${r.path} ${r.scheme === "exact" ? FUNDING_PRICE : PAY_PER_REQUEST_PRICE}`).sort(),
    );
    expect(audit.warnings.map((w) => w.code)).not.toContain("L2_NO_PAID_ROUTES");
    expect(unexpected(audit.warnings.filter((w) => w.code.startsWith("L2_")))).toEqual([]);
    expect(audit.warnings.filter((w) => w.severity === "error")).toEqual([]);
  });
});
