import { describe, expect, test } from "vitest";
import { parseMessagesRequest } from "../../../src/contract/messages.js";
import { messagesModality } from "../../../src/domain/inference/modalities/messages/messages.js";
import {
  anthropicMessageOf,
  anthropicUsage,
  chatPromptOf,
  contentBlocksOf,
  messagesPromptEstimate,
  stopReasonOf,
  toolInputOf,
} from "../../../src/domain/inference/modalities/messages/messages-translate.js";
import { estimatePromptTokens } from "../../../src/domain/inference/pipeline/admission.js";
import type { InferenceSession, Settled } from "../../../src/domain/inference/pipeline/session.js";

type Json = Record<string, unknown>;

const base = { model: "m", max_tokens: 100 };
const prompt = (body: Json) => chatPromptOf(parseMessagesRequest({ ...base, ...body }));

const SETTLED: Settled = {
  costMicroUsdc: 1_234n,
  clearingPriceCents: 45,
  burnMicroDiem: 2_500n,
  balanceRemainingMicroUsdc: 9_000_000n,
  supportReference: "0b4f3a52-5d0e-4f43-9a43-8d6d5d3c1a11",
  requestId: "11111111-2222-4333-8444-555555555555",
};

describe("chatPromptOf: Anthropic's prompt as the upstream's chat messages", () => {
  test("a string system and string turns pass as they are", () => {
    expect(
      prompt({
        system: "Be brief.",
        messages: [
          { role: "user", content: "hi" },
          { role: "assistant", content: "hello" },
          { role: "user", content: "bye" },
        ],
      }),
    ).toEqual({
      messages: [
        { role: "system", content: "Be brief." },
        { role: "user", content: "hi" },
        { role: "assistant", content: "hello" },
        { role: "user", content: "bye" },
      ],
    });
  });

  test("system blocks are joined by a blank line; cache_control is not forwarded; an empty system is none", () => {
    const p = prompt({
      system: [
        { type: "text", text: "You are Claude Code.", cache_control: { type: "ephemeral" } },
        { type: "text", text: "Be careful." },
      ],
      messages: [{ role: "user", content: [{ type: "text", text: "hi", cache_control: { type: "ephemeral" } }] }],
    });
    expect(p.messages).toEqual([
      { role: "system", content: "You are Claude Code.\n\nBe careful." },
      { role: "user", content: "hi" },
    ]);
    expect(JSON.stringify(p)).not.toContain("cache_control");
    expect(prompt({ system: "", messages: [{ role: "user", content: "x" }] }).messages).toEqual([
      { role: "user", content: "x" },
    ]);
  });

  test("a system message in the conversation (Claude Code's environment) stays a system message there", () => {
    const p = prompt({
      system: "Top.",
      messages: [
        { role: "user", content: "hi" },
        { role: "system", content: [{ type: "text", text: "# Environment", cache_control: { type: "ephemeral" } }] },
        { role: "system", content: "" },
      ],
    });
    expect(p.messages).toEqual([
      { role: "system", content: "Top." },
      { role: "user", content: "hi" },
      { role: "system", content: "# Environment" },
    ]);
  });

  test("images: base64 as a data: URL, a URL as it is, beside the text parts; empty text parts dropped", () => {
    const p = prompt({
      messages: [
        {
          role: "user",
          content: [
            { type: "text", text: "What is this?" },
            { type: "text", text: "" },
            { type: "image", source: { type: "base64", media_type: "image/png", data: "iVBORw0KGgo=" } },
            { type: "image", source: { type: "url", url: "https://example.com/cat.jpg" } },
          ],
        },
      ],
    });
    expect(p.messages).toEqual([
      {
        role: "user",
        content: [
          { type: "text", text: "What is this?" },
          { type: "image_url", image_url: { url: "data:image/png;base64,iVBORw0KGgo=" } },
          { type: "image_url", image_url: { url: "https://example.com/cat.jpg" } },
        ],
      },
    ]);
  });

  test("tool_use as tool_calls; tool_result as tool messages first, then the turn's own text", () => {
    const p = prompt({
      messages: [
        { role: "user", content: "Weather in Paris and Oslo?" },
        {
          role: "assistant",
          content: [
            { type: "thinking", thinking: "two calls", signature: "sig" },
            { type: "text", text: "Checking." },
            { type: "tool_use", id: "call_1", name: "get_weather", input: { city: "Paris" } },
            { type: "tool_use", id: "call_2", name: "get_weather", input: { city: "Oslo" } },
          ],
        },
        {
          role: "user",
          content: [
            { type: "tool_result", tool_use_id: "call_1", content: "18°C" },
            {
              type: "tool_result",
              tool_use_id: "call_2",
              is_error: true,
              content: [
                { type: "text", text: "station " },
                { type: "text", text: "offline" },
                { type: "image", source: { type: "url", url: "https://example.com/map.png" } },
              ],
            },
            { type: "text", text: "Summarise." },
          ],
        },
      ],
    });
    expect(p.messages).toEqual([
      { role: "user", content: "Weather in Paris and Oslo?" },
      {
        role: "assistant",
        content: "Checking.",
        tool_calls: [
          { id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } },
          { id: "call_2", type: "function", function: { name: "get_weather", arguments: '{"city":"Oslo"}' } },
        ],
      },
      { role: "tool", tool_call_id: "call_1", content: "18°C" },
      { role: "tool", tool_call_id: "call_2", content: "station offline" },
      {
        role: "user",
        content: [
          { type: "image_url", image_url: { url: "https://example.com/map.png" } },
          { type: "text", text: "Summarise." },
        ],
      },
    ]);
  });

  test("an assistant turn of tool calls alone has null content; a turn of thinking alone is dropped", () => {
    const p = prompt({
      messages: [
        { role: "user", content: "x" },
        { role: "assistant", content: [{ type: "redacted_thinking", data: "…" }] },
        { role: "assistant", content: [{ type: "tool_use", id: "t", name: "f", input: {} }] },
        { role: "user", content: [{ type: "tool_result", tool_use_id: "t" }] },
      ],
    });
    expect(p.messages).toEqual([
      { role: "user", content: "x" },
      {
        role: "assistant",
        content: null,
        tool_calls: [{ id: "t", type: "function", function: { name: "f", arguments: "{}" } }],
      },
      { role: "tool", tool_call_id: "t", content: "" },
    ]);
  });

  test.each([
    [{ type: "auto" }, "auto", undefined],
    [{ type: "any" }, "required", undefined],
    [{ type: "none" }, "none", undefined],
    [{ type: "tool", name: "get_weather" }, { type: "function", function: { name: "get_weather" } }, undefined],
    [{ type: "auto", disable_parallel_tool_use: true }, "auto", false],
  ])("tools as functions; tool_choice %j → %j", (choice, expected, parallel) => {
    const p = prompt({
      messages: [{ role: "user", content: "x" }],
      tools: [
        { name: "get_weather", description: "The weather.", input_schema: { type: "object" }, cache_control: {} },
        { name: "bare", input_schema: { type: "object", properties: {} }, type: "custom" },
      ],
      tool_choice: choice,
    });
    expect(p.tools).toEqual([
      {
        type: "function",
        function: { name: "get_weather", description: "The weather.", parameters: { type: "object" } },
      },
      { type: "function", function: { name: "bare", parameters: { type: "object", properties: {} } } },
    ]);
    expect(p.tool_choice).toEqual(expected);
    expect(p.parallel_tool_calls).toBe(parallel);
  });

  test("a tool_choice without tools is not sent", () => {
    expect(prompt({ messages: [{ role: "user", content: "x" }], tool_choice: { type: "any" } })).toEqual({
      messages: [{ role: "user", content: "x" }],
    });
  });
});

