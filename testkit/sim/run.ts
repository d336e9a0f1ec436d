// The seeded money simulation (issue 38; docs/decisions.md "Seeded money simulation (issue 38)"), in
// the spirit of TigerBeetle's VOPR: one seed draws a schedule of steps — buyers, key trees, offers,
// requests with upstream failures and fall-forward, faults at commit, crashes, stalls, the sweeper,
// the clock across UTC midnight, video jobs, refunds, payouts — run against the real pipeline over
// the project's SQL stores on a database cloned from the migrated template (docs/decisions.md "The
// simulation runs the SQL"), with every invariant checked after every step. A failing seed replays
// exactly: one PRNG, one manual clock, deterministic ids for everything the simulation creates, the
// database emptied before each seed, every step waited out before the next.
import { setLogLevel } from "../../src/lib/logger.js";
import { CLOCK_START } from "../market-pipeline.js";
import { checkDrained, checkInvariants, type MarketRows, readMarket } from "./invariants.js";
import type { PlantedDefect } from "./plants.js";
import { Prng } from "./prng.js";
import * as step from "./steps.js";
import { openSimMarket, type SimMarket, type SimOptions, SimWorld } from "./world.js";

export interface SimResult {
  seed: number;
  ok: boolean;
  /** steps run (the failing one last) */
  steps: number;
  violations: string[];
  /** one line per step (and per drain action) */
  trace: string[];
  /** figures of the run */
  stats: { requests: number; clears: number; refunds: number; payouts: number; processes: number };
}

const MAX_BUYERS = 8;
const MAX_OFFERS = 24;

/** Offers active, unexpired and on an active key as of the last step's rows (the schedule's weight for new offers). */
function activeOffers(w: SimWorld, rows: MarketRows): number {
  const now = w.clock.now().getTime();
  return rows.offers.filter((o) => o.status === "active" && o.expiresAt.getTime() > now && o.keyStatus === "active")
    .length;
}

/**
 * Runs one seed on `market` (emptied first; its planted defects must be `o.defects`): `steps` drawn
 * steps, then the drain; stops at the first broken invariant.
 */
