import {
  accountResponse,
  apiKeyList,
  apiKeyMetadata,
  createdApiKey,
  createKeyBody,
  historyQuery,
  historyResponse,
  maxPriceBody,
  maxPriceResponse,
  meResponse,
  savingsResponse,
  updateKeyBody,
} from "../account.js";
import { idpVerifyBody, sessionIdentityResponse, siweNonceResponse, siweVerifyBody } from "../auth.js";
import { idParam, statusOk } from "../common.js";
import {
  BODY_ERRORS,
  errorResponses,
  type HeadersObject,
  headers,
  historyResponses,
  jsonBody,
  jsonResponse,
  KEY_UPDATE_ERRORS,
  PUBLIC,
  registry,
  SESSION,
} from "./registry.js";

const SET_COOKIE: HeadersObject = { "Set-Cookie": { $ref: "#/components/headers/Set-Cookie" } };

/** A buyer's session routes: sign-in (IdP, SIWE) and the account (session). */
export function registerAccountRoutes(): void {
  registry.registerComponent("headers", "Set-Cookie", {
    description: "`svc_session` (HttpOnly)",
    schema: { type: "string" },
  });

  registry.registerPath({
    method: "post",
    path: "/auth/idp/verify",
    operationId: "idpVerify",
    tags: ["Session"],
    summary: "Sign in with the identity provider's access and identity tokens",
    security: PUBLIC,
    request: { body: jsonBody(idpVerifyBody) },
    responses: {
      200: { ...jsonResponse(sessionIdentityResponse, "Signed in"), headers: { ...headers(), ...SET_COOKIE } },
      ...errorResponses([...BODY_ERRORS, 401, 403]),
    },
  });

  registry.registerPath({
    method: "post",
    path: "/auth/siwe/nonce",
    operationId: "siweNonce",
    tags: ["Session"],
    summary: "A single-use Sign-In-With-Ethereum nonce (10 minutes)",
    security: PUBLIC,
    responses: { 200: jsonResponse(siweNonceResponse, "The nonce and the message's fields"), ...errorResponses([403]) },
  });

  registry.registerPath({
    method: "post",
    path: "/auth/siwe/verify",
    operationId: "siweVerify",
    tags: ["Session"],
    summary: "Sign in with a signed EIP-4361 message",
    security: PUBLIC,
    request: { body: jsonBody(siweVerifyBody) },
    responses: {
      200: { ...jsonResponse(sessionIdentityResponse, "Signed in"), headers: { ...headers(), ...SET_COOKIE } },
      ...errorResponses([...BODY_ERRORS, 401, 403]),
    },
  });

  registry.registerPath({
    method: "post",
    path: "/auth/logout",
    operationId: "logout",
    tags: ["Session"],
    summary: "End the session",
    security: SESSION,
    responses: {
      200: { ...jsonResponse(statusOk, "Signed out; the cookie is cleared"), headers: { ...headers(), ...SET_COOKIE } },
      ...errorResponses([401, 403]),
    },
  });

  registry.registerPath({
    method: "get",
    path: "/v1/me",
    operationId: "me",
    tags: ["Account"],
    security: SESSION,
    responses: { 200: jsonResponse(meResponse, "The signed-in identity"), ...errorResponses([401]) },
  });

  registry.registerPath({
    method: "get",
    path: "/v1/account",
    operationId: "account",
    tags: ["Account"],
    summary: "Balances, ceiling and the recent ledger",
    security: SESSION,
    responses: { 200: jsonResponse(accountResponse, "Account summary"), ...errorResponses([401]) },
  });

  registry.registerPath({
    method: "patch",
    path: "/v1/account/max-price",
    operationId: "setAccountMaxPrice",
    tags: ["Account"],
    summary: "Set the buyer ceiling (30-80; nothing clamped)",
    security: SESSION,
    request: { body: jsonBody(maxPriceBody) },
    responses: {
      200: jsonResponse(maxPriceResponse, "The new ceiling"),
      ...errorResponses([...BODY_ERRORS, 401, 403]),
    },
  });

  registry.registerPath({
    method: "get",
    path: "/v1/account/api-keys",
    operationId: "listAccountKeys",
    tags: ["Account"],
    summary: "Active API keys (metadata only) and the cap",
    security: SESSION,
    responses: { 200: jsonResponse(apiKeyList, "Keys"), ...errorResponses([401]) },
  });

  registry.registerPath({
    method: "post",
    path: "/v1/account/api-keys",
    operationId: "createAccountKey",
    tags: ["Account"],
    summary: "Mint an API key (plaintext returned once)",
    security: SESSION,
    request: { body: jsonBody(createKeyBody) },
    responses: {
      201: jsonResponse(createdApiKey, "The key, with its plaintext"),
      ...errorResponses([...BODY_ERRORS, 401, 403, 409], { 409: "At the active-key cap (10)." }),
    },
  });

  registry.registerPath({
    method: "patch",
    path: "/v1/account/api-keys/{id}",
    operationId: "updateAccountKey",
    tags: ["Account"],
    summary: "Change a key's name or policy (only the fields sent; null removes a setting)",
    security: SESSION,
    request: { params: idParam, body: jsonBody(updateKeyBody) },
    responses: {
      200: jsonResponse(apiKeyMetadata, "The key with its policy and usage"),
      ...errorResponses([...BODY_ERRORS, 401, 403, 404, 409], KEY_UPDATE_ERRORS),
    },
  });

  registry.registerPath({
    method: "delete",
    path: "/v1/account/api-keys/{id}",
    operationId: "revokeAccountKey",
    tags: ["Account"],
    security: SESSION,
    request: { params: idParam },
    responses: {
      200: jsonResponse(statusOk, "Revoked"),
      ...errorResponses([400, 401, 403, 404], { 404: "No such key on this account." }),
    },
  });

  registry.registerPath({
    method: "get",
    path: "/v1/account/inference-history",
    operationId: "accountInferenceHistory",
    tags: ["Account"],
    summary: "Buyer inference records, newest first (keyset pages), by key and period; JSON or CSV",
    security: SESSION,
    request: { query: historyQuery },
    responses: { 200: historyResponses(historyResponse), ...errorResponses([400, 401]) },
  });

  registry.registerPath({
    method: "get",
    path: "/v1/account/savings",
    operationId: "accountSavings",
    tags: ["Account"],
    summary: "Savings against face value and against the ceiling",
    security: SESSION,
    responses: { 200: jsonResponse(savingsResponse, "Savings"), ...errorResponses([401]) },
  });
}
