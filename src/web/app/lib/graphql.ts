import { Client, type Exchange, fetchExchange, subscriptionExchange } from "@urql/core";
import { createClient as createSseClient } from "graphql-sse";
import type { AppConfig } from "./config";

/**
 * The app's GraphQL client: queries and mutations over fetch, subscriptions over graphql-sse in
 * single-connection mode (`/graphql/stream`: one EventSource-like stream for every subscription, so
 * the browser's six-connections-per-host limit is never spent on events). The session cookie rides
 * along (`credentials: include`); a new client is made when the viewer signs in or out, so owner-only
 * subscriptions are opened with the new credential. `cache` is the normalised cache (cache.ts), made
 * anew with each client so one viewer's data never shows another's.
 */
export function createGraphqlClient(config: AppConfig, cache: Exchange): { client: Client; dispose: () => void } {
  const sse = createSseClient({
    url: `${config.graphqlUrl}/stream`,
    singleConnection: true,
    credentials: "include",
    retryAttempts: 20,
    lazy: true,
  });
  const client = new Client({
    url: config.graphqlUrl,
    fetchOptions: { credentials: "include" },
    // POST for every operation: account data never sits in a URL, a log line or an HTTP cache
    preferGetMethod: false,
    requestPolicy: "cache-and-network",
    exchanges: [
      cache,
      fetchExchange,
      subscriptionExchange({
        forwardSubscription(request) {
          const operation = { ...request, query: request.query ?? "" };
          return {
            subscribe(sink) {
              const unsubscribe = sse.subscribe(operation, sink);
              return { unsubscribe };
            },
          };
        },
      }),
    ],
  });
  return { client, dispose: () => sse.dispose() };
}

/** The GraphQL error code (`extensions.code`, the REST error code) and message of a failed operation. */
export function errorInfo(error: unknown): { code: string | undefined; message: string } {
  const e = error as {
    graphQLErrors?: { message: string; extensions?: { code?: unknown } }[];
    networkError?: Error;
    message?: string;
  };
  const first = e?.graphQLErrors?.[0];
  if (first) {
    const code = typeof first.extensions?.code === "string" ? first.extensions.code : undefined;
    return { code, message: first.message };
  }
  if (e?.networkError) return { code: "network_error", message: `Network error: ${e.networkError.message}` };
  return { code: undefined, message: e?.message ?? String(error) };
}
