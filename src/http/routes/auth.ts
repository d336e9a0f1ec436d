import { type Request, type Response, Router } from "express";
import { noteWriter } from "../../adapters/read-replica.js";
import { idpVerifyBody, siweVerifyBody } from "../../contract/auth.js";
import type { SignedIn } from "../../domain/identity/identity-service.js";
import { SESSION_ABSOLUTE_MS } from "../../domain/identity/identity-service.js";
import type { Runtime } from "../../runtime.js";
import { clearedSessionCookie, requireSameOrigin, requireSession, sessionCookie, viewerOf } from "../auth.js";
import { STATUS_OK } from "../present.js";
import { parse } from "../validate.js";

function sessionIdentityBody(s: SignedIn) {
  return {
    accountId: s.identity.accountId,
    walletAddress: s.identity.walletAddress,
    authProvider: s.identity.authProvider,
    sessionExpiresAt: s.identity.expiresAt.toISOString(),
    sessionAbsoluteExpiresAt: s.identity.absoluteExpiresAt.toISOString(),
    createdAccount: s.createdAccount,
  };
}

/** SPEC "Identity and session" + SIWE (decided in docs/decisions.md). */
export function authRoutes(rt: Runtime): Router {
  const r = Router();
  const { identity } = rt.services;
  const setCookie = (res: Response, s: SignedIn) => {
    // a sign-in writes (the session, maybe the account): its caller's next reads see it (read replica)
    noteWriter(res, s.identity.accountId);
    res.setHeader("Set-Cookie", sessionCookie(rt.config, s.cookieValue, Math.floor(SESSION_ABSOLUTE_MS / 1000)));
  };
  const sameOrigin = requireSameOrigin(rt.config);

  r.post("/auth/idp/verify", sameOrigin, async (req: Request, res: Response) => {
    const body = parse(idpVerifyBody, req.body);
    const s = await identity.signInWithIdp({ ...body, userAgent: req.headers["user-agent"] });
    setCookie(res, s);
    res.status(200).json(sessionIdentityBody(s));
  });

  r.post("/auth/siwe/nonce", sameOrigin, async (_req, res) => {
    const n = await identity.createSiweNonce();
    res
      .status(200)
      .json({ nonce: n.nonce, expiresAt: n.expiresAt.toISOString(), domain: n.domain, uri: n.uri, chainId: n.chainId });
  });

  r.post("/auth/siwe/verify", sameOrigin, async (req, res) => {
    const body = parse(siweVerifyBody, req.body);
    const s = await identity.signInWithSiwe({ ...body, userAgent: req.headers["user-agent"] });
    setCookie(res, s);
    res.status(200).json(sessionIdentityBody(s));
  });

  r.post("/auth/logout", sameOrigin, requireSession(rt.services), async (_req, res) => {
    const v = viewerOf(res);
    if (v.sessionId) await identity.logout(v.sessionId);
    res.setHeader("Set-Cookie", clearedSessionCookie(rt.config));
    res.status(200).json(STATUS_OK);
  });
  return r;
}
