import { randomUUID } from "node:crypto";
import { type Clock, systemClock } from "../../lib/clock.js";
import { logger } from "../../lib/logger.js";
import type { RedisClient } from "./client.js";
import { ASSERT, BEAT, GROW, type ScriptRedis, SHRINK } from "./gate-scripts.js";

/**
 * In-flight gates shared by every process, leased per process (the way escrow leases money).
 *
 * A gate (a buyer API key, a supplier key, the small-model tier) has a limit. Redis keeps, per
 * gate, how many of its slots each process holds (a hash: holder → slots); the sum never exceeds
 * the limit. A process admits a request against the slots it holds, in memory; only when they are
 * all in use does it ask Redis for more (one short Lua script that counts every live holder's
 * slots first).
 *
 * A gate only this process uses keeps a freed slot for its next request, and gives it back to
 * Redis once unused for a trim window (at most `2 × GATE_TRIM_MS`). A gate other processes use too
 * (a grow saw their slots, or one of them asked) is *shared* for a while (`GATE_SHARED_MS`): there
 * a freed slot goes back at once (in the same tick), as a per-request gate would. A process refused
 * while others hold slots asks them to give back idle ones (`onPressure` → `yieldIdle` everywhere)
 * and tries again a few times over `GATE_PRESSURE_WAITS_MS` (about a third of a second).
 *
 * So the limit holds exactly across processes; what changes is who may use a free slot: for at most
 * a trim window, only the process that last used it, and only while no other process wants it.
 *
 * Holders are leased too: a sorted set scores each holder by its lease's expiry, renewed by a
 * heartbeat. A process that dies stops renewing, and the next process to grow a lease on a gate it
 * held drops its slots there (so a crash frees its slots after `GATE_HOLDER_TTL_MS`). A process
 * that was only stalled past its lease registers again and re-asserts the slots its requests still
 * use (for a moment the sum may then exceed the limit, as any lease scheme must allow).
 */

/** A holder's lease: its slots are presumed abandoned this long after its last heartbeat. */
export const GATE_HOLDER_TTL_MS = 30_000;
/** Heartbeat period (several per lease, so a slow beat never lapses it). */
export const GATE_HEARTBEAT_MS = 5_000;
/** Leased slots unused for a whole window of this length go back to Redis. */
export const GATE_TRIM_MS = 100;
/**
 * A grow refused while other processes hold slots asks them for idle ones and tries again after
 * each of these waits (asking again each time: a process busy at the first ask may have idle slots
 * by the next). About a third of a second in all: longer than a trim window takes to free idle slots
 * (2 × GATE_TRIM_MS), so even a pressure message that was lost cannot leave a refusal standing on idle
 * slots, and a process under load may take that long to hear.
 */
export const GATE_PRESSURE_WAITS_MS = [5, 10, 20, 40, 80, 160] as const;
/** A gate seen used by another process gives freed slots back at once for this long. */
export const GATE_SHARED_MS = 5_000;
/** Gate hashes are forgotten this long after their last grow (everything in them is dead by then). */
const GATE_KEY_TTL_MS = 10 * GATE_HOLDER_TTL_MS;

/** One gate as this process sees it. */
interface LocalGate {
  /** slots this process holds in Redis */
  leased: number;
  /** slots its requests use now */
  used: number;
  /** most used at once since the last trim */
  peak: number;
  /** a grow under way (the slots granted), shared by everyone who found the lease full */
  growing: Promise<number> | null;
  /** requests waiting for that grow */
  waiting: number;
  /** until when (epoch ms) other processes are known to use it: freed slots go back at once */
  sharedUntil: number;
}

export interface GateLeasesOptions {
  /** Holders' sorted set (one per deployment). */
  holdersKey: string;
  /** Told when a grow was refused while other processes held slots of `gate` (publish it to all). */
  onPressure?: (gate: string) => void;
  /** Trim window (default GATE_TRIM_MS). */
  trimMs?: number;
  /** the time the shared window is measured in (tests move it); Redis leases use Redis's own time */
  clock?: Clock;
}

export interface GateStats {
  /** acquisitions served from the process's own slots */
  local: number;
  /** round trips to Redis to grow a lease */
  grows: number;
}

export class GateLeases {
  readonly id = randomUUID();
  readonly stats: GateStats = { local: 0, grows: 0 };
  private readonly redis: ScriptRedis;
  private readonly gates = new Map<string, LocalGate>();
  private registered: Promise<void> | null = null;
  /** registered in Redis and not closed: its lease says whether this process runs */
  private beating = false;
  /** gates with slots to give back at the end of this tick (shared gates' freed slots) */
  private readonly toGiveBack = new Set<string>();
  private heartbeatTimer: NodeJS.Timeout | null = null;
  private trimTimer: NodeJS.Timeout | null = null;
  private closed = false;

  private nowMs(): number {
    return (this.opts.clock ?? systemClock).now().getTime();
  }

