/**
 * Input the service must refuse before it reaches Postgres or a recursive walk (docs/decisions.md
 * "Hostile input"): text Postgres cannot store (a NUL character, or a lone UTF-16 surrogate, which has no
 * UTF-8 encoding) and JSON nested deeper than any request needs. Pure: the transports call it once,
 * at the parser (http/middleware.ts) and on GraphQL arguments (graphql/limits.ts).
 */

/**
 * Deepest JSON nesting a request may carry (objects and arrays; the top-level value is level 1).
 * The deepest real body is a chat request with a tool's JSON schema, a dozen levels; 64 leaves room
 * and keeps every walk over the body (the prompt estimate, the upstream serialisation) far from the
 * stack limit.
 */
export const MAX_JSON_DEPTH = 64;

export type TextProblem = "nul" | "lone_surrogate";

export interface JsonProblem {
  problem: TextProblem | "too_deep";
  /** dotted path of the offending value (zod's style: `messages.0.content`); "" for the top level */
  field: string;
}

type WellFormed = string & { isWellFormed(): boolean };

/** What makes `s` unstorable in Postgres text/jsonb, or null when it is fine. */
export function textProblem(s: string): TextProblem | null {
  if (s.includes("\u0000")) return "nul";
  // String.prototype.isWellFormed (Node >= 20): false exactly when a surrogate is unpaired
  if (!(s as WellFormed).isWellFormed()) return "lone_surrogate";
  return null;
}

/** A string safe to echo in an error: the refused characters as `\uXXXX`, at most `max` characters. */
export function printable(s: string, max = 120): string {
  let out = "";
  let i = 0;
  for (; i < s.length && out.length < max; i++) {
    const c = s.charCodeAt(i);
    const next = s.charCodeAt(i + 1);
    if (c === 0) out += "\\u0000";
    else if (c >= 0xd800 && c <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) {
      out += s[i] ?? "";
      out += s[i + 1] ?? "";
      i++;
    } else if (c >= 0xd800 && c <= 0xdfff) out += `\\u${c.toString(16)}`;
    else out += s[i] ?? "";
  }
  return i < s.length || out.length > max ? `${out.slice(0, max)}…` : out;
}

interface Frame {
  value: unknown;
  depth: number;
  parent: Frame | null;
  key: string;
}

function pathOf(frame: Frame): string {
  const keys: string[] = [];
  for (let f: Frame | null = frame; f?.parent; f = f.parent) keys.push(printable(f.key, 60));
  const path = keys.reverse().join(".");
  return path.length > 200 ? `${path.slice(0, 200)}…` : path;
}

/**
 * The first problem in a parsed JSON value, or null: a string or an object key that Postgres cannot
 * store, or nesting deeper than `maxDepth`. Iterative (an explicit stack), so the check itself never
 * recurses; linear in the value's size.
 */
export function findJsonProblem(value: unknown, maxDepth = MAX_JSON_DEPTH): JsonProblem | null {
  const stack: Frame[] = [{ value, depth: 0, parent: null, key: "" }];
  for (let frame = stack.pop(); frame !== undefined; frame = stack.pop()) {
    const v = frame.value;
    if (typeof v === "string") {
      const problem = textProblem(v);
      if (problem) return { problem, field: pathOf(frame) };
      continue;
    }
    if (typeof v !== "object" || v === null) continue;
    const depth = frame.depth + 1;
    if (depth > maxDepth) return { problem: "too_deep", field: pathOf(frame) };
    if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) stack.push({ value: v[i], depth, parent: frame, key: String(i) });
      continue;
    }
    const keys = Object.keys(v);
    for (let i = keys.length - 1; i >= 0; i--) {
      const key = keys[i] as string;
      const child: Frame = { value: (v as Record<string, unknown>)[key], depth, parent: frame, key };
      const problem = textProblem(key);
      if (problem) return { problem, field: pathOf(child) };
      stack.push(child);
    }
  }
  return null;
}

/** The message of a refused value (the caller names `field` beside it). */
export function describeProblem(problem: JsonProblem["problem"], field: string, maxDepth = MAX_JSON_DEPTH): string {
  const where = field ? `${field}: ` : "";
  switch (problem) {
    case "nul":
      return `${where}text must not contain the NUL character (\\u0000).`;
    case "lone_surrogate":
      return `${where}text must be valid Unicode (a lone UTF-16 surrogate cannot be stored).`;
    case "too_deep":
      return `${where}JSON nesting is deeper than ${maxDepth} levels.`;
  }
}
