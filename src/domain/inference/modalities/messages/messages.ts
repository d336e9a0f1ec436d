import { type MessagesRequest, parseCountTokensRequest, parseMessagesRequest } from "../../../../contract/messages.js";
import { bareModelId } from "../../../catalog/catalog-service.js";
import type { KeyRules } from "../../../keys/key-period.js";
import { allowModel } from "../../escrow/key-budget.js";
import { textPricer } from "../../pipeline/admission.js";
import type { InferenceModality } from "../../pipeline/endpoint.js";
import type { InferencePipeline } from "../../pipeline/pipeline.js";
import { usageOf } from "../../settlement/usage.js";
import { MessagesStream } from "./messages-stream.js";
import { anthropicMessageOf, type ChatPrompt, chatPromptOf, messagesPromptEstimate } from "./messages-translate.js";

type Json = Record<string, unknown>;

export type { MessagesRequest };

const translated = new WeakMap<MessagesRequest, ChatPrompt>();

/** A request's prompt translated onto chat (messages-translate.ts), once per request: every attempt sends the same. */
export function chatOf(req: MessagesRequest): ChatPrompt {
  let chat = translated.get(req);
  if (!chat) {
    chat = chatPromptOf(req);
    translated.set(req, chat);
  }
  return chat;
}

/**
 * Anthropic's Messages API as a modality (docs/decisions.md "Anthropic Messages API"), on the same
 * pipeline as chat: same key, scopes, budgets, prepaid debit, catalog, clearing and fall-forward.
 * The request is translated onto the upstream's chat completions — only documented chat fields go
 * upstream, the admitted cap as `max_completion_tokens`, stream usage always on, the provider's
 * system prompt off — and priced by tokens × the catalog's rates; the answer is translated back
 * (a buffered message, or Anthropic's SSE events: messages-stream.ts).
 */
export const messagesModality: InferenceModality<MessagesRequest> = {
  route: "messages",
  modality: "text",
  path: "/chat/completions",
  parse: parseMessagesRequest,
  price: (req, model) => textPricer(model, messagesPromptEstimate(chatOf(req)), req.maxTokens),
  upstreamBody(req, session, stream) {
    const out: Json = {
      model: session.model.id,
      ...chatOf(req),
      max_completion_tokens: session.plan.admittedMaxTokens,
      stream,
    };
    if (req.stopSequences && req.stopSequences.length > 0) out.stop = req.stopSequences;
    if (req.temperature !== undefined) out.temperature = req.temperature;
    if (req.topP !== undefined) out.top_p = req.topP;
    if (req.topK !== undefined) out.top_k = req.topK;
    if (stream) out.stream_options = { include_usage: true };
    out.venice_parameters = { include_venice_system_prompt: false };
    return out;
  },
  meter: (answer) => usageOf(answer.usage) ?? { refused: "upstream answer without usage" },
  answer: (answer, req, session, settled) =>
    anthropicMessageOf(
      answer,
      {
        requestId: session.requestId,
        model: session.model.id,
        thinking: req.thinking,
        stopSequences: req.stopSequences,
      },
      settled,
    ),
  renderer: (req, session) =>
    new MessagesStream(session, chatOf(req), { thinking: req.thinking, stopSequences: req.stopSequences }),
};

/**
 * `POST /v1/messages/count_tokens`: the prompt estimate admission makes for the same body
 * (`messagesPromptEstimate`: bytes/3 + 16 per message over what would go upstream), for a live text
 * model the key may call. Free: nothing is admitted, charged or recorded.
 */
export class MessagesTokenCounter {
  constructor(private readonly pipeline: InferencePipeline) {}

  async count(caller: { key?: KeyRules | undefined }, raw: unknown): Promise<{ inputTokens: number }> {
    const req = parseCountTokensRequest(raw);
    const model = await this.pipeline.model(bareModelId(req.model), "text", "messages");
    allowModel(caller.key, model);
    return { inputTokens: messagesPromptEstimate(chatPromptOf(req)) };
  }
}
