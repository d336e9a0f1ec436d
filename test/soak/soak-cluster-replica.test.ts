// The short soak with the service on a Redis Cluster (3 masters + 3 replicas of its own on loopback)
// and reading a streaming replica of the machine's Postgres: the same load, faults and crashes as
// soak-short.test.ts, except that the Redis restart becomes a graceful failover of the gates' master
// (a cluster keeps its data through one), the Postgres connections are terminated on the standby
// too, and every paid buffered request is read back at once by its support reference from another
// API (read-your-writes across processes). Then every invariant (docs/operations.md "Soak").
import { describe, expect, test } from "vitest";
import { replicaUnavailable } from "../../testkit/replica.js";
import { runSoak, SHORT_SOAK } from "../../testkit/soak/run.js";

describe.skipIf(replicaUnavailable() !== undefined)("soak (short) on a Redis Cluster and a read replica", () => {
  test("the books, balances, escrow, gates, charges and read-your-writes hold through faults, a failover and crashes", async () => {
    const lines: Record<string, unknown>[] = [];
    const report = await runSoak({ ...SHORT_SOAK, redisCluster: true, readReplica: true }, (line) => lines.push(line));
    const failed = report.invariants.filter((i) => !i.ok);
    const context = lines.filter((l) => l.soak === "chaos" || l.soak === "service_error_sample");
    expect(failed, JSON.stringify({ failed, context }, null, 2)).toEqual([]);
    const names = report.invariants.map((i) => i.invariant);
    // the cluster's own disruption and the replica's check ran, beside the books
    for (const n of ["books_balance", "gate_slots_back", "periodic_jobs_kept_through_failover", "own_writes_read_back"])
      expect(names).toContain(n);
    expect(names).not.toContain("periodic_jobs_back_after_redis_restart");
    expect(lines.find((l) => l.soak === "chaos" && l.action === "redis_cluster_failover")).toBeDefined();
    expect(report.requests).toBeGreaterThanOrEqual(SHORT_SOAK.requests);
  }, 420_000);
});
