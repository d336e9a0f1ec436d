// The routes validate with the API contract (src/contract); where the domain checks the same input
// (the ceiling, the stats window, funding bodies, the inference bodies' common fields), the contract
// must answer the same 400: the same message and the same field. A row per case.
import { describe, expect, test } from "vitest";
import { maxPriceBody } from "../../../src/contract/agent.js";
import { capacityQuery, modelStatsQuery } from "../../../src/contract/catalog.js";
import { supportReferenceParam } from "../../../src/contract/common.js";
import { fundingBody, signupBody } from "../../../src/contract/funding.js";
import { chatCompletionBody, responsesBody, videoBody } from "../../../src/contract/inference.js";
import { assertCeiling } from "../../../src/domain/accounts/account-service.js";
import { parseStatsWindow } from "../../../src/domain/catalog/catalog-stats.js";
import { parseFundingBody } from "../../../src/domain/funding/funding-request.js";
import { parseChatBody } from "../../../src/domain/inference/chat.js";
import { parseResponsesBody } from "../../../src/domain/inference/responses.js";
import { parseVideoBody } from "../../../src/domain/inference/video-request.js";
import { checkShape, parse } from "../../../src/http/validate.js";
import { DomainError } from "../../../src/lib/errors.js";

/** The 400 a call answers: `{message, field}`, or "ok". */
function answer(f: () => unknown): { message: string; field: unknown } | "ok" {
  try {
    f();
    return "ok";
  } catch (e) {
    if (!(e instanceof DomainError)) throw e;
    expect(e.code).toBe("invalid_request");
    return { message: e.message, field: e.details.field };
  }
}

describe("the ceiling: contract = assertCeiling", () => {
  test.each([
    ["missing", {}],
    ["a string", { maxPriceCentsPerDollar: "60" }],
    ["null", { maxPriceCentsPerDollar: null }],
    ["below 30", { maxPriceCentsPerDollar: 29 }],
    ["above 80", { maxPriceCentsPerDollar: 81 }],
    ["a fraction", { maxPriceCentsPerDollar: 60.5 }],
    ["in range, walletAddress ignored", { maxPriceCentsPerDollar: 30, walletAddress: "0xabc" }],
  ])("%s", (_label, body) => {
    expect(answer(() => parse(maxPriceBody, body))).toEqual(
      answer(() => assertCeiling((body as { maxPriceCentsPerDollar?: unknown }).maxPriceCentsPerDollar)),
    );
  });

  test("extra fields are dropped", () => {
    expect(parse(maxPriceBody, { maxPriceCentsPerDollar: 55, walletAddress: "0xabc" })).toEqual({
      maxPriceCentsPerDollar: 55,
    });
  });
});

describe("query strings", () => {
  test.each([
    ["absent", undefined],
    ["24h", "24h"],
    ["unknown", "1y"],
    ["empty", ""],
    ["repeated", ["7d", "30d"]],
  ])("window %s: contract = parseStatsWindow", (_label, window) => {
    expect(answer(() => parse(modelStatsQuery, { window }))).toEqual(answer(() => parseStatsWindow(window)));
  });

  const CAPACITY = { message: "maxPriceCents must be an integer 30-80.", field: "maxPriceCents" };
  test.each([
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
    expect(answer(() => parse(supportReferenceParam, { support_reference: "nope" }))).toEqual({
      message: "support_reference must be a uuid.",
      field: "support_reference",
    });
  });
});

describe("funding bodies: contract = parseFundingBody", () => {
  test.each([
    ["no body", undefined],
    ["an array", [1]],
    ["no amount", {}],
    ["a string amount", { amountMicroUsdc: "5000000" }],
    ["a fraction", { amountMicroUsdc: 1_500_000.5 }],
    ["below 1 USDC", { amountMicroUsdc: 999_999 }],
    ["above 1000 USDC", { amountMicroUsdc: 1_000_000_001 }],
    ["unsafe", { amountMicroUsdc: 2 ** 60 }],
    ["ok", { amountMicroUsdc: 5_000_000 }],
    ["signup: a long key name", { amountMicroUsdc: 5_000_000, keyName: "k".repeat(65) }],
    ["signup: a numeric key name", { amountMicroUsdc: 5_000_000, keyName: 7 }],
    ["signup: a ceiling out of range", { amountMicroUsdc: 5_000_000, maxPriceCentsPerDollar: 90 }],
  ])("%s", (_label, body) => {
    expect(answer(() => checkShape(signupBody, body))).toEqual(answer(() => parseFundingBody("signup", body)));
    expect(answer(() => checkShape(fundingBody, body))).toEqual(answer(() => parseFundingBody("top_up", body)));
  });
});

describe("inference bodies: where the domain refuses, the contract refuses the same way", () => {
  const M = [{ role: "user", content: "hi" }];
  test.each([
    ["no body", undefined],
    ["a string", "hello"],
    ["null", null],
    ["no model", { messages: M }],
    ["an empty model", { model: "", messages: M }],
    ["a model suffix", { model: "a:b", messages: M }],
    ["no messages", { model: "m" }],
    ["empty messages", { model: "m", messages: [] }],
    ["stream not a boolean", { model: "m", messages: M, stream: "yes" }],
    ["n = 2", { model: "m", messages: M, n: 2 }],
    ["ok", { model: "m", messages: M, stream: true, max_tokens: null }],
  ])("chat: %s", (_label, body) => {
    expect(answer(() => checkShape(chatCompletionBody, body))).toEqual(answer(() => parseChatBody(body)));
  });

  test.each([
    ["no input", { model: "m" }],
    ["empty input", { model: "m", input: "" }],
    ["an empty list", { model: "m", input: [] }],
    ["a list of strings", { model: "m", input: ["a"] }],
    ["instructions not a string", { model: "m", input: "x", instructions: 3 }],
    ["ok", { model: "m", input: "x" }],
  ])("responses: %s", (_label, body) => {
    expect(answer(() => checkShape(responsesBody, body))).toEqual(answer(() => parseResponsesBody(body)));
  });

  test.each([
    ["no body", undefined],
    ["no model", { prompt: "x", duration: "5s" }],
    ["ok without duration (the row decides)", { model: "m", prompt: "x" }],
  ])("video: %s", (_label, body) => {
    expect(answer(() => checkShape(videoBody, body))).toEqual(answer(() => parseVideoBody(body)));
  });

  test("what only the contract refuses is named by field", () => {
    expect(answer(() => checkShape(chatCompletionBody, { model: "m", messages: [{ content: "no role" }] }))).toEqual({
      message: "messages.0.role: is required",
      field: "messages.0.role",
    });
  });
});
