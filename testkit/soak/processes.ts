import { type ChildProcess, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { Redis } from "ioredis";

/**
 * The soak's own processes: a redis-server it may kill and restart, the upstream simulator, and the
 * service (`src/main.ts --role=api|worker`) exactly as `npm run start:api|start:worker` runs it.
 * Every child is killed when the soak exits, however it exits short of SIGKILL.
 */

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
/** Output kept per process (the tail), for the report when something goes wrong. */
const TAIL_BYTES = 16_000;

const children = new Set<ChildProcess>();
let hooked = false;

function hookExit(): void {
  if (hooked) return;
  hooked = true;
  const killAll = () => {
    for (const c of children) c.kill("SIGKILL");
  };
  process.on("exit", killAll);
  // Ctrl-C or a SIGTERM: take the children along (the exit hooks, anvil's included, run on exit)
  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    process.once(signal, () => {
      killAll();
      process.exit(130);
    });
  }
}

function track(child: ChildProcess): void {
  hookExit();
  children.add(child);
  child.once("exit", () => children.delete(child));
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((r) => child.once("exit", () => r()));
}

/** SIGTERM, then SIGKILL after `graceMs`; resolves once the process is gone. */
export async function stopChild(child: ChildProcess, graceMs = 20_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill("SIGTERM");
  const t = setTimeout(() => child.kill("SIGKILL"), graceMs);
  await exited(child);
  clearTimeout(t);
}

export async function killChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill("SIGKILL");
  await exited(child);
}

/** A redis-server of the soak's own on `port`: no persistence, so a restart loses everything. */
export class SoakRedis {
  private proc: ChildProcess | null = null;
  restarts = 0;

  constructor(readonly port: number) {}

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  /** the server's process id while it runs (its CPU, for the bench) */
  get pid(): number | undefined {
    return this.proc?.pid;
  }