  constructor(
    redis: RedisClient,
    private readonly opts: GateLeasesOptions,
  ) {
    this.redis = redis as ScriptRedis;
    if (typeof this.redis.gateGrow !== "function") {
      redis.defineCommand("gateGrow", { numberOfKeys: 2, lua: GROW });
      redis.defineCommand("gateShrink", { lua: SHRINK });
      redis.defineCommand("gateBeat", { numberOfKeys: 1, lua: BEAT });
      redis.defineCommand("gateAssert", { lua: ASSERT });
    }
  }

  /**
   * Takes one slot of `gate` (at most `limit` in use across all processes): in memory when this
   * process holds a spare one, otherwise by growing its lease in Redis. False when the gate is full.
   */
  async acquire(gate: string, limit: number): Promise<boolean> {
    let pressed = 0;
    for (;;) {
      // checked on every try: a request waiting out a refusal or a grow when the gates close must
      // not grow a lease again (that would register this holder anew, live after the process exits)
      if (this.closed) throw new Error("gates closed");
      const g = this.local(gate);
      if (g.used < g.leased) {
        g.used++;
        if (g.used > g.peak) g.peak = g.used;
        this.stats.local++;
        return true;
      }
      if (g.leased >= limit) return false;
      if (g.growing) {
        g.waiting++;
        const granted = await g.growing.finally(() => g.waiting--);
        if (granted <= 0) return false;
        continue;
      }
      // everyone who finds the lease full while this grow is under way waits for it: ask for them
      // too, plus (on a gate no other process uses) a quarter of what is in use, so a busy gate
      // grows in steps, not one slot at a time
      const headroom = g.sharedUntil > this.nowMs() ? 0 : Math.floor(g.used / 4);
      const want = Math.min(limit - g.leased, 1 + g.waiting + headroom);
      const grown = this.grow(gate, g, want, limit);
      g.growing = grown.then((r) => r.granted);
      // only waiters await `growing`: when none came, a failed grow (Redis down) must not leave it
      // rejecting unobserved — Node ends the process on an unhandled rejection. Waiters still get
      // the failure; this request gets it from `grown` below.
      g.growing.catch(() => undefined);
      const r = await grown.finally(() => {
        g.growing = null;
      });
      if (r.granted > 0) continue;
      if (r.others > 0 && pressed < GATE_PRESSURE_WAITS_MS.length) {
        // other processes hold slots, perhaps idle ones: ask them to give those back, then try again
        this.opts.onPressure?.(gate);
        await new Promise((res) => setTimeout(res, GATE_PRESSURE_WAITS_MS[pressed++]));
        continue;
      }
      this.forgetIfIdle(gate, g);
      return false;
    }
  }

  /** Gives a slot back to this process (Redis gets it once unused for a trim window). */
  release(gate: string): void {
    const g = this.gates.get(gate);
    if (!g || g.used <= 0) {
      // after close() everything went back already; otherwise this is a bug
      if (!this.closed) logger.error({ gate }, "gate slot released twice");
      return;
    }
    g.used--;
    if (g.sharedUntil > this.nowMs()) this.giveBackThisTick(gate);
  }

  /** Slots of `gate` this process's requests use now. */
  inUse(gate: string): number {
    return this.gates.get(gate)?.used ?? 0;
  }

  /**
   * Slots of `gate` in use here plus those being acquired (waiting on a grow of the lease, and the
   * request growing it): a gate whose claims reach its limit is full for a new request, which would
   * otherwise join the grow and most likely be refused.
   */
  claimed(gate: string): number {
    const g = this.gates.get(gate);
    return g ? g.used + g.waiting + (g.growing ? 1 : 0) : 0;
  }

  /** Slots of `gate` this process holds in Redis. */
  leased(gate: string): number {
    return this.gates.get(gate)?.leased ?? 0;
  }

  /** Another process wants slots of `gate`: give back every slot held here and not in use. */
  yieldIdle(gate: string): void {
    const g = this.gates.get(gate);
    if (!g) return;
    g.sharedUntil = this.nowMs() + GATE_SHARED_MS;
    void this.shrink(this.lowerTo(gate, g, g.used));
  }

  /** A shared gate's freed slots go back when the tick ends (every release of the tick in one call). */
  private giveBackThisTick(gate: string): void {
    if (this.toGiveBack.size === 0) {
      queueMicrotask(() => {
        const back: Array<[string, number]> = [];
        for (const name of this.toGiveBack) {
          const g = this.gates.get(name);
          if (g && !g.growing) back.push(...this.lowerTo(name, g, g.used));
        }
        this.toGiveBack.clear();
        void this.shrink(back);
      });
    }
    this.toGiveBack.add(gate);
  }

  /**
   * This process's holder id once it is registered (its lease in the holders' set, renewed by the
   * heartbeat), until it closes; null before and after. An in-flight stream's record names it.
   */
  get holder(): string | null {
    return this.beating ? this.id : null;
  }

