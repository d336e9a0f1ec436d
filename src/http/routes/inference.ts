import type { IncomingMessage, ServerResponse } from "node:http";
import { pipeline } from "node:stream/promises";
import { Router } from "express";
import { parseVideoJobRef, parseVideoRequest } from "../../contract/inference.js";
import type { Viewer } from "../../domain/identity/viewer.js";
import type { InferenceEndpoint, ModalityRequest } from "../../domain/inference/pipeline/endpoint.js";
import type { Caller } from "../../domain/inference/pipeline/session.js";
import type { StreamSink } from "../../domain/inference/pipeline/sink.js";
import { DomainError } from "../../lib/errors.js";
import { logger } from "../../lib/logger.js";
import { tracingOn } from "../../lib/tracing.js";
import type { Runtime } from "../../runtime.js";
import { costHeaders, SSE_HEADERS, streamStartHeaders } from "../answer-headers.js";
import { bearerCheck, requireBearer, viewerOf } from "../auth.js";
import { writeJson } from "../error-response.js";
import { credentialed, type EntryLayers, endWithError } from "../layers.js";
import { presentVideoQueued, presentVideoQuote, presentVideoStatus } from "../present.js";
import { traceRequest } from "../tracing.js";

const CHAT_PATH = "/v1/chat/completions";
const RESPONSES_PATH = "/v1/responses";
const MESSAGES_PATH = "/v1/messages";
const COUNT_TOKENS_PATH = "/v1/messages/count_tokens";
const IMAGE_PATH = "/v1/image/generate";
const IMAGES_OPENAI_PATH = "/v1/images/generations";

/**
 * An SSE sink over a node response; aborts when the buyer goes away. Frames written in the same
 * tick (the held frames flushed with the first content, a burst of chunks from one upstream read,
 * usage + cost + [DONE]) leave in one socket write: the response is corked on the first write of a
 * tick and uncorked on the next tick, before any I/O, so nothing waits.
 */
export function sseSink(req: IncomingMessage, res: ServerResponse): StreamSink {
  const ac = new AbortController();
  let closed = false;
  let corked = false;
  res.on("close", () => {
    if (!res.writableFinished) {
      closed = true;
      ac.abort();
    }
  });
  req.socket.setNoDelay(true);
  const coalesce = () => {
    if (corked) return;
    corked = true;
    res.cork();
    process.nextTick(() => {
      corked = false;
      res.uncork();
    });
  };
  return {
    start(facts) {
      coalesce();
      res.writeHead(200, {
        ...SSE_HEADERS,
        Connection: "keep-alive",
        "X-Accel-Buffering": "no",
        ...streamStartHeaders(facts),
      });
      res.flushHeaders();
    },
    write(text) {
      if (closed) return;
      coalesce();
      res.write(text);
    },
    end() {
      if (!closed) res.end();
    },
    get closed() {
      return closed || res.destroyed;
    },
    signal: ac.signal,
  };
}

/** Aborts when the buyer goes away before the answer finished. */
export function abortSignal(res: ServerResponse): AbortSignal {
  const ac = new AbortController();
  res.on("close", () => {
    if (!res.writableFinished) ac.abort();
  });
  return ac.signal;
}

/**
 * Who pays for a call, with the `X-Svc-Request-Id` already on its response: the request's record
 * takes that id, so the answer, an error body and the record name one id (a support question quotes any of them).
 */
function callerOf(viewer: Viewer, res: ServerResponse): Caller {
  const requestId = res.getHeader("X-Svc-Request-Id");
  return {
    accountId: viewer.accountId,
    apiKeyId: viewer.apiKeyId ?? "",
    ...(viewer.keyRules ? { key: viewer.keyRules } : {}),
    ...(typeof requestId === "string" ? { requestId } : {}),
  };
}

/**
 * One inference call (chat, Responses, images), the same for both transports below: the body parsed
 * once into the typed request (the endpoint's `parse`, the contract's), then served on one call path
 * (the endpoint's `serve`): `stream: true` into an SSE sink, otherwise the buffered JSON answer.
 * Throws what the service throws; the caller renders it.
 */
