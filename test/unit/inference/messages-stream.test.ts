import { describe, expect, test } from "vitest";
import { MessagesStream } from "../../../src/domain/inference/modalities/messages/messages-stream.js";
import type { InferenceSession, Settled } from "../../../src/domain/inference/pipeline/session.js";
import type { FrameVerdict, StreamRelay } from "../../../src/domain/inference/pipeline/stream-relay.js";
import { DomainError } from "../../../src/lib/errors.js";
import type { SseFrame } from "../../../src/lib/sse.js";

/**
 * The Messages stream renderer over a relay that replays upstream chat chunks: the events it
 * writes, which of them commit the stream, and its endings (docs/decisions.md "Anthropic Messages API").
 */

type Json = Record<string, unknown>;

class ReplayRelay {
  readonly written: { frame: string; content: boolean }[] = [];
  committed = false;
  failed: string | undefined;
  constructor(private readonly frames: SseFrame[]) {}

  async pump(on: (f: SseFrame) => FrameVerdict | undefined | Promise<FrameVerdict | undefined>) {
    for (const f of this.frames) {
      const v = await on(f);
      if (v) return v;
    }
    return "stop" as const;
  }

  emit(frame: string, content: boolean) {
    this.written.push({ frame, content });
    if (content) this.committed = true;
  }

  failBeforeContent(detail: string) {
    this.failed = detail;
    return "retry" as const;
  }
}

const SESSION = {
  requestId: "11111111-2222-4333-8444-555555555555",
  supportReference: "0b4f3a52-5d0e-4f43-9a43-8d6d5d3c1a11",
  model: { id: "zai-org-glm-5-1" },
} as unknown as InferenceSession;

const SETTLED: Settled = {
  costMicroUsdc: 2_000n,
  clearingPriceCents: 40,
  burnMicroDiem: 4_545n,
  balanceRemainingMicroUsdc: 1n,
  supportReference: SESSION.supportReference,
  requestId: SESSION.requestId,
};

const chunk = (delta: Json, finish: string | null = null, extra: Json = {}): SseFrame => ({
  data: JSON.stringify({
    id: "c",
    object: "chat.completion.chunk",
    choices: [{ index: 0, delta, finish_reason: finish, ...extra }],
  }),
});
const usage = (prompt: number, completion: number): SseFrame => ({
  data: JSON.stringify({ choices: [], usage: { prompt_tokens: prompt, completion_tokens: completion } }),
});
const DONE: SseFrame = { data: "[DONE]" };

function parse(text: string): { event: string; json: Json }[] {
  return text
    .split("\n\n")
    .filter((b) => b.length > 0)
    .map((b) => {
      const [ev, data] = b.split("\n");
      return { event: (ev ?? "").slice(7), json: JSON.parse((data ?? "").slice(6)) as Json };
    });
}

async function run(frames: SseFrame[], o: { thinking?: boolean; stops?: string[] } = {}) {
  const relay = new ReplayRelay(frames);
  const stream = new MessagesStream(
    SESSION,
    { messages: [{ role: "user", content: "hi" }] },
    {
      thinking: o.thinking ?? false,
      stopSequences: o.stops,
    },
  );
  const outcome = await stream.relayAttempt(relay as unknown as StreamRelay);
  const events = parse(relay.written.map((w) => w.frame).join(""));
  return { relay, stream, outcome, events };
}

