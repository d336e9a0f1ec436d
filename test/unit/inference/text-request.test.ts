import { describe, expect, test } from "vitest";
import { parseChatBody } from "../../../src/domain/inference/chat.js";
import { parseResponsesBody } from "../../../src/domain/inference/responses.js";
import { DomainError } from "../../../src/lib/errors.js";

// One paid add-on check for every text route: chat and Responses refuse exactly the same bodies.
const chat = (extra: Record<string, unknown>) => () =>
  parseChatBody({ model: "m", messages: [{ role: "user", content: "hi" }], ...extra });
const responses = (extra: Record<string, unknown>) => () => parseResponsesBody({ model: "m", input: "hi", ...extra });

function outcome(fn: () => unknown): string {
  try {
    fn();
    return "ok";
  } catch (e) {
    if (e instanceof DomainError) return `${e.status} ${e.code} ${String(e.details.field)}`;
    throw e;
  }
}

const CASES: [string, Record<string, unknown>, string][] = [
  ["web search on", { venice_parameters: { enable_web_search: "on" } }, "400 invalid_request venice_parameters"],
  ["web search auto", { venice_parameters: { enable_web_search: "auto" } }, "400 invalid_request venice_parameters"],
  ["web search off", { venice_parameters: { enable_web_search: "off" } }, "ok"],
  ["web search null", { venice_parameters: { enable_web_search: null } }, "ok"],
  ["web search false", { venice_parameters: { enable_web_search: false } }, "ok"],
  ["scraping", { venice_parameters: { enable_web_scraping: true } }, "400 invalid_request venice_parameters"],
  ["X search", { venice_parameters: { enable_x_search: true } }, "400 invalid_request venice_parameters"],
  ["venice_parameters not an object", { venice_parameters: 3 }, "400 invalid_request venice_parameters"],
  ["venice_parameters null", { venice_parameters: null }, "ok"],
  ["web_search", { web_search: true }, "400 invalid_request web_search"],
  ["web_search null", { web_search: null }, "ok"],
  ["web_search tool", { tools: [{ type: "web_search" }] }, "400 invalid_request tools"],
  ["web_search_preview tool", { tools: [{ type: "web_search_preview_2025_03_11" }] }, "400 invalid_request tools"],
  ["x_search tool", { tools: [{ type: "x_search" }] }, "400 invalid_request tools"],
  ["function tool", { tools: [{ type: "function", function: { name: "f" } }] }, "ok"],
  ["tools not an array", { tools: {} }, "400 invalid_request tools"],
  ["tools null", { tools: null }, "ok"],
];

describe("paid add-ons: one check for chat and Responses", () => {
  for (const [name, extra, expected] of CASES) {
    test(`${name} → ${expected}, on both routes`, () => {
      expect(outcome(chat(extra))).toBe(expected);
      expect(outcome(responses(extra))).toBe(expected);
    });
  }
});
