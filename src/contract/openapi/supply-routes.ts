import { idParam, pageQuery } from "../common.js";
import {
  offerList,
  offerResponse,
  patchOfferBody,
  postOfferBody,
  registerUpstreamKeyBody,
  revokeUpstreamKeyResponse,
  supplierHistoryResponse,
  supplierLedgerResponse,
  upstreamKeyList,
  upstreamKeyResponse,
} from "../supply.js";
import { BODY_ERRORS, errorResponses, jsonBody, jsonResponse, registry, SESSION } from "./registry.js";

/** The supplier's routes (session): upstream keys, offers, earnings and payouts. */

export function registerSupplyRoutes(): void {
  registry.registerPath({
    method: "post",
    path: "/v1/supply/upstream-keys",
    operationId: "registerUpstreamKey",
    tags: ["Supply"],
    summary: "Register an upstream key (stored encrypted)",
    security: SESSION,
    request: { body: jsonBody(registerUpstreamKeyBody) },
    responses: {
      201: jsonResponse(upstreamKeyResponse, "Registered"),
      ...errorResponses([...BODY_ERRORS, 401, 403, 409, 502]),
    },
  });

  registry.registerPath({
    method: "get",
    path: "/v1/supply/upstream-keys/mine",
    operationId: "listUpstreamKeys",
    tags: ["Supply"],
    security: SESSION,
    responses: { 200: jsonResponse(upstreamKeyList, "Your keys"), ...errorResponses([401]) },
  });

  registry.registerPath({
    method: "delete",
    path: "/v1/supply/upstream-keys/{id}",
    operationId: "revokeUpstreamKey",
    tags: ["Supply"],
    summary: "Revoke the key row and cancel its offers",
    security: SESSION,
    request: { params: idParam },
    responses: {
      200: jsonResponse(revokeUpstreamKeyResponse, "Revoked"),
      ...errorResponses([400, 401, 403, 404]),
    },
  });

  registry.registerPath({
    method: "post",
    path: "/v1/supply/offers",
    operationId: "postOffer",
    tags: ["Supply"],
    summary: "Post an offer (one live offer per key; expires at UTC midnight)",
    security: SESSION,
    request: { body: jsonBody(postOfferBody) },
    responses: { 201: jsonResponse(offerResponse, "Posted"), ...errorResponses([...BODY_ERRORS, 401, 403, 404, 409]) },
  });

  registry.registerPath({
    method: "get",
    path: "/v1/supply/offers/mine",
    operationId: "listOffers",
    tags: ["Supply"],
    summary: "Your offers, excluding cancelled",
    security: SESSION,
    request: { query: pageQuery },
    responses: { 200: jsonResponse(offerList, "A page"), ...errorResponses([400, 401]) },
  });

  registry.registerPath({
    method: "patch",
    path: "/v1/supply/offers/{id}",
    operationId: "updateOffer",
    tags: ["Supply"],
    summary: "Reprice, pause or unpause",
    security: SESSION,
    request: { params: idParam, body: jsonBody(patchOfferBody) },
    responses: { 200: jsonResponse(offerResponse, "Updated"), ...errorResponses([...BODY_ERRORS, 401, 403, 404, 409]) },
  });

  registry.registerPath({
    method: "delete",
    path: "/v1/supply/offers/{id}",
    operationId: "cancelOffer",
    tags: ["Supply"],
    summary: "Cancel a live offer",
    security: SESSION,
    request: { params: idParam },
    responses: { 200: jsonResponse(offerResponse, "Cancelled"), ...errorResponses([400, 401, 403, 404, 409]) },
  });

  registry.registerPath({
    method: "get",
    path: "/v1/supply/ledger",
    operationId: "supplierLedger",
    tags: ["Supply"],
    summary: "Supplier ledger and payouts",
    security: SESSION,
    request: { query: pageQuery },
    responses: { 200: jsonResponse(supplierLedgerResponse, "A page"), ...errorResponses([400, 401]) },
  });

  registry.registerPath({
    method: "get",
    path: "/v1/supply/inference-history",
    operationId: "supplierInferenceHistory",
    tags: ["Supply"],
    summary: "Clears of your offers",
    security: SESSION,
    request: { query: pageQuery },
    responses: { 200: jsonResponse(supplierHistoryResponse, "A page"), ...errorResponses([400, 401]) },
  });
}
