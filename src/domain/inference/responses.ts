import { type Json, parseResponsesRequest, type ResponsesRequest } from "../../contract/inference.js";
import { estimatePromptTokens, textPricer } from "./admission.js";
import type { InferenceModality } from "./endpoint.js";
import { ResponsesStream, withoutExtras } from "./responses-stream.js";
import { approxItemTokens, usageOf, usageWithCost } from "./usage.js";

export type { ResponsesRequest };

/** Request fields that ask for storage or background work: the facade is stateless, so they are dropped. */
const STATELESS_DROPPED = ["store", "previous_response_id", "background", "metadata"] as const;

/** The admission estimate: the generous bytes/3 rule over the input (and the instructions, if any). */
export function responsesPromptEstimate(req: Pick<ResponsesRequest, "input" | "instructions">): number {
  const items = typeof req.input === "string" ? 1 : req.input.length;
  if (req.instructions === undefined) return estimatePromptTokens(req.input, items);
  return estimatePromptTokens([req.instructions, req.input], items + 1);
}

/** The rough upstream-like prompt count (per input item) for billing a stream that ended without usage. */
export function approxResponsesPromptTokens(req: Pick<ResponsesRequest, "input" | "instructions">): number {
  const text = (v: unknown) => (typeof v === "string" ? v.length : JSON.stringify(v ?? "").length);
  let t = req.instructions ? approxItemTokens(req.instructions.length) : 0;
  if (typeof req.input === "string") return t + approxItemTokens(req.input.length);
  for (const item of req.input) {
    const x = item as Json;
    t += approxItemTokens(text(x.content ?? x.output ?? x.arguments ?? x));
  }
  return t;
}

/**
 * The stateless OpenAI Responses facade as a modality, on the same pipeline as chat (SPEC
 * "Inference" POST /v1/responses, "Events" Responses SSE): same key, prepaid debit, catalog and
 * fall-forward. Buffered answers carry the cost headers; streams end in `response.completed` or
 * `response.incomplete` with flat cost fields, or `response.failed` (see responses-stream.ts).
 */
export const responsesModality: InferenceModality<ResponsesRequest> = {
  route: "responses",
  modality: "text",
  path: "/responses",
  parse: parseResponsesRequest,
  price: (req, model) => textPricer(model, responsesPromptEstimate(req), req.maxTokens),
  upstreamBody(req, session, stream) {
    const rest: Json = { ...req.body };
    for (const k of [...STATELESS_DROPPED, "model", "max_output_tokens", "max_tokens", "max_completion_tokens", "user"])
      delete rest[k];
    return {
      ...rest,
      model: session.model.id,
      max_output_tokens: session.plan.admittedMaxTokens,
      stream,
      venice_parameters: {
        include_venice_system_prompt: false,
        ...((req.body.venice_parameters as Json | null | undefined) ?? {}),
      },
    };
  },
  // an `incomplete` response (cut at max_output_tokens) consumed tokens: settled like any other
  meter: (answer) =>
    answer.status === "failed"
      ? { refused: "upstream response failed" }
      : (usageOf(answer.usage) ?? { refused: "upstream answer without usage" }),
  answer(answer, _req, _session, settled) {
    const body = withoutExtras(answer);
    return { ...body, usage: usageWithCost(body.usage, settled) };
  },
  renderer: (req, session) => new ResponsesStream(session, approxResponsesPromptTokens(req)),
};
