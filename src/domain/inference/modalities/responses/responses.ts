import { documentedBody } from "../../../../adapters/upstream/reference.js";
import { type Json, parseResponsesRequest, type ResponsesRequest } from "../../../../contract/inference.js";
import { textPricer, textPromptEstimate } from "../../pipeline/admission.js";
import type { InferenceModality } from "../../pipeline/endpoint.js";
import { approxDefinitionTokens, approxItemTokens, usageOf, usageWithCost } from "../../settlement/usage.js";
import { ResponsesStream, withoutExtras } from "./responses-stream.js";

export type { ResponsesRequest };

/**
 * `instructions` is not in the upstream's Responses body: it goes as what OpenAI defines it to be, a
 * system message ahead of the input (a string input becomes that message and one user message); empty
 * instructions add nothing.
 */
export function inputWithInstructions(input: string | unknown[], instructions: string | undefined): string | unknown[] {
  if (!instructions) return input;
  const system = { role: "system", content: instructions };
  return typeof input === "string" ? [system, { role: "user", content: input }] : [system, ...input];
}

/** What a Responses request sends beside its input that the provider bills as prompt. */
function responsesDefinitions(req: Pick<ResponsesRequest, "body">): Record<string, unknown> {
  return { tools: req.body.tools, tool_choice: req.body.tool_choice };
}

/**
 * The admission estimate (`textPromptEstimate`): the generous bytes/3 rule over the input (and the
 * instructions, if any) and the tool definitions.
 */
export function responsesPromptEstimate(req: Pick<ResponsesRequest, "input" | "instructions" | "body">): number {
  const items = typeof req.input === "string" ? 1 : req.input.length;
  const definitions = responsesDefinitions(req);
  if (req.instructions === undefined) return textPromptEstimate(req.input, items, definitions);
  return textPromptEstimate([req.instructions, req.input], items + 1, definitions);
}

/** The rough upstream-like prompt count (per input item) for billing a stream that ended without usage. */
export function approxResponsesPromptTokens(req: Pick<ResponsesRequest, "input" | "instructions" | "body">): number {
  const text = (v: unknown) => (typeof v === "string" ? v.length : JSON.stringify(v ?? "").length);
  let t =
    (req.instructions ? approxItemTokens(req.instructions.length) : 0) +
    approxDefinitionTokens(responsesDefinitions(req));
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
    // only what the reference documents: storage and background fields (`store`,
    // `previous_response_id`, `background`, `metadata`: the facade is stateless), `user` and other
    // undocumented fields are dropped; `fallbacks` is refused by the contract (here at most empty)
    const { model: _m, max_output_tokens: _mot, fallbacks: _f, ...rest } = documentedBody("/responses", req.body);
    return {
      ...rest,
      input: inputWithInstructions(req.input, req.instructions),
      model: session.model.id,
      max_output_tokens: session.plan.admittedMaxTokens,
      stream,
      venice_parameters: {
        include_venice_system_prompt: false,
        ...((rest.venice_parameters as Json | null | undefined) ?? {}),
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
