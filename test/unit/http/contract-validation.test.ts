// Issue 27 "one validation": every request body is parsed once, by the API contract (src/contract),
// into the typed request REST, GraphQL and MCP hand the domain. A row per rule: the documented 400
// (code invalid_request, the message, the field), and for good bodies the typed request. Where a
// body breaks several rules, the first in the order below is the one named.
import { describe, expect, test } from "vitest";
import { maxPriceBody, parseCeiling } from "../../../src/contract/account.js";
import { capacityQuery, modelStatsQuery, parseStatsWindow } from "../../../src/contract/catalog.js";
import { supportReferenceParam } from "../../../src/contract/common.js";
import { DEFAULT_SIGNUP_KEY_NAME, parseFundingRequest } from "../../../src/contract/funding.js";
import {
  MAX_REQUESTED_TOKENS,
  parseChatRequest,
  parseImageRequest,
  parseOpenAiImageRequest,
  parseResponsesRequest,
  parseVideoJobRef,
  parseVideoRequest,
} from "../../../src/contract/inference.js";
import { parseWith } from "../../../src/contract/parse.js";
import { videoJobArgs } from "../../../src/contract/video-jobs.js";
import { parse } from "../../../src/http/validate.js";
import { DomainError } from "../../../src/lib/errors.js";

type Refusal = { message: string; field?: string };

/** The 400 a parse answers (`{message, field}`), or "ok". */
function answer(f: () => unknown): Refusal | "ok" {
  try {
    f();
    return "ok";
  } catch (e) {
    if (!(e instanceof DomainError)) throw e;
    expect(e.code).toBe("invalid_request");
    expect(e.status).toBe(400);
    return e.details.field === undefined
      ? { message: e.message }
      : { message: e.message, field: e.details.field as string };
  }
}

const refused = (field: string | undefined, message: string): Refusal =>
  field === undefined ? { message } : { message, field };

const M = [{ role: "user", content: "hi" }];
const MODEL = refused("model", "model is required (a live id from /v1/models).");
const CAP = (field: string) => refused(field, `${field} must be an integer from 1 to ${MAX_REQUESTED_TOKENS}.`);
const ADD_ONS = refused(
  "venice_parameters",
  "Web search, scraping and X search are refused: they bill beyond published pricing.",
);
const TOOL = (type: string) => refused("tools", `The ${type} tool is refused: it bills beyond published pricing.`);

