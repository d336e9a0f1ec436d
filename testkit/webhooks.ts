import { createServer, type IncomingMessage, type Server } from "node:http";
import { Webhook } from "standardwebhooks";
import type { ResolveHost } from "../src/adapters/webhooks/resolve-host.js";
import { call, type Res } from "./actors.js";
import type { TestApp } from "./harness.js";

/**
 * Webhook receivers and helpers for the tests of issue 30: a receiver on loopback (the service
 * reaches it with WEBHOOK_ALLOW_PRIVATE, on in local mode), a resolver that maps names to addresses
 * (injected as the app's `resolveHost`), and registration through the REST route.
 */

/** One request the receiver got. */
export interface ReceivedHook {
  headers: Record<string, string>;
  body: string;
  /** the parsed body: `{type, timestamp, data}` */
  json: { type: string; timestamp: string; data: Record<string, unknown> };
  /** what the receiver answered */
  status: number;
}

export interface Receiver {
  /** `http://127.0.0.1:<port>/hook` */
  url: string;
  received: ReceivedHook[];
  /** how the receiver answers the n-th request (0-based): a status (default 200) */
  answer: (n: number, hook: ReceivedHook) => number;
  /** the first request (already received or to come) matching `match`, within `timeoutMs` */
  waitFor(match: (h: ReceivedHook) => boolean, timeoutMs?: number): Promise<ReceivedHook>;
  /** every request matching `match` so far */
  all(match: (h: ReceivedHook) => boolean): ReceivedHook[];
  close(): Promise<void>;
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    req.on("error", reject);
  });
}

/** A webhook receiver on 127.0.0.1 that records every POST and answers `answer(n)` (200 by default). */
export async function startReceiver(): Promise<Receiver> {
  const received: ReceivedHook[] = [];
  const waiters: { match: (h: ReceivedHook) => boolean; resolve: (h: ReceivedHook) => void }[] = [];
  let server: Server | undefined;
  const receiver: Receiver = {
    url: "",
    received,
    answer: () => 200,
    async waitFor(match, timeoutMs = 15_000) {
      const found = received.find(match);
      if (found) return found;
      return new Promise<ReceivedHook>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no matching webhook within ${timeoutMs} ms`)), timeoutMs);
        waiters.push({
          match,
          resolve: (h) => {
            clearTimeout(timer);
            resolve(h);
          },
        });
      });
    },
    all: (match) => received.filter(match),
    close: () => new Promise<void>((r) => (server ? server.close(() => r()) : r())),
  };
  server = createServer(async (req, res) => {
    const body = await readBody(req);
    let json: ReceivedHook["json"];
    try {
      json = JSON.parse(body) as ReceivedHook["json"];
    } catch {
      json = { type: "", timestamp: "", data: {} };
    }
    const headers = Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, String(v)]));
    const hook: ReceivedHook = { headers, body, json, status: 0 };
    hook.status = receiver.answer(received.length, hook);
    received.push(hook);
    res.writeHead(hook.status, { "content-type": "text/plain" }).end("ok");
    for (const w of [...waiters]) {
      if (w.match(hook)) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(hook);
      }
    }
  });
  const listening = server;
  await new Promise<void>((r) => listening.listen(0, "127.0.0.1", () => r()));
  receiver.url = `http://127.0.0.1:${(listening.address() as { port: number }).port}/hook`;
  return receiver;
}

/** A resolver that knows only `map`'s names (an unknown name does not resolve). */
export function hostsResolver(map: Record<string, string[]>): ResolveHost {
  return async (name) => {
    const found = map[name.toLowerCase()];
    if (!found) throw new Error(`getaddrinfo ENOTFOUND ${name}`);
    return found;
  };
}

/** Whether a received request verifies with the endpoint's secret (Standard Webhooks, `standardwebhooks`). */
export function verifies(secret: string, hook: ReceivedHook): boolean {
  try {
    new Webhook(secret).verify(hook.body, {
      "webhook-id": hook.headers["webhook-id"] ?? "",
      "webhook-timestamp": hook.headers["webhook-timestamp"] ?? "",
      "webhook-signature": hook.headers["webhook-signature"] ?? "",
    });
    return true;
  } catch {
    return false;
  }
}

/** `POST /v1/webhooks` with the given credential headers. */
export function registerWebhook(
  app: TestApp,
  headers: Record<string, string>,
  body: Record<string, unknown>,
): Promise<Res> {
  return call(app, { method: "POST", path: "/v1/webhooks", headers, body });
}

/** Registers an endpoint (201 expected): its id and secret. */
export async function webhookFor(
  app: TestApp,
  headers: Record<string, string>,
  body: Record<string, unknown>,
): Promise<{ id: string; secret: string }> {
  const r = await registerWebhook(app, headers, body);
  if (r.status !== 201) throw new Error(`webhook registration failed: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body as { id: string; secret: string };
}
