/**
 * How deep a GraphQL document nests, read from its text before anything parses it (the parser
 * recurses, and a deep enough document overflows its stack).
 * graphql-js parses recursively: each `{`, `[` or `(` inside another is a few more stack frames, so
 * a document of 10,000 nested list literals overflows the stack inside the parser — before any
 * validation rule can refuse it. This scan is linear and iterative: it follows the GraphQL lexical
 * grammar only as far as it has to (strings, block strings and comments, where brackets do not
 * count) and stops at the first bracket past the limit. Pure: graphql/limits.ts calls it before the
 * parser.
 */

const OPEN = new Set(["{", "[", "("]);
const CLOSE = new Set(["}", "]", ")"]);

/**
 * The offset of the first `{`, `[` or `(` that nests deeper than `limit` (the outermost bracket is
 * level 1), or null when none does. Brackets inside strings, block strings and comments do not
 * count; a closing bracket without an opening one does not go below zero. Text the lexer would
 * refuse (an unterminated string, an unknown character) is scanned on as if it were fine: the parser
 * stops there anyway, so the count only ever over-estimates how deep the parser goes.
 */
export function nestingPastLimit(source: string, limit: number): number | null {
  let depth = 0;
  let i = 0;
  const n = source.length;
  while (i < n) {
    const c = source[i] as string;
    if (c === "#") {
      // a comment runs to the end of the line
      while (i < n && source[i] !== "\n" && source[i] !== "\r") i++;
      continue;
    }
    if (c === '"') {
      if (source.startsWith('"""', i)) {
        // a block string: its only escape is \""" and it ends at the next """
        i += 3;
        while (i < n && !source.startsWith('"""', i)) i += source.startsWith('\\"""', i) ? 4 : 1;
        i += 3;
        continue;
      }
      // a string: backslash escapes one character; it ends at " or (unterminated) at a line end
      i++;
      while (i < n && source[i] !== '"' && source[i] !== "\n" && source[i] !== "\r") i += source[i] === "\\" ? 2 : 1;
      i++;
      continue;
    }
    if (OPEN.has(c)) {
      depth++;
      if (depth > limit) return i;
    } else if (CLOSE.has(c) && depth > 0) depth--;
    i++;
  }
  return null;
}