export async function runSeed(o: SimOptions, market: SimMarket): Promise<SimResult> {
  setLogLevel(process.env.SIM_LOG_LEVEL ?? "silent");
  const defects = [...(o.defects ?? [])].sort();
  if (defects.join() !== market.defects.join())
    throw new Error(
      `the market has ${market.defects.join() || "no defect"} planted, the seed asks ${defects.join() || "none"}`,
    );
  await market.reset();
  market.clock.set(CLOCK_START);
  const w = new SimWorld(new Prng(o.seed), market);
  const p = w.prng;
  let violations: string[] = [];
  let stats: SimResult["stats"] = { requests: 0, clears: 0, refunds: 0, payouts: 0, processes: 0 };
  const done = (ok: boolean): SimResult => ({ seed: o.seed, ok, steps: w.step, violations, trace: w.trace, stats });
  try {
    w.startProcess();
    await step.addBuyer(w);
    await step.addBuyer(w);
    await step.addOffer(w);
    await step.addOffer(w);
    let rows = await readMarket(w.market.sql);
    for (w.step = 1; w.step <= o.steps; w.step++) {
      const kind = p.weighted({
        open: 30,
        finish: 22,
        advance: 10,
        deposit: 3,
        buyer: w.buyers.length < MAX_BUYERS ? 2 : 0,
        subKey: 5,
        revoke: 1,
        offer: w.offers.length >= MAX_OFFERS ? 0 : activeOffers(w, rows) < 3 ? 12 : 3,
        supply: 3,
        video: 3,
        refund: 1,
        payout: 2,
        sweep: 2,
        stall: 1,
        crash: 1,
        restart: 1,
      });
      violations = await runStep(w, kind);
      await w.quiet();
      rows = await readMarket(w.market.sql);
      violations.push(...checkInvariants(w, rows));
      if (violations.length > 0) return done(false);
    }
    // the drain: every request ends, every process closes, the sweeper takes the dead ones' escrow,
    // every video job becomes final; then nothing may be held anywhere
    w.step = o.steps + 1;
    while (w.inflight.some((f) => !f.proc.dead)) violations.push(...(await step.finish(w, { drain: true })));
    for (const proc of w.live()) {
      await proc.pipeline.close();
      await w.kill(proc);
    }
    w.clock.advance(10 * 60_000);
    await step.sweep(w);
    for (const r of await step.pendingVideoJobs(w)) await w.market.releaseHeld(r);
    await w.quiet();
    w.log("drained");
    rows = await readMarket(w.market.sql);
    violations.push(...checkInvariants(w, rows), ...checkDrained(w, rows));
    stats = {
      requests: rows.requests.length,
      clears: rows.clears.length,
      refunds: rows.refunds.size,
      payouts: rows.paidOut.size,
      processes: w.procs.length,
    };
    return done(violations.length === 0);
  } catch (e) {
    violations.push(`the simulation threw: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
    return done(false);
  } finally {
    // dead processes' heartbeat timers stop (their stores are cut off: nothing moves)
    for (const proc of w.procs) {
      await w.kill(proc);
      await proc.pipeline.close().catch(() => undefined);
    }
  }
}

/**
 * Runs seeds `from`…`from + count − 1` on `jobs` market databases at once (one seed per database at a
 * time: a seed is mostly waiting for Postgres, so two or three lanes use the machine's two cores),
 * each seed exactly as `runSeed` runs it alone. Calls `onResult` in seed order; stops taking new
 * seeds once one failed and returns the lowest failing seed's result, or null when all passed.
 * `markets`: the lanes' databases, kept open (the caller's); else `jobs` are opened and closed here.
 */
export async function runSeeds(
  o: {
    from: number;
    count: number;
    steps: number;
    defects?: readonly PlantedDefect[];
    jobs?: number;
    markets?: readonly SimMarket[];
  },
  onResult: (r: SimResult) => void,
): Promise<SimResult | null> {
  const defects = o.defects ?? [];
  const lanes = Math.max(1, Math.min(o.jobs ?? 1, o.count));
  const markets = o.markets ?? (await Promise.all(Array.from({ length: lanes }, () => openSimMarket(defects))));
  const done = new Map<number, SimResult>();
  let next = o.from;
  let reported = o.from;
  const out: { failed: SimResult | null } = { failed: null };
  const end = o.from + o.count;
  // read through a function: a lane's loop condition narrows `out.failed`, another lane sets it
  const lowest = (): SimResult | null => out.failed;
  const lane = async (market: SimMarket) => {
    while (next < end && !out.failed) {
      const seed = next++;
      const r = await runSeed({ seed, steps: o.steps, defects }, market);
      done.set(seed, r);
      const failed = lowest();
      if (!r.ok && (!failed || r.seed < failed.seed)) out.failed = r;
      for (let d = done.get(reported); d && reported <= (out.failed?.seed ?? end); d = done.get(reported)) {
        done.delete(reported++);
        onResult(d);
      }
    }
  };
  try {
    await Promise.all(markets.map(lane));
  } finally {
    if (!o.markets) await Promise.all(markets.map((m) => m.close()));
  }
  return out.failed;
}

async function runStep(w: SimWorld, kind: string): Promise<string[]> {
  switch (kind) {
    case "open":
      return step.open(w);
    case "finish":
      return step.finish(w);
    case "advance":
      await step.advance(w);
      return [];
    case "deposit":
      await step.deposit(w);
      return [];
    case "buyer":
      await step.addBuyer(w);
      return [];
    case "subKey":
      await step.addSubKey(w);
      return [];
    case "revoke":
      await step.revokeKey(w);
      return [];
    case "offer":
      await step.addOffer(w);
      return [];
    case "supply":
      await step.supplyChange(w);
      return [];
    case "video":
      await step.videoOutcome(w);
      return [];
    case "refund":
      await step.lateRefund(w);
      return [];
    case "payout":
      await step.payout(w);
      return [];
    case "sweep":
      await step.sweep(w);
      return [];
    case "stall":
      step.stall(w);
      return [];
    case "crash":
      await step.crash(w);
      return [];
    case "restart":
      return step.restart(w);
    default:
      throw new Error(`unknown step ${kind}`);
  }
}

/** The pipeline's sleeps are at most this long (escrow pressure 50 ms, the lost-commit lookup 150 ms). */
const SHORT_SLEEP_MS = 500;

/**
 * Runs the pipeline's short wall-clock sleeps (escrow pressure 50 ms, a key poll 25 ms: `setTimeout`)
 * at once, until the returned function restores them. The simulation's time is the manual clock:
 * what those sleeps wait for is another store call of the same step, and every step is waited out
 * (`SimWorld.quiet`) before the next, so only the wall time changes, never an outcome (a seed
 * replays the same). `setInterval` (the holder heartbeat, 15 s; the simulation drives it itself,
 * and a seed takes far less) is left alone.
 */
export function zeroDelaySleeps(): () => void {
  const real = globalThis.setTimeout;
  // the database clients' own timers (Prisma's 2 s wait for a transaction, its 5 s limit) keep their time
  const fast = ((fn: (...a: unknown[]) => void, ms?: number, ...args: unknown[]) =>
    real(fn, (ms ?? 0) <= SHORT_SLEEP_MS ? 0 : ms, ...args)) as unknown as typeof setTimeout;
  globalThis.setTimeout = fast;
  return () => {
    globalThis.setTimeout = real;
  };
}

/** How to replay a result exactly. */
export function replayCommand(r: { seed: number }, o: { steps: number; defects?: readonly PlantedDefect[] }): string {
  const plant = (o.defects ?? []).map((d) => ` --plant=${d}`).join("");
  return `npm run sim -- --seed=${r.seed} --steps=${o.steps}${plant}`;
}

/** A failed run as a report: the seed, the broken rules, the last steps, the replay command. */
export function describeFailure(
  r: SimResult,
  o: { steps: number; defects?: readonly PlantedDefect[] },
  tail = 40,
): string {
  return [
    `seed ${r.seed} FAILED at step ${r.steps}:`,
    ...r.violations.map((v) => `  ✗ ${v}`),
    `last ${Math.min(tail, r.trace.length)} of ${r.trace.length} trace lines:`,
    ...r.trace.slice(-tail).map((l) => `  ${l}`),
    `replay: ${replayCommand(r, o)}`,
  ].join("\n");
}
