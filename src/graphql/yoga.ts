import { useGraphQLSSE } from "@graphql-yoga/plugin-graphql-sse";
import type { Request, Response } from "express";
import { createYoga } from "graphql-yoga";
import type { Viewer } from "../domain/identity/viewer.js";
import type { GraphQLContext } from "./context.js";
import { maskError } from "./errors.js";
import { buildSchema } from "./schema/index.js";

export interface YogaDeps {
  base: Omit<GraphQLContext, "viewer" | "requestId">;
  graphiql: boolean;
  /** resolves the caller from the Express request (session cookie or Bearer) */
  resolveViewer: (req: Request) => Promise<Viewer | null>;
  /** browser origins allowed by CORS (credentials included) */
  allowedOrigins: string[];
}

export type ServerContext = { req: Request; res: Response };

/**
 * graphql-yoga at /graphql. Subscriptions: SSE distinct-connections mode on /graphql itself and
 * the graphql-sse single-connection mode at /graphql/stream. Errors masked by `maskError`.
 */
export function createGraphQL(deps: YogaDeps) {
  const schema = buildSchema();
  return createYoga<ServerContext, GraphQLContext>({
    schema,
    graphqlEndpoint: "/graphql",
    graphiql: deps.graphiql,
    landingPage: false,
    logging: false,
    maskedErrors: { maskError },
    plugins: [useGraphQLSSE()],
    // only our own origins get CORS headers; anything else (including "null") gets none
    cors: (request) => {
      const origin = request.headers.get("origin");
      return origin && deps.allowedOrigins.includes(origin) ? { origin, credentials: true } : false;
    },
    context: async ({ req, res }) => ({
      ...deps.base,
      viewer: await deps.resolveViewer(req),
      requestId: String(res.locals.requestId ?? ""),
    }),
  });
}
