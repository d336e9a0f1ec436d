import { describe, expect, test } from "vitest";
import { findJsonProblem, MAX_JSON_DEPTH, printable, textProblem } from "../../../src/lib/json-safety.js";

function nested(depth: number, leaf: unknown = 1): unknown {
  let v: unknown = leaf;
  for (let i = 1; i < depth; i++) v = { a: v };
  return depth === 0 ? leaf : { a: v };
}

describe("textProblem", () => {
  test.each([
    { label: "plain ASCII", s: "hello", want: null },
    { label: "empty", s: "", want: null },
    { label: "a surrogate pair (emoji)", s: "🚀", want: null },
    { label: "a NUL", s: "a\u0000b", want: "nul" },
    { label: "a lone high surrogate", s: "\ud800", want: "lone_surrogate" },
    { label: "a lone low surrogate", s: "x\udc00y", want: "lone_surrogate" },
    { label: "a reversed pair", s: "\udc00\ud800", want: "lone_surrogate" },
  ])("$label", ({ s, want }) => {
    expect(textProblem(s)).toBe(want);
  });
});

describe("findJsonProblem", () => {
  test.each([
    { label: "a scalar", v: 42, want: null },
    { label: "a clean object", v: { a: [1, "x", { b: null }] }, want: null },
    {
      label: "a NUL in an array element",
      v: { m: [{ c: "ok" }, { c: "\u0000" }] },
      want: { problem: "nul", field: "m.1.c" },
    },
    { label: "a lone surrogate at the top", v: "\ud800", want: { problem: "lone_surrogate", field: "" } },
    { label: "a NUL in a key", v: { "k\u0000": 1 }, want: { problem: "nul", field: "k\\u0000" } },
    { label: "exactly the maximum depth", v: nested(MAX_JSON_DEPTH), want: null },
    {
      label: "one level deeper than the maximum",
      v: nested(MAX_JSON_DEPTH + 1),
      want: { problem: "too_deep", field: Array(MAX_JSON_DEPTH).fill("a").join(".") },
    },
  ])("$label", ({ v, want }) => {
    expect(findJsonProblem(v)).toEqual(want);
  });

  test("a 100,000-deep array is reported without recursion", () => {
    const deep = JSON.parse(`${"[".repeat(100_000)}${"]".repeat(100_000)}`);
    expect(findJsonProblem(deep)?.problem).toBe("too_deep");
  });

  test("the first problem in document order is the one reported", () => {
    expect(findJsonProblem({ a: "\u0000", b: "\ud800" })).toEqual({ problem: "nul", field: "a" });
  });
});

describe("printable", () => {
  test("escapes what it refuses and bounds the length", () => {
    expect(printable("a\u0000b\ud800🚀")).toBe("a\\u0000b\\ud800🚀");
    expect(printable("x".repeat(500), 10)).toBe(`${"x".repeat(10)}…`);
  });
});
