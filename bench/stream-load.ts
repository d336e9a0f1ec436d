// The memory section's client (issue 19 target 4), in a process of its own so its sockets do not
// count against the bench process's (which hosts the simulator's). Opens `streams` chat streams,
// one connection each, paced by the service: at most `window` requests may be waiting for
// admission (sent, and neither open at the upstream nor ended: the bench reads the upstream's count
// of open streams from the simulator and writes `{"upstream": n}` lines to stdin). Each stream is told (by its chunk delay) to end at
// `holdUntilMs` after the start or 10 s after it is sent, whichever is later, spread over 10 s, so
// every stream opened before the hold ends is open at once. Reports progress every 250 ms and, at the
// end, each stream's status, support reference and `svc.cost`. Self-stopping: exits after
// `timeoutMs` whatever is still open. Configured by BENCH_STREAM_LOAD (JSON); prints JSON lines.
import http from "node:http";
import { performance } from "node:perf_hooks";

interface Config {
  url: string;
  keys: string[];
  model: string;
  chunks: number;
  streams: number;
  window: number;
  ratePerSecond: number;
  holdUntilMs: number;
  timeoutMs: number;
}

const cfg = JSON.parse(process.env.BENCH_STREAM_LOAD ?? "{}") as Config;
const agent = new http.Agent({ keepAlive: false, maxSockets: Number.POSITIVE_INFINITY });
const u = new URL(cfg.url);

/** per stream: [status, supportReference, costUsdc, sawDone (0/1), error] */
type Result = [number, string, string, number, string];
const results: Result[] = [];
let sent = 0;
let streaming = 0;
let peakStreaming = 0;
let peakAtMs = 0;
let ended = 0;
let failed = 0;
let upstream = 0;
let firstError = "";
let rampEndMs: number | null = null;
const t0 = performance.now();
const now = () => performance.now() - t0;

function out(line: Record<string, unknown>): void {
  process.stdout.write(`${JSON.stringify(line)}\n`);
}

function body(i: number): string {
  // end at the hold (or 10 s from now), spread over 10 s so the endings do not all land at once
  const endAt = Math.max(cfg.holdUntilMs, now() + 10_000) + (i % 20) * 500;
  const delay = Math.max(1, Math.round((endAt - now()) / cfg.chunks));
  const directives = `[[sim:tokens=${cfg.chunks}]][[sim:chunks=${cfg.chunks}]][[sim:chunk_delay_ms=${delay}]]`;
  return JSON.stringify({
    model: cfg.model,
    messages: [{ role: "user", content: `Memory stream ${directives}` }],
    max_tokens: 32,
    stream: true,
  });
}

function open(i: number): void {
  sent++;
  const payload = body(i);
  let started = false;
  let settled = false;
  const finish = (r: Result) => {
    if (settled) return;
    settled = true;
    if (started) streaming--;
    ended++;
    if (r[0] !== 200 || !r[2] || r[3] !== 1) {
      failed++;
      if (!firstError) firstError = `${r[0]} ${r[4]}`.slice(0, 300);
    }
    results.push(r);
  };
  const req = http.request(
    {
      agent,
      host: u.hostname,
      port: u.port,
      path: u.pathname,
      method: "POST",
      headers: {
        authorization: `Bearer ${cfg.keys[i % cfg.keys.length]}`,
        "content-type": "application/json",
        "content-length": Buffer.byteLength(payload),
      },
    },
    (res) => {
      res.setEncoding("utf8");
      let text = "";
      res.on("data", (d: string) => {
        if (!started && res.statusCode === 200 && /"content":"[^"]/.test(d)) {
          started = true;
          streaming++;
          if (streaming > peakStreaming) {
            peakStreaming = streaming;
            peakAtMs = Math.round(now());
          }
        }
        // only the tail matters (the cost frame, [DONE], or an error body)
        text = (text + d).slice(-4096);
      });
      res.on("end", () => {
        let ref = "";
        let cost = "";
        const m = /data: (\{"[^\n]*"object":"svc\.cost"[^\n]*)\n/.exec(text);
        if (m?.[1]) {
          const f = JSON.parse(m[1]) as { costUsdc: string; supportReference: string };
          ref = f.supportReference;
          cost = f.costUsdc;
        }
        finish([res.statusCode ?? 0, ref, cost, text.includes("data: [DONE]") ? 1 : 0, cost ? "" : text.slice(-300)]);
      });
      res.on("error", (e) => finish([res.statusCode ?? 0, "", "", 0, e.message]));
    },
  );
  req.on("error", (e) => finish([0, "", "", 0, e.message]));
  req.end(payload);
}

// streams open at the upstream now, from the bench (the admission window's other edge)
let stdinBuf = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (d: string) => {
  stdinBuf += d;
  let nl = stdinBuf.indexOf("\n");
  while (nl >= 0) {
    const line = JSON.parse(stdinBuf.slice(0, nl)) as { upstream?: number };
    stdinBuf = stdinBuf.slice(nl + 1);
    nl = stdinBuf.indexOf("\n");
    if (typeof line.upstream === "number") upstream = line.upstream;
  }
});

function progress(): Record<string, unknown> {
  return { t: Math.round(now()), sent, upstream, streaming, peakStreaming, peakAtMs, ended, failed, rampEndMs };
}

// the ramp: every 20 ms, a share of the rate, while the admission window has room
const perTick = Math.max(1, Math.round(cfg.ratePerSecond / 50));
const ramp = setInterval(() => {
  // waiting for admission: sent, and neither open at the upstream nor ended
  for (let k = 0; k < perTick && sent < cfg.streams && sent - upstream - ended < cfg.window; k++) open(sent);
  if (sent >= cfg.streams) {
    rampEndMs = Math.round(now());
    clearInterval(ramp);
  }
}, 20);
const ticker = setInterval(() => {
  out({ progress: progress() });
  if (ended >= cfg.streams) finishRun(false);
}, 250);
const deadline = setTimeout(() => finishRun(true), cfg.timeoutMs);

function finishRun(timedOut: boolean): void {
  clearInterval(ramp);
  clearInterval(ticker);
  clearTimeout(deadline);
  // whatever is still open is cut here (the run is bounded), once the report has left: a large
  // write to a pipe may still be queued when `write` returns
  process.stdout.write(`${JSON.stringify({ done: { ...progress(), timedOut, firstError }, streams: results })}\n`, () =>
    process.exit(0),
  );
}
