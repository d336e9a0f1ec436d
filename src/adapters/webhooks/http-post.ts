import { request as httpRequest, type IncomingMessage } from "node:http";
import { request as httpsRequest } from "node:https";
import { isIP, type LookupFunction } from "node:net";

/**
 * The most of a response the client takes in: the status line and headers (at most
 * `MAX_RESPONSE_HEADER_BYTES`, a longer head is a failed attempt) and whatever of the body arrived in
 * the same socket read; the socket is destroyed the moment the status line and headers are parsed,
 * so nothing more is read, and a socket read is at most 64 KiB (libuv's read buffer).
 */
export const MAX_RESPONSE_BYTES = 64 * 1024;
/** Node's own default, set explicitly: a head past it fails the attempt (HPE_HEADER_OVERFLOW). */
export const MAX_RESPONSE_HEADER_BYTES = 16 * 1024;

/**
 * One webhook delivery attempt: a POST to `url`, connected to `address` (the address the caller
 * checked, so a DNS answer that changes between the check and the connection cannot redirect it:
 * DNS rebinding), TLS still verified against the URL's host name. No redirect is followed (a 3xx is
 * an answer like any other). One deadline, `timeoutMs`, bounds the whole exchange — connect, TLS,
 * sending the request, the status line and headers — and at its end the socket is destroyed. The
 * answer is the status alone: once it is read the socket is destroyed, the body never read (a
 * receiver streaming a body forever, or a huge one, costs nothing), no connection kept alive.
 */
export interface WebhookPost {
  url: URL;
  /** the IP address to connect to (one of the host's, already checked) */
  address: string;
  /**
   * the Standard Webhooks identity of the message, sent as its `webhook-id`, `webhook-timestamp`
   * (Unix seconds, as signed) and `webhook-signature` headers
   */
  message: { id: string; timestamp: string; signature: string };
  body: string;
  timeoutMs: number;
}

/** `timedOut`: the deadline ended it (no status line and headers within `timeoutMs`). */
export type WebhookPostResult = { ok: true; status: number } | { ok: false; error: string; timedOut?: true };

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
      // whatever ended the attempt (the status, the deadline, an error), nothing of it stays open
      req.destroy();
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(r);
    };
    const req = request(
      post.url,
      {
        method: "POST",
        headers: {
          "content-type": "application/json",
          "user-agent": "svc-webhooks/1",
          "webhook-id": post.message.id,
          "webhook-timestamp": post.message.timestamp,
          "webhook-signature": post.message.signature,
          "content-length": Buffer.byteLength(post.body).toString(),
        },
        lookup: pinned,
        // a fresh connection per attempt, closed with it (no pool a receiver could keep a socket in)
        agent: false,
        maxHeaderSize: MAX_RESPONSE_HEADER_BYTES,
      },
      (res: IncomingMessage) => {
        // the status is the answer: the body is not read, its socket destroyed now
        res.on("error", () => undefined);
        res.destroy();
        done({ ok: true, status: res.statusCode ?? 0 });
      },
    );
    const timer = setTimeout(
      () => done({ ok: false, error: `no answer within ${post.timeoutMs} ms`, timedOut: true }),
      post.timeoutMs,
    );
    req.on("error", (e: Error & { code?: string }) =>
      done({ ok: false, error: e.code ? `${e.code}: ${e.message}` : e.message }),
    );
    req.end(post.body);
  });
