/**
 * JSON text for hostile request bodies: what `JSON.stringify` cannot write (a `-0`, a number past
 * double range, nesting thousands deep) goes in as `RawJson`, spliced verbatim. `undefined` object
 * members are left out, as JSON.stringify does. Lone surrogates and NUL are written as `\uXXXX`
 * escapes (JSON.stringify's well-formed output), so they reach the server's parser intact.
 */
export class RawJson {
  constructor(readonly text: string) {}
  toString(): string {
    return `RawJson(${this.text.length > 60 ? `${this.text.slice(0, 60)}…` : this.text})`;
  }
}

export function toJsonText(value: unknown): string {
  if (value instanceof RawJson) return value.text;
  if (Array.isArray(value)) return `[${value.map((v) => (v === undefined ? "null" : toJsonText(v))).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const members: string[] = [];
    for (const [k, v] of Object.entries(value)) {
      if (v !== undefined) members.push(`${JSON.stringify(k)}:${toJsonText(v)}`);
    }
    return `{${members.join(",")}}`;
  }
  return JSON.stringify(value) ?? "null";
}

/** `levels` nested arrays or objects around `inner`, as text (no recursion on either side). */
export function nested(levels: number, kind: "array" | "object", inner = "1"): RawJson {
  return kind === "array"
    ? new RawJson(`${"[".repeat(levels)}${inner}${"]".repeat(levels)}`)
    : new RawJson(`${'{"a":'.repeat(levels)}${inner}${"}".repeat(levels)}`);
}

/** Deepest nesting of a parsed JSON value (the top level is 1), walked without recursion. */
export function jsonDepth(value: unknown): number {
  let max = 0;
  const stack: [unknown, number][] = [[value, 1]];
  for (let item = stack.pop(); item; item = stack.pop()) {
    const [v, d] = item;
    if (v === null || typeof v !== "object") continue;
    max = Math.max(max, d);
    for (const child of Object.values(v)) stack.push([child, d + 1]);
  }
  return max;
}

/** True when `s` holds a NUL or a UTF-16 surrogate without its pair: text Postgres cannot store. */
export function unstorable(s: string): boolean {
  return s.includes("\u0000") || !(s as string & { isWellFormed(): boolean }).isWellFormed();
}

/** Any string (or object key) in a parsed JSON value that Postgres cannot store. */
export function hasUnstorableText(value: unknown): boolean {
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const v = stack.pop();
    if (typeof v === "string") {
      if (unstorable(v)) return true;
    } else if (v !== null && typeof v === "object") {
      for (const [k, child] of Object.entries(v)) {
        if (unstorable(k)) return true;
        stack.push(child);
      }
    }
  }
  return false;
}
