import { connect as netConnect, type Socket } from "node:net";
import { type TLSSocket, connect as tlsConnect } from "node:tls";
import { AbstractConnector, Redis, type RedisOptions } from "ioredis";
import type { ClusterUrl } from "../../lib/redis-url.js";

/**
 * A plain Redis connection to whichever master of a Redis Cluster serves one slot, found again on
 * every (re)connect. BullMQ's queues live in one slot each (`<prefix>:bull:{<queue>}`), so a queue's
 * producer and workers need only that slot's master; a plain connection keeps BullMQ on the code
 * path it has with one Redis (docs/decisions.md "Redis Cluster", "A killed master").
 *
 * How it follows a failover:
 * - connect: asks the seed nodes (the first that answers) `CLUSTER SLOTS` and connects to the
 *   slot's master; when no seed answers it tries the master it knew, so ioredis's own retry loop
 *   (`retryStrategy`) runs as after any lost connection;
 * - the ready check: a node that answers `role:slave` (a demoted master, a replica not promoted
 *   yet) is refused and the connection retried after the retry delay;
 * - a reply saying the node no longer serves the slot (`MOVED`, `READONLY`, `UNBLOCKED` when a
 *   master turns replica under a blocked `BZPOPMIN`) reconnects, and the command is sent again to
 *   the slot's master then (`reconnectOnError` 2).
 */
export interface SlotRoute {
  /** the cluster's seed nodes and credentials (REDIS_URL) */
  cluster: ClusterUrl;
  /** any key of the slot (a queue's key) */
  key: string;
}

type NetStream = Socket | TLSSocket;

/** How long one seed may take to answer `CLUSTER SLOTS` before the next is asked. */
const PROBE_TIMEOUT_MS = 1000;

/** The errors after which a connection no longer talks to the slot's master. */
export const NOT_THE_SLOT_MASTER = /^(MOVED|READONLY|UNBLOCKED)\b/;

/** `RedisOptions` of a connection to the master of `route.key`'s slot (merge the role's own over them). */
export function slotMasterOptions(route: SlotRoute): RedisOptions {
  const state: SlotState = {};
  class SlotMasterConnector extends AbstractConnector {
    constructor(options: unknown) {
      super((options as RedisOptions).disconnectTimeout ?? 2000);
    }

    /** the ready check's INFO: only a master will do */
    override check(info: Record<string, string>): boolean {
      return info.role === undefined || info.role === "master";
    }

    async connect(): Promise<NetStream> {
      this.connecting = true;
      const found = await findSlotMaster(route, state).catch(() => undefined);
      if (found) state.master = found;
      if (!this.connecting) throw new Error("Connection is closed.");
      const target = found ?? state.master ?? (route.cluster.nodes[0] as { host: string; port: number });
      const stream: NetStream = route.cluster.tls
        ? tlsConnect({ host: target.host, port: target.port, servername: target.host })
        : netConnect({ host: target.host, port: target.port });
      stream.once("error", (err) => {
        this.firstError = err;
      });
      this.stream = stream;
      return stream;
    }
  }
  return {
    Connector: SlotMasterConnector,
    username: route.cluster.username,
    password: route.cluster.password,
    ...(route.cluster.tls ? { tls: {} } : {}),
    reconnectOnError: (err) => (NOT_THE_SLOT_MASTER.test(err.message) ? 2 : false),
  };
}

interface SlotState {
  /** `route.key`'s slot, asked once */
  slot?: number;
  /** the master last found */
  master?: { host: string; port: number };
  /** the seed that answered last (asked first next time: a dead seed is not waited on each time) */
  seed?: number;
}

/** The master serving `route.key`'s slot now, as the first seed that answers sees it. */
async function findSlotMaster(route: SlotRoute, state: SlotState): Promise<{ host: string; port: number } | undefined> {
  const seeds = route.cluster.nodes;
  const first = state.seed ?? 0;
  for (let i = 0; i < seeds.length; i++) {
    const at = (first + i) % seeds.length;
    const seed = seeds[at] as { host: string; port: number };
    const probe = new Redis({
      host: seed.host,
      port: seed.port,
      username: route.cluster.username,
      password: route.cluster.password,
      ...(route.cluster.tls ? { tls: { servername: seed.host } } : {}),
      lazyConnect: true,
      connectTimeout: PROBE_TIMEOUT_MS,
      commandTimeout: PROBE_TIMEOUT_MS,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
      enableReadyCheck: false,
      connectionName: "svc-slot-probe",
    });
    probe.on("error", () => undefined);
    try {
      await probe.connect();
      state.slot ??= Number(await probe.call("CLUSTER", "KEYSLOT", route.key));
      const slot = state.slot;
      const ranges = (await probe.call("CLUSTER", "SLOTS")) as Array<[number, number, [string, number, ...unknown[]]]>;
      const hit = ranges.find(([from, to]) => slot >= from && slot <= to);
      if (hit) {
        state.seed = at;
        return { host: hit[2][0] || seed.host, port: Number(hit[2][1]) };
      }
    } catch {
      // the next seed
    } finally {
      probe.disconnect();
    }
  }
  return undefined;
}
