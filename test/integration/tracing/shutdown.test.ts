// Issue 40 deliver 3: with the OTLP endpoint unreachable, the service's tracing shutdown (what
// runtime.close() awaits last) still resolves, within a bound of at most 2 s: the exporter gives up
// after EXPORT_TIMEOUT_MS, and shutdown stops waiting at SHUTDOWN_DEADLINE_MS whatever the exporter
// does. Two unreachable collectors: a closed port (refused, which the exporter retries with backoff)
// and one that takes the connection and never answers. The 5 s race is a hang guard, not the bound.
import { createServer, type Server, type Socket } from "node:net";
import { afterEach, describe, expect, test } from "vitest";
import { EXPORT_TIMEOUT_MS, SHUTDOWN_DEADLINE_MS, startTracing, type Tracing } from "../../../src/adapters/tracing.js";
import { startSpan, tracingOn } from "../../../src/lib/tracing.js";

const HANG_GUARD_MS = 5_000;

function listen(server: Server): Promise<number> {
  return new Promise((r) => server.listen(0, "127.0.0.1", () => r((server.address() as { port: number }).port)));
}

/** A port nothing listens on (bound, then released). */
async function closedPort(): Promise<number> {
  const s = createServer();
  const port = await listen(s);
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

let tracing: Tracing | undefined;
const silent: Server[] = [];
const held: Socket[] = [];
afterEach(async () => {
  await tracing?.shutdown();
  tracing = undefined;
  for (const socket of held.splice(0)) socket.destroy();
  for (const s of silent.splice(0)) await new Promise<void>((r) => s.close(() => r()));
});

/** Starts tracing towards `url`, ends a few spans (so there is something to export), and stops it. */
async function stopWith(url: string): Promise<"stopped" | "hung"> {
  tracing = await startTracing({ tracesUrl: url, serviceName: "shutdown-test" });
  expect(tracingOn()).toBe(true);
  for (let i = 0; i < 5; i++) startSpan(`span ${i}`, { "svc.n": i }).end();
  const t = tracing;
  const result = await Promise.race([
    t.shutdown().then(() => "stopped" as const),
    new Promise<"hung">((r) => setTimeout(() => r("hung"), HANG_GUARD_MS).unref()),
  ]);
  return result;
}

describe("tracing shutdown with the collector unreachable", () => {
  test("the configured export timeout and shutdown deadline are at most 2 s", () => {
    expect(EXPORT_TIMEOUT_MS).toBeLessThanOrEqual(2_000);
    expect(SHUTDOWN_DEADLINE_MS).toBeLessThanOrEqual(2_000);
    expect(EXPORT_TIMEOUT_MS).toBeLessThanOrEqual(SHUTDOWN_DEADLINE_MS);
  });

  test("a closed port: shutdown resolves and the SDK is unregistered", async () => {
    const port = await closedPort();
    expect(await stopWith(`http://127.0.0.1:${port}/v1/traces`)).toBe("stopped");
    expect(tracingOn()).toBe(false);
  });

  test("a collector that never answers: shutdown resolves all the same", async () => {
    // takes the connection, says nothing
    const server = createServer((socket) => {
      held.push(socket);
    });
    silent.push(server);
    const port = await listen(server);
    expect(await stopWith(`http://127.0.0.1:${port}/v1/traces`)).toBe("stopped");
    expect(tracingOn()).toBe(false);
  });
});
