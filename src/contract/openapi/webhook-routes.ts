import type { RouteConfig } from "@asteasolutions/zod-to-openapi";
import { idParam, pageQuery, statusOk } from "../common.js";
import {
  createdWebhookResponse,
  createWebhookBody,
  WEBHOOK_TESTS_PER_MINUTE,
  webhookDelivery,
  webhookDeliveryList,
  webhookList,
  webhookResponse,
} from "../webhooks.js";
import { BODY_ERRORS, errorResponses, jsonBody, jsonResponse, registry } from "./registry.js";

/** Buyers with a Bearer key or a session, suppliers with a session (one credential, not both). */
const BEARER_OR_SESSION: RouteConfig["security"] = [{ bearerAuth: [] }, { cookieAuth: [] }];

const WEBHOOK_DESCRIPTION =
  "Deliveries are Standard Webhooks: `POST` of `{type, timestamp, data}` with `webhook-id` (the same on every retry), `webhook-timestamp` and `webhook-signature` (verify with the `standardwebhooks` package and the endpoint's `whsec_` secret). Retried with exponential back-off for over 24 h; an endpoint whose event fails every attempt is disabled.";

/** The webhook endpoints and their delivery log (a Bearer key or a session). */
export function registerWebhookRoutes(): void {
  registry.registerPath({
    method: "post",
    path: "/v1/webhooks",
    operationId: "createWebhook",
    tags: ["Webhooks"],
    summary: "Register a webhook endpoint (at most 10 per account); the signing secret is shown once",
    description: WEBHOOK_DESCRIPTION,
    security: BEARER_OR_SESSION,
    request: { body: jsonBody(createWebhookBody) },
    responses: {
      201: jsonResponse(createdWebhookResponse, "Registered, with its `secret` (shown this once)"),
      ...errorResponses([...BODY_ERRORS, 401, 403, 409], {
        400: "A field is invalid (named in `error.field`): not https, a host that resolves to a loopback, private, link-local or metadata address, an unknown event, a supplier event with a Bearer key, `balance.low` without `balanceLowThresholdUsdc`. Nothing was created.",
        409: "`webhook_limit_reached`: the account has 10 endpoints; delete one first.",
      }),
    },
  });

  registry.registerPath({
    method: "get",
    path: "/v1/webhooks",
    operationId: "listWebhooks",
    tags: ["Webhooks"],
    summary: "Your webhook endpoints (with their status and `disabledReason`)",
    security: BEARER_OR_SESSION,
    responses: { 200: jsonResponse(webhookList, "Your endpoints"), ...errorResponses([401]) },
  });

  registry.registerPath({
    method: "delete",
    path: "/v1/webhooks/{id}",
    operationId: "deleteWebhook",
    tags: ["Webhooks"],
    summary: "Delete an endpoint and its delivery log",
    security: BEARER_OR_SESSION,
    request: { params: idParam },
    responses: { 200: jsonResponse(statusOk, "Deleted"), ...errorResponses([400, 401, 403, 404]) },
  });

  registry.registerPath({
    method: "post",
    path: "/v1/webhooks/{id}/rotate-secret",
    operationId: "rotateWebhookSecret",
    tags: ["Webhooks"],
    summary: "A new signing secret, shown once; the old one stops at once",
    security: BEARER_OR_SESSION,
    request: { params: idParam },
    responses: {
      200: jsonResponse(createdWebhookResponse, "Rotated, with the new `secret`"),
      ...errorResponses([400, 401, 403, 404]),
    },
  });

  registry.registerPath({
    method: "post",
    path: "/v1/webhooks/{id}/enable",
    operationId: "enableWebhook",
    tags: ["Webhooks"],
    summary: "Receive events again after the endpoint was disabled",
    security: BEARER_OR_SESSION,
    request: { params: idParam },
    responses: { 200: jsonResponse(webhookResponse, "Active"), ...errorResponses([400, 401, 403, 404]) },
  });

  registry.registerPath({
    method: "post",
    path: "/v1/webhooks/{id}/test",
    operationId: "testWebhook",
    tags: ["Webhooks"],
    summary: "Send a `webhook.test` event to the endpoint",
    description: `Queued like every event; its delivery shows in the log. At most ${WEBHOOK_TESTS_PER_MINUTE} a minute per account (this route and GraphQL \`sendTestWebhook\` together, a fixed window per UTC minute); past it 429 \`rate_limited\` with Retry-After (the seconds until the minute turns), and nothing is sent.`,
    security: BEARER_OR_SESSION,
    request: { params: idParam },
    responses: {
      202: jsonResponse(webhookDelivery, "Queued: its delivery-log row"),
      ...errorResponses([400, 401, 403, 404, 409, 429], {
        409: "The endpoint is disabled; enable it first.",
        429: `\`rate_limited\`: ${WEBHOOK_TESTS_PER_MINUTE} test events this minute already; retry after Retry-After seconds. Nothing was sent.`,
      }),
    },
  });

  registry.registerPath({
    method: "get",
    path: "/v1/webhooks/{id}/deliveries",
    operationId: "webhookDeliveries",
    tags: ["Webhooks"],
    summary: "The endpoint's delivery log, newest first (status, attempts, last response code)",
    security: BEARER_OR_SESSION,
    request: { params: idParam, query: pageQuery },
    responses: { 200: jsonResponse(webhookDeliveryList, "A page"), ...errorResponses([400, 401, 404]) },
  });
}