describe("chat: parseChatRequest", () => {
  const BODY = refused(undefined, "Body must be a JSON object with model and messages.");
  test.each<[string, unknown, Refusal | "ok"]>([
    ["no body", undefined, BODY],
    ["null", null, BODY],
    ["a string", "hello", BODY],
    ["an array", [M], BODY],
    ["no model", { messages: M }, MODEL],
    ["an empty model", { model: "", messages: M }, MODEL],
    ["a numeric model", { model: 7, messages: M }, MODEL],
    ["a model of 201 characters", { model: "m".repeat(201), messages: M }, MODEL],
    [
      "a model suffix",
      { model: "a:b", messages: M },
      refused("model", "model suffixes (`model:option=…`) are not accepted."),
    ],
    ["no messages", { model: "m" }, refused("messages", "messages must be a non-empty array.")],
    ["empty messages", { model: "m", messages: [] }, refused("messages", "messages must be a non-empty array.")],
    ["messages not a list", { model: "m", messages: "hi" }, refused("messages", "messages must be a non-empty array.")],
    [
      "a message without role",
      { model: "m", messages: [{ content: "x" }] },
      refused("messages.0.role", "messages.0.role: is required"),
    ],
    [
      "stream not a boolean",
      { model: "m", messages: M, stream: "yes" },
      refused("stream", "stream must be a boolean."),
    ],
    ["stream null", { model: "m", messages: M, stream: null }, refused("stream", "stream must be a boolean.")],
    ["n = 2", { model: "m", messages: M, n: 2 }, refused("n", "n must be 1 (one choice per request).")],
    ["n null", { model: "m", messages: M, n: null }, refused("n", "n must be 1 (one choice per request).")],
    ["max_completion_tokens 0", { model: "m", messages: M, max_completion_tokens: 0 }, CAP("max_completion_tokens")],
    [
      "max_completion_tokens 1.5",
      { model: "m", messages: M, max_completion_tokens: 1.5 },
      CAP("max_completion_tokens"),
    ],
    [
      "max_completion_tokens above the cap",
      { model: "m", messages: M, max_completion_tokens: MAX_REQUESTED_TOKENS + 1 },
      CAP("max_completion_tokens"),
    ],
    ["max_tokens a string", { model: "m", messages: M, max_tokens: "64" }, CAP("max_tokens")],
    [
      "max_tokens beside a good max_completion_tokens",
      { model: "m", messages: M, max_completion_tokens: 5, max_tokens: 0 },
      CAP("max_tokens"),
    ],
    ["the cap itself", { model: "m", messages: M, max_tokens: MAX_REQUESTED_TOKENS }, "ok"],
    // several rules broken: the first in order (model, messages, stream, n, paid add-ons, caps)
    [
      "suffix and no messages",
      { model: "a:b", messages: [] },
      refused("model", "model suffixes (`model:option=…`) are not accepted."),
    ],
    [
      "n and tools and a cap",
      { model: "m", messages: M, n: 2, tools: "x", max_tokens: 0 },
      refused("n", "n must be 1 (one choice per request)."),
    ],
    [
      "a paid tool and a cap",
      { model: "m", messages: M, tools: [{ type: "web_search" }], max_tokens: 0 },
      TOOL("web_search"),
    ],
  ])("%s", (_label, body, expected) => {
    expect(answer(() => parseChatRequest(body))).toEqual(expected);
  });

  test("a good body: the typed request, the body as sent", () => {
    const body = {
      model: "svc/m",
      messages: M,
      stream: true,
      max_completion_tokens: 64,
      max_tokens: null,
      temperature: 0.2,
      venice_parameters: { enable_web_search: "off", strip_thinking_response: true },
      tools: [{ type: "function", function: { name: "f" } }],
    };
    const req = parseChatRequest(body);
    expect(req).toEqual({ body, model: "svc/m", stream: true, maxTokens: 64, messages: M });
    expect(req.body).toBe(body);
    expect(parseChatRequest({ model: "m", messages: M, max_tokens: 9 })).toMatchObject({ stream: false, maxTokens: 9 });
    expect(parseChatRequest({ model: "m", messages: M, max_tokens: null })).toMatchObject({ maxTokens: undefined });
  });
});

describe("paid add-ons (SPEC 12): one refusal for chat and Responses", () => {
  const chat = (extra: Record<string, unknown>) => () => parseChatRequest({ model: "m", messages: M, ...extra });
  const responses = (extra: Record<string, unknown>) => () =>
    parseResponsesRequest({ model: "m", input: "hi", ...extra });
  test.each<[string, Record<string, unknown>, Refusal | "ok"]>([
    ["web search on", { venice_parameters: { enable_web_search: "on" } }, ADD_ONS],
    ["web search auto", { venice_parameters: { enable_web_search: "auto" } }, ADD_ONS],
    ["web search off", { venice_parameters: { enable_web_search: "off" } }, "ok"],
    ["web search null", { venice_parameters: { enable_web_search: null } }, "ok"],
    ["web search false", { venice_parameters: { enable_web_search: false } }, "ok"],
    ["scraping", { venice_parameters: { enable_web_scraping: true } }, ADD_ONS],
    ["X search", { venice_parameters: { enable_x_search: true } }, ADD_ONS],
    [
      "a provider character",
      { venice_parameters: { character_slug: "alan-watts" } },
      refused(
        "venice_parameters",
        "venice_parameters.character_slug is refused: a character's prompt is billed as prompt tokens the request does not show, beyond its maximum charge.",
      ),
    ],
    ["no character", { venice_parameters: { character_slug: null } }, "ok"],
    [
      "venice_parameters not an object",
      { venice_parameters: 3 },
      refused("venice_parameters", "venice_parameters must be an object."),
    ],
    [
      "venice_parameters a list",
      { venice_parameters: [] },
      refused("venice_parameters", "venice_parameters must be an object."),
    ],
    ["venice_parameters null", { venice_parameters: null }, "ok"],
    [
      "web_search",
      { web_search: true },
      refused("web_search", "web_search is refused: it bills beyond published pricing."),
    ],
    ["web_search off", { web_search: "off" }, "ok"],
    ["web_search null", { web_search: null }, "ok"],
    ["web_search tool", { tools: [{ type: "web_search" }] }, TOOL("web_search")],
    [
      "web_search_preview tool",
      { tools: [{ type: "web_search_preview_2025_03_11" }] },
      TOOL("web_search_preview_2025_03_11"),
    ],
    ["x_search tool", { tools: [{ type: "x_search" }] }, TOOL("x_search")],
    ["a paid tool after a free one", { tools: [{ type: "function" }, { type: "x_search" }] }, TOOL("x_search")],
    ["function tool", { tools: [{ type: "function", function: { name: "f" } }] }, "ok"],
    ["a tool that is not an object", { tools: ["web_search"] }, "ok"],
    ["tools not an array", { tools: {} }, refused("tools", "tools must be an array.")],
    ["tools null", { tools: null }, "ok"],
  ])("%s → the same answer on both routes", (_label, extra, expected) => {
    expect(answer(chat(extra))).toEqual(expected);
    expect(answer(responses(extra))).toEqual(expected);
  });
});

