import { Router } from "express";
import { createKeyBody, historyQuery, maxPriceBody, updateKeyBody } from "../../contract/account.js";
import { idParam } from "../../contract/common.js";
import { historyReader } from "../../domain/keys/key-scopes.js";
import type { Runtime } from "../../runtime.js";
import { requireSameOrigin, requireSession, viewerOf } from "../auth.js";
import { answerHistory } from "../history.js";
import { keyChangeOf } from "../keys.js";
import { presentAccount, presentKey, presentSavings, STATUS_OK } from "../present.js";
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
    const { keys, cap } = await apiKeys.listActive(viewerOf(res));
    res.json({ keys: keys.map(presentKey), cap, active: keys.length });
  });

  r.post("/v1/account/api-keys", session, async (req, res) => {
    const body = parse(createKeyBody, req.body);
    const k = await apiKeys.createKey({
      actor: viewerOf(res),
      name: body.name,
      source: "session",
      policy: keyChangeOf(body),
      scopes: body.scopes,
    });
    res.status(201).json({ ...presentKey(k), apiKey: k.apiKey });
  });

  r.patch("/v1/account/api-keys/:id", session, async (req, res) => {
    const { id: keyId } = parse(idParam, req.params);
    const body = parse(updateKeyBody, req.body);
    res.json(presentKey(await apiKeys.updateKey({ actor: viewerOf(res), keyId, change: keyChangeOf(body) })));
  });

  r.delete("/v1/account/api-keys/:id", session, async (req, res) => {
    const { id: keyId } = parse(idParam, req.params);
    await apiKeys.revokeKey({ actor: viewerOf(res), keyId });
    res.json(STATUS_OK);
  });

  r.get("/v1/account/inference-history", session, async (req, res) => {
    await answerHistory(rt.services, res, historyReader(viewerOf(res)), parse(historyQuery, req.query));
  });

  r.get("/v1/account/savings", session, async (_req, res) => {
    res.json(presentSavings(await accounts.savings(viewerOf(res).accountId)));
  });
  return r;
}