async function serveInference<R extends ModalityRequest>(
  svc: InferenceEndpoint<R>,
  viewer: Viewer,
  body: unknown,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> {
  const request = svc.parse(body);
  const caller = callerOf(viewer, res);
  const out = await svc.serve(
    caller,
    request,
    request.stream ? { sink: sseSink(req, res) } : { signal: abortSignal(res) },
  );
  // a stream went out through its sink; a buffered answer is written here
  if (out) writeJson(res, 200, costHeaders(out.cost), out.body);
}

/**
 * The hot POSTs, `POST /v1/chat/completions`, `POST /v1/responses` and `POST /v1/messages`: the
 * cached key check before the body (the Messages route also reads `x-api-key`), then the call
 * (layers.ts `credentialed`). One function per route, built once, which the fast path below and
 * Express's router both run.
 */
function hotPosts(rt: Runtime): ReadonlyMap<string, (req: IncomingMessage, res: ServerResponse) => Promise<void>> {
  const bearer = bearerCheck(rt.services, { cached: true, scope: "inference" });
  const anthropicKey = bearerCheck(rt.services, { cached: true, scope: "inference", apiKeyHeader: true });
  const { chat, responses, messages } = rt.services;
  const post = <R extends ModalityRequest>(svc: InferenceEndpoint<R>, key = bearer) => {
    const handler = (viewer: Viewer, req: IncomingMessage, res: ServerResponse) =>
      serveInference(svc, viewer, (req as { body?: unknown }).body, req, res);
    return (req: IncomingMessage, res: ServerResponse) => credentialed(key, handler, req, res);
  };
  return new Map([
    [CHAT_PATH, post(chat)],
    [RESPONSES_PATH, post(responses)],
    [MESSAGES_PATH, post(messages, anthropicKey)],
  ]);
}

/**
 * The hot path without Express: the hot POSTs at their exact paths (any query) are served on the
 * bare listener by the same layers Express runs for them (layers.ts): the entry layers (in-flight
 * count, timing, request id, unsafe URL refusal), the route's own `hotPosts` function (credential,
 * body, call), the same error ending. Only Express's router and its per-request wrapping are skipped.
 * Returns false for every other request, which then goes to Express unchanged; so do the spellings
 * Express also routes here (trailing slash, other letter case, absolute-form target), served there by
 * the same `hotPosts` functions.
 */
export function inferenceListener(
  rt: Runtime,
  layers: EntryLayers,
): (req: IncomingMessage, res: ServerResponse) => boolean {
  const posts = hotPosts(rt);
  return (req, res) => {
    if (req.method !== "POST" || req.url === undefined) return false;
    const q = req.url.indexOf("?");
    const path = q < 0 ? req.url : req.url.slice(0, q);
    const post = posts.get(path);
    if (!post) return false;
    const refusal = layers.enter(req, res, path);
    if (tracingOn()) traceRequest(req, res, path, () => serveFast(post, refusal, req, res));
    else serveFast(post, refusal, req, res);
    return true;
  };
}

/** A hot POST past the entry layers: their refusal, or the route's function (its error ended the same way). */
function serveFast(
  post: (req: IncomingMessage, res: ServerResponse) => Promise<void>,
  refusal: DomainError | undefined,
  req: IncomingMessage,
  res: ServerResponse,
): void {
  if (refusal) endWithError(res, refusal);
  else post(req, res).catch((err: unknown) => endWithError(res, err));
}

/**
 * SPEC "Inference" (Bearer only) in Express: what the fast listener leaves to it. The POST routes
 * answer the other spellings of the hot paths and keep OPTIONS' `Allow` as it was.
 */
export function inferenceRoutes(rt: Runtime): Router {
  const r = Router();
  const bearer = requireBearer(rt.services, { cached: true, scope: "inference" });
  for (const [path, post] of hotPosts(rt)) r.post(path, post);
  // Anthropic's token count: the admission estimate, free (errors in Anthropic's shape, as on /v1/messages)
  const { messageTokens } = rt.services;
  const anthropicKey = requireBearer(rt.services, { cached: true, scope: "inference", apiKeyHeader: true });
  r.post(COUNT_TOKENS_PATH, anthropicKey, async (req, res) => {
    const v = viewerOf(res);
    const out = await messageTokens.count(v.keyRules ? { key: v.keyRules } : {}, req.body);
    res.json({ input_tokens: out.inputTokens });
  });

  // images: synchronous, buffered only (a `stream: true` body is a 400)
  const { image, imagesOpenAi } = rt.services;
  r.post(IMAGE_PATH, bearer, (req, res) => serveInference(image, viewerOf(res), req.body, req, res));
  r.post(IMAGES_OPENAI_PATH, bearer, (req, res) => serveInference(imagesOpenAi, viewerOf(res), req.body, req, res));

  // video: the quote (no charge, no job, no record); the body parsed once by the contract, the row's rules the service's
  const { videoQuotes } = rt.services;
  r.post("/v1/video/quote", bearer, async (req, res) => {
    const v = viewerOf(res);
    const q = await videoQuotes.quote(
      { accountId: v.accountId, apiKeyId: v.apiKeyId ?? "", ...(v.keyRules ? { key: v.keyRules } : {}) },
      parseVideoRequest(req.body),
    );
    res.json(presentVideoQuote(q));
  });

  // video: the queue (settled up front; the job's row commits with its charge)
  const { videoQueue, videoJobs } = rt.services;
  r.post("/v1/video/queue", bearer, async (req, res) => {
    const v = viewerOf(res);
    const q = await videoQueue.queue(callerOf(v, res), parseVideoRequest(req.body));
    writeJson(res, 200, costHeaders(q.cost), presentVideoQueued(q));
  });
  // retrieve: JSON while rendering, the mp4 once (then 410); branch on Content-Type
  r.post("/v1/video/retrieve", bearer, async (req, res) => {
    const out = await videoJobs.retrieve(viewerOf(res).accountId, parseVideoJobRef(req.body));
    if (out.kind === "status") {
      res.json(presentVideoStatus(out.report));
      return;
    }
    res.writeHead(200, {
      "Content-Type": out.contentType,
      ...(out.contentLength !== null ? { "Content-Length": String(out.contentLength) } : {}),
      "Cache-Control": "no-store",
    });
    try {
      await pipeline(out.body, res);
      await out.delivered();
    } catch (err) {
      logger.warn({ err }, "video delivery broke; the job can be retrieved again");
      await out.undelivered();
      res.destroy();
    }
  });
  r.post("/v1/video/complete", bearer, async (req, res) => {
    const out = await videoJobs.complete(viewerOf(res).accountId, parseVideoJobRef(req.body));
    res.json({ success: out.success, queue_id: out.queueId, state: out.status });
  });

  // Responses is stateless: nothing is stored, so nothing can be read back
  r.get([RESPONSES_PATH, `${RESPONSES_PATH}/:id`], bearer, () => {
    throw new DomainError("not_found", "Responses are not stored; there is nothing to retrieve.");
  });
  return r;
}
