import { type ChildProcess, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("..", import.meta.url));

/** The arguments after `node` that run the service as `spawnMain` says (the one place that knows them). */
export function mainCommand(args: string[], nodeArgs: string[] = [], opts: { compiled?: boolean } = {}): string[] {
  const entry = args[0] === "--local" ? ["src/dev.ts", ...args.slice(1)] : ["src/main.ts", ...args];
  if (opts.compiled && entry[0] !== "src/main.ts")
    throw new Error("mainCommand: only the production entry is compiled");
  return opts.compiled
    ? [...nodeArgs, "--enable-source-maps", "dist/server/main.js", ...entry.slice(1)]
    : [...nodeArgs, "--import", "tsx", ...entry];
}

/**
 * Runs the service with exactly the given environment: from source the way the npm scripts do
 * (`node --import tsx`), `src/main.ts` (the production entry), or with `--local` first the dev entry
 * `src/dev.ts` (`npm run dev`); or, `compiled`, the production build as `npm start` runs it (`node
 * --enable-source-maps dist/server/main.js`: `npm run build` must have made it).
 */
export function spawnMain(
  args: string[],
  env: Record<string, string>,
  nodeArgs: string[] = [],
  opts: { compiled?: boolean } = {},
): ChildProcess & { output: () => { stdout: string; stderr: string } } {
  const child = spawn(process.execPath, mainCommand(args, nodeArgs, opts), {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout?.on("data", (d) => {
    stdout += d;
  });
  child.stderr?.on("data", (d) => {
    stderr += d;
  });
  return Object.assign(child, { output: () => ({ stdout, stderr }) });
}

/**
 * Runs what `npm run dev` runs (local mode), with exactly the given environment. The one place
 * that knows the dev entry's command line.
 */
export function spawnDev(env: Record<string, string>): ReturnType<typeof spawnMain> {
  return spawnMain(["--local"], env);
}

export function waitForExit(child: ChildProcess, timeoutMs: number): Promise<number | null> {
  return new Promise((resolve, reject) => {
    if (child.exitCode !== null) return resolve(child.exitCode);
    const t = setTimeout(() => reject(new Error("process did not exit in time")), timeoutMs);
    child.once("exit", (code) => {
      clearTimeout(t);
      resolve(code);
    });
  });
}

export async function waitFor(pred: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!pred()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Polls an asynchronous predicate every 250 ms until it holds, failing after `timeoutMs`. */
export async function waitForAsync(pred: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await pred())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** Polls a URL until it answers 200 (or the child exits). */
export async function waitForHttp(url: string, timeoutMs: number, child?: ChildProcess): Promise<void> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    if (child && child.exitCode !== null)
      throw new Error(`process exited with ${child.exitCode} before ${url} answered`);
    try {
      const res = await fetch(url);
      if (res.status === 200) return;
    } catch {}
    if (Date.now() > end) throw new Error(`timed out waiting for ${url}`);
    await new Promise((r) => setTimeout(r, 150));
  }
}
