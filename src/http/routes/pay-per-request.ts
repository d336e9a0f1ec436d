import type { ServerResponse } from "node:http";
import { type Request, type Response, Router } from "express";
import { PAY_PER_REQUEST_ROUTES, type PayPerRequestId } from "../../contract/paid-routes.js";
import type { PaidOutcome } from "../../domain/pay-per-request/ppr-service.js";
import type { Runtime } from "../../runtime.js";
import { paidAnswerHeaders, SSE_HEADERS, streamStartHeaders } from "../answer-headers.js";
import { writeJson } from "../error-response.js";
import { abortSignal, sseSink } from "./inference.js";

/**
 * Pay-per-request inference: `POST /x402/v1/chat/completions`, `/responses`,
 * `/messages`, `/image/generate`, `/images/generations` — the /v1 twins' bodies and answers, no
 * key (an `Authorization` header is ignored), paid with x402 v2 `upto` in `PAYMENT-SIGNATURE`. The
 * service (domain/pay-per-request) does everything; this route hands it the call and writes what
 * it answers.
 */
export function payPerRequestRoutes(rt: Runtime): Router {
  const r = Router();
  const { payPerRequest } = rt.services;
  for (const route of PAY_PER_REQUEST_ROUTES) {
    r.post(route.path, async (req: Request, res: Response) => {
      const signature = req.header("PAYMENT-SIGNATURE");
      const requestId = res.getHeader("X-Svc-Request-Id");
      const out = await payPerRequest.serve({
        route: route.id as PayPerRequestId,
        body: req.body,
        payment: signature ? { header: signature } : undefined,
        v1Payment: Boolean(req.header("X-PAYMENT")),
        ...(typeof requestId === "string" ? { requestId } : {}),
        openStream: () => sseSink(req, res),
        signal: abortSignal(res),
      });
      send(res, out);
    });
  }
  return r;
}

function send(res: ServerResponse, out: PaidOutcome): void {
  switch (out.type) {
    case "challenge":
      // the 402: PAYMENT-REQUIRED (x402 v2) and the same challenge in the body
      writeJson(
        res,
        402,
        { "X-Svc-Error-Code": out.code, [out.paymentRequired.name]: out.paymentRequired.value },
        out.body,
      );
      return;
    case "answer":
      writeJson(res, out.status, paidAnswerHeaders(out.cost, out.receipt), out.body);
      return;
    case "replayed_stream":
      res.writeHead(200, { ...SSE_HEADERS, ...(out.start ? streamStartHeaders(out.start) : {}) });
      res.end(out.text);
      return;
    case "streamed":
      return;
  }
}
