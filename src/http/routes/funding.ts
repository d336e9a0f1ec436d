import { type Request, type Response, Router } from "express";
import { noteWriter } from "../../adapters/read-replica.js";
import type { FundingKind, FundingOutcome } from "../../domain/funding/funding-request.js";
import { PAYMENT_HEADER } from "../../domain/funding/x402.js";
import type { Runtime } from "../../runtime.js";
import { requireBearer, requireSameOrigin, requireSession, viewerOf } from "../auth.js";

/**
 * SPEC "Funding flow": x402 `exact` on Base. Signup is public (the settled payment is the only
 * credential), top-up takes the session, refill the Bearer key.
 */
export function fundingRoutes(rt: Runtime): Router {
  const r = Router();
  const { funding } = rt.services;

  const send = (res: Response, outcome: FundingOutcome) => {
    if (outcome.type === "challenge") {
      // one 402, both x402 versions: v1 in the body, v2 in PAYMENT-REQUIRED
      res.status(402).setHeader("X-Svc-Error-Code", outcome.code);
      res.setHeader(outcome.paymentRequired.name, outcome.paymentRequired.value);
      res.json(outcome.body);
      return;
    }
    // X-PAYMENT-RESPONSE or PAYMENT-RESPONSE, as the payment came
    res.setHeader(outcome.paymentResponse.name, outcome.paymentResponse.value);
    res.status(200).json(outcome.body);
  };
  const handler = (kind: FundingKind) => async (req: Request, res: Response) => {
    const viewer = kind === "signup" ? undefined : viewerOf(res);
    // the body goes to the service as sent, which parses it once with the contract
    // (`parseFundingRequest`); the paid retry must repeat it byte for byte (SPEC rule 2)
    const outcome = await funding.fund({
      kind,
      body: req.body,
      payment: {
        xPayment: req.header(PAYMENT_HEADER[1]) || undefined,
        paymentSignature: req.header(PAYMENT_HEADER[2]) || undefined,
      },
      resource: `${rt.config.urls.base}${req.path}`,
      caller: viewer ? { accountId: viewer.accountId, walletAddress: viewer.walletAddress } : undefined,
    });
    // a signup has no credential yet: the account it funded is the writer (read replica, read-your-writes)
    if (outcome.type === "funded" && typeof outcome.body.accountId === "string")
      noteWriter(res, outcome.body.accountId);
    send(res, outcome);
  };

  r.post("/v1/x402/signup", handler("signup"));
  r.post("/v1/x402/top-up", requireSameOrigin(rt.config), requireSession(rt.services), handler("top_up"));
  r.post("/v1/x402/refill", requireBearer(rt.services, { scope: "account" }), handler("refill"));
  return r;
}
