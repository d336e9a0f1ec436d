import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { privateKeyToAccount } from "viem/accounts";
import { afterAll, describe, expect, test } from "vitest";
import { StartupError } from "../../../src/adapters/db.js";
import { parseDecimal6 } from "../../../src/lib/money.js";
import { isAlive } from "../../../src/lib/process.js";
import { type DevServices, postgresDataDir, startDevServices } from "../../../src/local/dev-services/index.js";
import { waitUntilGone } from "../../../src/local/dev-services/process.js";
import { x402Signup } from "../../../testkit/funding.js";
import { freePort } from "../../../testkit/harness.js";
import { spawnDev, waitFor, waitForAsync, waitForExit } from "../../../testkit/spawn.js";

// Deliverable 6 of issue 31: `npm run dev` with Node alone (plus a redis-server binary).

const dirs: string[] = [];
/** A fresh DEV_STATE_DIR; as root the embedded PostgreSQL runs as the user postgres, who must reach it. */
function freshStateDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "svc-dev-state-"));
  chmodSync(dir, 0o755);
  dirs.push(dir);
  return dir;
}
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** Every process whose command line matches (`ps`, so the check needs no knowledge of our code). */
function processesMatching(re: RegExp): string[] {
  return execFileSync("ps", ["-eo", "pid=,args="], { encoding: "utf8" })
    .split("\n")
    .filter((line) => re.test(line) && !line.includes("ps -eo"));
}