describe("Responses: parseResponsesRequest", () => {
  const INPUT_ITEMS = refused("input", "input must be a string or a non-empty array of input items.");
  test.each<[string, unknown, Refusal | "ok"]>([
    ["no body", undefined, refused(undefined, "Body must be a JSON object with model and input.")],
    ["no model", { input: "x" }, MODEL],
    ["no input", { model: "m" }, refused("input", "input is required (a string or an array of input items).")],
    [
      "a numeric input",
      { model: "m", input: 3 },
      refused("input", "input is required (a string or an array of input items)."),
    ],
    ["empty input", { model: "m", input: "" }, refused("input", "input must not be empty.")],
    ["an empty list", { model: "m", input: [] }, INPUT_ITEMS],
    ["a list of strings", { model: "m", input: ["a"] }, INPUT_ITEMS],
    [
      "instructions not a string",
      { model: "m", input: "x", instructions: 3 },
      refused("instructions", "instructions must be a string."),
    ],
    ["stream not a boolean", { model: "m", input: "x", stream: 1 }, refused("stream", "stream must be a boolean.")],
    ["max_output_tokens 0", { model: "m", input: "x", max_output_tokens: 0 }, CAP("max_output_tokens")],
    // the caps come before the paid add-ons here
    [
      "a cap and a paid tool",
      { model: "m", input: "x", max_output_tokens: 0, tools: [{ type: "x_search" }] },
      CAP("max_output_tokens"),
    ],
  ])("%s", (_label, body, expected) => {
    expect(answer(() => parseResponsesRequest(body))).toEqual(expected);
  });

  test("a good body: the typed request", () => {
    const items = [{ type: "message", role: "user", content: "hi" }];
    const body = {
      model: "m",
      input: items,
      instructions: "be brief",
      stream: true,
      max_output_tokens: 32,
      store: true,
    };
    expect(parseResponsesRequest(body)).toEqual({
      body,
      model: "m",
      stream: true,
      maxTokens: 32,
      input: items,
      instructions: "be brief",
    });
    expect(parseResponsesRequest({ model: "m", input: "x", instructions: null })).toMatchObject({
      stream: false,
      maxTokens: undefined,
      instructions: undefined,
    });
  });
});

