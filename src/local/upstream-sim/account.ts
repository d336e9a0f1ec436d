/** Catalog and key routes: `GET /models` (§2), `GET /api_keys/rate_limits` (§7), the x402 discovery 402 (§8). */
import { type ApiContext, baseHeaders, sendApiError, sendApiJson } from "./context.js";
import { detailedError, type Json } from "./http-util.js";
import { admissionFailure, availableDiemMicro } from "./keys.js";
import { filterModels, isModelListType, MODEL_LIST_TYPES, type SimModel } from "./models.js";
import { microToNumber } from "./money.js";

export const MSG_AUTH_FAILED = "Authentication failed";
export const MSG_ADMIN_KEY_REQUIRED = "Admin API key required";

/** Pre-serialises the `GET /models` bodies for every list type (the catalog is fixed per instance). */
export function buildModelsBodies(models: readonly SimModel[]): Map<string, string> {
  const out = new Map<string, string>();
  for (const type of MODEL_LIST_TYPES) {
    out.set(type, JSON.stringify({ object: "list", type, data: filterModels(models, type) }));
  }
  return out;
}

/** `GET /models?type=`; `type` defaults to `text`; an unknown type → 400 DetailedError. */
export function handleListModels(ctx: ApiContext): void {
  const type = ctx.query.get("type") ?? "text";
  if (!isModelListType(type)) {
    sendApiJson(
      ctx,
      400,
      detailedError([
        {
          code: "invalid_enum_value",
          path: ["type"],
          received: type,
          message: `Invalid enum value. Expected ${MODEL_LIST_TYPES.map((t) => `'${t}'`).join(" | ")}, received '${type}'`,
        },
      ]),
    );
    return;
  }
  const body = ctx.rt.modelsBodyByType.get(type) ?? "";
  ctx.res.writeHead(200, {
    ...baseHeaders(ctx),
    "content-type": "application/json; charset=utf-8",
    "content-length": Buffer.byteLength(body),
  });
  ctx.res.end(body);
}

/**
 * `GET /api_keys/rate_limits` for the calling key. `balances.DIEM` is the DIEM balance clamped to
 * what is left of the key's epoch cap; `accessPermitted` is the same admission check inference uses.
 */
export function handleRateLimits(ctx: ApiContext): void {
  const key = ctx.key;
  if (!key) {
    sendApiError(ctx, 401, MSG_AUTH_FAILED);
    return;
  }
  const state = ctx.rt.state;
  const rateLimits: Json[] = ctx.rt.models.map((m) => ({
    apiModelId: m.id,
    rateLimits:
      m.type === "video"
        ? []
        : m.type === "image"
          ? [{ type: "RPM", amount: Math.min(key.rpmLimit, 20) }]
          : [
              { type: "RPM", amount: key.rpmLimit },
              { type: "TPM", amount: key.tpmLimit },
            ],
  }));
  sendApiJson(ctx, 200, {
    data: {
      accessPermitted: admissionFailure(key) === null,
      apiTier: { id: "paid", isCharged: true },
      balances: { USD: microToNumber(key.usdMicro), DIEM: microToNumber(availableDiemMicro(key)), BUNDLED_CREDITS: 0 },
      keyExpiration: null,
      nextEpochBegins: state.nextEpochBegins().toISOString(),
      rateLimits,
    },
  });
}

/** Admin-only routes (`/api_keys` CRUD, `/billing/*`) called with an inference key. */
export function handleAdminOnly(ctx: ApiContext): void {
  sendApiError(ctx, 401, MSG_ADMIN_KEY_REQUIRED);
}

const BASE_USDC = "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913";

/** 402 body for a request without credentials: x402 v2 discovery (no money semantics simulated). */
export function sendX402Discovery(ctx: ApiContext): void {
  const host = ctx.req.headers.host ?? "127.0.0.1";
  const accepts = [
    {
      scheme: "exact",
      network: "eip155:8453",
      amount: "5000000",
      asset: BASE_USDC,
      payTo: "0x0000000000000000000000000000000000005e11",
      maxTimeoutSeconds: 300,
      extra: { name: "USD Coin", version: "2" },
    },
  ];
  const body = {
    x402Version: 2,
    error: "Authentication required. Provide an API key (Authorization: Bearer) or sign in with an x402 wallet.",
    resource: {
      url: `http://${host}/api/v1${ctx.route}`,
      description: "Venice API inference",
      mimeType: "application/json",
    },
    accepts,
    extensions: {
      "sign-in-with-x": { header: "SIGN-IN-WITH-X", supportedChains: ["eip155:8453", "solana:mainnet"] },
    },
    authOptions: {
      apiKey: { header: "Authorization", scheme: "Bearer", docs: "https://docs.venice.ai/api-reference/api-spec" },
      x402Wallet: { header: "SIGN-IN-WITH-X", topUp: "/api/v1/x402/top-up", minimumTopUpUsd: 5 },
    },
  };
  const paymentRequired = Buffer.from(JSON.stringify({ x402Version: 2, accepts })).toString("base64");
  sendApiJson(ctx, 402, body, { "payment-required": paymentRequired });
}
