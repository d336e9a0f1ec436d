import { STATUS_CODES } from "node:http";
import { type DocumentNode, type ExecutionArgs, type GraphQLError, getOperationAST } from "graphql";
import type { RequestParams, Response as SseResponse } from "graphql-sse";
import { createHandler } from "graphql-sse/lib/use/fetch";
import type { Plugin } from "graphql-yoga";
import { DomainError } from "../lib/errors.js";
import { logger } from "../lib/logger.js";
import { maskError } from "./errors.js";
import { jsonRefusal, queryStringRefusal, variablesRefusal } from "./limits.js";

/** Where graphql-sse is served: the web app's single-connection stream, and distinct streams too. */
export const STREAM_ENDPOINT = "/graphql/stream";

/** A GraphQL error as it goes in a body: its JSON form, without yoga's `http` status hint. */
function serialized(e: GraphQLError): unknown {
  const json = e.toJSON();
  if (json.extensions && "http" in json.extensions) {
    const { http: _http, ...extensions } = json.extensions;
    return { ...json, extensions };
  }
  return json;
}

/**
 * The errors of an operation /graphql/stream will not run, as the answer to the request that carried
 * it: the GraphQL errors (each through `maskError`, as yoga's /graphql shows them) with the highest
 * status they ask for, 400 when none does — graphql-sse's own answer to a document it cannot parse —
 * and 500 for a masked failure of ours.
 */
function refusal(errors: readonly GraphQLError[]): SseResponse {
  let status = 400;
  for (const e of errors) {
    const asked = (e.extensions.http as { status?: unknown } | undefined)?.status;
    if (typeof asked === "number" && asked > status) status = asked;
    // a masked failure of ours (never expected at parse or validation) is not the client's
    if (e.extensions.code === "internal_error") status = 500;
  }
  return [
    JSON.stringify({ errors: errors.map(serialized) }),
    { status, statusText: STATUS_CODES[status] ?? "", headers: { "content-type": "application/json; charset=utf-8" } },
  ];
}

/**
 * GraphQL over SSE (graphql-sse) at /graphql/stream, on yoga's envelop: the same parse (with the
 * nesting bound and token limit), validation (the per-operation limits), context, execution and
 * subscription as /graphql. In place of @graphql-yoga/plugin-graphql-sse, whose
 * `onSubscribe` let a parse failure reject the handler — answered 500 with the error's stack as the
 * body — and skipped the checks
 * yoga runs on a request's parameters. Here:
 * - a query string that does not decode is 400 in the JSON error shape, as on /graphql;
 * - variables with text Postgres cannot store, or nested past the JSON limit, are refused as on /graphql;
 * - a document that does not parse or validate is 400 with its GraphQL errors (masked like
 *   /graphql's); in single-connection mode graphql-sse keeps the refused operation's id reserved on
 *   that stream (as for its own refusals), and the client's next operation takes a new id anyway;
 * - anything else that escapes is logged and answered 500 `internal_error` in the JSON error shape,
 *   never with a stack.
 */
export function useGraphQLStream(): Plugin {
  const serverContexts = new WeakMap<Request, unknown>();
  let handler: ((req: Request) => Promise<Response>) | undefined;
  return {
    onYogaInit({ yoga }) {
      handler = createHandler(
        {
          onSubscribe(req, params: RequestParams) {
            const refused = variablesRefusal(params.variables);
            if (refused) return refusal([refused]);
            const serverContext = serverContexts.get(req.raw) as Record<string, unknown> | undefined;
            const enveloped = yoga.getEnveloped({ ...serverContext, request: req.raw, params });
            let document: DocumentNode;
            try {
              document = enveloped.parse(params.query);
            } catch (err) {
              return refusal([maskError(err, "Unexpected error.") as GraphQLError]);
            }
            const errors = enveloped.validate(enveloped.schema, document);
            if (errors.length > 0)
              return refusal(errors.map((e: GraphQLError) => maskError(e, "Unexpected error.") as GraphQLError));
            return Promise.resolve(enveloped.contextFactory()).then((contextValue) => {
              const args: ExecutionArgs = {
                schema: enveloped.schema,
                document,
                contextValue,
                variableValues: params.variables,
                operationName: params.operationName,
              };
              const operation = getOperationAST(document, params.operationName);
              return operation?.operation === "subscription" ? enveloped.subscribe(args) : enveloped.execute(args);
            });
          },
        },
        yoga.fetchAPI,
      );
    },
    async onRequest({ request, serverContext, url, endResponse, fetchAPI }) {
      if (!url.pathname.endsWith(STREAM_ENDPOINT) || !handler) return;
      const refused = queryStringRefusal(request, serverContext);
      if (refused) {
        endResponse(jsonRefusal(fetchAPI, refused));
        return;
      }
      serverContexts.set(request, serverContext);
      try {
        endResponse(await handler(request));
      } catch (err) {
        logger.error({ err }, "graphql-sse request failed");
        endResponse(jsonRefusal(fetchAPI, new DomainError("internal_error", "Unexpected error.")));
      }
    },
  };
}
