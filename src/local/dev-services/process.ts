import { type ChildProcessWithoutNullStreams, execFileSync, spawn } from "node:child_process";
import { accessSync, constants, readFileSync } from "node:fs";
import { connect } from "node:net";
import { delimiter, join } from "node:path";
import { isAlive } from "../../lib/process.js";

/**
 * Processes that `npm run dev` starts for itself (an embedded PostgreSQL, a redis-server) and
 * must never outlive it. Each runs under a tiny `sh` watchdog, as anvil does (src/local/chain):
 * the watchdog reads its stdin, a pipe from this process, and signals the service when the pipe
 * hits EOF — which the kernel guarantees when this process dies, SIGKILL included. The watchdog
 * runs in its own process group, so a terminal's Ctrl-C reaches only the dev process, which
 * drains its requests and closes its pools before it stops the services (world.stop()).
 * The first stdout line reports the service's own pid.
 */
const WATCHDOG_SCRIPT = [
  'sig="$1"',
  "shift",
  "exec 3<&0",
  '"$@" </dev/null 3<&- &',
  "child=$!",
  'echo "svc-guard-pid $child"',
  '( while read -r _; do :; done <&3; kill -"$sig" "$child" 2>/dev/null ) &',
  "watcher=$!",
  'wait "$child"; code=$?',
  'kill "$watcher" 2>/dev/null',
  'exit "$code"',
].join("\n");

export interface Guarded {
  /** the service's own pid (not its watchdog's) */
  readonly pid: number;
  /** resolves when the watchdog (hence the service) has exited */
  readonly exited: Promise<void>;
  running(): boolean;
  /** the last few kilobytes of the service's output, for error messages */
  tail(): string;
  /** Sends the stop signal, waits up to `timeoutMs`, then SIGKILLs. Idempotent. */
  stop(timeoutMs: number): Promise<void>;
}

interface Live {
  pid: number;
  signal: NodeJS.Signals;
  proc: ChildProcessWithoutNullStreams;
}

/** Every guarded service not yet stopped; the exit hook signals them (the watchdog would too). */
const live = new Set<Live>();

function killQuietly(pid: number, signal: NodeJS.Signals | number): void {
  try {
    process.kill(pid, signal);
  } catch {
    // already gone
  }
}

function onExit(): void {
  for (const l of live) {
    killQuietly(l.pid, l.signal);
    l.proc.stdin.destroy();
  }
}

function track(l: Live): void {
  if (live.size === 0) process.on("exit", onExit);
  live.add(l);
}

function untrack(l: Live): void {
  live.delete(l);
  if (live.size === 0) process.off("exit", onExit);
}

export async function spawnGuarded(opts: {
  command: string;
  args: string[];
  /** what the watchdog sends when this process goes away or `stop()` is called */
  stopSignal: "SIGINT" | "SIGTERM";
  cwd?: string;
  uid?: number;
  gid?: number;
  env?: NodeJS.ProcessEnv;
}): Promise<Guarded> {
  const proc = spawn(
    "/bin/sh",
    ["-c", WATCHDOG_SCRIPT, "svc-guard", opts.stopSignal.slice(3), opts.command, ...opts.args],
    {
      stdio: ["pipe", "pipe", "pipe"],
      detached: true,
      cwd: opts.cwd,
      uid: opts.uid,
      gid: opts.gid,
      env: opts.env ?? process.env,
    },
  );
  // Writing to / closing the watchdog's stdin after it died raises EPIPE; that is expected.
  proc.stdin.on("error", () => undefined);
  let output = "";
  const collect = (chunk: Buffer) => {
    output = (output + chunk.toString("utf8")).slice(-8000);
  };
  proc.stdout.on("data", collect);
  proc.stderr.on("data", collect);
  let done = false;
  const exited = new Promise<void>((resolve) => {
    proc.once("exit", () => {
      done = true;
      resolve();
    });
  });

  const pid = await new Promise<number>((resolve, reject) => {
    const check = () => {
      const m = /svc-guard-pid (\d+)\n/.exec(output);
      if (m) {
        proc.stdout.off("data", check);
        resolve(Number(m[1]));
      }
    };
    proc.stdout.on("data", check);
    proc.once("error", reject);
    void exited.then(() => reject(new Error(`${opts.command} exited at once: ${output.trim()}`)));
  });
  output = output.replace(/svc-guard-pid \d+\n/, "");

  const entry: Live = { pid, signal: opts.stopSignal, proc };
  track(entry);
  void exited.then(() => untrack(entry));

  let stopping: Promise<void> | undefined;
  return {
    pid,
    exited,
    running: () => !done,
    tail: () => output.trim(),
    stop(timeoutMs) {
      stopping ??= (async () => {
        if (!done) {
          killQuietly(pid, opts.stopSignal);
          proc.stdin.end();
          const timedOut = await Promise.race([
            exited.then(() => false),
            new Promise<boolean>((r) => setTimeout(() => r(true), timeoutMs).unref()),
          ]);
          if (timedOut) {
            killQuietly(pid, "SIGKILL");
            proc.kill("SIGKILL");
            await exited;
          }
        }
        untrack(entry);
      })();
      return stopping;
    },
  };
}

/** Runs a short-lived command to completion; rejects with its output's last line on failure. */
export function runToEnd(
  command: string,
  args: string[],
  opts: { cwd?: string; uid?: number; gid?: number; env?: NodeJS.ProcessEnv },
): Promise<void> {
  return new Promise((resolve, reject) => {
    const proc = spawn(command, args, { ...opts, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    const collect = (chunk: Buffer) => {
      output = (output + chunk.toString("utf8")).slice(-8000);
    };
    proc.stdout.on("data", collect);
    proc.stderr.on("data", collect);
    proc.once("error", reject);
    proc.once("close", (code, signal) => {
      if (code === 0) resolve();
      else reject(new Error(lastLine(output) || `exit ${code ?? signal}`));
    });
  });
}

export function lastLine(text: string): string {
  return (
    text
      .trim()
      .split("\n")
      .map((l) => l.trim())
      .filter(Boolean)
      .at(-1) ?? ""
  );
}

/** True when something accepts a TCP connection at host:port within `timeoutMs`. */
export function tcpAnswers(host: string, port: number, timeoutMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host, port, timeout: timeoutMs });
    const finish = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.once("connect", () => finish(true));
    socket.once("timeout", () => finish(false));
    socket.once("error", () => finish(false));
  });
}

/** The host of a URL as a socket address (`[::1]` → `::1`). */
export function socketHost(url: URL): string {
  return url.hostname.replace(/^\[(.*)\]$/, "$1");
}

export function isLoopback(host: string): boolean {
  return host === "localhost" || host === "::1" || /^127\.\d+\.\d+\.\d+$/.test(host);
}

/** A process's command line, from /proc where there is one, else from `ps`; undefined if gone. */
export function commandLine(pid: number): string | undefined {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " ").trim();
  } catch {
    try {
      return execFileSync("ps", ["-o", "command=", "-p", String(pid)], { encoding: "utf8" }).trim() || undefined;
    } catch {
      return undefined;
    }
  }
}

export async function waitUntilGone(pid: number, timeoutMs: number): Promise<boolean> {
  const end = Date.now() + timeoutMs;
  while (isAlive(pid)) {
    if (Date.now() > end) return false;
    await new Promise((r) => setTimeout(r, 50));
  }
  return true;
}

/** The first executable `name` on a PATH string, or undefined. */
export function findOnPath(name: string, path: string | undefined): string | undefined {
  for (const dir of (path ?? "").split(delimiter)) {
    if (!dir) continue;
    const candidate = join(dir, name);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return undefined;
}
