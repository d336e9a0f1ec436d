import { Router } from "express";
import { idParam } from "../../contract/common.js";
import { createWebhookBody, MAX_WEBHOOKS_PER_ACCOUNT, webhookDeliveriesQuery } from "../../contract/webhooks.js";
import type { WebhookDeliveryView, WebhookView } from "../../domain/webhooks/webhook-service.js";
import { formatDecimal6 } from "../../lib/money.js";
import type { Runtime } from "../../runtime.js";
import { readCookie, requireBearerOrSession, requireSameOrigin, SESSION_COOKIE, viewerOf } from "../auth.js";
import { STATUS_OK } from "../present.js";
import { parse } from "../validate.js";

const iso = (d: Date | null): string | null => d?.toISOString() ?? null;

/** An endpoint as REST shows it (never its secret). */
export function presentWebhook(w: WebhookView) {
  return {
    id: w.id,
    url: w.url,
    description: w.description,
    events: w.events,
    balanceLowThresholdUsdc:
      w.balanceLowThresholdMicroUsdc === null ? null : formatDecimal6(w.balanceLowThresholdMicroUsdc),
    status: w.status,
    disabledReason: w.disabledReason,
    disabledAt: iso(w.disabledAt),
    consecutiveFailures: w.consecutiveFailures,
    createdAt: w.createdAt.toISOString(),
    updatedAt: w.updatedAt.toISOString(),
  };
}

/** One row of an endpoint's delivery log. */
export function presentWebhookDelivery(d: WebhookDeliveryView) {
  return {
    id: d.id,
    webhookId: d.webhookId,
    type: d.type,
    status: d.status,
    attempts: d.attempts,
    lastStatusCode: d.lastStatusCode,
    lastError: d.lastError,
    lastAttemptAt: iso(d.lastAttemptAt),
    nextAttemptAt: iso(d.nextAttemptAt),
    deliveredAt: iso(d.deliveredAt),
    createdAt: d.createdAt.toISOString(),
    data: d.data,
  };
}

/**
 * Webhooks. Buyers (Bearer key or session) and suppliers (session) manage the endpoints
 * of their account; supplier events need a session (`WebhookService.register`). Another account's
 * endpoint is 404. Cookie-authenticated writes must come from our own origins.
 */
export function webhookRoutes(rt: Runtime): Router {
  const r = Router();
  const { webhooks } = rt.services;
  const auth = requireBearerOrSession(rt.services, { scope: "account" });
  const sameOrigin = requireSameOrigin(rt.config);
  r.use("/v1/webhooks", (req, res, next) =>
    readCookie(req, SESSION_COOKIE) !== undefined ? sameOrigin(req, res, next) : next(),
  );

  r.post("/v1/webhooks", auth, async (req, res) => {
    const body = parse(createWebhookBody, req.body);
    const v = viewerOf(res);
    const created = await webhooks.register({
      accountId: v.accountId,
      credential: v.credential,
      url: body.url,
      events: body.events,
      description: body.description,
      balanceLowThresholdMicroUsdc: body.balanceLowThresholdUsdc,
    });
    res.status(201).json({ ...presentWebhook(created.webhook), secret: created.secret });
  });

  r.get("/v1/webhooks", auth, async (_req, res) => {
    const list = await webhooks.list(viewerOf(res).accountId);
    res.json({ data: list.map(presentWebhook), cap: MAX_WEBHOOKS_PER_ACCOUNT });
  });

  r.delete("/v1/webhooks/:id", auth, async (req, res) => {
    const { id } = parse(idParam, req.params);
    await webhooks.remove(viewerOf(res).accountId, id);
    res.json(STATUS_OK);
  });

  r.post("/v1/webhooks/:id/rotate-secret", auth, async (req, res) => {
    const { id } = parse(idParam, req.params);
    const rotated = await webhooks.rotateSecret(viewerOf(res).accountId, id);
    res.json({ ...presentWebhook(rotated.webhook), secret: rotated.secret });
  });

  r.post("/v1/webhooks/:id/enable", auth, async (req, res) => {
    const { id } = parse(idParam, req.params);
    res.json(presentWebhook(await webhooks.enable(viewerOf(res).accountId, id)));
  });

  r.post("/v1/webhooks/:id/test", auth, async (req, res) => {
    const { id } = parse(idParam, req.params);
    res.status(202).json(presentWebhookDelivery(await webhooks.sendTest(viewerOf(res).accountId, id)));
  });

  r.get("/v1/webhooks/:id/deliveries", auth, async (req, res) => {
    const { id } = parse(idParam, req.params);
    const q = parse(webhookDeliveriesQuery, req.query);
    const page = await webhooks.deliveries({
      accountId: viewerOf(res).accountId,
      webhookId: id,
      limit: q.limit,
      cursor: q.cursor,
    });
    res.json({ data: page.items.map(presentWebhookDelivery), nextCursor: page.nextCursor });
  });
  return r;
}
