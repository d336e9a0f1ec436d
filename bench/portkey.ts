// Issue 32: Portkey's open-source gateway (`@portkey-ai/gateway`, a dev dependency) as a bench peer,
// beside direct, the bare pass-through proxy and the service: a real gateway in front of the same
// upstream simulator. It runs its own build (`build/start-server.js --port=N --headless`: no UI, no
// log stream) in a process of its own, on a free port, with nothing but PATH in its environment (so
// no Redis cache and no other option of its own is on). Each request names the provider and the
// upstream (`x-portkey-provider: openai`, `x-portkey-custom-host: <simulator>/api/v1`) and carries a
// simulator key as its Bearer token. Before anything is measured, a buffered and a streamed chat
// through it must equal what the simulator answers directly (ids and timestamps aside).
import { type ChildProcess, spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { freePort } from "../testkit/harness.js";
import { waitForExit } from "../testkit/spawn.js";
import { post, type Sample, type StreamKind } from "./client.js";
import { CHAT_BODY, type Market, STREAM_BODY, track } from "./market.js";

const require = createRequire(import.meta.url);
const SERVER = require.resolve("@portkey-ai/gateway/build/start-server.js");
export const PORTKEY_VERSION = (
  JSON.parse(readFileSync(join(dirname(SERVER), "..", "package.json"), "utf8")) as { version: string }
).version;

/** what its `GET /` answers: tells it apart from anything else that might hold the port */
const HELLO = "AI Gateway says hey!";
/** the most of its stderr kept (it writes nothing there unless something fails) */
const STDERR_KEEP = 20_000;

export interface PortkeyPeer {
  version: string;
  url: string;
  pid: number | undefined;
  /** Portkey's routing headers, sent with every request */
  headers: Record<string, string>;
  /** one chat completion through Portkey, timed as every other peer's */
  chat(body: unknown, stream?: StreamKind): Promise<Sample>;
  /** stops it; prints `portkey.output` if it wrote to stderr */
  close(emit: (f: Record<string, unknown>) => void): Promise<void>;
}

/** true when `BENCH_PORTKEY` leaves Portkey out (`off`, `0` or `false`) */
export function portkeyDisabled(): boolean {
  return ["off", "0", "false"].includes((process.env.BENCH_PORTKEY ?? "").trim().toLowerCase());
}

async function waitForHello(url: string, child: ChildProcess, stderr: () => string, timeoutMs: number): Promise<void> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null)
      throw new Error(
        `Portkey exited (${child.exitCode ?? child.signalCode}) before it listened: ${stderr().slice(-800)}`,
      );
    try {
      const res = await fetch(url);
      const text = await res.text();
      if (res.status === 200 && text === HELLO) return;
      throw new Error(`${url} answered ${res.status} ${text.slice(0, 200)}: not Portkey`);
    } catch (e) {
      // not listening yet; anything else that answers is not Portkey
      if (e instanceof Error && e.message.includes("not Portkey")) throw e;
    }
    if (Date.now() > end) throw new Error(`Portkey did not listen on ${url} within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** One raw answer, whole (verification only: the timed requests go through `post`). */
async function raw(url: string, key: string, body: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(url, {
    method: "POST",
    headers: { ...headers, authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: res.status, type: res.headers.get("content-type") ?? "", text: await res.text() };
}

/** An answer without what differs between two identical requests: `id` and `created`. */
function comparable(json: string): string {
  const o = JSON.parse(json) as Record<string, unknown>;
  delete o.id;
  delete o.created;
  return JSON.stringify(o);
}

/** An SSE stream as its frames, each `data:` object made comparable. */
function frames(text: string): string[] {
  return text
    .split("\n\n")
    .map((f) => f.trim())
    .filter(Boolean)
    .map((f) => (f.startsWith("data: {") ? `data: ${comparable(f.slice("data: ".length))}` : f));
}

/**
 * Sends one buffered and one streamed chat straight to the simulator and the same two through
 * Portkey, and throws unless Portkey's answers equal the simulator's (status, content type, and the
 * body frame by frame, ids and timestamps aside).
 */
async function verify(m: Market, p: { url: string; headers: Record<string, string> }) {
  const out: Record<string, unknown> = {};
  for (const [kind, body] of [
    ["buffered", CHAT_BODY],
    ["streamed", { ...STREAM_BODY, stream: true }],
  ] as const) {
    const direct = await raw(`${m.sim.baseUrl}/chat/completions`, m.directKey, body);
    const viaPortkey = await raw(`${p.url}/v1/chat/completions`, m.directKey, body, p.headers);
    const fail = (why: string) => {
      throw new Error(
        `Portkey's ${kind} chat is not the simulator's (${why}):\n  simulator: ${direct.status} ${direct.text.slice(0, 400)}\n  portkey:   ${viaPortkey.status} ${viaPortkey.text.slice(0, 400)}`,
      );
    };
    if (direct.status !== 200) fail("the simulator itself did not answer 200");
    if (viaPortkey.status !== direct.status) fail("status");
    if (viaPortkey.type.split(";")[0] !== direct.type.split(";")[0]) fail(`content type ${viaPortkey.type}`);
    const a = kind === "buffered" ? [comparable(direct.text)] : frames(direct.text);
    const b = kind === "buffered" ? [comparable(viaPortkey.text)] : frames(viaPortkey.text);
    const at = a.findIndex((x, i) => x !== b[i]);
    if (at >= 0 || a.length !== b.length)
      fail(at >= 0 ? `frame ${at}: ${a[at]?.slice(0, 200)} ≠ ${b[at]?.slice(0, 200)}` : "frame count");
    if (kind === "streamed" && a[a.length - 1] !== "data: [DONE]") fail("the stream did not end with [DONE]");
    out[kind] = kind === "buffered" ? { bytes: viaPortkey.text.length } : { frames: b.length };
  }
  return out;
}

/**
 * Starts Portkey in front of the market's simulator, checks that it answers what the simulator
 * answers, and prints `portkey.peer`. Throws (and stops it) if it does not.
 */
export async function startPortkey(m: Market, emit: (f: Record<string, unknown>) => void): Promise<PortkeyPeer> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  // stdout carries only its start-up banner (a spinner and `console.clear()`): dropped, so the
  // bench's stdout stays JSON lines
  const child = track(
    spawn(process.execPath, [SERVER, `--port=${port}`, "--headless"], {
      env: { PATH: process.env.PATH ?? "" },
      stdio: ["ignore", "ignore", "pipe"],
    }),
  );
  let stderr = "";
  child.stderr?.setEncoding("utf8");
  child.stderr?.on("data", (d: string) => {
    if (stderr.length < STDERR_KEEP) stderr += d;
  });
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill("SIGTERM");
    await waitForExit(child, 5_000).catch(() => child.kill("SIGKILL"));
  };
  const headers = { "x-portkey-provider": "openai", "x-portkey-custom-host": m.sim.baseUrl };
  try {
    await waitForHello(`${url}/`, child, () => stderr, 30_000);
    const verified = await verify(m, { url, headers });
    emit({
      bench: "portkey.peer",
      version: PORTKEY_VERSION,
      url,
      customHost: m.sim.baseUrl,
      // a buffered and a streamed chat through Portkey equalled the simulator's own answers
      verified,
    });
  } catch (e) {
    await stop();
    throw e;
  }
  return {
    version: PORTKEY_VERSION,
    url,
    pid: child.pid,
    headers,
    chat: (body, stream) => post(`${url}/v1/chat/completions`, m.directKey, body, stream, headers),
    async close(emitLine) {
      await stop();
      if (stderr.length > 0)
        emitLine({ bench: "portkey.output", stderrBytes: stderr.length, sample: stderr.slice(0, 600) });
    },
  };
}
