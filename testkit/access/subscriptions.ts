import { createClient } from "graphql-sse";
import type { TestApp } from "../harness.js";
import type { GqlError, HeaderMap } from "./transports.js";

export interface SubscriptionResult {
  data?: Record<string, unknown> | null;
  errors?: readonly GqlError[];
}

/** An open GraphQL subscription over SSE (distinct-connections mode on /graphql), read into `results`. */
export interface OpenSubscription {
  results: SubscriptionResult[];
  /** true once the stream has ended (an error, or the server closed it) */
  ended(): boolean;
  /** resolves with true when `pred` holds for the results, or false after `ms` */
  until(pred: (rs: SubscriptionResult[]) => boolean, ms?: number): Promise<boolean>;
  /** everything received so far, as text (for the leak search) */
  text(): string;
  close(): Promise<void>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export function openSubscription(app: TestApp, query: string, headers: HeaderMap): OpenSubscription {
  // cookie-authenticated GraphQL requests must come from our own origin
  const client = createClient({
    url: `${app.baseUrl}/graphql`,
    headers: { origin: new URL(app.baseUrl).origin, ...headers },
    retryAttempts: 0,
  });
  const results: SubscriptionResult[] = [];
  let done = false;
  const it = client.iterate<Record<string, unknown>>({ query });
  const reader = (async () => {
    try {
      for await (const r of it) results.push(r as SubscriptionResult);
    } catch (e) {
      results.push({ errors: [{ message: String(e), extensions: { code: "client_error" } }] });
    } finally {
      done = true;
    }
  })();
  return {
    results,
    ended: () => done,
    async until(pred, ms = 5_000) {
      for (let waited = 0; waited < ms; waited += 25) {
        if (pred(results)) return true;
        await sleep(25);
      }
      return pred(results);
    },
    text: () => JSON.stringify(results),
    async close() {
      await it.return?.();
      client.dispose();
      await Promise.race([reader, sleep(1_000)]);
    },
  };
}
