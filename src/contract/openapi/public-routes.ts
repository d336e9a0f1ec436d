import { capacityQuery, modelIdParam, modelList, modelRow, modelStatsQuery, modelStatsResponse } from "../catalog.js";
import { x402DiscoveryDocument, x402Manifest } from "../discovery.js";
import { capacityResponse, marketStatsResponse, poolSummaryResponse } from "../market.js";
import { errorResponses, headers, jsonResponse, PUBLIC, registry, textResponse } from "./registry.js";

const DOCUMENTS: [string, string, string, string][] = [
  ["/llms.txt", "getLlmsTxt", "text/plain", "Integration guide for agents (plain text)"],
  ["/SKILL.md", "getSkill", "text/markdown", "The agent skill"],
  ["/skill.md", "getSkillLower", "text/markdown", "The agent skill (same document as /SKILL.md)"],
  ["/pricing.md", "getPricing", "text/markdown", "How charges are computed: the debit formula, rounding, fees"],
  ["/marketplace.md", "getMarketplace", "text/markdown", "Supply, offers, ceilings, clearing, capacity"],
  ["/MCP.md", "getMcpGuide", "text/markdown", "MCP connector setup"],
];

/** The public routes: probes, this document, x402 discovery, the documents, the catalog and the market. */
export function registerPublicRoutes(): void {
  registry.registerPath({
    method: "get",
    path: "/healthz",
    operationId: "healthz",
    tags: ["Public"],
    summary: "Liveness",
    security: PUBLIC,
    responses: { 200: textResponse("text/plain", "`ok`") },
  });

  registry.registerPath({
    method: "get",
    path: "/readyz",
    operationId: "readyz",
    tags: ["Public"],
    summary: "Readiness: Postgres and Redis answer",
    security: PUBLIC,
    responses: {
      200: textResponse("text/plain", "`ready`"),
      503: textResponse("text/plain", "`not ready`"),
    },
  });

  registry.registerPath({
    method: "get",
    path: "/metrics",
    operationId: "metrics",
    tags: ["Public"],
    summary: "Prometheus metrics of this process (docs/operations.md): requests, clears, fall-forwards, escrow, queues",
    security: PUBLIC,
    responses: {
      200: textResponse("text/plain", "Prometheus text exposition format 0.0.4"),
    },
  });

  registry.registerPath({
    method: "get",
    path: "/openapi.json",
    operationId: "getOpenApi",
    tags: ["Public"],
    summary: "This OpenAPI 3.0 document",
    security: PUBLIC,
    responses: {
      200: {
        description: "OpenAPI 3.0 document",
        headers: headers(),
        content: { "application/json": { schema: { type: "object" } } },
      },
    },
  });

  registry.registerPath({
    method: "get",
    path: "/.well-known/x402",
    operationId: "getX402Discovery",
    tags: ["Public"],
    summary: "x402 discovery: the paid routes as `POST <url>` and instructions for an agent",
    description:
      "x402scan's fan-out document: `version` 1, `resources` (signup, top-up, refill, then the pay-per-request routes under /x402/v1, at this deployment's base URL), `instructions`. Cached 5 minutes; any origin may read it. The priced description of every paid route is this document's `x-payment-info`.",
    security: PUBLIC,
    responses: { 200: jsonResponse(x402DiscoveryDocument, "The discovery document") },
  });

  registry.registerPath({
    method: "get",
    path: "/.well-known/x402.json",
    operationId: "getX402Manifest",
    tags: ["Public"],
    summary: "x402 discovery manifest (the x402 draft `well-known-discovery` extension): every paid route",
    description:
      "`x402Version` 2, `lastUpdated`, and one item per paid route: `resource` (URL, description, service name, tags, icon), `type` http, advisory `accepts` (the live 402 is authoritative), `input` (POST, JSON body schema) and `output` (the 200's example and schema). Cached 5 minutes; any origin may read it.",
    security: PUBLIC,
    responses: { 200: jsonResponse(x402Manifest, "The manifest") },
  });

  for (const [path, operationId, mime, summary] of DOCUMENTS) {
    registry.registerPath({
      method: "get",
      path,
      operationId,
      tags: ["Documents"],
      summary,
      security: PUBLIC,
      responses: { 200: textResponse(mime, summary) },
    });
  }

  registry.registerPath({
    method: "get",
    path: "/v1/models",
    operationId: "listModels",
    tags: ["Catalog"],
    summary: "The catalog: live and coming-soon rows",
    security: PUBLIC,
    responses: { 200: jsonResponse(modelList, "Catalog rows"), ...errorResponses([]) },
  });

  registry.registerPath({
    method: "get",
    path: "/v1/models/stats",
    operationId: "modelStats",
    tags: ["Catalog"],
    summary: "Model statistics: rank and usage share (no raw counts)",
    security: PUBLIC,
    request: { query: modelStatsQuery },
    responses: { 200: jsonResponse(modelStatsResponse, "Model statistics"), ...errorResponses([400]) },
  });

  registry.registerPath({
    method: "get",
    path: "/v1/models/{id}",
    operationId: "getModel",
    tags: ["Catalog"],
    summary: "One catalog row (`id` bare, or `svc/`-prefixed with the slash percent-encoded)",
    security: PUBLIC,
    request: { params: modelIdParam },
    responses: {
      200: jsonResponse(modelRow, "The row; a coming_soon row is 200 too"),
      ...errorResponses([404], { 404: "Unknown, disabled or unlisted model." }),
    },
  });

  registry.registerPath({
    method: "get",
    path: "/v1/models/svc/{id}",
    operationId: "getModelPrefixed",
    tags: ["Catalog"],
    summary: "One catalog row by its `svc/`-prefixed id (the response `id` is bare)",
    security: PUBLIC,
    request: { params: modelIdParam },
    responses: {
      200: jsonResponse(modelRow, "The row"),
      ...errorResponses([404], { 404: "Unknown, disabled or unlisted model." }),
    },
  });

  registry.registerPath({
    method: "get",
    path: "/v1/capacity",
    operationId: "capacity",
    tags: ["Market"],
    summary: "Routable capacity by price (cached 30 s; a pre-flight view, not a reservation)",
    security: PUBLIC,
    request: { query: capacityQuery },
    responses: {
      200: jsonResponse(capacityResponse, "The ladder; when nothing is eligible `prices` is [] and totals are 0"),
      ...errorResponses([400], { 400: "`maxPriceCents` outside 30-80 (never clamped)." }),
    },
  });

  registry.registerPath({
    method: "get",
    path: "/v1/supply/pool/summary",
    operationId: "poolSummary",
    tags: ["Market"],
    summary: "The pool's price ladder (no supplier identities)",
    security: PUBLIC,
    responses: { 200: jsonResponse(poolSummaryResponse, "Price rows"), ...errorResponses([]) },
  });

  registry.registerPath({
    method: "get",
    path: "/v1/market/stats",
    operationId: "marketStats",
    tags: ["Market"],
    summary: "Corridor depth, buyer savings, today's clears",
    security: PUBLIC,
    responses: { 200: jsonResponse(marketStatsResponse, "Market statistics"), ...errorResponses([]) },
  });
}
