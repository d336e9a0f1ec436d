import { Router } from "express";
import { createKeyBody, historyQuery, maxPriceBody } from "../../contract/account.js";
import { idParam } from "../../contract/common.js";
import type { Runtime } from "../../runtime.js";
import { requireSameOrigin, requireSession, viewerOf } from "../auth.js";
import { presentAccount, presentHistoryRow, presentKey, presentSavings, STATUS_OK } from "../present.js";
import { parse } from "../validate.js";

/** SPEC "Account (session)". Every route: session cookie only. */
export function accountRoutes(rt: Runtime): Router {
  const r = Router();
  const { accounts, apiKeys } = rt.services;
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

  r.get("/v1/account/api-keys", session, async (_req, res) => {
    const { keys, cap } = await apiKeys.listActive(viewerOf(res).accountId);
    res.json({ keys: keys.map(presentKey), cap, active: keys.length });
  });

  r.post("/v1/account/api-keys", session, async (req, res) => {
    const body = parse(createKeyBody, req.body);
    const k = await apiKeys.createKey({ accountId: viewerOf(res).accountId, name: body.name, source: "session" });
    res.status(201).json({ ...presentKey(k), apiKey: k.apiKey });
  });

  r.delete("/v1/account/api-keys/:id", session, async (req, res) => {
    const { id: keyId } = parse(idParam, req.params);
    await apiKeys.revokeKey({ accountId: viewerOf(res).accountId, keyId });
    res.json(STATUS_OK);
  });

  r.get("/v1/account/inference-history", session, async (req, res) => {
    const q = parse(historyQuery, req.query);
    const page = await accounts.inferenceHistory({
      accountId: viewerOf(res).accountId,
      limit: q.limit,
      cursor: q.cursor,
      modality: q.modality,
    });
    res.json({ data: page.items.map(presentHistoryRow), nextCursor: page.nextCursor });
  });

  r.get("/v1/account/savings", session, async (_req, res) => {
    res.json(presentSavings(await accounts.savings(viewerOf(res).accountId)));
  });
  return r;
}
