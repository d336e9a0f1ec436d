import express, { type Express, type Request, type Response } from "express";
import type { Viewer } from "../graphql/context.js";
import { createGraphQL } from "../graphql/yoga.js";
import { DomainError } from "../lib/errors.js";
import type { Runtime } from "../runtime.js";
import { errorMiddleware, sendError } from "./error-response.js";
import { InFlight, requestId } from "./middleware.js";
import { healthRoutes } from "./routes/health.js";

export interface HttpApp {
  app: Express;
  inFlight: InFlight;
  /** yoga instance, exposed for `yoga.fetch` in tests */
  yoga: ReturnType<typeof createGraphQL>;
}

/** Body limit for JSON requests (chat bodies may carry images as data URLs). */
export const JSON_BODY_LIMIT = "20mb";

/**
 * The one HTTP listener's app: REST, SSE, GraphQL at /graphql, and (later) MCP and documents.
 * Transports only: every handler validates, calls one service method, and shapes the output.
 */
export function createHttpApp(rt: Runtime): HttpApp {
  const app = express();
  app.disable("x-powered-by");
  app.set("trust proxy", false);
  app.set("etag", false);
  const inFlight = new InFlight();
  app.use(inFlight.middleware);
  app.use(requestId);
  app.use(express.json({ limit: JSON_BODY_LIMIT, strict: false }));

  app.use(healthRoutes(rt));

  const resolveViewer = async (_req: Request): Promise<Viewer | null> => null; // issue 3: sessions and API keys
  const yoga = createGraphQL({
    base: { db: rt.db, bus: rt.bus, services: rt.services },
    graphiql: rt.config.mode === "local",
    resolveViewer,
  });
  app.use(yoga.graphqlEndpoint, yoga.requestListener as unknown as express.RequestHandler);

  app.use((req: Request, res: Response) => {
    sendError(res, new DomainError("not_found", `No route for ${req.method} ${req.path}.`));
  });
  app.use(errorMiddleware);
  return { app, inFlight, yoga };
}
