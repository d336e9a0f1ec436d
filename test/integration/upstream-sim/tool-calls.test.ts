import { afterEach, beforeEach, describe, expect, test } from "vitest";
import {
  countDefinitionTokens,
  countPromptTokens,
  type UpstreamSimulator,
} from "../../../src/local/upstream-sim/index.js";
import {
  parseToolCallDirective,
  planToolCall,
  sampleArguments,
  toolCallTokens,
} from "../../../src/local/upstream-sim/tokens.js";
import { diemOf, jsonFrames, parseSse, post, startSim } from "../../../testkit/upstream-sim.js";

/** The simulator's tool calls (its README "Tool calls"): when it calls a tool, which one, with what. */

const WEATHER = {
  type: "function",
  function: {
    name: "get_weather",
    parameters: {
      type: "object",
      properties: {
        city: { type: "string" },
        unit: { type: "string", enum: ["celsius", "fahrenheit"] },
        days: { type: "integer" },
      },
      required: ["city", "unit"],
    },
  },
};
const CLOCK = { type: "function", function: { name: "now", parameters: { type: "object", properties: {} } } };
const ask = (text: string) => [{ role: "user", content: text }];

describe("planToolCall", () => {
  test("the directive calls the first tool, or the one it names, with sample arguments", () => {
    expect(planToolCall({ tools: [WEATHER, CLOCK] }, ask("go [[sim:tool_call]]"))).toEqual({
      name: "get_weather",
      arguments: '{"city":"sim","unit":"celsius"}',
    });
    expect(planToolCall({ tools: [WEATHER, CLOCK] }, ask("go [[sim:tool_call=now]]"))).toEqual({
      name: "now",
      arguments: "{}",
    });
    // a name no tool has: the first tool
    expect(planToolCall({ tools: [WEATHER] }, ask("[[sim:tool_call=nope]]"))?.name).toBe("get_weather");
  });

  test("tool_choice required or a named function forces a call without the directive", () => {
    expect(planToolCall({ tools: [WEATHER, CLOCK], tool_choice: "required" }, ask("x"))?.name).toBe("get_weather");
    const named = { type: "function", function: { name: "now" } };
    expect(planToolCall({ tools: [WEATHER, CLOCK], tool_choice: named }, ask("x"))?.name).toBe("now");
  });

  test("no call: no tools, tool_choice none, no directive, or the last message is a tool result", () => {
    expect(planToolCall({}, ask("[[sim:tool_call]]"))).toBeUndefined();
    expect(planToolCall({ tools: [WEATHER], tool_choice: "none" }, ask("[[sim:tool_call]]"))).toBeUndefined();
    expect(planToolCall({ tools: [WEATHER], tool_choice: "auto" }, ask("plain"))).toBeUndefined();
    const answered = [
      ...ask("[[sim:tool_call]]"),
      { role: "assistant", content: null, tool_calls: [] },
      { role: "tool", tool_call_id: "c", content: "18" },
    ];
    expect(planToolCall({ tools: [WEATHER] }, answered)).toBeUndefined();
  });

  test("directive parsing: the bare form, a name, the last one wins", () => {
    expect(parseToolCallDirective(ask("none"))).toBeUndefined();
    expect(parseToolCallDirective(ask("[[sim:tool_call]]"))).toBe(true);
    expect(parseToolCallDirective([...ask("[[sim:tool_call=a]]"), ...ask("[[sim:tool_call=b_2]]")])).toBe("b_2");
  });

  test("sample arguments: required properties (else all), enum's first value, one value per type", () => {
    expect(sampleArguments(WEATHER.function.parameters)).toBe('{"city":"sim","unit":"celsius"}');
    const all = { type: "object", properties: { n: { type: "number" }, b: { type: "boolean" }, l: { type: "array" } } };
    expect(sampleArguments(all)).toBe('{"n":1,"b":true,"l":[]}');
    expect(sampleArguments(undefined)).toBe("{}");
  });

  test("tokens: ceil((name + arguments) / 4), at least 1", () => {
    expect(toolCallTokens({ name: "get_weather", arguments: '{"city":"sim","unit":"celsius"}' })).toBe(
      Math.ceil((11 + 31) / 4),
    );
    expect(toolCallTokens({ name: "", arguments: "" })).toBe(1);
  });
});