  /** Stops the timers and gives every slot back (a clean shutdown; call once requests have drained). */
  async close(): Promise<void> {
    this.closed = true;
    this.beating = false;
    if (this.heartbeatTimer) clearInterval(this.heartbeatTimer);
    if (this.trimTimer) clearInterval(this.trimTimer);
    this.heartbeatTimer = this.trimTimer = null;
    const back: Array<[string, number]> = [];
    for (const [gate, g] of this.gates) if (g.leased > 0) back.push([gate, g.leased]);
    this.gates.clear();
    if (!this.registered) return;
    await this.shrink(back);
    await this.redis.zrem(this.opts.holdersKey, this.id).catch(() => undefined);
  }

  /** Renews this holder's lease; after a lapse, re-asserts the slots its requests still use. */
  async heartbeat(): Promise<void> {
    if (this.closed) return;
    try {
      const live = await this.redis.gateBeat(this.opts.holdersKey, this.id, GATE_HOLDER_TTL_MS);
      if (live === 1) return;
      logger.warn({ holder: this.id }, "gate holder lease had lapsed; re-asserting its slots");
      const held = [...this.gates].filter(([, g]) => g.leased > 0);
      if (held.length === 0) return;
      await this.redis.gateAssert(
        held.length,
        ...held.map(([gate]) => gate),
        this.id,
        ...held.map(([, g]) => g.leased),
        GATE_KEY_TTL_MS,
      );
    } catch (e) {
      logger.warn({ err: e, holder: this.id }, "gate heartbeat failed");
    }
  }

  /**
   * Gives back slots unused for a whole trim window: each gate keeps as many as its requests used
   * at most since the last trim.
   */
  trim(): void {
    const back: Array<[string, number]> = [];
    for (const [gate, g] of this.gates) {
      const keep = Math.max(g.used, g.peak);
      g.peak = g.used;
      if (!g.growing) back.push(...this.lowerTo(gate, g, keep));
      this.forgetIfIdle(gate, g);
    }
    if (back.length > 0) void this.shrink(back);
  }

  private local(gate: string): LocalGate {
    let g = this.gates.get(gate);
    if (!g) {
      g = { leased: 0, used: 0, peak: 0, growing: null, waiting: 0, sharedUntil: 0 };
      this.gates.set(gate, g);
    }
    return g;
  }

  /**
   * Lowers this process's lease of `gate` to `keep` slots (the one place a lease shrinks); returns
   * what Redis must get back, for `shrink` (nothing when it holds no more than that).
   */
  private lowerTo(gate: string, g: LocalGate, keep: number): Array<[string, number]> {
    if (g.leased <= keep) return [];
    const n = g.leased - keep;
    g.leased = keep;
    return [[gate, n]];
  }

  private forgetIfIdle(gate: string, g: LocalGate): void {
    if (g.leased === 0 && g.used === 0 && !g.growing && g.waiting === 0) this.gates.delete(gate);
  }

  private register(): Promise<void> {
    if (!this.registered) {
      this.registered = this.redis
        .gateBeat(this.opts.holdersKey, this.id, GATE_HOLDER_TTL_MS)
        .then(() => {
          if (this.closed) return;
          this.beating = true;
          this.heartbeatTimer = setInterval(() => void this.heartbeat(), GATE_HEARTBEAT_MS);
          this.heartbeatTimer.unref();
          this.trimTimer = setInterval(() => this.trim(), this.opts.trimMs ?? GATE_TRIM_MS);
          this.trimTimer.unref();
        })
        .catch((e) => {
          this.registered = null;
          throw e;
        });
    }
    return this.registered;
  }

  private async grow(
    gate: string,
    g: LocalGate,
    want: number,
    limit: number,
  ): Promise<{ granted: number; others: number }> {
    await this.register();
    for (let lapsed = 0; ; lapsed++) {
      this.stats.grows++;
      const [granted, others] = await this.redis.gateGrow(
        gate,
        this.opts.holdersKey,
        this.id,
        want,
        limit,
        GATE_KEY_TTL_MS,
      );
      if (this.closed) {
        // closed while this grow was in Redis: what it got goes straight back
        if (granted > 0) await this.shrink([[gate, granted]]);
        throw new Error("gates closed");
      }
      if (granted === -1 && lapsed === 0) {
        await this.heartbeat();
        continue;
      }
      if (granted > 0) g.leased += granted;
      // others' slots in the gate: share it (freed slots straight back) until they have been gone a while
      if (others > 0) g.sharedUntil = this.nowMs() + GATE_SHARED_MS;
      if (granted > 0 && g.sharedUntil > this.nowMs()) {
        // shared (perhaps since this grow left, by another process's ask): keep only what the
        // grower and its waiters take, so no grant outlives the ask as an idle slot
        void this.shrink(this.lowerTo(gate, g, g.used + 1 + g.waiting));
      }
      return { granted: Math.max(0, granted), others };
    }
  }

  private async shrink(back: Array<[string, number]>): Promise<void> {
    if (back.length === 0) return;
    try {
      await this.redis.gateShrink(back.length, ...back.map(([gate]) => gate), this.id, ...back.map(([, n]) => n));
    } catch (e) {
      // still counted in Redis: count them as held here too, so a later trim gives them back
      for (const [gate, n] of back) this.local(gate).leased += n;
      logger.warn({ err: e }, "could not give gate slots back");
    }
  }
}
