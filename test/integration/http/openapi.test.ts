// GET /openapi.json (issue 17 item 2): the document validates, names every route the app serves (and
// nothing it does not), and the contract's response schemas describe what the routes really answer.
import SwaggerParser from "@apidevtools/swagger-parser";
import type { Express } from "express";
import { describe, expect } from "vitest";
import { agentMeResponse, agentRequestResponse } from "../../../src/contract/agent.js";
import { modelList, modelRow, modelStatsResponse } from "../../../src/contract/catalog.js";
import { errorBody, HEADERS } from "../../../src/contract/common.js";
import { chatCompletionResponse, videoQuoteResponse } from "../../../src/contract/inference.js";
import { capacityResponse, marketStatsResponse, poolSummaryResponse } from "../../../src/contract/market.js";
import { docsPathOf, mcpPathOf } from "../../../src/contract/openapi.js";
import { PAY_PER_REQUEST_ROUTES } from "../../../src/contract/paid-routes.js";
import { call } from "../../../testkit/actors.js";
import { fileWorld, appTest as test } from "../../../testkit/app-test.js";
import { addSupply, chat, fundedBuyerKey } from "../../../testkit/market.js";

test.override("appOptions", { sim: {}, syncCatalog: true });
const world = fileWorld(test);

interface Doc {
  openapi: string;
  info: { version: string };
  servers: { url: string }[];
  paths: Record<string, Record<string, Operation>>;
  components: { securitySchemes: Record<string, Record<string, string>>; responses: Record<string, Response> };
}
interface Response {
  $ref?: string;
  headers?: Record<string, { $ref: string }>;
  content?: Record<string, { schema: { $ref?: string } }>;
}
interface Operation {
  responses: Record<string, Response>;
  security?: Record<string, string[]>[];
  parameters?: { $ref: string }[];
  "x-payment-info"?: unknown;
}

async function fetchDocument(): Promise<Doc> {
  const res = await fetch(`${world.app.baseUrl}/openapi.json`);
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toMatch(/^application\/json/);
  // public and credential-free: a docs site on another origin (DOCS_URL) may load it
  expect(res.headers.get("access-control-allow-origin")).toBe("*");
  return (await res.json()) as Doc;
}

const METHODS = ["get", "post", "put", "patch", "delete"] as const;

/** `/v1/models/:id` → `/v1/models/{id}` */
const toOpenApiPath = (p: string) => p.replace(/:([A-Za-z0-9_]+)/g, "{$1}");

/** Express 5's router internals, as far as this walk reads them. */
interface Layer {
  route?: { path: string | string[]; methods: Record<string, boolean> };
  handle: { stack?: Layer[] };
  /** the path given to `use()` (router 2.x); undefined for `use(fn)` */
  rawPath?: string | string[];
  slash: boolean;
}

/**
 * Every "METHOD path" the Express app routes: each router's routes (an array path is each of its
 * paths), one level of nested routers (how app.ts mounts them), and the `use()` mounts that are not
 * routes (`mounts`: middleware bound to a path, or a mounted handler such as GraphQL's).
 */
function expressRoutes(app: Express): { routes: Set<string>; all: Set<string>; mounts: Set<string> } {
  const routes = new Set<string>();
  const all = new Set<string>();
  const mounts = new Set<string>();
  const walk = (stack: Layer[]) => {
    for (const layer of stack) {
      if (layer.route) {
        const paths = Array.isArray(layer.route.path) ? layer.route.path : [layer.route.path];
        for (const p of paths) {
          for (const [m, on] of Object.entries(layer.route.methods)) {
            if (!on) continue;
            if (m === "_all") all.add(toOpenApiPath(p));
            else routes.add(`${m.toUpperCase()} ${toOpenApiPath(p)}`);
          }
        }
      } else if (layer.handle.stack) {
        walk(layer.handle.stack);
      } else if (!layer.slash && layer.rawPath !== undefined) {
        for (const p of [layer.rawPath].flat()) mounts.add(p);
      }
    }
  };
  walk((app as unknown as { router: { stack: Layer[] } }).router.stack);
  return { routes, all, mounts };
}