describe("images: parseImageRequest (native) and parseOpenAiImageRequest (OpenAI)", () => {
  const P = { model: "m", prompt: "a fox" };
  const PROMPT = refused("prompt", "prompt must be a non-empty string.");
  test.each<[string, unknown, Refusal | "ok"]>([
    ["no body", undefined, refused(undefined, "Body must be a JSON object with model and prompt.")],
    ["no model", { prompt: "x" }, MODEL],
    ["no prompt", { model: "m" }, PROMPT],
    ["a blank prompt", { model: "m", prompt: "  " }, PROMPT],
    [
      "web search",
      { ...P, enable_web_search: "auto" },
      refused("enable_web_search", "enable_web_search is refused: it bills beyond published pricing."),
    ],
    ["web search off", { ...P, enable_web_search: "off" }, "ok"],
    [
      "the prompt rewrite",
      { ...P, enhance_prompt: true },
      refused("enhance_prompt", "enhance_prompt is refused: its prompt rewrite bills beyond published pricing."),
    ],
    ["the prompt rewrite off", { ...P, enhance_prompt: false }, "ok"],
    ["stream", { ...P, stream: true }, refused("stream", "Image generation does not stream.")],
    ["stream false", { ...P, stream: false }, "ok"],
    [
      "return_binary",
      { ...P, return_binary: true },
      refused("return_binary", "return_binary is not supported: images come back base64 in images[]."),
    ],
    [
      "variants and n differ",
      { ...P, variants: 2, n: 3 },
      refused("variants", "Send variants or n, not both with different values."),
    ],
    [
      "variants and n differ, both out of range",
      { ...P, variants: 5, n: 6 },
      refused("variants", "Send variants or n, not both with different values."),
    ],
    ["variants 5", { ...P, variants: 5 }, refused("variants", "variants must be an integer 1-4.")],
    [
      "the same variants and n, out of range",
      { ...P, variants: 5, n: 5 },
      refused("variants", "variants must be an integer 1-4."),
    ],
    ["n 0", { ...P, n: 0 }, refused("n", "n must be an integer 1-4.")],
    ["an empty resolution", { ...P, resolution: "" }, refused("resolution", "resolution must be a non-empty string.")],
    ["a numeric quality", { ...P, quality: 3 }, refused("quality", "quality must be a non-empty string.")],
    [
      "hide_watermark not a boolean",
      { ...P, hide_watermark: "yes" },
      refused("hide_watermark", "hide_watermark: Expected boolean, received string"),
    ],
  ])("native: %s", (_label, body, expected) => {
    expect(answer(() => parseImageRequest(body))).toEqual(expected);
  });

  test.each<[string, unknown, Refusal | "ok"]>([
    ["no prompt", { model: "m" }, PROMPT],
    ["n 5", { ...P, n: 5 }, refused("n", "n must be an integer 1-4.")],
    [
      "an unknown size",
      { ...P, size: "9x9" },
      refused(
        "size",
        "size must be one of auto, 256x256, 512x512, 1024x1024, 1536x1024, 1024x1536, 1792x1024, 1024x1792.",
      ),
    ],
    ["gif", { ...P, output_format: "gif" }, refused("output_format", "output_format must be png, jpeg or webp.")],
    [
      "response_format",
      { ...P, response_format: "file" },
      refused("response_format", "response_format must be b64_json or url."),
    ],
    ["moderation", { ...P, moderation: "high" }, refused("moderation", "moderation must be auto or low.")],
    ["a numeric quality", { ...P, quality: 3 }, refused("quality", "quality must be a string.")],
    ["quality hd (the model's default)", { ...P, quality: "hd" }, "ok"],
  ])("OpenAI: %s", (_label, body, expected) => {
    expect(answer(() => parseOpenAiImageRequest(body))).toEqual(expected);
  });

  test("good bodies: the native body forwarded with variants and format; OpenAI's translated", () => {
    const native = { ...P, n: 2, seed: 7, resolution: "4K", enable_web_search: false };
    expect(parseImageRequest(native)).toEqual({
      body: native,
      model: "m",
      stream: false,
      forward: { model: "m", prompt: "a fox", seed: 7, resolution: "4K", variants: 2, format: "webp" },
      variants: 2,
      resolution: "4K",
      quality: undefined,
      openai: null,
    });
    const openai = {
      ...P,
      n: 3,
      size: "1024x1536",
      output_format: "jpeg",
      response_format: "url",
      moderation: "low",
      quality: "low",
      style: "vivid",
    };
    expect(parseOpenAiImageRequest(openai)).toEqual({
      body: openai,
      model: "m",
      stream: false,
      forward: { prompt: "a fox", variants: 3, format: "jpeg", safe_mode: false, quality: "low" },
      variants: 3,
      resolution: undefined,
      quality: "low",
      openai: { responseFormat: "url", mime: "image/jpeg", size: [1024, 1536] },
    });
    // the OpenAI route does not stream: `stream: true` reaches the endpoint, which refuses it
    expect(parseOpenAiImageRequest({ ...P, stream: true }).stream).toBe(true);
  });
});

