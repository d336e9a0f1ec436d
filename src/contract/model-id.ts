import { z } from "./common.js";

const MODEL_MESSAGE = "model is required (a live id from /v1/models).";

/** A live model id from the catalog, optionally `svc/`-prefixed; `model:option` suffixes are refused. */
export const modelId = z
  .string({ required_error: MODEL_MESSAGE, invalid_type_error: MODEL_MESSAGE })
  .min(1, { message: MODEL_MESSAGE })
  .max(200, { message: MODEL_MESSAGE })
  .refine((m) => !m.includes(":"), { message: "model suffixes (`model:option=…`) are not accepted." })
  .openapi({ description: "a live id from GET /v1/models, optionally `svc/`-prefixed", example: "qwen3-4b" });

/** SPEC naming: a model id may carry this prefix in requests; responses always use the bare slug. */
export const SVC_MODEL_PREFIX = "svc/";

/** `svc/foo` → `foo`; a bare slug is returned unchanged. */
export function bareModelId(id: string): string {
  return id.startsWith(SVC_MODEL_PREFIX) ? id.slice(SVC_MODEL_PREFIX.length) : id;
}