describe("GET /openapi.json", () => {
  test("is a valid OpenAPI 3.0 document, version 1.0.0, served for this deployment", async () => {
    const doc = await fetchDocument();
    // swagger-parser dereferences in place: give it a copy
    await expect(SwaggerParser.validate(structuredClone(doc) as never)).resolves.toBeTruthy();
    expect(doc.openapi).toMatch(/^3\.0\.\d+$/);
    expect(doc.info.version).toBe("1.0.0");
    expect(doc.servers).toEqual([{ url: world.app.rt.config.urls.base }]);
    expect(doc.components.securitySchemes.bearerAuth).toMatchObject({ type: "http", scheme: "bearer" });
    expect(doc.components.securitySchemes.cookieAuth).toMatchObject({
      type: "apiKey",
      in: "cookie",
      name: "svc_session",
    });
    // the x402 payment headers are parameters of the paid routes, not security schemes (issue 41)
    expect(Object.keys(doc.components.securitySchemes).sort()).toEqual(["anthropicApiKey", "bearerAuth", "cookieAuth"]);
  });

  test("every error status answers the error body with X-Svc-Error-Code; inference carries the X-Svc-* headers", async () => {
    const doc = await fetchDocument();
    const resolve = (r: Response): Response =>
      r.$ref ? (doc.components.responses[r.$ref.replace("#/components/responses/", "")] ?? {}) : r;
    for (const [path, ops] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(ops)) {
        for (const [status, raw] of Object.entries(op.responses)) {
          const r = resolve(raw);
          expect(r.headers?.[HEADERS.requestId.name], `${method} ${path} ${status}`).toBeDefined();
          // GraphQL answers its own errors in `errors[]`; funding's 402 is the x402 challenge
          if (Number(status) < 400 || path === "/graphql" || (status === "402" && path.startsWith("/v1/x402/")))
            continue;
          if (path === "/readyz") continue; // text/plain `not ready`
          // the Messages routes (and their pay-per-request twin) answer Anthropic's error shape
          const body = path.replace(/^\/x402/, "").startsWith("/v1/messages") ? "AnthropicErrorBody" : "ErrorBody";
          expect(r.content?.["application/json"]?.schema.$ref, `${method} ${path} ${status}`).toBe(
            `#/components/schemas/${body}`,
          );
          expect(r.headers?.[HEADERS.errorCode.name], `${method} ${path} ${status}`).toBeDefined();
        }
      }
    }
    const chatOk = doc.paths["/v1/chat/completions"]?.post?.responses["200"];
    for (const h of [
      "X-Svc-Request-Id",
      "X-Svc-Support-Reference",
      "X-Svc-Cost-Usdc",
      "X-Svc-Clearing-Price-Cents",
      "X-Balance-Remaining",
    ]) {
      expect(chatOk?.headers?.[h], h).toEqual({ $ref: `#/components/headers/${h}` });
    }
    expect(
      resolve(doc.paths["/v1/chat/completions"]?.post?.responses["429"] ?? {}).headers?.["Retry-After"],
    ).toBeDefined();
    expect(doc.paths["/v1/agent/me"]?.get?.security).toEqual([{ bearerAuth: [] }]);
    expect(doc.paths["/v1/account"]?.get?.security).toEqual([{ cookieAuth: [] }]);
    expect(doc.paths["/v1/x402/refill"]?.post?.security).toEqual([{ bearerAuth: [] }]);
  });

  test("funding routes: X-PAYMENT or PAYMENT-SIGNATURE in, PAYMENT-REQUIRED on 402, both receipts on 200 and 409", async () => {
    const doc = await fetchDocument();
    const security: Record<string, unknown> = {
      "/v1/x402/signup": [],
      "/v1/x402/top-up": [{ cookieAuth: [] }],
      "/v1/x402/refill": [{ bearerAuth: [] }],
    };
    for (const path of ["/v1/x402/signup", "/v1/x402/top-up", "/v1/x402/refill"]) {
      const op = doc.paths[path]?.post;
      // the payment headers are optional header parameters; the security is the caller's own credential
      expect(op?.security, path).toEqual(security[path]);
      expect(op?.parameters, path).toEqual([
        { $ref: "#/components/parameters/XPayment" },
        { $ref: "#/components/parameters/PaymentSignature" },
      ]);
      expect(op?.["x-payment-info"], path).toMatchObject({
        price: { mode: "dynamic", currency: "USD", min: "1.000000", max: "1000.000000" },
        protocols: [
          { x402: { scheme: "exact", network: "eip155:8453", asset: world.app.rt.config.chain.usdcAddress } },
        ],
      });
      const ref = (h: string) => ({ $ref: `#/components/headers/${h}` });
      expect(op?.responses["402"]?.headers?.["PAYMENT-REQUIRED"], path).toEqual(ref("PAYMENT-REQUIRED"));
      for (const status of ["200", "409"]) {
        expect(op?.responses[status]?.headers?.["X-PAYMENT-RESPONSE"], `${path} ${status}`).toEqual(
          ref("X-PAYMENT-RESPONSE"),
        );
        expect(op?.responses[status]?.headers?.["PAYMENT-RESPONSE"], `${path} ${status}`).toEqual(
          ref("PAYMENT-RESPONSE"),
        );
      }
    }
  });

  test("names exactly the routes the app serves", async () => {
    const doc = await fetchDocument();
    const documented = new Set<string>();
    for (const [path, ops] of Object.entries(doc.paths)) {
      for (const m of METHODS) if (ops[m]) documented.add(`${m.toUpperCase()} ${path}`);
    }

    const { routes, all, mounts } = expressRoutes(world.app.http.app);
    // the two hot inference POSTs never reach Express (app.ts `handler`: routes/inference.ts
    // `inferenceListener`); they are also Express routes for the other spellings of their paths
    const served = new Set([...routes, "POST /v1/chat/completions", "POST /v1/responses"]);

    // GraphQL is a handler mounted with `app.use` (not a route): yoga answers GET and POST there
    const graphql = world.app.http.yoga.graphqlEndpoint;
    expect(mounts.has(graphql)).toBe(true);
    served.add(`GET ${graphql}`);
    served.add(`POST ${graphql}`);

    // Allow-list: what the app routes that is not an API operation.
    // - pages and assets of the docs site below `{docs_url}` (its root is documented), and the web app
    //   at `{web_url}` with its config and local-mode helpers: HTML, static files and the UI's own
    //   plumbing, not the API.
    const docsPath = docsPathOf(world.app.rt.config.urls);
    const webPath = new URL(world.app.rt.config.urls.web).pathname.replace(/\/+$/, "");
    const notApiPath = (path: string) =>
      path.startsWith(`${docsPath}/`) || (webPath !== "" && (path === webPath || path.startsWith(`${webPath}/`)));
    const notApi = (route: string) => notApiPath(route.split(" ")[1] ?? "");
    // - `app.all` catch-alls that only answer 405 for the methods a path does not serve (the MCP
    //   connector's GET/DELETE; it is stateless): the path must be documented for some method.
    for (const p of all) {
      expect(
        [...documented].some((d) => d.endsWith(` ${p}`)),
        `catch-all ${p}`,
      ).toBe(true);
    }
    // - middleware bound to a path with `use()` (the same-origin guards on the session routes, the
    //   GraphQL mount above, the docs site's static assets): each sits on a documented path or on a
    //   path of the first item.
    for (const m of mounts) {
      const covered = [...documented].some((d) => d.split(" ")[1]?.startsWith(m)) || m === docsPath || notApiPath(m);
      expect(covered, `mount ${m}`).toBe(true);
    }
    // - the final 404 handler is `use(fn)` without a path: not a route, not walked.

    expect([...served].filter((r) => !documented.has(r) && !notApi(r)).sort(), "served, not documented").toEqual([]);
    // the pay-per-request routes are documented before their handlers land (branch i41-ppr): while
    // none of them is served, they are the only documented routes allowed to be missing
    const payPerRequest = PAY_PER_REQUEST_ROUTES.map((r) => `POST ${r.path}`);
    const pending = new Set(payPerRequest.every((r) => !served.has(r)) ? payPerRequest : []);
    expect([...documented].filter((r) => !served.has(r) && !pending.has(r)).sort(), "documented, not served").toEqual(
      [],
    );
    // the deployment-dependent paths are where config puts them
    expect(documented.has(`POST ${mcpPathOf(world.app.rt.config.urls)}`)).toBe(true);
    expect(documented.has(`GET ${docsPath}`)).toBe(true);
  });
});

