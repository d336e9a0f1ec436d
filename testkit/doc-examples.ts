/**
 * Reads the example requests out of the public documents (docs/public/*, as served) so tests can run
 * them: every `curl` command in a ```sh block, and every worked example (a ```json block right after
 * `<!-- worked-example -->`).
 *
 * A block may be annotated on the line before its fence:
 *   <!-- example: expect=402 -->            every curl in the block must answer 402 (default: any 2xx)
 *   <!-- example: skip=<reason> -->         not run here (e.g. a paid x402 call, run by the agent-path test)
 *
 * Commands are read as a POSIX shell would for the subset the documents use: quotes, backslash
 * escapes and line continuations, `$NAME`/`${NAME}` expansion, and a captured result
 * `NAME=$(curl … | jq -r .field)`. Anything else (another pipe, `;`, `&&`, redirections, an unknown
 * curl option or variable) is an error, so a document cannot drift into an example the runner skips.
 */
import { expect } from "vitest";

export interface FencedBlock {
  /** the fence's info string: "sh", "json", "ts" … */
  lang: string;
  code: string;
  /** 1-based line of the opening fence */
  line: number;
  /** the HTML comment on the line before the fence, without `<!--`/`-->`, if any */
  annotation: string | undefined;
}

export function fencedBlocks(markdown: string): FencedBlock[] {
  const lines = markdown.split("\n");
  const blocks: FencedBlock[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(\S*)\s*$/.exec(lines[i] ?? "");
    if (!open) continue;
    const start = i;
    const body: string[] = [];
    for (i++; i < lines.length && !/^```\s*$/.test(lines[i] ?? ""); i++) body.push(lines[i] ?? "");
    if (i >= lines.length) throw new Error(`unclosed code fence at line ${start + 1}`);
    const prev = (lines[start - 1] ?? "").trim();
    const comment = /^<!--\s*(.*?)\s*-->$/.exec(prev);
    blocks.push({ lang: open[1] ?? "", code: body.join("\n"), line: start + 1, annotation: comment?.[1] });
  }
  return blocks;
}

export interface ExampleAnnotation {
  expectStatus?: number;
  skip?: string;
}

export function exampleAnnotation(block: FencedBlock): ExampleAnnotation {
  const a = block.annotation;
  if (a === undefined || !a.startsWith("example:")) return {};
  const m = /^example:\s*(?:expect=(\d{3})|skip=(.+))$/.exec(a);
  if (!m) throw new Error(`line ${block.line}: unreadable annotation <!-- ${a} -->`);
  return m[1] !== undefined ? { expectStatus: Number(m[1]) } : { skip: m[2] };
}

/** The commands of a shell block: continuations joined, comments and blank lines dropped. */
export function shellCommands(code: string): string[] {
  const joined = code.replace(/\\\n/g, " ");
  return joined
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l !== "" && !l.startsWith("#"));
}

export function isCurlCommand(command: string): boolean {
  return /^(?:[A-Z_][A-Z0-9_]*=\$\()?curl\s/.test(command);
}

export interface CurlCall {
  method: string;
  url: string;
  headers: Record<string, string>;
  body: string | undefined;
  /** `NAME=$(curl … | jq -r .a.b)`: store the answer's field a.b as $NAME */
  capture: { variable: string; path: string[] } | undefined;
}

type Env = Readonly<Record<string, string>>;

/** Splits a command into words with the shell's quoting and expansion; stops at an unquoted `|`. */
export function shellWords(src: string, env: Env): { words: string[]; pipe: string | undefined } {
  const words: string[] = [];
  let word: string | undefined;
  const push = (s: string) => {
    word = (word ?? "") + s;
  };
  const expand = (at: number): [string, number] => {
    const m = /^\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))/.exec(src.slice(at));
    if (!m) throw new Error(`unsupported "$" in: ${src}`);
    const name = (m[1] ?? m[2]) as string;
    const value = env[name];
    if (value === undefined) throw new Error(`unknown variable $${name} in: ${src}`);
    return [value, at + m[0].length];
  };
  let i = 0;
  while (i < src.length) {
    const c = src[i] as string;
    if (/\s/.test(c)) {
      if (word !== undefined) words.push(word);
      word = undefined;
      i++;
    } else if (c === "'") {
      const end = src.indexOf("'", i + 1);
      if (end < 0) throw new Error(`unclosed ' in: ${src}`);
      push(src.slice(i + 1, end));
      i = end + 1;
    } else if (c === '"') {
      push("");
      i++;
      for (;;) {
        if (i >= src.length) throw new Error(`unclosed " in: ${src}`);
        const d = src[i] as string;
        if (d === '"') {
          i++;
          break;
        }
        if (d === "\\" && /[$`"\\]/.test(src[i + 1] ?? "")) {
          push(src[i + 1] as string);
          i += 2;
        } else if (d === "$") {
          const [v, next] = expand(i);
          push(v);
          i = next;
        } else if (d === "`") {
          throw new Error(`unsupported command substitution in: ${src}`);
        } else {
          push(d);
          i++;
        }
      }
    } else if (c === "\\") {
      push(src[i + 1] ?? "");
      i += 2;
    } else if (c === "$") {
      const [v, next] = expand(i);
      push(v);
      i = next;
    } else if (c === "|") {
      if (word !== undefined) words.push(word);
      return { words, pipe: src.slice(i + 1).trim() };
    } else if (/[;&<>()`]/.test(c)) {
      throw new Error(`unsupported shell syntax "${c}" in: ${src}`);
    } else {
      push(c);
      i++;
    }
  }
  if (word !== undefined) words.push(word);
  return { words, pipe: undefined };
}

const FLAGS = new Set(["s", "S", "N", "i", "L", "f"]);
const LONG_FLAGS = new Set(["--silent", "--show-error", "--no-buffer", "--include", "--location", "--fail"]);

/** Reads one curl command (with the variables known so far) into a request. */
export function parseCurl(command: string, env: Env): CurlCall {
  let src = command;
  let variable: string | undefined;
  const cap = /^([A-Z_][A-Z0-9_]*)=\$\(([\s\S]*)\)$/.exec(command);
  if (cap) {
    variable = cap[1];
    src = cap[2] as string;
  }
  const { words, pipe } = shellWords(src, env);
  let capture: CurlCall["capture"];
  if (pipe !== undefined || variable !== undefined) {
    const jq = /^jq -r '?\.([A-Za-z_][\w.]*)'?$/.exec(pipe ?? "");
    if (!jq || variable === undefined) throw new Error(`only NAME=$(curl … | jq -r .field) is supported: ${command}`);
    capture = { variable, path: (jq[1] as string).split(".") };
  }
  if (words[0] !== "curl") throw new Error(`not a curl command: ${command}`);
  let method: string | undefined;
  let url: string | undefined;
  let body: string | undefined;
  const headers: Record<string, string> = {};
  for (let i = 1; i < words.length; i++) {
    const w = words[i] as string;
    const arg = () => {
      const v = words[++i];
      if (v === undefined) throw new Error(`${w} needs a value: ${command}`);
      return v;
    };
    if (w === "-X" || w === "--request") method = arg();
    else if (w === "-H" || w === "--header") {
      const h = arg();
      const colon = h.indexOf(":");
      if (colon < 1) throw new Error(`bad header ${h}`);
      headers[h.slice(0, colon).trim().toLowerCase()] = h.slice(colon + 1).trim();
    } else if (w === "-d" || w === "--data" || w === "--data-raw") body = arg();
    else if (w === "-D" || w === "--dump-header" || w === "-o" || w === "--output" || w === "-w") arg();
    else if (LONG_FLAGS.has(w)) {
      // output flags: no effect on the request
    } else if (/^-[A-Za-z]+$/.test(w) && [...w.slice(1)].every((f) => FLAGS.has(f))) {
      // combined short output flags (-s, -sN, -sS)
    } else if (w.startsWith("-")) throw new Error(`unsupported curl option ${w}: ${command}`);
    else if (url === undefined) url = w;
    else throw new Error(`two URLs in: ${command}`);
  }
  if (url === undefined) throw new Error(`no URL in: ${command}`);
  return { method: method ?? (body !== undefined ? "POST" : "GET"), url, headers, body, capture };
}

/** The ```json blocks that follow `<!-- worked-example -->`, parsed. */
export function workedExamples(markdown: string): { line: number; example: Record<string, unknown> }[] {
  return fencedBlocks(markdown)
    .filter((b) => b.annotation === "worked-example")
    .map((b) => {
      if (b.lang !== "json") throw new Error(`line ${b.line}: a worked example must be a json block`);
      return { line: b.line, example: JSON.parse(b.code) as Record<string, unknown> };
    });
}

/** Runs of whitespace as one space: a statement matches across a document's line wrapping. */
export const flat = (s: string): string => s.replace(/\s+/g, " ");

/** Expects the served document `docs[path]` to contain `statement`, whatever its line wrapping. */
export function says(docs: Record<string, string>, path: string, statement: string): void {
  expect(flat(docs[path] ?? "").includes(flat(statement)), `${path} should say: ${statement}`).toBe(true);
}