describe("video: parseVideoRequest (the row's constraints are the domain's) and parseVideoJobRef", () => {
  test.each<[string, unknown, Refusal | "ok"]>([
    ["no body", undefined, refused(undefined, "Body must be a JSON object with model and duration.")],
    ["no model", { prompt: "x", duration: "5s" }, MODEL],
    ["ok without duration (the row decides)", { model: "m", prompt: "x" }, "ok"],
    [
      "a blank prompt",
      { model: "m", prompt: " ", duration: "5s" },
      refused("prompt", "prompt must be a non-empty string."),
    ],
    [
      "a numeric prompt",
      { model: "m", prompt: 3, duration: "5s" },
      refused("prompt", "prompt must be a non-empty string."),
    ],
    [
      "a numeric duration",
      { model: "m", duration: 5 },
      refused("duration", "duration must be one of the row's constraints.durations."),
    ],
    ["audio not a boolean", { model: "m", duration: "5s", audio: "yes" }, refused("audio", "audio must be a boolean.")],
  ])("%s", (_label, body, expected) => {
    expect(answer(() => parseVideoRequest(body))).toEqual(expected);
  });

  test("a good body: the body as sent and the model", () => {
    const body = { model: "wan", prompt: "a fox", duration: "5s", seed: 1 };
    const req = parseVideoRequest(body);
    expect(req).toEqual({ body, model: "wan", stream: false });
    expect(req.body).toBe(body);
  });

  const QUEUE_ID = refused("queue_id", "queue_id (the id POST /v1/video/queue returned) is required.");
  test.each<[string, unknown, Refusal | "ok"]>([
    ["no body", undefined, refused(undefined, "Body must be a JSON object with queue_id.")],
    ["no queue_id", {}, QUEUE_ID],
    ["an empty queue_id", { queue_id: "" }, QUEUE_ID],
    ["a numeric queue_id", { queue_id: 7 }, QUEUE_ID],
    ["101 characters", { queue_id: "q".repeat(101) }, QUEUE_ID],
  ])("queue_id: %s", (_label, body, expected) => {
    expect(answer(() => parseVideoJobRef(body))).toEqual(expected);
  });

  test("the job's id; GraphQL's queueId has the same rule", () => {
    expect(parseVideoJobRef({ queue_id: "abc", other: 1 })).toBe("abc");
    expect(answer(() => parseWith(videoJobArgs, { queueId: "" }))).toEqual(
      refused("queueId", "queueId (the id POST /v1/video/queue returned) is required."),
    );
  });
});

describe("funding bodies: parseFundingRequest", () => {
  const BODY = refused(undefined, "Body must be a JSON object with amountMicroUsdc.");
  const TYPE = refused("amountMicroUsdc", "amountMicroUsdc must be an integer number of micro-USDC.");
  const RANGE = refused("amountMicroUsdc", "amountMicroUsdc must be 1000000-1000000000 (1 to 1000 USDC).");
  const KEY_NAME = refused("keyName", "keyName must be a string of at most 64 characters.");
  const CEILING = refused(
    "maxPriceCentsPerDollar",
    "maxPriceCentsPerDollar must be an integer 30-80; nothing was changed.",
  );
  test.each<[string, unknown, Refusal | "ok", Refusal | "ok"]>([
    // label, body, signup's answer, top-up's and refill's answer
    ["no body", undefined, BODY, BODY],
    ["an array", [1], BODY, BODY],
    ["no amount", {}, TYPE, TYPE],
    ["a string amount", { amountMicroUsdc: "5000000" }, TYPE, TYPE],
    ["a fraction", { amountMicroUsdc: 1_500_000.5 }, TYPE, TYPE],
    ["below 1 USDC", { amountMicroUsdc: 999_999 }, RANGE, RANGE],
    ["above 1000 USDC", { amountMicroUsdc: 1_000_000_001 }, RANGE, RANGE],
    ["unsafe", { amountMicroUsdc: 2 ** 60 }, TYPE, TYPE],
    ["ok", { amountMicroUsdc: 5_000_000 }, "ok", "ok"],
    ["a long key name", { amountMicroUsdc: 5_000_000, keyName: "k".repeat(65) }, KEY_NAME, "ok"],
    ["a numeric key name", { amountMicroUsdc: 5_000_000, keyName: 7 }, KEY_NAME, "ok"],
    ["a ceiling out of range", { amountMicroUsdc: 5_000_000, maxPriceCentsPerDollar: 90 }, CEILING, "ok"],
    ["a null ceiling", { amountMicroUsdc: 5_000_000, maxPriceCentsPerDollar: null }, CEILING, "ok"],
  ])("%s", (_label, body, signup, topUp) => {
    expect(answer(() => parseFundingRequest("signup", body))).toEqual(signup);
    expect(answer(() => parseFundingRequest("top_up", body))).toEqual(topUp);
    expect(answer(() => parseFundingRequest("refill", body))).toEqual(topUp);
  });

  test("good bodies: the amount in micro-USDC, signup's key name and ceiling with their defaults", () => {
    expect(
      parseFundingRequest("signup", { amountMicroUsdc: 5_000_000, keyName: "bot", maxPriceCentsPerDollar: 55 }),
    ).toEqual({
      amountMicroUsdc: 5_000_000n,
      keyName: "bot",
      maxPriceCentsPerDollar: 55,
    });
    const defaults = { amountMicroUsdc: 1_000_000n, keyName: DEFAULT_SIGNUP_KEY_NAME, maxPriceCentsPerDollar: 80 };
    expect(parseFundingRequest("signup", { amountMicroUsdc: 1_000_000, keyName: "" })).toEqual(defaults);
    expect(
      parseFundingRequest("top_up", { amountMicroUsdc: 1_000_000, keyName: "ignored", maxPriceCentsPerDollar: 30 }),
    ).toEqual(defaults);
  });
});

