import { OpenAPIRegistry, OpenApiGeneratorV3 } from "@asteasolutions/zod-to-openapi";
import { z } from "./common.js";
import { registerAccountRoutes } from "./openapi/account-routes.js";
import { registerAgentRoutes } from "./openapi/agent-routes.js";
import { registerFundingRoutes } from "./openapi/funding-routes.js";
import { registerGraphqlRoutes } from "./openapi/graphql-routes.js";
import { registerInferenceRoutes } from "./openapi/inference-routes.js";
import { registerPayPerRequestRoutes } from "./openapi/pay-per-request-routes.js";
import { registerPublicRoutes } from "./openapi/public-routes.js";
import {
  API_VERSION,
  BEARER,
  BODY_ERRORS,
  errorResponses,
  headers,
  jsonBody,
  OPENAPI_VERSION,
  PUBLIC,
  registry,
  textResponse,
} from "./openapi/registry.js";
import { registerSupplyRoutes } from "./openapi/supply-routes.js";
import { registerWebhookRoutes } from "./openapi/webhook-routes.js";
import { BASE_USDC, PAID_ROUTES, type PaymentNetwork, paymentInfo, SERVICE_NAME } from "./paid-routes.js";

/**
 * The OpenAPI registry: every route the app serves, described from the same zod schemas the routes
 * validate with (SPEC "Public" /openapi.json, "Versioning" 2). `registry` holds the routes whose
 * paths are fixed, registered here by family in the document's order (openapi/*-routes.ts, over the
 * shared components and response helpers of openapi/registry.ts); `buildOpenApiDocument` adds the
 * ones that live at the deployment's URLs (the MCP connector under `{mcp_url}`, the docs site at
 * `{docs_url}`) and renders OpenAPI 3.0.
 */

export { API_VERSION, OPENAPI_VERSION, registry };

type OpenAPIObject = ReturnType<OpenApiGeneratorV3["generateDocument"]>;

registerPublicRoutes();
registerAccountRoutes();
registerFundingRoutes();
registerAgentRoutes();
registerPayPerRequestRoutes(registerInferenceRoutes());
registerSupplyRoutes();
registerWebhookRoutes();
registerGraphqlRoutes();

export interface DocumentUrls {
  /** `{base_url}`: the API host */
  base: string;
  /** `{mcp_url}`: the MCP connector is at `{mcp_url}/mcp` */
  mcp: string;
  /** `{docs_url}`: the documentation site */
  docs: string;
}

/** Path of a deployment URL (`""` for a bare host), and a server override when it lives elsewhere. */
function placed(url: string, base: string): { path: string; servers?: { url: string }[] } {
  const u = new URL(url);
  const path = u.pathname.replace(/\/+$/, "");
  return u.origin === new URL(base).origin ? { path } : { path, servers: [{ url: u.origin }] };
}

/** `{mcp_url}/mcp`'s path on this listener (`/mcp` by default). */
export function mcpPathOf(urls: DocumentUrls): string {
  return `${placed(urls.mcp, urls.base).path}/mcp`;
}

/** `{docs_url}`'s path on this listener (`/docs` by default). */
export function docsPathOf(urls: DocumentUrls): string {
  return placed(urls.docs, urls.base).path || "/";
}

const jsonRpc = z
  .object({
    jsonrpc: z.literal("2.0"),
    id: z.union([z.string(), z.number()]).optional(),
    method: z.string().openapi({ example: "tools/call" }),
    params: z.record(z.unknown()).optional(),
  })
  .passthrough()
  .openapi("JsonRpcRequest");

/**
 * Every route of a deployment, with its zod schemas: `registry` plus the routes at the deployment's
 * URLs (the MCP connector, the docs site). The document is generated from it; the fuzz tests
 * (test/integration/fuzz) walk its routes.
 */
