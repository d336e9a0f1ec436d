import { connect } from "node:net";
import { tmpdir } from "node:os";
import { StartupError } from "../../adapters/db.js";
import { logger } from "../../lib/logger.js";
import { lastLine, socketHost, spawnGuarded } from "./process.js";

/** A redis-server child on REDIS_URL's loopback host and port, keeping nothing on disk. */
export interface LocalRedis {
  readonly pid: number;
  /** the redis-server executable that runs */
  readonly binary: string;
  /** SIGTERM, waits until it is gone. Idempotent. */
  stop(): Promise<void>;
}

const READY_TIMEOUT_MS = 10_000;

/** Sends PING; resolves with the first reply line, or undefined if nothing answers. */
function ping(host: string, port: number): Promise<string | undefined> {
  return new Promise((resolve) => {
    const socket = connect({ host, port, timeout: 1_000 });
    let reply = "";
    const finish = (value: string | undefined) => {
      socket.destroy();
      resolve(value);
    };
    socket.once("connect", () => socket.write("PING\r\n"));
    socket.on("data", (d: Buffer) => {
      reply += d.toString("utf8");
      if (reply.includes("\r\n")) finish(reply.split("\r\n")[0]);
    });
    socket.once("timeout", () => finish(undefined));
    socket.once("error", () => finish(undefined));
    socket.once("close", () => finish(reply || undefined));
  });
}

export async function startRedisServer(opts: { url: URL; binary: string }): Promise<LocalRedis> {
  const host = socketHost(opts.url);
  const port = Number(opts.url.port || 6379);
  const password = decodeURIComponent(opts.url.password);
  const args = [
    "--port",
    String(port),
    "--bind",
    ...(host === "localhost" ? ["127.0.0.1", "-::1"] : [host]),
    "--save",
    "",
    "--appendonly",
    "no",
    "--daemonize",
    "no",
    "--loglevel",
    "warning",
    "--dir",
    tmpdir(),
  ];
  if (password) args.push("--requirepass", password);
  const server = await spawnGuarded({ command: opts.binary, args, stopSignal: "SIGTERM", cwd: tmpdir() });
  const end = Date.now() + READY_TIMEOUT_MS;
  for (;;) {
    const reply = await ping(host === "localhost" ? "127.0.0.1" : host, port);
    // -NOAUTH: it answers, and wants the URL's password
    if (reply === "+PONG" || reply?.startsWith("-NOAUTH")) break;
    if (!server.running() || Date.now() > end) {
      await server.stop(5_000);
      throw new StartupError(
        `REDIS_URL: ${opts.binary} did not start on ${host}:${port} (${lastLine(server.tail()) || "no output"})`,
      );
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  let stopping = false;
  void server.exited.then(() => {
    if (!stopping) logger.error({ port, output: lastLine(server.tail()) }, "redis-server exited unexpectedly");
  });
  return {
    pid: server.pid,
    binary: opts.binary,
    async stop() {
      stopping = true;
      await server.stop(5_000);
    },
  };
}
