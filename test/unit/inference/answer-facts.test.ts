// Issue 40 deliver 3: what an attempt's span says of the upstream's answer (GenAI conventions), read
// from both answer shapes, each breakdown only when the upstream reported it; and the operation and
// output type per route, from the conventions' defined values only.
import { describe, expect, test } from "vitest";
import { answerFacts, usageDetailsOf } from "../../../src/adapters/upstream/answer-facts.js";
import {
  GENAI_CHAT,
  genAiOperation,
  genAiRequestAttributes,
  genAiResponseAttributes,
} from "../../../src/domain/inference/pipeline/pipeline-trace.js";
import type { RouteKind } from "../../../src/domain/inference/pipeline/session.js";

describe("answerFacts", () => {
  test("a chat completion: id, model, one finish reason per choice, every breakdown", () => {
    const facts = answerFacts({
      id: "chatcmpl-1",
      model: "zai-org-glm-5-1",
      choices: [
        { index: 0, finish_reason: "stop" },
        { index: 1, finish_reason: "length" },
      ],
      usage: {
        prompt_tokens: 100,
        completion_tokens: 40,
        prompt_tokens_details: { cached_tokens: 60, cache_creation_input_tokens: 25 },
        completion_tokens_details: { reasoning_tokens: 12 },
      },
    });
    expect(facts).toEqual({
      id: "chatcmpl-1",
      model: "zai-org-glm-5-1",
      finishReasons: ["stop", "length"],
      cacheReadTokens: 60,
      cacheCreationTokens: 25,
      reasoningTokens: 12,
    });
  });

  test("a breakdown the upstream did not send stays unset (not 0)", () => {
    const facts = answerFacts({ id: "x", choices: [{ finish_reason: null }], usage: { prompt_tokens: 3 } });
    expect(facts.finishReasons).toBeUndefined();
    expect(facts.cacheReadTokens).toBeUndefined();
    expect(facts.cacheCreationTokens).toBeUndefined();
    expect(facts.reasoningTokens).toBeUndefined();
    expect(facts.model).toBeUndefined();
  });

  test("a Responses object: its final status, or why it is incomplete; output details", () => {
    expect(
      answerFacts({
        id: "resp_1",
        status: "completed",
        usage: { input_tokens_details: { cached_tokens: 4 }, output_tokens_details: { reasoning_tokens: 7 } },
      }),
    ).toMatchObject({ id: "resp_1", finishReasons: ["completed"], cacheReadTokens: 4, reasoningTokens: 7 });
    expect(
      answerFacts({ status: "incomplete", incomplete_details: { reason: "max_output_tokens" } }).finishReasons,
    ).toEqual(["max_output_tokens"]);
    expect(answerFacts({ status: "in_progress" }).finishReasons).toBeUndefined();
  });

  test("Anthropic's top-level cache_creation_input_tokens is read; nonsense counts are not", () => {
    expect(usageDetailsOf({ cache_creation_input_tokens: 9 }).cacheCreationTokens).toBe(9);
    expect(
      usageDetailsOf({
        prompt_tokens_details: { cached_tokens: -1 },
        completion_tokens_details: { reasoning_tokens: "2" },
      }),
    ).toEqual({ cacheReadTokens: undefined, cacheCreationTokens: undefined, reasoningTokens: undefined });
    expect(usageDetailsOf(null)).toEqual({});
  });
});

describe("GenAI attributes", () => {
  const ROUTES: RouteKind[] = ["chat", "responses", "image", "images_openai", "video_queue"];

  test.each(ROUTES)("%s: a defined operation, and an output type only from the defined values", (route) => {
    const op = genAiOperation(route);
    expect(["chat", "generate_content"]).toContain(op.name);
    if (op.output !== undefined) expect(["text", "json", "image", "speech"]).toContain(op.output);
  });

  test("chat routes are `chat` producing text; a video has no output type", () => {
    expect(genAiOperation("chat")).toEqual(GENAI_CHAT);
    expect(genAiOperation("responses")).toEqual(GENAI_CHAT);
    expect(genAiOperation("video_queue").output).toBeUndefined();
  });

  test("request: gen_ai.request.stream only when streaming; never gen_ai.system", () => {
    const buffered = genAiRequestAttributes(GENAI_CHAT, { model: "m", maxTokens: 10, stream: false });
    const streamed = genAiRequestAttributes(GENAI_CHAT, { model: "m", maxTokens: 10, stream: true });
    expect(buffered["gen_ai.request.stream"]).toBeUndefined();
    expect(streamed["gen_ai.request.stream"]).toBe(true);
    expect(streamed).toMatchObject({
      "gen_ai.operation.name": "chat",
      "gen_ai.output.type": "text",
      "gen_ai.provider.name": "venice",
      "gen_ai.request.model": "m",
      "gen_ai.request.max_tokens": 10,
    });
    expect(Object.keys(streamed)).not.toContain("gen_ai.system");
  });

  test("response: the facts and the reported usage under the conventions' names", () => {
    expect(
      genAiResponseAttributes(
        {
          id: "chatcmpl-1",
          model: "m",
          finishReasons: ["stop"],
          cacheReadTokens: 1,
          cacheCreationTokens: 2,
          reasoningTokens: 3,
          timeToFirstChunkSeconds: 0.25,
        },
        { promptTokens: 10, completionTokens: 20 },
      ),
    ).toEqual({
      "gen_ai.response.id": "chatcmpl-1",
      "gen_ai.response.model": "m",
      "gen_ai.response.finish_reasons": ["stop"],
      "gen_ai.response.time_to_first_chunk": 0.25,
      "gen_ai.usage.input_tokens": 10,
      "gen_ai.usage.output_tokens": 20,
      "gen_ai.usage.cache_read.input_tokens": 1,
      "gen_ai.usage.cache_creation.input_tokens": 2,
      "gen_ai.usage.reasoning.output_tokens": 3,
    });
  });
});
