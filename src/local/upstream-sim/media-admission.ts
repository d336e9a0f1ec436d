import { type Admitted, MSG_INSUFFICIENT_BALANCE, MSG_MODEL_NOT_FOUND, MSG_SPEND_LIMIT } from "./admission.js";
import { type ApiContext, resolveModel, sendApiError, sendApiJson } from "./context.js";
import { admissionFailure, debitPrepaid } from "./keys.js";
import type { SimModel } from "./models.js";

/**
 * What the prepaid media routes (images §5, video §6) share: the model of the route's type, and the
 * prepaid debit (one currency must cover the whole amount, else 402).
 */

export function modelOfType<T extends SimModel["type"]>(
  ctx: ApiContext,
  raw: unknown,
  type: T,
  routeName: string,
): Extract<SimModel, { type: T }> | null {
  if (typeof raw !== "string" || raw.trim() === "") {
    sendApiError(ctx, 400, "model is required");
    return null;
  }
  const model = resolveModel(ctx.rt, raw);
  if (!model) {
    sendApiError(ctx, 404, MSG_MODEL_NOT_FOUND);
    return null;
  }
  ctx.record.model = model.id;
  if (model.type !== type) {
    sendApiError(ctx, 400, `Model ${model.id} is a ${model.type} model and does not support ${routeName}`);
    return null;
  }
  if (model.model_spec.offline) {
    sendApiError(ctx, 400, `Model ${model.id} is currently offline. Please select a different model.`);
    return null;
  }
  return model as Extract<SimModel, { type: T }>;
}

/**
 * Debits a prepaid amount (DIEM first, then USD; one currency must cover it) and records it.
 * Sends 402 and returns false when it does not fit.
 */
export function chargePrepaid(
  ctx: ApiContext,
  admitted: Admitted,
  amountMicro: bigint,
): { diemMicro: bigint; usdMicro: bigint } | null {
  const charged = debitPrepaid(admitted.key, amountMicro);
  if (!charged) {
    const failure = admissionFailure(admitted.key);
    sendApiJson(
      ctx,
      402,
      { error: failure === "spend_limit" ? MSG_SPEND_LIMIT : MSG_INSUFFICIENT_BALANCE },
      admitted.headers,
    );
    return null;
  }
  ctx.record.burnMicroDiem = amountMicro;
  ctx.record.chargedDiemMicro = charged.diemMicro;
  ctx.record.chargedUsdMicro = charged.usdMicro;
  return charged;
}