describe("POST /chat/completions with a tool call", () => {
  let sim: UpstreamSimulator;
  beforeEach(async () => {
    sim = await startSim([{ key: "k1", diemMicro: 50_000_000n }]);
  });
  afterEach(async () => {
    await sim.close();
  });

  const ARGS = '{"city":"sim","unit":"celsius"}';
  const CALL_TOKENS = toolCallTokens({ name: "get_weather", arguments: ARGS });

  test("buffered: tool_calls, content null, finish_reason tool_calls, the call's tokens billed", async () => {
    const messages = ask("Weather? [[sim:tool_call]]");
    const before = diemOf(sim);
    const res = await post(sim, "/chat/completions", { model: "zai-org-glm-5-1", messages, tools: [WEATHER] });
    expect(res.status).toBe(200);
    const body = (await res.json()) as {
      choices: { message: Record<string, unknown>; finish_reason: string }[];
      usage: { prompt_tokens: number; completion_tokens: number };
    };
    const choice = body.choices[0];
    expect(choice?.finish_reason).toBe("tool_calls");
    expect(choice?.message.content).toBeNull();
    expect(choice?.message.tool_calls).toEqual([
      {
        id: expect.stringMatching(/^call_[0-9a-f]{24}$/),
        type: "function",
        function: { name: "get_weather", arguments: ARGS },
      },
    ]);
    // the tool definitions are prompt too
    expect(body.usage).toMatchObject({
      prompt_tokens: countPromptTokens(messages) + countDefinitionTokens([WEATHER]),
      completion_tokens: CALL_TOKENS,
    });
    expect(diemOf(sim)).toBeLessThan(before);

    // the result goes back as a `tool` message: the answer is text
    const second = [
      ...messages,
      { role: "assistant", content: null, tool_calls: choice?.message.tool_calls },
      { role: "tool", tool_call_id: "x", content: "18" },
    ];
    const res2 = await post(sim, "/chat/completions", { model: "zai-org-glm-5-1", messages: second, tools: [WEATHER] });
    const body2 = (await res2.json()) as typeof body;
    expect(body2.choices[0]?.finish_reason).toBe("stop");
    expect(typeof body2.choices[0]?.message.content).toBe("string");
    expect(body2.usage.prompt_tokens).toBe(countPromptTokens(second) + countDefinitionTokens([WEATHER]));
  });

  test("streamed: the call's head, its arguments in pieces, finish tool_calls, then usage", async () => {
    const res = await post(sim, "/chat/completions", {
      model: "zai-org-glm-5-1",
      messages: ask("Weather? [[sim:tool_call=get_weather]] [[sim:chunks=4]]"),
      tools: [WEATHER],
      stream: true,
    });
    const chunks = jsonFrames(parseSse(await res.text())) as {
      choices: {
        delta: { tool_calls?: { index: number; id?: string; function: { name?: string; arguments: string } }[] };
        finish_reason: string | null;
      }[];
      usage?: { completion_tokens: number };
    }[];
    const calls = chunks.flatMap((c) => c.choices[0]?.delta.tool_calls ?? []);
    expect(calls[0]).toMatchObject({
      index: 0,
      id: expect.any(String),
      function: { name: "get_weather", arguments: "" },
    });
    expect(calls.length).toBe(5);
    expect(calls.map((c) => c.function.arguments).join("")).toBe(ARGS);
    expect(chunks.map((c) => c.choices[0]?.finish_reason).filter(Boolean)).toEqual(["tool_calls"]);
    expect(chunks.at(-1)?.usage?.completion_tokens).toBe(CALL_TOKENS);
  });
});
