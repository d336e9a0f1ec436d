import { type RequestHandler, Router } from "express";
import { createKeyBody, updateKeyBody } from "../../contract/account.js";
import { idParam } from "../../contract/common.js";
import { keyChangeOf } from "../../domain/keys/api-key-service.js";
import type { KeySource } from "../../domain/keys/api-key-types.js";
import type { Runtime } from "../../runtime.js";
import { viewerOf } from "../auth.js";
import { presentKey, STATUS_OK } from "../present.js";
import { parse } from "../validate.js";

/**
 * An account's API keys (SPEC "Account (session)" and "Agent self-service"): list, mint, change and
 * revoke, one handler for both credentials. `path` is where the routes live (`/v1/account/api-keys`
 * for a session, `/v1/agent/keys` for a Bearer key), `auth` the credential's check, `source` what a
 * minted key records as its origin.
 */
export function keyRoutes(rt: Runtime, o: { path: string; auth: RequestHandler; source: KeySource }): Router {
  const r = Router();
  const { apiKeys } = rt.services;

  r.get(o.path, o.auth, async (_req, res) => {
    const { keys, cap } = await apiKeys.listActive(viewerOf(res));
    res.json({ keys: keys.map(presentKey), cap, active: keys.length });
  });

  r.post(o.path, o.auth, async (req, res) => {
    const body = parse(createKeyBody, req.body);
    const k = await apiKeys.createKey({
      actor: viewerOf(res),
      name: body.name,
      source: o.source,
      policy: keyChangeOf(body),
      scopes: body.scopes,
    });
    res.status(201).json({ ...presentKey(k), apiKey: k.apiKey });
  });

  r.patch(`${o.path}/:id`, o.auth, async (req, res) => {
    const { id: keyId } = parse(idParam, req.params);
    const body = parse(updateKeyBody, req.body);
    res.json(presentKey(await apiKeys.updateKey({ actor: viewerOf(res), keyId, change: keyChangeOf(body) })));
  });

  r.delete(`${o.path}/:id`, o.auth, async (req, res) => {
    const { id: keyId } = parse(idParam, req.params);
    await apiKeys.revokeKey({ actor: viewerOf(res), keyId });
    res.json(STATUS_OK);
  });
  return r;
}
