import { Router } from "express";
import { historyQuery, maxPriceBody } from "../../contract/account.js";
import { historyReader } from "../../domain/keys/key-scopes.js";
import type { Runtime } from "../../runtime.js";
import { requireSameOrigin, requireSession, viewerOf } from "../auth.js";
import { answerHistory } from "../history.js";
import { presentAccount, presentSavings } from "../present.js";
import { parse } from "../validate.js";
import { keyRoutes } from "./keys.js";

/** SPEC "Account (session)". Every route: session cookie only. */
export function accountRoutes(rt: Runtime): Router {
  const r = Router();
  const { accounts } = rt.services;
  const session = requireSession(rt.services);
  r.use(["/v1/me", "/v1/account"], requireSameOrigin(rt.config));

  r.get("/v1/me", session, async (_req, res) => {
    const id = await accounts.getIdentity(viewerOf(res));
    res.json({ accountId: id.accountId, walletAddress: id.walletAddress, authProvider: id.authProvider });
  });

  r.get("/v1/account", session, async (_req, res) => {
    res.json(presentAccount(await accounts.getSummary(viewerOf(res))));
  });

  r.patch("/v1/account/max-price", session, async (req, res) => {
    const body = parse(maxPriceBody, req.body);
    res.json(
      await accounts.setMaxPrice({
        accountId: viewerOf(res).accountId,
        maxPriceCentsPerDollar: body.maxPriceCentsPerDollar,
      }),
    );
  });

  r.use(keyRoutes(rt, { path: "/v1/account/api-keys", auth: session, source: "session" }));

  r.get("/v1/account/inference-history", session, async (req, res) => {
    await answerHistory(rt.services, res, historyReader(viewerOf(res)), parse(historyQuery, req.query));
  });

  r.get("/v1/account/savings", session, async (_req, res) => {
    res.json(presentSavings(await accounts.savings(viewerOf(res).accountId)));
  });
  return r;
}