export function deploymentRegistry(urls: DocumentUrls): OpenAPIRegistry {
  const local = new OpenAPIRegistry([registry]);
  const mcp = placed(urls.mcp, urls.base);
  local.registerPath({
    method: "post",
    path: mcpPathOf(urls),
    operationId: "mcp",
    tags: ["MCP"],
    summary: "The hosted MCP connector (Streamable HTTP, stateless JSON-RPC)",
    description:
      'Model Context Protocol over Streamable HTTP with the same Bearer key. Tools include `agent_me`, capacity, models, model stats, video quote, request lookup, set max price, and the paid `chat_completion` and `generate_image`. With no Authorization header at all the two paid tools are served paid per call (the x402 MCP transport binding: `_meta["x402/payment"]`, receipt in `_meta["x402/payment-response"]`) and the others answer the tool error `authentication_failed`; a key that is sent must be valid (401). See /MCP.md.',
    ...(mcp.servers ? { servers: mcp.servers } : {}),
    security: BEARER,
    request: { body: jsonBody(jsonRpc) },
    responses: {
      200: {
        description: "JSON-RPC result (tool errors carry the REST error codes)",
        headers: headers(),
        content: { "application/json": { schema: { type: "object" } } },
      },
      ...errorResponses([...BODY_ERRORS, 401, 406]),
    },
  });
  const docs = placed(urls.docs, urls.base);
  local.registerPath({
    method: "get",
    path: docsPathOf(urls),
    operationId: "docsSite",
    tags: ["Documents"],
    summary: "The documentation site: the documents as pages, the API reference, GraphiQL",
    ...(docs.servers ? { servers: docs.servers } : {}),
    security: PUBLIC,
    responses: { 200: textResponse("text/html", "The documentation site") },
  });
  return local;
}

/** Short guidance for agents in `info.x-guidance` (what x402scan and `@agentcash/discovery` read first). */
const GUIDANCE =
  'Two ways to pay, both x402 with USDC on Base. Prepaid: POST /v1/x402/signup with {"amountMicroUsdc": 1000000-1000000000} answers 402; pay it (scheme exact) and repeat the request: the 200 carries an API key (svc_…, shown once). Then call the OpenAI-compatible API under /v1 (and Anthropic\'s Messages API at /v1/messages) with Authorization: Bearer <key>; refill with POST /v1/x402/refill. Per request, no account: POST the same bodies to /x402/v1/chat/completions, /responses, /messages, /image/generate or /images/generations; the 402 asks an x402 v2 `upto` payment of the request\'s maximum charge, and the exact cost is settled. Errors are {"error":{"code","message"}}. Guides: /llms.txt, /SKILL.md.';

/**
 * The OpenAPI 3.0 document for a deployment: its URLs decide the servers and the MCP and docs paths,
 * `network` the network and asset every paid operation's `x-payment-info` names (the catalog's,
 * paid-routes.ts: the structured shape of x402scan's DISCOVERY.md).
 */
export function buildOpenApiDocument(urls: DocumentUrls, network: PaymentNetwork = BASE_USDC): OpenAPIObject {
  const doc = generate(urls);
  for (const route of PAID_ROUTES) {
    const op = doc.paths?.[route.path]?.[route.method.toLowerCase() as "post"];
    if (!op) throw new Error(`paid route ${route.method} ${route.path} is not documented`);
    (op as unknown as Record<string, unknown>)["x-payment-info"] = paymentInfo(route, network);
  }
  return doc;
}

function generate(urls: DocumentUrls): OpenAPIObject {
  return new OpenApiGeneratorV3(deploymentRegistry(urls).definitions).generateDocument({
    openapi: OPENAPI_VERSION,
    info: {
      title: "svc: prepaid inference marketplace",
      version: API_VERSION,
      contact: { name: SERVICE_NAME, url: urls.docs },
      "x-guidance": GUIDANCE,
      description:
        'Buyers prepay USDC on Base (x402 `exact`), or pay per request with no account (x402 `upto`, under /x402/v1), and call an OpenAI-compatible API (and Anthropic\'s Messages API at /v1/messages) routed to the cheapest eligible supplier offer; suppliers sell expiring DIEM capacity. Errors are `{"error":{"code","message",...}}` with `X-Svc-Error-Code` (on /v1/messages inside Anthropic\'s `{"type":"error","error":{…}}`). Guides: /llms.txt, /SKILL.md, /pricing.md, /marketplace.md, /MCP.md.',
    },
    servers: [{ url: urls.base }],
    tags: [
      { name: "Public" },
      { name: "Documents" },
      { name: "Catalog" },
      { name: "Market" },
      { name: "Session" },
      { name: "Account" },
      { name: "Funding" },
      { name: "Agent" },
      { name: "Inference" },
      { name: "Pay per request" },
      { name: "Video" },
      { name: "Supply" },
      { name: "Webhooks" },
      { name: "GraphQL" },
      { name: "MCP" },
    ],
  });
}
