import { z } from "../common.js";
import { errorResponse, headers, jsonBody, jsonResponse, registry } from "./registry.js";

const graphqlRequest = z
  .object({
    query: z.string(),
    variables: z.record(z.unknown()).nullable().optional(),
    operationName: z.string().nullable().optional(),
  })
  .openapi("GraphQLRequest");

const graphqlResult = z
  .object({
    data: z.record(z.unknown()).nullable().optional(),
    errors: z
      .array(
        z
          .object({
            message: z.string(),
            extensions: z.object({ code: z.string().optional() }).passthrough().optional(),
          })
          .passthrough(),
      )
      .optional(),
  })
  .openapi("GraphQLResult");

const GRAPHQL_DESCRIPTION =
  "The GraphQL API (schema at `schema.graphql`; errors carry `extensions.code` with the REST codes). Session cookie or Bearer key; subscriptions over graphql-sse.";

/** GraphQL over POST and GET, as the one listener serves it. */
export function registerGraphqlRoutes(): void {
  registry.registerPath({
    method: "post",
    path: "/graphql",
    operationId: "graphqlPost",
    tags: ["GraphQL"],
    summary: "GraphQL query or mutation",
    description: GRAPHQL_DESCRIPTION,
    security: [{}, { cookieAuth: [] }, { bearerAuth: [] }],
    request: { body: jsonBody(graphqlRequest) },
    responses: {
      200: {
        description: "GraphQL result (or an SSE stream for subscriptions)",
        headers: headers(),
        content: { "application/json": { schema: graphqlResult }, "text/event-stream": { schema: { type: "string" } } },
      },
      400: jsonResponse(graphqlResult, "Invalid GraphQL request"),
      403: errorResponse(403, "A cookie-authenticated request from another origin (`csrf_rejected`)."),
    },
  });

  registry.registerPath({
    method: "get",
    path: "/graphql",
    operationId: "graphqlGet",
    tags: ["GraphQL"],
    summary: "GraphQL query over GET (GraphiQL in a browser)",
    description: GRAPHQL_DESCRIPTION,
    security: [{}, { cookieAuth: [] }, { bearerAuth: [] }],
    request: {
      query: z.object({
        query: z.string().optional(),
        variables: z.string().optional().openapi({ description: "JSON-encoded" }),
        operationName: z.string().optional(),
      }),
    },
    responses: {
      200: {
        description: "GraphQL result, or GraphiQL (text/html) for a browser",
        headers: headers(),
        content: { "application/json": { schema: graphqlResult }, "text/html": { schema: { type: "string" } } },
      },
      400: jsonResponse(graphqlResult, "Invalid GraphQL request"),
    },
  });
}