function reEscape(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

function postmasterPid(dataDir: string): number {
  return Number.parseInt(readFileSync(join(dataDir, "postmaster.pid"), "utf8").split("\n")[0] ?? "", 10);
}

async function tcpRefused(port: number): Promise<boolean> {
  const { connect } = await import("node:net");
  return new Promise((resolve) => {
    const s = connect({ host: "127.0.0.1", port });
    s.once("connect", () => {
      s.destroy();
      resolve(false);
    });
    s.once("error", () => resolve(true));
  });
}

describe("npm run dev with no PostgreSQL and no Redis at its URLs", () => {
  test("runs an embedded PostgreSQL and a redis-server, sells a paid chat, and SIGTERM leaves no process behind", async () => {
    const port = await freePort();
    const pgPort = await freePort();
    const redisPort = await freePort();
    const stateDir = freshStateDir();
    const dataDir = postgresDataDir(stateDir);
    const child = spawnDev({
      PORT: String(port),
      DATABASE_URL: `postgresql://postgres@127.0.0.1:${pgPort}/svc`,
      REDIS_URL: `redis://127.0.0.1:${redisPort}`,
      DEV_STATE_DIR: stateDir,
      CONFIRMATION_BLOCKS: "2",
      LOG_LEVEL: "warn",
    });
    try {
      await waitFor(() => child.output().stdout.includes("Ctrl-C stops"), 90_000, "the banner");
      const out = child.output().stdout;
      expect(out).toContain(
        `PostgreSQL: nothing answered at 127.0.0.1:${pgPort}, so an embedded PostgreSQL 18.4 runs there; its data is in ${dataDir} (initialised now)`,
      );
      expect(out).toMatch(
        new RegExp(`Redis: nothing answered at 127\\.0\\.0\\.1:${redisPort}, so \\S*redis-server runs there`),
      );
      expect(out).toContain("then the PostgreSQL and redis-server above.");

      // both run for this process, where the URLs point
      const pgPid = postmasterPid(dataDir);
      expect(isAlive(pgPid)).toBe(true);
      expect(
        processesMatching(new RegExp(`^\\s*${pgPid} \\S*/postgres -D ${reEscape(dataDir)} -p ${pgPort}\\b`)),
      ).toHaveLength(1);
      const redisLines = processesMatching(new RegExp(`redis-server 127\\.0\\.0\\.1:${redisPort}\\b`));
      expect(redisLines).toHaveLength(1);
      const redisPid = Number.parseInt(redisLines[0]?.trim() ?? "", 10);

      // a buyer signs up with x402 on the local chain (a dev wallet from the banner), then buys a chat
      const base = `http://127.0.0.1:${port}`;
      const buyerKey = /\n\s+(0x[0-9a-fA-F]{40})\s+(0x[0-9a-f]{64})/.exec(out)?.[2];
      expect(buyerKey).toBeDefined();
      const buyer = privateKeyToAccount(buyerKey as `0x${string}`);
      const signup = await x402Signup(base, buyer, 2_000_000);
      expect(signup.status).toBe(200);
      const apiKey = String(signup.body.apiKey);
      const confirmed = async () =>
        (
          (await (await fetch(`${base}/v1/agent/me`, { headers: { authorization: `Bearer ${apiKey}` } })).json()) as {
            confirmedUsdc: string;
          }
        ).confirmedUsdc;
      await waitForAsync(async () => (await confirmed()) === "2.000000", 30_000, "the credit to confirm");
      const chat = await fetch(`${base}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
        body: JSON.stringify({ model: "zai-org-glm-5-1", messages: [{ role: "user", content: "hi" }] }),
      });
      expect(chat.status).toBe(200);
      const body = (await chat.json()) as { choices: { message: { content: string } }[] };
      expect(body.choices[0]?.message.content).toBeTruthy();
      const cost = parseDecimal6(chat.headers.get("x-svc-cost-usdc") ?? "") ?? 0n;
      expect(cost).toBeGreaterThan(0n);
      expect(parseDecimal6(await confirmed())).toBe(2_000_000n - cost);

      child.kill("SIGTERM");
      expect(await waitForExit(child, 30_000)).toBe(0);
      // nothing it started is left: not by pid, not by data directory or port, and both ports are closed
      expect(isAlive(pgPid)).toBe(false);
      expect(isAlive(redisPid)).toBe(false);
      expect(processesMatching(new RegExp(reEscape(dataDir)))).toEqual([]);
      expect(processesMatching(new RegExp(`redis-server \\S*:${redisPort}\\b`))).toEqual([]);
      expect(await tcpRefused(pgPort)).toBe(true);
      expect(await tcpRefused(redisPort)).toBe(true);
      // a clean shutdown: PostgreSQL removed its lock file
      expect(existsSync(join(dataDir, "postmaster.pid"))).toBe(false);
    } finally {
      if (child.exitCode === null) child.kill("SIGKILL");
    }
  }, 180_000);
});

describe("the dev services never outlive the dev process", () => {
  async function env(stateDir: string) {
    return {
      DATABASE_URL: `postgresql://postgres@127.0.0.1:${await freePort()}/svc`,
      REDIS_URL: `redis://127.0.0.1:${await freePort()}`,
      DEV_STATE_DIR: stateDir,
      PATH: process.env.PATH ?? "",
    };
  }
  const quiet = () => undefined;

  test("a SIGKILLed dev process takes its PostgreSQL and redis-server with it; the next start reuses the cluster", async () => {
    const stateDir = freshStateDir();
    const e = await env(stateDir);
    const fixture = fileURLToPath(new URL("./fixtures/dev-services-child.ts", import.meta.url));
    const child: ChildProcess = spawn(process.execPath, ["--import", "tsx", fixture], {
      env: { ...process.env, ...e },
      stdio: ["ignore", "pipe", "inherit"],
    });
    const pids = await new Promise<{ postgresPid: number; redisPid: number }>((resolve, reject) => {
      let out = "";
      child.stdout?.on("data", (d: Buffer) => {
        out += d.toString();
        const line = out.split("\n").find((l) => l.startsWith("{"));
        if (line) resolve(JSON.parse(line) as { postgresPid: number; redisPid: number });
      });
      child.once("exit", (code) => reject(new Error(`child exited early (${code})`)));
    });
    expect(isAlive(pids.postgresPid)).toBe(true);
    expect(isAlive(pids.redisPid)).toBe(true);
    const exited = new Promise((r) => child.once("exit", r));
    child.kill("SIGKILL");
    await exited;
    expect(await waitUntilGone(pids.postgresPid, 15_000)).toBe(true);
    expect(await waitUntilGone(pids.redisPid, 15_000)).toBe(true);

    const next = await startDevServices({ env: e, stateDir, say: quiet });
    try {
      expect(next.postgres?.initialised).toBe(false);
      expect(next.postgres?.pid).not.toBe(pids.postgresPid);
      expect(isAlive(next.postgres?.pid ?? 0)).toBe(true);
    } finally {
      await next.stop();
    }
    expect(isAlive(next.postgres?.pid ?? 0)).toBe(false);
    expect(isAlive(next.redis?.pid ?? 0)).toBe(false);
  }, 60_000);

  test("a postmaster.pid whose pid is now another process is removed, and that process is left alone", async () => {
    const stateDir = freshStateDir();
    const e = await env(stateDir);
    const first = await startDevServices({ env: e, stateDir, say: quiet });
    await first.stop();
    // PostgreSQL itself ignores a lock file naming a dead pid, but not one naming a live process of
    // its own user ("lock file already exists"): plant one, as after a reboot that reused the pid
    const asPostgres =
      process.getuid?.() === 0
        ? {
            uid: Number(execFileSync("id", ["-u", "postgres"], { encoding: "utf8" })),
            gid: Number(execFileSync("id", ["-g", "postgres"], { encoding: "utf8" })),
          }
        : {};
    const sleeper = spawn("sleep", ["60"], { stdio: "ignore", ...asPostgres });
    const dataDir = postgresDataDir(stateDir);
    try {
      writeFileSync(join(dataDir, "postmaster.pid"), `${sleeper.pid}\n${dataDir}\n0\n1\n\n127.0.0.1\n0 0\nready\n`);
      const said: string[] = [];
      const next = await startDevServices({ env: e, stateDir, say: (l) => said.push(l) });
      try {
        expect(said[0]).toBe(
          `PostgreSQL: removed a stale ${dataDir}/postmaster.pid (its pid ${sleeper.pid} is now another process)`,
        );
        expect(isAlive(next.postgres?.pid ?? 0)).toBe(true);
        expect(postmasterPid(dataDir)).toBe(next.postgres?.pid);
        expect(isAlive(sleeper.pid ?? 0)).toBe(true);
      } finally {
        await next.stop();
      }
    } finally {
      sleeper.kill("SIGKILL");
    }
  }, 60_000);

  test("a cluster whose dev process is alive is used as it is; one whose dev process is gone is stopped and replaced", async () => {
    const stateDir = freshStateDir();
    const e = await env(stateDir);
    const first = await startDevServices({ env: { ...e, REDIS_URL: undefined }, stateDir, say: quiet });
    let third: DevServices | undefined;
    try {
      const firstPid = first.postgres?.pid ?? 0;
      // the owner (this process) lives: the server answers at DATABASE_URL and nothing new starts
      const second = await startDevServices({ env: { ...e, REDIS_URL: undefined }, stateDir, say: quiet });
      expect(second.postgres).toBeUndefined();
      expect(isAlive(firstPid)).toBe(true);

      // its dev process is gone (as after SIGKILL of both it and the watchdog): stopped and replaced
      const dead = spawn("true");
      await new Promise((r) => dead.once("exit", r));
      writeFileSync(join(stateDir, "postgres.owner"), `${dead.pid} ${firstPid}\n`);
      const said: string[] = [];
      third = await startDevServices({ env: { ...e, REDIS_URL: undefined }, stateDir, say: (l) => said.push(l) });
      expect(said[0]).toBe(
        `PostgreSQL: stopping the embedded PostgreSQL (pid ${firstPid}) left running by a dev process that is gone`,
      );
      expect(isAlive(firstPid)).toBe(false);
      expect(third.postgres?.initialised).toBe(false);
      expect(isAlive(third.postgres?.pid ?? 0)).toBe(true);
    } finally {
      await first.stop();
      await third?.stop();
    }
  }, 60_000);
});

describe("what cannot be started is said in one line naming the variable, before anything starts", () => {
  test("no Redis and no redis-server on PATH", async () => {
    const stateDir = freshStateDir();
    const redisPort = await freePort();
    const e = {
      DATABASE_URL: `postgresql://postgres@127.0.0.1:${await freePort()}/svc`,
      REDIS_URL: `redis://127.0.0.1:${redisPort}`,
      PATH: "/nonexistent",
    };
    const err = await startDevServices({ env: e, stateDir, say: () => undefined }).catch((x: unknown) => x);
    expect(err).toBeInstanceOf(StartupError);
    expect((err as Error).message).toBe(
      `REDIS_URL: no Redis answers at 127.0.0.1:${redisPort} and there is no redis-server on PATH: run \`docker compose up -d redis\` (this repository's docker-compose.yml) or install your OS's package (apt install redis-server, brew install redis)`,
    );
    // checked before the embedded PostgreSQL was initialised
    expect(existsSync(postgresDataDir(stateDir))).toBe(false);
  });

  test("no PostgreSQL at a DATABASE_URL that is not on this machine", async () => {
    const stateDir = freshStateDir();
    const e = { DATABASE_URL: "postgresql://postgres@192.0.2.1:5432/svc", REDIS_URL: "redis://127.0.0.1:6379" };
    const err = await startDevServices({ env: e, stateDir, say: () => undefined }).catch((x: unknown) => x);
    expect(err).toBeInstanceOf(StartupError);
    expect((err as Error).message).toBe(
      "DATABASE_URL: no PostgreSQL answers at 192.0.2.1:5432, and an embedded one is only started on a loopback host (127.0.0.1, ::1, localhost)",
    );
    expect(existsSync(postgresDataDir(stateDir))).toBe(false);
  });
});
