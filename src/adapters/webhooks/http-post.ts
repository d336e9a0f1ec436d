import { request as httpRequest, type IncomingMessage } from "node:http";
import { request as httpsRequest } from "node:https";
import { isIP, type LookupFunction } from "node:net";

/**
 * One webhook delivery attempt: a POST to `url`, connected to `address` (the address the caller
 * checked, so a DNS answer that changes between the check and the connection cannot redirect it:
 * DNS rebinding), TLS still verified against the URL's host name. No redirect is followed (a 3xx is
 * an answer like any other), and the whole exchange is bounded by `timeoutMs`.
 */
export interface WebhookPost {
  url: URL;
  /** the IP address to connect to (one of the host's, already checked) */
  address: string;
  headers: Record<string, string>;
  body: string;
  timeoutMs: number;
}

export type WebhookPostResult = { ok: true; status: number } | { ok: false; error: string };

export type PostWebhook = (post: WebhookPost) => Promise<WebhookPostResult>;

export const postWebhook: PostWebhook = (post) =>
  new Promise<WebhookPostResult>((resolve) => {
    const family = isIP(post.address) === 6 ? 6 : 4;
    // the connection goes to the checked address whatever the resolver would say now
    const pinned: LookupFunction = (_host, options, callback) => {
      const cb = callback as (err: Error | null, address: unknown, family?: number) => void;
      if ((options as { all?: boolean }).all) cb(null, [{ address: post.address, family }]);
      else cb(null, post.address, family);
    };
    const request = post.url.protocol === "https:" ? httpsRequest : httpRequest;
    let settled = false;
    const done = (r: WebhookPostResult) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(r);
    };
    const req = request(
      post.url,
      {
        method: "POST",
        headers: { ...post.headers, "content-length": Buffer.byteLength(post.body).toString() },
        lookup: pinned,
        agent: false,
      },
      (res: IncomingMessage) => {
        // only the status matters; the body is drained and dropped
        res.resume();
        res.on("error", () => undefined);
        done({ ok: true, status: res.statusCode ?? 0 });
      },
    );
    const timer = setTimeout(() => {
      req.destroy();
      done({ ok: false, error: `no answer within ${post.timeoutMs} ms` });
    }, post.timeoutMs);
    req.on("error", (e: Error & { code?: string }) =>
      done({ ok: false, error: e.code ? `${e.code}: ${e.message}` : e.message }),
    );
    req.end(post.body);
  });