  async start(): Promise<void> {
    const proc = spawn(
      "redis-server",
      ["--port", String(this.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--loglevel", "warning"],
      { stdio: ["ignore", "ignore", "pipe"] },
    );
    let stderr = "";
    proc.stderr?.on("data", (d) => {
      stderr = (stderr + String(d)).slice(-2000);
    });
    track(proc);
    this.proc = proc;
    const end = Date.now() + 10_000;
    for (;;) {
      if (proc.exitCode !== null) throw new Error(`redis-server exited (${proc.exitCode}): ${stderr}`);
      const probe = new Redis(this.url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
      probe.on("error", () => undefined);
      try {
        await probe.connect();
        if ((await probe.ping()) === "PONG") return;
      } catch {
      } finally {
        probe.disconnect();
      }
      if (Date.now() > end) throw new Error(`redis-server on ${this.port} did not answer: ${stderr}`);
      await sleep(50);
    }
  }

  /** SIGKILL (a crash: everything in it is gone), then a fresh server on the same port. Returns the downtime. */
  async restart(pauseMs: number): Promise<number> {
    const t0 = Date.now();
    if (this.proc) await killChild(this.proc);
    await sleep(pauseMs);
    await this.start();
    this.restarts++;
    return Date.now() - t0;
  }

  async stop(): Promise<void> {
    if (this.proc) await killChild(this.proc);
    this.proc = null;
  }
}

/**
 * The service's log lines (pino JSON) by role, level and message: how many, and the first line of
 * each kind at error level or above (what to read when an invariant fails).
 */
export type LogTally = Map<string, { count: number; sample?: string }>;

/** One service process slot (an API or a worker) that can be killed and started again. */
export class ServiceProcess {
  private proc: ChildProcess | null = null;
  private tail = "";
  private partial = "";
  starts = 0;
  kills = 0;
  /** exits the soak did not cause (a crash), each with the output that preceded it */
  readonly crashes: { atMs: number; code: number | null; signal: string | null; tail: string }[] = [];
  /** exit codes of SIGTERM stops (0 = a clean shutdown) */
  readonly stops: (number | null)[] = [];
  /** start-ups that ended in an exit (e.g. Redis down at that moment), with the reason */
  readonly startFailures: string[] = [];
  private expectExit = false;
  private ready = false;

  constructor(
    readonly name: string,
    readonly role: "api" | "worker",
    private readonly env: Record<string, string>,
    private readonly tally: LogTally,
    readonly port?: number,
  ) {}

  get pid(): number | undefined {
    return this.proc?.pid;
  }

  get alive(): boolean {
    return this.proc !== null && this.proc.exitCode === null && this.proc.signalCode === null;
  }

  get baseUrl(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** The last lines it wrote (diagnostics). */
  output(): string {
    return this.tail;
  }

  private onOutput(d: Buffer | string): void {
    const s = String(d);
    this.tail = (this.tail + s).slice(-TAIL_BYTES);
    const lines = (this.partial + s).split("\n");
    this.partial = lines.pop() ?? "";
    for (const line of lines) {
      if (!line.startsWith("{")) continue;
      try {
        const j = JSON.parse(line) as { level?: number; msg?: string };
        const key = `${this.role}:${j.level}:${String(j.msg ?? "").slice(0, 80)}`;
        const t = this.tally.get(key) ?? { count: 0 };
        t.count++;
        if (!t.sample && (j.level ?? 0) >= 50) t.sample = `${this.name}: ${line.slice(0, 3000)}`;
        this.tally.set(key, t);
      } catch {}
    }
  }

  /**
   * Starts the process and waits until it serves (an API's /healthz) or announces it is ready (a
   * worker). Like a supervisor, tries again when it exits during start-up (e.g. Redis is down at
   * that moment: the service refuses to start half-connected), up to `attempts` times.
   */
  async start(opts: { timeoutMs?: number; attempts?: number } = {}): Promise<void> {
    const attempts = opts.attempts ?? 1;
    for (let a = 1; ; a++) {
      try {
        await this.startOnce(opts.timeoutMs ?? 60_000);
        return;
      } catch (e) {
        if (a >= attempts) throw e;
        this.expectExit = true;
        await killChild(this.proc as ChildProcess).catch(() => undefined);
        await sleep(1_000 * a);
      }
    }
  }

  private async startOnce(timeoutMs: number): Promise<void> {
    this.tail = "";
    this.partial = "";
    const proc = spawn(process.execPath, ["--import", "tsx", "src/main.ts", `--role=${this.role}`], {
      cwd: ROOT,
      env: {
        PATH: process.env.PATH ?? "",
        HOME: process.env.HOME ?? "/tmp",
        ...this.env,
        ...(this.port ? { PORT: String(this.port) } : {}),
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    proc.stdout?.on("data", (d) => this.onOutput(d));
    proc.stderr?.on("data", (d) => this.onOutput(d));
    track(proc);
    this.proc = proc;
    this.starts++;
    this.expectExit = false;
    this.ready = false;
    proc.once("exit", (code, signal) => {
      if (this.expectExit) return;
      if (!this.ready) {
        this.startFailures.push(this.tail.trim().split("\n").slice(-2).join(" ").slice(0, 300));
        return;
      }
      this.crashes.push({ atMs: Date.now(), code, signal, tail: this.tail.slice(-4000) });
    });
    const end = Date.now() + timeoutMs;
    for (;;) {
      if (!this.alive) throw new Error(`${this.name} exited during start-up:\n${this.tail.slice(-3000)}`);
      if (this.role === "api") {
        try {
          const r = await fetch(`${this.baseUrl}/healthz`, { signal: AbortSignal.timeout(2000) });
          if (r.status === 200) {
            this.ready = true;
            return;
          }
        } catch {}
      } else if (/ready/.test(this.tail)) {
        this.ready = true;
        return;
      }
      if (Date.now() > end) throw new Error(`${this.name} not ready after ${timeoutMs} ms:\n${this.tail.slice(-3000)}`);
      await sleep(150);
    }
  }

  async kill(): Promise<void> {
    if (!this.proc) return;
    this.kills++;
    this.expectExit = true;
    await killChild(this.proc);
  }

  /** SIGTERM and wait (SIGKILL after 20 s); records the exit code. */
  async stop(): Promise<void> {
    const proc = this.proc;
    if (!proc) return;
    this.expectExit = true;
    const wasAlive = this.alive;
    await stopChild(proc);
    if (wasAlive) this.stops.push(proc.exitCode);
  }
}

/** The upstream simulator in its own process (its CLI), with the given keys (`SECRET:DIEM`). */
export class SimProcess {
  private proc: ChildProcess | null = null;
  private out = "";

  constructor(readonly port: number) {}

  get baseUrl(): string {
    return `http://127.0.0.1:${this.port}/api/v1`;
  }

  get adminUrl(): string {
    return `http://127.0.0.1:${this.port}/__admin`;
  }

  async start(keys: { key: string; diem: string }[]): Promise<void> {
    const args = ["--import", "tsx", "src/local/upstream-sim/cli.ts", "--port", String(this.port)];
    for (const k of keys) args.push("--key", `${k.key}:${k.diem}`);
    const proc = spawn(process.execPath, args, {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    proc.stdout?.on("data", (d) => {
      this.out = (this.out + String(d)).slice(-4000);
    });
    proc.stderr?.on("data", (d) => {
      this.out = (this.out + String(d)).slice(-4000);
    });
    track(proc);
    this.proc = proc;
    const end = Date.now() + 30_000;
    while (!/UPSTREAM_BASE_URL=/.test(this.out)) {
      if (proc.exitCode !== null) throw new Error(`simulator exited: ${this.out}`);
      if (Date.now() > end) throw new Error(`simulator did not start: ${this.out}`);
      await sleep(100);
    }
  }

  async admin<T = unknown>(method: string, path: string, body?: unknown): Promise<T> {
    const res = await fetch(`${this.adminUrl}${path}`, {
      method,
      headers: body !== undefined ? { "content-type": "application/json" } : {},
      body: body !== undefined ? JSON.stringify(body) : undefined,
    });
    const text = await res.text();
    if (res.status >= 400) throw new Error(`sim admin ${method} ${path}: ${res.status} ${text}`);
    return (text ? JSON.parse(text) : undefined) as T;
  }

  async stop(): Promise<void> {
    if (this.proc) await stopChild(this.proc, 5_000);
  }
}