describe("MessagesStream", () => {
  test("thinking (when asked for), text and two tool calls: sequential blocks, indices, deltas", async () => {
    const { outcome, events, stream, relay } = await run(
      [
        chunk({ role: "assistant", content: "" }),
        chunk({ reasoning_content: "hmm" }),
        chunk({ content: "Let me check." }),
        chunk({ tool_calls: [{ index: 0, id: "call_a", type: "function", function: { name: "f", arguments: "" } }] }),
        chunk({ tool_calls: [{ index: 0, function: { arguments: '{"x":' } }] }),
        chunk({ tool_calls: [{ index: 0, function: { arguments: "1}" } }] }),
        chunk({ tool_calls: [{ index: 1, id: "call_b", type: "function", function: { name: "g", arguments: "{}" } }] }),
        chunk({}, "tool_calls"),
        usage(12, 7),
        DONE,
      ],
      { thinking: true },
    );
    expect(outcome).toEqual({ verdict: "finished", usage: { promptTokens: 12, completionTokens: 7, cachedTokens: 0 } });
    expect(events.map((e) => [e.event, e.json.index ?? null])).toEqual([
      ["message_start", null],
      ["ping", null],
      ["content_block_start", 0],
      ["content_block_delta", 0],
      ["content_block_stop", 0],
      ["content_block_start", 1],
      ["content_block_delta", 1],
      ["content_block_stop", 1],
      ["content_block_start", 2],
      ["content_block_delta", 2],
      ["content_block_delta", 2],
      ["content_block_stop", 2],
      ["content_block_start", 3],
      ["content_block_delta", 3],
      ["content_block_stop", 3],
    ]);
    expect(events[2]?.json.content_block).toEqual({ type: "thinking", thinking: "", signature: "" });
    expect(events[3]?.json.delta).toEqual({ type: "thinking_delta", thinking: "hmm" });
    expect(events[6]?.json.delta).toEqual({ type: "text_delta", text: "Let me check." });
    expect(events[8]?.json.content_block).toEqual({ type: "tool_use", id: "call_a", name: "f", input: {} });
    expect(events[9]?.json.delta).toEqual({ type: "input_json_delta", partial_json: '{"x":' });
    // message_start and ping are held until content: they do not commit the stream
    expect(relay.written[0]?.content).toBe(false);
    const closing = parse(stream.completedFrames(SETTLED));
    expect(closing.map((e) => e.event)).toEqual(["message_delta", "message_stop"]);
    expect(closing[0]?.json).toMatchObject({
      delta: { stop_reason: "tool_use", stop_sequence: null },
      usage: { input_tokens: 12, output_tokens: 7, cost: 0.002, cost_details: { cost_usdc: "0.002000" } },
      costUsdc: "0.002000",
      clearingPriceCents: 40,
      supportReference: SESSION.supportReference,
    });
    // relayed characters: reasoning, text and arguments
    expect(stream.incomplete().relayedChars).toBe(3 + 13 + 7 + 2);
  });

  test("reasoning not asked for is not shown: one ping commits the stream", async () => {
    const { events, relay } = await run([
      chunk({ reasoning_content: "a" }),
      chunk({ reasoning_content: "b" }),
      chunk({ content: "Done." }),
      chunk({}, "stop"),
      usage(3, 4),
      DONE,
    ]);
    expect(events.map((e) => e.event)).toEqual([
      "message_start",
      "ping",
      "ping",
      "content_block_start",
      "content_block_delta",
      "content_block_stop",
    ]);
    expect(relay.written.find((w) => w.frame.includes('"ping"') && w.content)).toBeDefined();
    expect(JSON.stringify(events)).not.toContain("thinking");
  });

  test("a matched stop sequence; an open block closed by the closing frames when no finish came", async () => {
    const { stream } = await run(
      [chunk({ content: "x" }, null), chunk({}, "stop", { stop_reason: "END" }), usage(1, 1), DONE],
      {
        stops: ["END"],
      },
    );
    const closing = parse(stream.completedFrames(SETTLED));
    expect(closing[0]?.json.delta).toEqual({ stop_reason: "stop_sequence", stop_sequence: "END" });
    const open = await run([chunk({ content: "x" }), usage(1, 1), DONE]);
    expect(parse(open.stream.completedFrames(SETTLED)).map((e) => e.event)).toEqual([
      "content_block_stop",
      "message_delta",
      "message_stop",
    ]);
  });

  test("an empty answer (usage alone) is still a whole message", async () => {
    const { outcome, events, stream } = await run([usage(5, 0), DONE]);
    expect(outcome.usage).toEqual({ promptTokens: 5, completionTokens: 0, cachedTokens: 0 });
    expect(events).toEqual([]);
    expect(stream.emptyAnswerIsResult).toBe(true);
    expect(parse(stream.completedFrames(SETTLED)).map((e) => e.event)).toEqual([
      "message_start",
      "ping",
      "message_delta",
      "message_stop",
    ]);
  });

  test("an upstream error before content falls forward; after content it cuts the stream", async () => {
    const before = await run([chunk({ role: "assistant" }), { data: JSON.stringify({ error: { message: "x" } }) }]);
    expect(before.outcome.verdict).toBe("retry");
    expect(before.relay.failed).toContain("before content");
    const after = await run([chunk({ content: "abc" }), { data: JSON.stringify({ error: { message: "x" } }) }]);
    expect(after.outcome).toEqual({ verdict: "stop", usage: undefined });
  });

  test("endings: stream_incomplete with the cost; a settlement failure without it", () => {
    const stream = new MessagesStream(SESSION, { messages: [] }, { thinking: false, stopSequences: undefined });
    const [incomplete] = parse(stream.incompleteFrames(SETTLED));
    expect(incomplete).toEqual({
      event: "error",
      json: {
        type: "error",
        error: {
          type: "api_error",
          code: "stream_incomplete",
          message: expect.any(String),
          supportReference: SESSION.supportReference,
          details: { error_code: "stream_incomplete" },
        },
        costUsdc: "0.002000",
        clearingPriceCents: 40,
        supportReference: SESSION.supportReference,
      },
    });
    const [failed] = parse(stream.errorFrame(new DomainError("settle_failed", "Settlement failed.")));
    expect(failed?.json).toEqual({
      type: "error",
      error: {
        type: "api_error",
        code: "settle_failed",
        message: "Settlement failed.",
        supportReference: SESSION.supportReference,
        details: { error_code: "settle_failed" },
      },
    });
    const [unknown] = parse(stream.errorFrame(new Error("boom")));
    expect(unknown?.json.error).toMatchObject({ code: "internal_error", type: "api_error" });
    expect(JSON.stringify(unknown)).not.toContain("boom");
  });
});
