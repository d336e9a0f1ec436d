/**
 * The documented refusals of a model or route to a valid key (vendor/venice/swagger.yaml):
 * the alpha-only `POST /responses`, a region-restricted model, and the fault kinds that answer every
 * documented error status with its documented body.
 */
import { MSG_AUTH_FAILED } from "./account.js";
import { MSG_MODEL_NOT_FOUND } from "./admission.js";
import { type ApiContext, sendApiError, sendApiJson } from "./context.js";
import type { SimFaultKind } from "./faults.js";
import { detailedError } from "./http-util.js";

/** 403 on `/video/quote`, `/video/queue`, `/video/retrieve` (the documented description). */
export const MSG_REGION =
  "The specified model is unavailable in your region. Use of Tor, VPNs, proxies, or other means to circumvent this restriction is a violation of our Terms of Service.";
/** 401 on every inference route (documented beside "Authentication failed"). */
export const MSG_PRO_ONLY = "This model is only available to Pro users";
/** `/responses` is "currently available to Alpha testers only" (its refusal's status is undocumented: 401 here). */
export const MSG_ALPHA_ONLY = "This endpoint is currently available to Alpha testers only.";
/** 403 documented on other routes (audio, augment): a refusal the reference does not explain for ours. */
export const MSG_UNAUTHORIZED = "Unauthorized access";
export const MSG_CONTENT_POLICY = "Your prompt violates the content policy of Venice.ai or the model provider";

/**
 * Refuses, before its handler, an inference call the caller may not make whatever its body: the
 * alpha-only `/responses` for a key without alpha access (401 `MSG_ALPHA_ONLY`), a model whose
 * `regionRestrictions` do not list the callers' region (403 `MSG_REGION`, on every inference route
 * naming it but `/video/complete`). True when it answered.
 */
export function refuseAccess(ctx: ApiContext): boolean {
  if (ctx.route === "/responses" && ctx.key && !ctx.key.alphaAccess) {
    sendApiError(ctx, 401, MSG_ALPHA_ONLY);
    return true;
  }
  // `/video/complete` documents no 403: deleting a job's media is never refused for the region
  if (ctx.route === "/video/complete") return false;
  const model = ctx.record.model === null ? undefined : ctx.rt.modelIndex.get(ctx.record.model);
  const regions = model?.model_spec.regionRestrictions;
  if (regions && !regions.includes(ctx.rt.state.callerRegion())) {
    sendApiError(ctx, 403, MSG_REGION);
    return true;
  }
  return false;
}

/** Answers a documented-refusal fault (`http_400` … `http_422_content_policy`); false for any other kind. */
export function sendRefusalFault(ctx: ApiContext, kind: SimFaultKind): boolean {
  switch (kind) {
    case "http_400":
      sendApiJson(
        ctx,
        400,
        detailedError([{ code: "invalid_type", path: ["model"], message: "Required", expected: "string" }]),
      );
      return true;
    case "http_401_auth":
      sendApiError(ctx, 401, MSG_AUTH_FAILED);
      return true;
    case "http_401_pro_only":
      sendApiError(ctx, 401, MSG_PRO_ONLY);
      return true;
    case "http_401_alpha":
      sendApiError(ctx, 401, MSG_ALPHA_ONLY);
      return true;
    case "http_403_region":
      sendApiError(ctx, 403, MSG_REGION);
      return true;
    case "http_403_unauthorized":
      sendApiError(ctx, 403, MSG_UNAUTHORIZED);
      return true;
    case "http_404":
      sendApiError(ctx, 404, MSG_MODEL_NOT_FOUND);
      return true;
    case "http_409_consent":
      sendApiJson(ctx, 409, {
        error: { code: "needs_consent", message: "Additional consent is required before this request can be queued." },
        consent_flow: "seedance",
        face_media_roles: ["image"],
        consent: { consent_version: "1", policy_text: "I confirm I have consent of every person shown." },
        docs_url: "https://docs.venice.ai",
      });
      return true;
    case "http_413":
      sendApiJson(ctx, 413, {
        code: "PAYLOAD_TOO_LARGE",
        error: "The request payload is too large. Please reduce the size of your request.",
      });
      return true;
    case "http_415":
      sendApiError(ctx, 415, "Invalid request content-type");
      return true;
    case "http_422_content_policy":
      // ContentViolationError in the reference
      sendApiJson(ctx, 422, { error: MSG_CONTENT_POLICY, suggested_prompt: "a landscape at dawn" });
      return true;
    default:
      return false;
  }
}
