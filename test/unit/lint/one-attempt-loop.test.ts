import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";
import { describe, expect, it } from "vitest";

// Issue 27: the attempt loop is written once (src/domain/inference/pipeline/attempt-loop.ts, `runAttempts`);
// buffered, streamed, image, the video queue and the video quote all go through it. This test reads
// every source file under src/ and fails if a `for`/`while`/`do` loop that drives attempts appears
// anywhere else: a loop whose body calls the fall-forward / next-attempt / run machinery, borrows
// supplier keys, classifies upstream failures, or calls the upstream.
const ROOT = fileURLToPath(new URL("../../..", import.meta.url));
const SRC = join(ROOT, "src");
const THE_LOOP = "src/domain/inference/pipeline/attempt-loop.ts";

/** Why a call inside a loop drives attempts (or undefined when it does not). */
function drivesAttempts(call: ts.CallExpression, file: ts.SourceFile): string | undefined {
  const callee = call.expression;
  const name = ts.isPropertyAccessExpression(callee)
    ? callee.name.text
    : ts.isIdentifier(callee)
      ? callee.text
      : undefined;
  if (!name) return undefined;
  const receiver = ts.isPropertyAccessExpression(callee) ? callee.expression.getText(file) : "";
  // the fall-forward and next-attempt machinery, wherever it is reached from
  if (["runAttempts", "fallForward", "nextAttempt", "failAttempt", "classifyFailure", "borrowKey"].includes(name)) {
    return name;
  }
  if (name === "next" && /attempts$/i.test(receiver)) return `${receiver}.next`;
  if ((name === "run" || name === "runBorrowed") && /pipeline|inference/i.test(receiver)) return `${receiver}.${name}`;
  // an upstream call made with a supplier key
  if ((/^post/.test(name) || name === "inference") && /upstream/i.test(receiver)) return `${receiver}.${name}`;
  return undefined;
}

type Loop = { file: string; line: number; why: string };

/** The loops of one source text that drive attempts. */
function attemptLoops(path: string, text: string): Loop[] {
  const file = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true);
  const found: Loop[] = [];
  const visitLoop = (loop: ts.IterationStatement) => {
    let why: string | undefined;
    const scan = (n: ts.Node): void => {
      if (why) return;
      if (ts.isCallExpression(n)) why = drivesAttempts(n, file);
      ts.forEachChild(n, scan);
    };
    scan(loop.statement);
    if (ts.isForStatement(loop)) {
      if (loop.condition) scan(loop.condition);
      if (loop.incrementor) scan(loop.incrementor);
    } else if (ts.isWhileStatement(loop) || ts.isDoStatement(loop)) {
      scan(loop.expression);
    } else if (ts.isForOfStatement(loop) || ts.isForInStatement(loop)) {
      scan(loop.expression);
    }
    if (why) found.push({ file: path, line: file.getLineAndCharacterOfPosition(loop.getStart(file)).line + 1, why });
  };
  const walk = (n: ts.Node): void => {
    if (ts.isIterationStatement(n, false)) visitLoop(n);
    ts.forEachChild(n, walk);
  };
  walk(file);
  return found;
}

function sources(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) {
      if (name !== "generated" && name !== "node_modules") out.push(...sources(p));
    } else if (/\.tsx?$/.test(name) && !name.endsWith(".d.ts")) {
      out.push(p);
    }
  }
  return out;
}

describe("one attempt loop in src/", () => {
  const loops = sources(SRC).flatMap((p) => attemptLoops(relative(ROOT, p), readFileSync(p, "utf8")));

  it("is the pipeline's (attempt-loop.ts), and there is exactly one", () => {
    expect(loops.filter((l) => l.file !== THE_LOOP)).toEqual([]);
    expect(loops.filter((l) => l.file === THE_LOOP)).toHaveLength(1);
  });

  it("catches a copy: the loops written before issue 27", () => {
    const copies: Record<string, string> = {
      // buffered.ts / streamed.ts / video-queue.ts before the pipeline ran the loop
      buffered: `async function f() {
        for (;;) {
          const attempt = session.attempt;
          const res = await upstream.postJson(o.path, attempt.secret, o.body(), {});
          if (!res.ok) { await failAttempt(pipeline, session, res.failure); continue; }
          return res;
        }
      }`,
      fallForward: `async function f() {
        while (true) {
          const r = await call();
          if (r.ok) return r;
          await pipeline.fallForward(session, { kind: "retryable", detail: "x" });
        }
      }`,
      // video-quote.ts's own five-key loop
      quote: `async function f() {
        const tried = [];
        while (tried.length < MAX_ATTEMPTS) {
          const key = await this.deps.pipeline.borrowKey(ceiling, tried, waitForKey);
          tried.push(key.upstreamKeyId);
        }
      }`,
      inferenceInALoop: `async function f() {
        for (const key of keys) await this.upstream.inference(path, key.secret, body, { stream: false, timeoutMs: 1 });
      }`,
      runInALoop: `async function f() { for (const s of sessions) await this.pipeline.run(s, call); }`,
      nextInALoop: `async function f() { do { a = await this.attempts.next(session); } while (!a); }`,
    };
    for (const [name, text] of Object.entries(copies)) {
      expect(attemptLoops(`${name}.ts`, text), name).toHaveLength(1);
    }
    // a loop that does not drive attempts is left alone
    expect(attemptLoops("x.ts", "for (const k of keys) gates.release(k); while (x) await sleep(1);")).toEqual([]);
  });
});
