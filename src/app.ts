import { createServer, type RequestListener, type Server } from "node:http";
import express, { type Express, type Request, type Response } from "express";
import { createGraphqlCostBudget } from "./adapters/redis/budget.js";
import { createGraphQL } from "./graphql/yoga.js";
import { bodyUnlessCredentialed, readCookie, requireSameOrigin, resolveViewer, SESSION_COOKIE } from "./http/auth.js";
import { answerClientError, errorMiddleware, sendError } from "./http/error-response.js";
import { EntryLayers } from "./http/layers.js";
import { graphqlJsonBody, InFlight } from "./http/middleware.js";
import { accountRoutes } from "./http/routes/account.js";
import { agentRoutes } from "./http/routes/agent.js";
import { authRoutes } from "./http/routes/auth.js";
import { catalogRoutes } from "./http/routes/catalog.js";
import { discoveryRoutes } from "./http/routes/discovery.js";
import { documentRoutes } from "./http/routes/documents.js";
import { fundingRoutes } from "./http/routes/funding.js";
import { healthRoutes } from "./http/routes/health.js";
import { inferenceListener, inferenceRoutes } from "./http/routes/inference.js";
import { marketRoutes } from "./http/routes/market.js";
import { openApiRoutes } from "./http/routes/openapi.js";
import { payPerRequestRoutes } from "./http/routes/pay-per-request.js";
import { supplyRoutes } from "./http/routes/supply.js";
import { type WebOptions, webRoutes } from "./http/routes/web.js";
import { webhookRoutes } from "./http/routes/webhooks.js";
import { DomainError } from "./lib/errors.js";
import { mcpPath, mcpRoutes } from "./mcp/routes.js";
import type { Runtime } from "./runtime.js";

export interface HttpApp {
  /** the Express app alone: it never sees the hot inference POSTs (see `handler`) */
  app: Express;
  /** the listener's request handler, the inference fast path then Express; drive this in-process */
  handler: RequestListener;
  /** the one HTTP server over `handler`, not yet listening (main and the test harness listen) */
  server: Server;
  inFlight: InFlight;
  /** yoga instance, exposed for `yoga.fetch` in tests */
  yoga: ReturnType<typeof createGraphQL>;
}

/**
 * The one HTTP listener's app: REST and SSE (src/http), GraphQL at /graphql (src/graphql), MCP
 * (src/mcp) and the documents. It mounts the three transports, so it sits above them: GraphQL and
 * MCP reuse HTTP's pieces (credentials, the error body, the presenters) and never the reverse.
 * Transports only: every handler validates, calls one service method, and shapes the output.
 */
export interface HttpAppOptions {
  /** the web app: local mode's dev routes, or where the built app is (routes/web.ts) */
  web?: WebOptions;
}

export function createHttpApp(rt: Runtime, opts: HttpAppOptions = {}): HttpApp {
  const app = express();
  app.disable("x-powered-by");
  app.set("trust proxy", false);
  app.set("etag", false);
  const inFlight = new InFlight();
  // the entry layers (in-flight count, timing, request id, unsafe URL refusal), defined once in
  // layers.ts: the fast path below runs the same function, so a layer added there is on both paths
  const entry = new EntryLayers(rt.metrics, inFlight, rt.reads);
  app.use(entry.express);
  // GraphQL documents are small (graphql/limits.ts): a smaller body limit there (yoga's endpoint and /graphql/stream)
  app.use("/graphql", graphqlJsonBody);
  // a credentialed route's body is read after its credential checks out (requireBearer/requireSession)
  app.use(bodyUnlessCredentialed([mcpPath(rt.config.urls.mcp)]));

  // the inference routes first: the requests the fast path leaves to Express should not walk every
  // other router's layers either (all routers own disjoint paths, so the order changes nothing else)
  app.use(inferenceRoutes(rt));
  app.use(payPerRequestRoutes(rt));
  app.use(healthRoutes(rt));
  app.use(authRoutes(rt));
  app.use(accountRoutes(rt));
  app.use(agentRoutes(rt));
  app.use(fundingRoutes(rt));
  app.use(catalogRoutes(rt));
  app.use(marketRoutes(rt));
  app.use(supplyRoutes(rt));
  app.use(webhookRoutes(rt));
  app.use(openApiRoutes(rt));
  app.use(discoveryRoutes(rt));
  app.use(documentRoutes(rt));
  app.use(mcpRoutes(rt));
  app.use(webRoutes(rt, opts.web));

  const yoga = createGraphQL({
    base: { db: rt.db, bus: rt.bus, services: rt.services },
    reads: rt.reads,
    resolveViewer: (req: Request) => resolveViewer(rt.services, req),
    allowedOrigins: [new URL(rt.config.urls.base).origin, new URL(rt.config.urls.web).origin],
    budget: {
      budget: createGraphqlCostBudget(rt.redis.command, rt.keys, rt.config.limits.graphqlCostPerMinute),
      clock: rt.clock,
    },
  });
  // cookie-authenticated GraphQL writes must come from our own origins (CSRF)
  const sameOrigin = requireSameOrigin(rt.config);
  app.use(yoga.graphqlEndpoint, (req, res, next) =>
    readCookie(req, SESSION_COOKIE) !== undefined ? sameOrigin(req, res, next) : next(),
  );
  app.use(yoga.graphqlEndpoint, yoga.requestListener as unknown as express.RequestHandler);

  app.use((req: Request, res: Response) => {
    sendError(res, new DomainError("not_found", `No route for ${req.method} ${req.path}.`));
  });
  app.use(errorMiddleware);

  // the hot inference POSTs skip Express (its router and per-request wrapping were a fifth of
  // the service's CPU on them); routes/inference.ts runs the same layers and route functions for them
  const fast = inferenceListener(rt, entry);
  const handler: RequestListener = (req, res) => {
    if (!fast(req, res)) app(req, res);
  };
  const server = createServer(handler);
  // node's own refusals (431, 408, 400 before any handler) in the JSON error shape
  server.on("clientError", answerClientError);
  return { app, handler, server, inFlight, yoga };
}

/**
 * A worker-only process's listener (`--role=worker`): the probes and /metrics alone, so an
 * orchestrator can check it and Prometheus can scrape its queue and job metrics. Everything else 404.
 */
export function createProbeApp(rt: Runtime): Server {
  const app = express();
  app.disable("x-powered-by");
  app.set("etag", false);
  app.use(healthRoutes(rt));
  app.use((req: Request, res: Response) => {
    sendError(res, new DomainError("not_found", `No route for ${req.method} ${req.path} on a worker process.`));
  });
  app.use(errorMiddleware);
  return createServer(app);
}
