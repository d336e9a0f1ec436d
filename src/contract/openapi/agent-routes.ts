import {
  apiKeyList,
  apiKeyMetadata,
  createdApiKey,
  createKeyBody,
  maxPriceBody,
  maxPriceResponse,
  updateKeyBody,
} from "../account.js";
import {
  agentKeyResponse,
  agentMeResponse,
  agentRequestResponse,
  agentRequestsQuery,
  agentRequestsResponse,
} from "../agent.js";
import { idParam, statusOk, supportReferenceParam } from "../common.js";
import {
  BEARER,
  BODY_ERRORS,
  errorResponses,
  historyResponses,
  jsonBody,
  jsonResponse,
  KEY_UPDATE_ERRORS,
  registry,
} from "./registry.js";

/** The agent self-service routes (Bearer). */
export function registerAgentRoutes(): void {
  registry.registerPath({
    method: "get",
    path: "/v1/agent/me",
    operationId: "agentMe",
    tags: ["Agent"],
    summary: "Wallet, balances, ceiling and confirmation depth",
    security: BEARER,
    responses: { 200: jsonResponse(agentMeResponse, "The key's account"), ...errorResponses([401]) },
  });

  registry.registerPath({
    method: "get",
    path: "/v1/agent/requests/{support_reference}",
    operationId: "agentRequest",
    tags: ["Agent"],
    summary: "One request by support reference: cost, clearing price, status, timings",
    security: BEARER,
    request: { params: supportReferenceParam },
    responses: {
      200: jsonResponse(agentRequestResponse, "The request record"),
      ...errorResponses([400, 401, 404], { 404: "The reference is not on this account." }),
    },
  });

  registry.registerPath({
    method: "patch",
    path: "/v1/agent/max-price",
    operationId: "setAgentMaxPrice",
    tags: ["Agent"],
    summary: "Set the buyer ceiling (30-80; nothing clamped; a `walletAddress` in the body is ignored)",
    security: BEARER,
    request: { body: jsonBody(maxPriceBody) },
    responses: { 200: jsonResponse(maxPriceResponse, "The new ceiling"), ...errorResponses([...BODY_ERRORS, 401]) },
  });

  registry.registerPath({
    method: "post",
    path: "/v1/agent/keys",
    operationId: "createAgentKey",
    tags: ["Agent"],
    summary: "Mint another API key (rotation: mint, store, verify, revoke the old one)",
    security: BEARER,
    request: { body: jsonBody(createKeyBody) },
    responses: {
      201: jsonResponse(createdApiKey, "The key, with its plaintext"),
      ...errorResponses([...BODY_ERRORS, 401, 409], { 409: "At the active-key cap (10); nothing paid." }),
    },
  });

  registry.registerPath({
    method: "get",
    path: "/v1/agent/keys",
    operationId: "listAgentKeys",
    tags: ["Agent"],
    summary: "Active keys (metadata only) and the cap",
    security: BEARER,
    responses: { 200: jsonResponse(apiKeyList, "Keys"), ...errorResponses([401]) },
  });

  registry.registerPath({
    method: "patch",
    path: "/v1/agent/keys/{id}",
    operationId: "updateAgentKey",
    tags: ["Agent"],
    summary: "Change a key's name or policy (only the fields sent; null removes a setting)",
    security: BEARER,
    request: { params: idParam, body: jsonBody(updateKeyBody) },
    responses: {
      200: jsonResponse(apiKeyMetadata, "The key with its policy and usage"),
      ...errorResponses([...BODY_ERRORS, 401, 404, 409], KEY_UPDATE_ERRORS),
    },
  });

  registry.registerPath({
    method: "get",
    path: "/v1/agent/key",
    operationId: "agentKey",
    tags: ["Agent"],
    summary: "The calling key: its policy and what it spent this period",
    security: BEARER,
    responses: { 200: jsonResponse(agentKeyResponse, "The calling key"), ...errorResponses([401]) },
  });

  registry.registerPath({
    method: "get",
    path: "/v1/agent/requests",
    operationId: "agentRequests",
    tags: ["Agent"],
    summary: "The account's inference records, newest first (keyset pages), by key and period; JSON or CSV",
    security: BEARER,
    request: { query: agentRequestsQuery },
    responses: { 200: historyResponses(agentRequestsResponse), ...errorResponses([400, 401]) },
  });

  registry.registerPath({
    method: "delete",
    path: "/v1/agent/keys/{id}",
    operationId: "revokeAgentKey",
    tags: ["Agent"],
    summary: "Revoke a key (the calling key included)",
    security: BEARER,
    request: { params: idParam },
    responses: {
      200: jsonResponse(statusOk, "Revoked"),
      ...errorResponses([400, 401, 404], { 404: "No such key on this account." }),
    },
  });
}
