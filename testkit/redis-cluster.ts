import { type ChildProcess, spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { freePort } from "./harness.js";

/**
 * A real Redis Cluster on loopback for tests and soaks (issue 42): `masters` masters with
 * `replicasPerMaster` replicas each, one `redis-server --cluster-enabled yes` per node in a temp
 * dir, joined by `redis-cli --cluster create`. Every node's client port and cluster-bus port is a
 * free port picked at start (`--cluster-port`, so nothing is assumed at port + 10000); nothing is
 * kept on disk after `stop()`.
 *
 *   const cluster = await startRedisCluster();      // 3 masters, 3 replicas
 *   process.env.REDIS_URL = cluster.url;            // redis+cluster://127.0.0.1:P1,…
 *   await cluster.failover(cluster.masterOf("some-key"));  // a replica takes over, gracefully
 *   await cluster.kill(port, { waitForPromotion: true });  // or dies: its replica is promoted
 *   await cluster.restart(port);                    // and comes back as a replica
 *   await cluster.stop();
 *
 * Needs `redis-server` and `redis-cli` (7.0 or later) on PATH.
 */
export interface RedisClusterNode {
  port: number;
  busPort: number;
  proc: ChildProcess | null;
}

export interface RedisCluster {
  /** `redis+cluster://127.0.0.1:<port>,…` of every node (a seed list: any live one will do) */
  readonly url: string;
  readonly nodes: readonly RedisClusterNode[];
  /** the port of the master serving `key`'s slot now */
  masterOf(key: string): Promise<number>;
  /** the ports of the current masters */
  masters(): Promise<number[]>;
  /** a graceful failover: a replica of the master at `masterPort` takes over (CLUSTER FAILOVER); resolves once it has */
  failover(masterPort: number, timeoutMs?: number): Promise<{ newMaster: number }>;
  /** SIGKILLs the node at `port`; with `waitForPromotion`, resolves once a replica serves its slots */
  kill(port: number, opts?: { waitForPromotion?: boolean; timeoutMs?: number }): Promise<{ newMaster?: number }>;
  /** starts a killed node again (same port and config): it rejoins, as a replica of whoever took its slots */
  restart(port: number, timeoutMs?: number): Promise<void>;
  /** resolves once every replica of the master at `masterPort` has everything the master has written so far */
  replicated(masterPort: number, timeoutMs?: number): Promise<void>;
  /** every slot served and every live node agreeing the cluster is ok */
  waitHealthy(timeoutMs?: number): Promise<void>;
  stop(): Promise<void>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function run(cmd: string, args: string[], timeoutMs = 30_000): Promise<string> {
  return new Promise((resolve, reject) => {
    const p = spawn(cmd, args, { stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    p.stdout.on("data", (d) => {
      out += d;
    });
    p.stderr.on("data", (d) => {
      out += d;
    });
    const timer = setTimeout(() => p.kill("SIGKILL"), timeoutMs);
    p.once("error", reject);
    p.once("exit", (code) => {
      clearTimeout(timer);
      if (code === 0) resolve(out);
      else reject(new Error(`${cmd} ${args.join(" ")} exited ${code}: ${out.slice(-2000)}`));
    });
  });
}

/** One admin command to one node (a fresh connection, never retried); its reply as it is. */
async function askRaw(port: number, ...args: string[]): Promise<unknown> {
  const r = new Redis({
    host: "127.0.0.1",
    port,
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  r.on("error", () => undefined); // a node that is down: connect() rejects with it
  try {
    await r.connect();
    return await r.call(args[0] as string, ...args.slice(1));
  } finally {
    r.disconnect();
  }
}

async function ask(port: number, ...args: string[]): Promise<string> {
  return String(await askRaw(port, ...args));
}

interface NodeLine {
  id: string;
  port: number;
  master: boolean;
  masterId: string | null;
  failed: boolean;
  slots: boolean;
}

/** CLUSTER NODES as one node sees it. */
async function clusterNodes(port: number): Promise<NodeLine[]> {
  return (await ask(port, "CLUSTER", "NODES"))
    .trim()
    .split("\n")
    .map((line) => {
      const f = line.split(" ");
      const flags = (f[2] ?? "").split(",");
      return {
        id: f[0] as string,
        port: Number((f[1] ?? "").split("@")[0]?.split(":").pop()),
        master: flags.includes("master"),
        masterId: f[3] === "-" ? null : (f[3] ?? null),
        failed: flags.includes("fail") || flags.includes("fail?"),
        slots: f.length > 8,
      };
    });
}

async function until<T>(what: string, timeoutMs: number, probe: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await probe();
      if (v !== undefined) return v;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline)
      throw new Error(`redis cluster: ${what} not within ${timeoutMs} ms${last ? ` (${last})` : ""}`);
    await sleep(100);
  }
}

export async function startRedisCluster(
  opts: { masters?: number; replicasPerMaster?: number } = {},
): Promise<RedisCluster> {
  const masters = opts.masters ?? 3;
  const replicas = opts.replicasPerMaster ?? 1;
  const dir = await mkdtemp(join(tmpdir(), "svc-redis-cluster-"));
  const nodes: RedisClusterNode[] = [];
  const used = new Set<number>();
  const pick = async () => {
    for (;;) {
      const p = await freePort();
      if (!used.has(p)) {
        used.add(p);
        return p;
      }
    }
  };
  for (let i = 0; i < masters * (1 + replicas); i++)
    nodes.push({ port: await pick(), busPort: await pick(), proc: null });

  const startNode = (n: RedisClusterNode) => {
    // node timeout 2 s: a dead master is failed and its replica promoted within a few seconds
    const args = [
      ...["--port", String(n.port), "--bind", "127.0.0.1", "--cluster-enabled", "yes"],
      ...["--cluster-port", String(n.busPort), "--cluster-config-file", join(dir, `nodes-${n.port}.conf`)],
      ...["--cluster-node-timeout", "2000", "--dir", dir, "--save", "", "--appendonly", "no"],
      ...["--loglevel", "warning", "--logfile", join(dir, `${n.port}.log`)],
    ];
    n.proc = spawn("redis-server", args, { stdio: "ignore" });
    n.proc.once("exit", () => {
      n.proc = null;
    });
  };

  const stop = async () => {
    process.off("exit", killAll);
    await Promise.all(
      nodes.map(async (n) => {
        const p = n.proc;
        if (!p) return;
        const gone = new Promise((r) => p.once("exit", r));
        p.kill("SIGKILL");
        await Promise.race([gone, sleep(3000)]);
      }),
    );
    await rm(dir, { recursive: true, force: true });
  };

  const waitHealthy = async (timeoutMs = 20_000) => {
    await until("healthy", timeoutMs, async () => {
      const live = nodes.filter((n) => n.proc);
      for (const n of live) {
        const info = await ask(n.port, "CLUSTER", "INFO");
        if (!/cluster_state:ok/.test(info) || !/cluster_slots_ok:16384/.test(info)) return undefined;
      }
      // every live node agrees on the masters holding slots, and none of them is failed
      const view = await clusterNodes(live[0]?.port as number);
      if (view.some((v) => v.master && v.slots && v.failed)) return undefined;
      // and every live replica of a live master in sync with it (a replica that never synced cannot take over)
      const liveMasters = new Set(view.filter((v) => v.master && !v.failed).map((v) => v.id));
      for (const v of view) {
        if (v.master || !v.masterId || !liveMasters.has(v.masterId) || !live.some((n) => n.port === v.port)) continue;
        if (!/master_link_status:up/.test(await ask(v.port, "INFO", "replication"))) return undefined;
      }
      return true;
    });
  };

  // a test process that ends without stop() (a hook timed out, a crash) takes its nodes with it
  const killAll = () => {
    for (const n of nodes) n.proc?.kill("SIGKILL");
  };
  process.once("exit", killAll);
  try {
    for (const n of nodes) startNode(n);
    for (const n of nodes)
      await until(`node ${n.port} up`, 10_000, async () => ((await ask(n.port, "PING")) === "PONG" ? true : undefined));
    await run("redis-cli", [
      "--cluster",
      "create",
      ...nodes.map((n) => `127.0.0.1:${n.port}`),
      "--cluster-replicas",
      String(replicas),
      "--cluster-yes",
    ]);
    await waitHealthy(30_000);
    // every replica attached to its master (so a failover has somewhere to go)
    await until("replicas attached", 30_000, async () => {
      for (const n of nodes) {
        const attached = (await clusterNodes(n.port)).filter((v) => !v.master && v.masterId).length;
        if (attached !== masters * replicas) return undefined;
      }
      return true;
    });
  } catch (e) {
    await stop();
    throw e;
  }

  const livePort = () => {
    const n = nodes.find((x) => x.proc);
    if (!n) throw new Error("redis cluster: no node is running");
    return n.port;
  };

  const masterPorts = async () => {
    const view = await clusterNodes(livePort());
    return view.filter((v) => v.master && v.slots && !v.failed).map((v) => v.port);
  };

  /** the master serving slots now that was not one of `before` (the promoted replica) */
  const promotedSince = async (before: number[], what: string, timeoutMs: number) =>
    until(what, timeoutMs, async () => {
      const now = await masterPorts();
      const promoted = now.find((p) => !before.includes(p));
      return promoted !== undefined && now.length === before.length ? promoted : undefined;
    });

  return {
    url: `redis+cluster://${nodes.map((n) => `127.0.0.1:${n.port}`).join(",")}`,
    nodes,
    async masterOf(key) {
      const slot = Number(await ask(livePort(), "CLUSTER", "KEYSLOT", key));
      const ranges = (await askRaw(livePort(), "CLUSTER", "SLOTS")) as Array<[number, number, [string, number]]>;
      const hit = ranges.find(([from, to]) => slot >= from && slot <= to);
      if (!hit) throw new Error(`redis cluster: slot ${slot} is not served`);
      return hit[2][1];
    },
    masters: masterPorts,
    async failover(masterPort, timeoutMs = 20_000) {
      const before = await masterPorts();
      const replica = await until(`a live replica of ${masterPort}`, timeoutMs, async () => {
        const view = await clusterNodes(masterPort);
        const me = view.find((v) => v.port === masterPort);
        return view.find((v) => v.masterId === me?.id && !v.failed)?.port;
      });
      await ask(replica, "CLUSTER", "FAILOVER");
      const newMaster = await promotedSince(before, `${replica} taking over from ${masterPort}`, timeoutMs);
      await waitHealthy(timeoutMs);
      return { newMaster };
    },
    async kill(port, o = {}) {
      const before = await masterPorts();
      const n = nodes.find((x) => x.port === port);
      const p = n?.proc;
      if (p) {
        const gone = new Promise((r) => p.once("exit", r));
        p.kill("SIGKILL");
        await gone;
      }
      if (!o.waitForPromotion || !before.includes(port)) return {};
      const timeoutMs = o.timeoutMs ?? 30_000;
      const newMaster = await promotedSince(before, `a replica of ${port} promoted`, timeoutMs);
      await waitHealthy(timeoutMs);
      return { newMaster };
    },
    async restart(port, timeoutMs = 30_000) {
      const n = nodes.find((x) => x.port === port);
      if (!n) throw new Error(`redis cluster: no node at ${port}`);
      if (n.proc) return;
      startNode(n);
      await until(`node ${port} up`, timeoutMs, async () => ((await ask(port, "PING")) === "PONG" ? true : undefined));
      await waitHealthy(timeoutMs);
    },
    async replicated(masterPort, timeoutMs = 10_000) {
      await until(`the replicas of ${masterPort} in sync`, timeoutMs, async () => {
        const info = await ask(masterPort, "INFO", "replication");
        const offset = Number(/master_repl_offset:(\d+)/.exec(info)?.[1]);
        const replicas = [...info.matchAll(/^slave\d+:.*offset=(\d+)/gm)].map((m) => Number(m[1]));
        return replicas.length > 0 && replicas.every((o) => o >= offset) ? true : undefined;
      });
    },
    waitHealthy,
    stop,
  };
}