describe("the ceiling: parseCeiling and maxPriceBody", () => {
  const CEILING = refused(
    "maxPriceCentsPerDollar",
    "maxPriceCentsPerDollar must be an integer 30-80; nothing was changed.",
  );
  test.each<[string, unknown, Refusal | "ok"]>([
    ["missing", undefined, CEILING],
    ["a string", "60", CEILING],
    ["null", null, CEILING],
    ["below 30", 29, CEILING],
    ["above 80", 81, CEILING],
    ["a fraction", 60.5, CEILING],
    ["30", 30, "ok"],
  ])("%s", (_label, value, expected) => {
    expect(answer(() => parseCeiling(value))).toEqual(expected);
    expect(answer(() => parse(maxPriceBody, { maxPriceCentsPerDollar: value, walletAddress: "0xabc" }))).toEqual(
      expected,
    );
  });

  test("extra fields are dropped", () => {
    expect(parse(maxPriceBody, { maxPriceCentsPerDollar: 55, walletAddress: "0xabc" })).toEqual({
      maxPriceCentsPerDollar: 55,
    });
    expect(parseCeiling(55)).toBe(55);
  });
});

describe("query strings", () => {
  const WINDOW = refused("window", "window must be one of 24h, 7d, 30d.");
  test.each<[string, unknown, string | Refusal]>([
    ["absent", undefined, "7d"],
    ["24h", "24h", "24h"],
    ["unknown", "1y", WINDOW],
    ["empty", "", WINDOW],
    ["upper case", "7D", WINDOW],
    ["repeated", ["7d", "30d"], WINDOW],
  ])("window %s (REST and GraphQL alike)", (_label, window, expected) => {
    const rest = answer(() => parse(modelStatsQuery, { window }));
    expect(rest).toEqual(typeof expected === "string" ? "ok" : expected);
    expect(answer(() => parseStatsWindow(window))).toEqual(rest);
    if (typeof expected === "string") expect(parseStatsWindow(window)).toBe(expected);
  });

  const CAPACITY = refused("maxPriceCents", "maxPriceCents must be an integer 30-80.");
  test.each<[string, Record<string, unknown>, Refusal | "ok"]>([
    ["absent", {}, "ok"],
    ["30", { maxPriceCents: "30" }, "ok"],
    ["80", { maxPriceCents: "80" }, "ok"],
    ["29", { maxPriceCents: "29" }, CAPACITY],
    ["81", { maxPriceCents: "81" }, CAPACITY],
    ["a fraction", { maxPriceCents: "55.5" }, CAPACITY],
    ["a word", { maxPriceCents: "cheap" }, CAPACITY],
    ["repeated", { maxPriceCents: ["40", "50"] }, CAPACITY],
  ])("capacity maxPriceCents %s", (_label, query, expected) => {
    expect(answer(() => parse(capacityQuery, query))).toEqual(expected);
  });

  test("support_reference: a uuid, lower-cased", () => {
    expect(parse(supportReferenceParam, { support_reference: "0B4F3A52-5D0E-4F43-9A43-8D6D5D3C1A11" })).toEqual({
      support_reference: "0b4f3a52-5d0e-4f43-9a43-8d6d5d3c1a11",
    });
    expect(answer(() => parse(supportReferenceParam, { support_reference: "nope" }))).toEqual(
      refused("support_reference", "support_reference must be a uuid."),
    );
  });
});