describe("the upstream body: only documented chat fields", () => {
  const session = {
    requestId: SETTLED.requestId,
    model: { id: "zai-org-glm-5-1" },
    plan: { admittedMaxTokens: 77 },
  } as unknown as InferenceSession;

  test("the admitted cap, the sampling fields, stop, usage in streams; nothing else of the buyer's body", () => {
    const req = parseMessagesRequest({
      model: "svc/zai-org-glm-5-1",
      max_tokens: 500,
      messages: [{ role: "user", content: "hi" }],
      stop_sequences: ["END"],
      temperature: 0.2,
      top_p: 0.9,
      top_k: 5,
      metadata: { user_id: "u" },
      thinking: { type: "enabled", budget_tokens: 1024 },
      service_tier: "auto",
      anything: 1,
      svc: { maxPriceCentsPerDollar: 50 },
    });
    expect(req.maxPriceCents).toBe(50);
    const streamed = messagesModality.upstreamBody(req, session, true);
    expect(streamed).toEqual({
      model: "zai-org-glm-5-1",
      messages: [{ role: "user", content: "hi" }],
      max_completion_tokens: 77,
      stream: true,
      stream_options: { include_usage: true },
      stop: ["END"],
      temperature: 0.2,
      top_p: 0.9,
      top_k: 5,
      venice_parameters: { include_venice_system_prompt: false },
    });
    const buffered = messagesModality.upstreamBody(req, session, false);
    expect(buffered.stream).toBe(false);
    expect(buffered).not.toHaveProperty("stream_options");
  });
});

describe("the prompt estimate (admission and count_tokens)", () => {
  test("bytes/3 + 16 per message over the translated messages and the tools", () => {
    const p = prompt({
      system: "S",
      messages: [{ role: "user", content: "hello" }],
      tools: [{ name: "f", input_schema: { type: "object" } }],
    });
    expect(messagesPromptEstimate(p)).toBe(estimatePromptTokens({ messages: p.messages, tools: p.tools }, 2));
    const plain = prompt({ messages: [{ role: "user", content: "hello" }] });
    expect(messagesPromptEstimate(plain)).toBe(estimatePromptTokens(plain.messages, 1));
    // it covers the upstream-like count (4 + chars/4 per message)
    expect(messagesPromptEstimate(plain)).toBeGreaterThanOrEqual(4 + Math.ceil("hello".length / 4));
  });
});

