import type { Request, Response } from "express";
import { createYoga, type GraphiQLOptions, map, pipe } from "graphql-yoga";
import type { EventBus } from "../adapters/pubsub.js";
import type { ReadRouting } from "../adapters/read-replica.js";
import type { Viewer } from "../domain/identity/viewer.js";
import { DomainError } from "../lib/errors.js";
import type { GraphQLContext } from "./context.js";
import { maskError } from "./errors.js";
import { type GraphQLBudgetDeps, graphqlLimits } from "./limits.js";
import { useReadReplica } from "./read-replica.js";
import { buildSchema } from "./schema/index.js";
import { useGraphQLStream } from "./stream.js";

export interface YogaDeps {
  base: Omit<GraphQLContext, "viewer" | "requestId">;
  /** resolves the caller from the Express request (session cookie or Bearer) */
  resolveViewer: (req: Request) => Promise<Viewer | null>;
  /** browser origins allowed by CORS (credentials included) */
  allowedOrigins: string[];
  /** the per-caller GraphQL cost budget (graphql/limits.ts); none: per-operation limits only */
  budget?: GraphQLBudgetDeps;
  /** where queries read (a replica when fresh enough; graphql/read-replica.ts); none: `base.db` */
  reads?: ReadRouting;
}

export type ServerContext = { req: Request; res: Response };

/** What GraphiQL opens with: a public query that works without signing in. */
const GRAPHIQL_OPTIONS: GraphiQLOptions = {
  title: "svc GraphiQL",
  defaultQuery: `# Public: no sign-in needed.
# Amounts are integer strings of micro-units.
{
  capacity { cheapestPostedCents routableDiem }
  models { id status }
}
`,
  credentials: "same-origin",
};

let graphiqlPage: Promise<string> | undefined;

/**
 * GraphiQL from the installed @graphql-yoga/render-graphiql (scripts, styles and workers inlined),
 * so /graphql works in a browser with no internet; yoga's default page loads GraphiQL from a CDN.
 * The 9 MB module is imported on the first page view and the page rendered once.
 */
function renderGraphiQL(options: GraphiQLOptions): Promise<string> {
  graphiqlPage ??= import("@graphql-yoga/render-graphiql").then((m) => m.renderGraphiQL(options));
  return graphiqlPage;
}

/**
 * The caller's owner-only streams last as long as its credential: each event of a per-account
 * channel is delivered only after the request's credential resolves again to the same account, so a
 * key revoked or a session signed out while a subscription is open ends it (`authentication_failed`)
 * instead of receiving the owner's next event. Public channels (no id) are not re-checked.
 */
function busWhileAuthenticated(bus: EventBus, viewer: Viewer, resolveAgain: () => Promise<Viewer | null>): EventBus {
  const subscribe = (...args: Parameters<EventBus["subscribe"]>) =>
    args[1] === undefined
      ? bus.subscribe(...args)
      : pipe(
          bus.subscribe(...args),
          map(async (event) => {
            if ((await resolveAgain())?.accountId !== viewer.accountId) {
              throw new DomainError("authentication_failed", "The credential was revoked or signed out.");
            }
            return event;
          }),
        );
  return { ...bus, subscribe: subscribe as EventBus["subscribe"] };
}

/**
 * graphql-yoga at /graphql. Subscriptions: SSE distinct-connections mode on /graphql itself and
 * graphql-sse (single-connection and distinct) at /graphql/stream (stream.ts). Errors masked by `maskError`.
 */
export function createGraphQL(deps: YogaDeps) {
  const schema = buildSchema();
  return createYoga<ServerContext, GraphQLContext>({
    schema,
    graphqlEndpoint: "/graphql",
    // in production too (docs/decisions.md "Documents and the docs site"): it is the docs site's GraphQL explorer
    graphiql: GRAPHIQL_OPTIONS,
    renderGraphiQL,
    landingPage: false,
    logging: false,
    maskedErrors: { maskError },
    plugins: [useGraphQLStream(), ...graphqlLimits(deps.budget), ...useReadReplica(deps.reads)],
    // only our own origins get CORS headers; anything else (including "null") gets none
    cors: (request) => {
      const origin = request.headers.get("origin");
      return origin && deps.allowedOrigins.includes(origin) ? { origin, credentials: true } : false;
    },
    context: async ({ req, res }) => {
      const viewer = await deps.resolveViewer(req);
      return {
        ...deps.base,
        bus: viewer ? busWhileAuthenticated(deps.base.bus, viewer, () => deps.resolveViewer(req)) : deps.base.bus,
        viewer,
        requestId: String(res.locals.requestId ?? ""),
      };
    },
  });
}
