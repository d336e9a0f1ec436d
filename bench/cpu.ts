// Where the CPU goes during a bench phase, read from /proc (Linux): the bench process (load client
// and simulator), the service process, every Postgres backend, Redis, and the machine as a whole
// (which includes kernel work, e.g. loopback TCP, that no process is charged for).
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { cpus } from "node:os";

export const TICK_MS = 10; // CLK_TCK = 100 on Linux

export interface CpuSnapshot {
  at: number;
  byGroup: Record<string, number>;
  machineBusy: number;
}

/** CPU ticks (user + system) a process has used so far, and its command name; null once it has ended. */
export function procTicks(pid: number): { comm: string; ticks: number } | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const close = stat.lastIndexOf(")");
    const comm = stat.slice(stat.indexOf("(") + 1, close);
    const f = stat.slice(close + 2).split(" ");
    // fields after comm: state(0) ... utime(11) stime(12)
    return { comm, ticks: Number(f[11]) + Number(f[12]) };
  } catch {
    return null; // the process ended between the listing and the read
  }
}

function machineBusyTicks(): number {
  const line = readFileSync("/proc/stat", "utf8").split("\n")[0] ?? "";
  const [, user, nice, system, , , irq, softirq, steal] = line.trim().split(/\s+/).map(Number);
  return (user ?? 0) + (nice ?? 0) + (system ?? 0) + (irq ?? 0) + (softirq ?? 0) + (steal ?? 0);
}

/** false off Linux: the CPU figures are then left out */
const HAVE_PROC = existsSync("/proc/stat");

/** CPU ticks so far of the named process groups (`pids` by pid, the rest by command name). */
export function cpuSnapshot(pids: Record<string, number | undefined>): CpuSnapshot {
  if (!HAVE_PROC) return { at: performance.now(), byGroup: {}, machineBusy: 0 };
  const byGroup: Record<string, number> = { postgres: 0, redis: 0 };
  for (const [name, pid] of Object.entries(pids)) byGroup[name] = pid ? (procTicks(pid)?.ticks ?? 0) : 0;
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const p = procTicks(Number(entry));
    if (!p) continue;
    if (p.comm === "postgres") byGroup.postgres = (byGroup.postgres ?? 0) + p.ticks;
    else if (p.comm === "redis-server") byGroup.redis = (byGroup.redis ?? 0) + p.ticks;
  }
  return { at: performance.now(), byGroup, machineBusy: machineBusyTicks() };
}

/**
 * CPU milliseconds per request of each group between two snapshots, the machine's busy share, and
 * the throughput this mix would reach with every core busy (cores ÷ machine CPU per request).
 */
export function cpuPerRequest(a: CpuSnapshot, b: CpuSnapshot, requests: number) {
  if (!HAVE_PROC) return { cpuMsPerRequest: null, machineBusyPct: null, cpuBoundPerSecond: null };
  const perRequestMs: Record<string, number> = {};
  for (const k of Object.keys(b.byGroup)) {
    perRequestMs[k] = +((((b.byGroup[k] ?? 0) - (a.byGroup[k] ?? 0)) * TICK_MS) / requests).toFixed(3);
  }
  const machineMs = ((b.machineBusy - a.machineBusy) * TICK_MS) / requests;
  const cores = cpus().length;
  const wallMs = b.at - a.at;
  return {
    cpuMsPerRequest: { ...perRequestMs, machine: +machineMs.toFixed(3) },
    machineBusyPct: Math.round((((b.machineBusy - a.machineBusy) * TICK_MS) / (wallMs * cores)) * 100),
    cpuBoundPerSecond: machineMs > 0 ? Math.round((cores * 1000) / machineMs) : null,
  };
}