describe("the response schemas describe the real responses", () => {
  const get = (path: string, apiKey?: string) =>
    call(world.app, { method: "GET", path, headers: apiKey ? { authorization: `Bearer ${apiKey}` } : {} });

  test("catalog, capacity, pool, market stats", async () => {
    const models = await get("/v1/models");
    expect(models.status).toBe(200);
    const list = modelList.strict().parse(models.body);
    expect(list.data.length).toBeGreaterThan(0);
    for (const row of list.data) modelRow.strict().parse(row);
    const live = list.data.find((m) => m.status === "live" && m.modality === "text");
    expect(live).toBeDefined();
    modelRow.strict().parse((await get(`/v1/models/${live?.id}`)).body);
    modelStatsResponse.strict().parse((await get("/v1/models/stats?window=24h")).body);

    await addSupply(world.app, world.sim, [{ priceCents: 40, quantityMicroDiem: 5_000_000n }]);
    world.app.rt.services.inference.invalidateBook();
    const cap = await get("/v1/capacity?maxPriceCents=60");
    expect(cap.status).toBe(200);
    expect(capacityResponse.strict().parse(cap.body).prices.length).toBeGreaterThan(0);
    poolSummaryResponse.strict().parse((await get("/v1/supply/pool/summary")).body);
    marketStatsResponse.strict().parse((await get("/v1/market/stats")).body);
  });

  test("agent/me, a chat completion and its request record, a video quote", async () => {
    const buyer = await fundedBuyerKey(world.app, 5_000_000n);
    const me = await get("/v1/agent/me", buyer.apiKey);
    expect(me.status).toBe(200);
    expect(agentMeResponse.strict().parse(me.body).confirmedUsdc).toBe("5.000000");

    await addSupply(world.app, world.sim, [{ priceCents: 40, quantityMicroDiem: 50_000_000n }]);
    world.app.rt.services.inference.invalidateBook();
    const done = await chat(world.app, buyer.apiKey, {
      model: "zai-org-glm-5-1",
      messages: [{ role: "user", content: "hello [[sim:tokens=8]]" }],
    });
    expect(done.status).toBe(200);
    chatCompletionResponse.parse(done.body);
    const ref = done.headers.get(HEADERS.supportReference.name);
    expect(ref).toMatch(/^[0-9a-f-]{36}$/);
    for (const h of [HEADERS.costUsdc, HEADERS.clearingPriceCents, HEADERS.requestId]) {
      expect(done.headers.get(h.name), h.name).not.toBeNull();
    }
    const record = await get(`/v1/agent/requests/${ref}`, buyer.apiKey);
    expect(record.status).toBe(200);
    agentRequestResponse.strict().parse(record.body);

    const quote = await call(world.app, {
      method: "POST",
      path: "/v1/video/quote",
      headers: { authorization: `Bearer ${buyer.apiKey}` },
      body: { model: "wan-2.6-text-to-video", prompt: "a fox in the snow", duration: "5s", resolution: "720p" },
    });
    expect(quote.status).toBe(200);
    videoQuoteResponse.strict().parse(quote.body);
  });

  test("errors: the error body, with the field named and X-Svc-Error-Code", async () => {
    const bad = await get("/v1/capacity?maxPriceCents=10");
    expect(bad.status).toBe(400);
    expect(bad.headers.get(HEADERS.errorCode.name)).toBe("invalid_request");
    const body = errorBody.parse(bad.body);
    expect(body.error).toMatchObject({ code: "invalid_request", field: "maxPriceCents" });
    expect(body.error.message).toBe("maxPriceCents must be an integer 30-80.");

    const unauthenticated = await get("/v1/agent/me");
    expect(unauthenticated.status).toBe(401);
    expect(errorBody.parse(unauthenticated.body).error.code).toBe("authentication_failed");

    const buyer = await fundedBuyerKey(world.app, 0n);
    const notMine = await get("/v1/agent/requests/00000000-0000-4000-8000-000000000000", buyer.apiKey);
    expect([notMine.status, errorBody.parse(notMine.body).error.code]).toEqual([404, "not_found"]);
    const notUuid = await get("/v1/agent/requests/nope", buyer.apiKey);
    expect([notUuid.status, errorBody.parse(notUuid.body).error]).toEqual([
      400,
      { code: "invalid_request", message: "support_reference must be a uuid.", field: "support_reference" },
    ]);
  });
});
