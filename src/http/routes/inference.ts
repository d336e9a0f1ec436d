import { type Request, type RequestHandler, type Response, Router } from "express";
import type { StreamSink } from "../../domain/routing/chat-service.js";
import { DomainError } from "../../lib/errors.js";
import type { Runtime } from "../../runtime.js";
import { requireBearer, viewerOf } from "../auth.js";

/**
 * An SSE sink over an Express response; aborts when the buyer goes away. Frames written in the same
 * tick (the held frames flushed with the first content, a burst of chunks from one upstream read,
 * usage + cost + [DONE]) leave in one socket write: the response is corked on the first write of a
 * tick and uncorked on the next tick, before any I/O, so nothing waits.
 */
export function sseSink(req: Request, res: Response): StreamSink {
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
    start(headers) {
      coalesce();
      res.writeHead(200, {
        "Content-Type": "text/event-stream; charset=utf-8",
        "Cache-Control": "no-cache, no-transform",
        Connection: "keep-alive",
        "X-Accel-Buffering": "no",
        ...headers,
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

function abortSignal(res: Response): AbortSignal {
  const ac = new AbortController();
  res.on("close", () => {
    if (!res.writableFinished) ac.abort();
  });
  return ac.signal;
}

/** SPEC "Inference" (Bearer only): chat completions and the stateless Responses facade. */
export function inferenceRoutes(rt: Runtime): Router {
  const r = Router();
  const bearer = requireBearer(rt.services, { cached: true });
  const { chat, responses } = rt.services;

  // one transport for both routes: `stream: true` → SSE, otherwise the buffered JSON answer
  const serve =
    (svc: typeof chat | typeof responses): RequestHandler =>
    async (req, res) => {
      const v = viewerOf(res);
      const caller = { accountId: v.accountId, apiKeyId: v.apiKeyId ?? "" };
      if ((req.body as { stream?: unknown } | undefined)?.stream === true) {
        await svc.stream(caller, req.body, sseSink(req, res));
        return;
      }
      const out = await svc.buffered(caller, req.body, abortSignal(res));
      res.set(out.headers).status(200).json(out.body);
    };
  r.post("/v1/chat/completions", bearer, serve(chat));
  r.post("/v1/responses", bearer, serve(responses));

  // Responses is stateless: nothing is stored, so nothing can be read back
  r.get(["/v1/responses", "/v1/responses/:id"], bearer, () => {
    throw new DomainError("not_found", "Responses are not stored; there is nothing to retrieve.");
  });
  return r;
}