describe("the answer: a chat completion as Anthropic's message", () => {
  test.each([
    ["stop", null, undefined, false, { stop_reason: "end_turn", stop_sequence: null }],
    ["length", null, undefined, false, { stop_reason: "max_tokens", stop_sequence: null }],
    ["tool_calls", null, undefined, false, { stop_reason: "tool_use", stop_sequence: null }],
    ["stop", null, undefined, true, { stop_reason: "tool_use", stop_sequence: null }],
    ["content_filter", null, undefined, false, { stop_reason: "refusal", stop_sequence: null }],
    ["stop", "END", ["END"], false, { stop_reason: "stop_sequence", stop_sequence: "END" }],
    ["stop", "OTHER", ["END"], false, { stop_reason: "end_turn", stop_sequence: null }],
    ["stop", 151645, ["END"], false, { stop_reason: "end_turn", stop_sequence: null }],
  ] as const)("finish %s, matched %j, stops %j, tool calls %s → %j", (finish, matched, stops, tools, expected) => {
    expect(stopReasonOf(finish, matched, stops, tools)).toEqual(expected);
  });

  test("usage: input excludes cache reads and writes; the cost beside it", () => {
    const u = { prompt_tokens: 100, completion_tokens: 20, prompt_tokens_details: { cached_tokens: 30 } };
    expect(anthropicUsage(u)).toEqual({
      input_tokens: 70,
      output_tokens: 20,
      cache_read_input_tokens: 30,
      cache_creation_input_tokens: 0,
    });
    const written = {
      prompt_tokens: 100,
      completion_tokens: 20,
      prompt_tokens_details: { cached_tokens: 30, cache_creation_input_tokens: 50 },
    };
    expect(anthropicUsage(written)).toMatchObject({ input_tokens: 20, cache_creation_input_tokens: 50 });
    expect(anthropicUsage(u, { ...SETTLED, cachedTokens: 30 })).toEqual({
      input_tokens: 70,
      output_tokens: 20,
      cache_read_input_tokens: 30,
      cache_creation_input_tokens: 0,
      cost: 0.001234,
      cost_details: {
        cost_usdc: "0.001234",
        clearing_price_cents: 45,
        upstream_burn_diem: "0.002500",
        cached_tokens: 30,
        cache_write_tokens: 0,
      },
    });
  });

  test("tool arguments: an object as it is, JSON text parsed, anything else {}", () => {
    expect(toolInputOf('{"a":1}')).toEqual({ a: 1 });
    expect(toolInputOf({ a: 2 })).toEqual({ a: 2 });
    expect(toolInputOf("")).toEqual({});
    expect(toolInputOf("[1]")).toEqual({});
    expect(toolInputOf("{broken")).toEqual({});
    expect(toolInputOf(undefined)).toEqual({});
  });

  test("content: thinking only when asked for, then text, then tool_use blocks", () => {
    const message = {
      role: "assistant",
      reasoning_content: "let me think",
      content: "Sure.",
      tool_calls: [{ id: "call_9", type: "function", function: { name: "f", arguments: '{"x":1}' } }],
    };
    expect(contentBlocksOf(message, false)).toEqual([
      { type: "text", text: "Sure." },
      { type: "tool_use", id: "call_9", name: "f", input: { x: 1 } },
    ]);
    expect(contentBlocksOf(message, true)[0]).toEqual({ type: "thinking", thinking: "let me think", signature: "" });
    expect(contentBlocksOf({ content: null, tool_calls: [] }, true)).toEqual([]);
  });

  test("the whole message: id from the request id, the catalog model, stop reason, usage with cost", () => {
    const answer = {
      id: "chatcmpl-1",
      model: "upstream-name",
      choices: [{ index: 0, message: { role: "assistant", content: "Hi." }, finish_reason: "stop" }],
      usage: { prompt_tokens: 9, completion_tokens: 2 },
      cost: { diem: 1 },
    };
    expect(
      anthropicMessageOf(
        answer,
        { requestId: SETTLED.requestId, model: "zai-org-glm-5-1", thinking: false, stopSequences: undefined },
        SETTLED,
      ),
    ).toEqual({
      id: "msg_11111111222243338444555555555555",
      type: "message",
      role: "assistant",
      model: "zai-org-glm-5-1",
      content: [{ type: "text", text: "Hi." }],
      stop_reason: "end_turn",
      stop_sequence: null,
      usage: {
        input_tokens: 9,
        output_tokens: 2,
        cache_read_input_tokens: 0,
        cache_creation_input_tokens: 0,
        cost: 0.001234,
        cost_details: {
          cost_usdc: "0.001234",
          clearing_price_cents: 45,
          upstream_burn_diem: "0.002500",
          cached_tokens: 0,
          cache_write_tokens: 0,
        },
      },
    });
  });
});
