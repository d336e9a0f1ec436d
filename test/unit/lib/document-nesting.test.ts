import { getIntrospectionQuery, Lexer, Source, TokenKind } from "graphql";
import { describe, expect, test } from "vitest";
import { nestingPastLimit } from "../../../src/lib/document-nesting.js";

const OPENERS: ReadonlySet<string> = new Set([TokenKind.BRACE_L, TokenKind.BRACKET_L, TokenKind.PAREN_L]);
const CLOSERS: ReadonlySet<string> = new Set([TokenKind.BRACE_R, TokenKind.BRACKET_R, TokenKind.PAREN_R]);

/** The deepest nesting graphql-js's own lexer sees in a document it can tokenise (the oracle). */
function lexerDepth(text: string): number {
  const lexer = new Lexer(new Source(text));
  let depth = 0;
  let max = 0;
  for (let t = lexer.advance(); t.kind !== TokenKind.EOF; t = lexer.advance()) {
    if (OPENERS.has(t.kind)) max = Math.max(max, ++depth);
    else if (CLOSERS.has(t.kind)) depth = Math.max(depth - 1, 0);
  }
  return max;
}

/** The deepest nesting by the scan: the smallest limit it lets through. */
function scanDepth(text: string): number {
  let limit = 0;
  while (nestingPastLimit(text, limit) !== null) limit++;
  return limit;
}

const lists = (n: number) => `{ models(filter: ${"[".repeat(n)}1${"]".repeat(n)}) { id } }`;

describe("nestingPastLimit", () => {
  test.each([
    { label: "no brackets", text: "query", limit: 0, want: null },
    { label: "one level at limit 1", text: "{ a }", limit: 1, want: null },
    { label: "one level past limit 0", text: "{ a }", limit: 0, want: 0 },
    { label: "the offset of the first bracket past the limit", text: "{ a(x: [1]) }", limit: 2, want: 7 },
    { label: "siblings do not add up", text: "{ a { b } c { d } e { f } }", limit: 2, want: null },
    { label: "10,000 nested list literals", text: lists(10_000), limit: 64, want: 17 + 62 },
    { label: "brackets in a string do not count", text: '{ a(x: "[[[[[[") }', limit: 2, want: null },
    { label: "an escaped quote does not end a string", text: '{ a(x: "\\"[[[[") }', limit: 2, want: null },
    { label: "brackets in a block string do not count", text: '{ a(x: """ [[[ " "" [[[ """) }', limit: 2, want: null },
    { label: 'an escaped """ does not end a block string', text: '{ a(x: """ \\""" [[[ """) }', limit: 2, want: null },
    { label: "brackets in a comment do not count", text: "{ a # [[[[[[\n }", limit: 1, want: null },
    { label: "a comment ends at a carriage return", text: "{ a # x\r [[ }", limit: 2, want: 10 },
    { label: "a string ends at a line end (the lexer refuses it there)", text: '{ "a\n [[ }', limit: 2, want: 7 },
    { label: "stray closers do not go below zero", text: ")))]]]}}} { [ ( ", limit: 2, want: 14 },
    { label: "an unterminated block string hides the rest", text: '{ """ [[[[', limit: 1, want: null },
  ])("$label", ({ text, limit, want }) => {
    expect(nestingPastLimit(text, limit)).toBe(want);
  });

  test.each([
    { label: "the introspection query GraphiQL sends", text: getIntrospectionQuery({ descriptions: true }) },
    { label: "nested lists", text: lists(40) },
    {
      label: "strings, block strings and comments with brackets",
      text: '{ a(x: "[{(", y: """ ] \\""" [[ """) # ((\n { b } }',
    },
    { label: "a unicode escape with braces", text: '{ a(x: "\\u{1F600} [[") { b(y: [[1]]) } }' },
    { label: "object literals and variables", text: "query($v: [[Int!]!]) { a(x: {b: [{c: $v}]}) { d } }" },
  ])("agrees with graphql-js's lexer: $label", ({ text }) => {
    expect(scanDepth(text)).toBe(lexerDepth(text));
  });

  test("the introspection query nests far below the 64-level limit", () => {
    expect(scanDepth(getIntrospectionQuery({ descriptions: true }))).toBeLessThan(16);
  });
});
