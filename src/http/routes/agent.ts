import { Router } from "express";
import { type AgentMeResponse, agentRequestsQuery, maxPriceBody } from "../../contract/agent.js";
import { supportReferenceParam } from "../../contract/common.js";
import { historyReader } from "../../domain/keys/key-scopes.js";
import type { Runtime } from "../../runtime.js";
import { requireBearer, viewerOf } from "../auth.js";
import { answerHistory } from "../history.js";
import { presentAgentMe, presentHistoryRow, presentKey } from "../present.js";
import { parse } from "../validate.js";
import { keyRoutes } from "./keys.js";

/** SPEC "Agent self-service": Bearer only; a session cookie is refused. */
export function agentRoutes(rt: Runtime): Router {
  const r = Router();
  const { accounts, apiKeys } = rt.services;
  const bearer = requireBearer(rt.services);
  // the account's own settings and figures: a key without the `account` scope is 403 insufficient_scope
  const accountKey = requireBearer(rt.services, { scope: "account" });

  r.get("/v1/agent/me", accountKey, async (_req, res) => {
    const a = await accounts.getSummary(viewerOf(res));
    const body: AgentMeResponse = presentAgentMe(a, rt.config.chain.confirmationBlocks);
    res.json(body);
  });

  // any walletAddress in the body is ignored: the key decides the account
  r.patch("/v1/agent/max-price", accountKey, async (req, res) => {
    const body = parse(maxPriceBody, req.body);
    res.json(
      await accounts.setMaxPrice({
        accountId: viewerOf(res).accountId,
        maxPriceCentsPerDollar: body.maxPriceCentsPerDollar,
      }),
    );
  });

  // the calling key: its policy and what it spent this period (OpenRouter's GET /api/v1/key)
  r.get("/v1/agent/key", bearer, async (_req, res) => {
    const v = viewerOf(res);
    res.json(presentKey(await apiKeys.describeKey({ accountId: v.accountId, apiKeyId: v.apiKeyId ?? "" })));
  });

  r.use(keyRoutes(rt, { path: "/v1/agent/keys", auth: bearer, source: "agent" }));

  r.get("/v1/agent/requests", bearer, async (req, res) => {
    await answerHistory(rt.services, res, historyReader(viewerOf(res)), parse(agentRequestsQuery, req.query));
  });

  r.get("/v1/agent/requests/:support_reference", bearer, async (req, res) => {
    const { support_reference: ref } = parse(supportReferenceParam, req.params);
    res.json(
      presentHistoryRow(await accounts.requestDetail({ ...historyReader(viewerOf(res)), supportReference: ref })),
    );
  });
  return r;
}
