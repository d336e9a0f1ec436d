// The seeded money simulation (issue 38; docs/decisions.md "Seeded money simulation (issue 38)"), in
// the spirit of TigerBeetle's VOPR: one seed draws a schedule of steps — buyers, key trees, offers,
// requests with upstream failures and fall-forward, faults at commit, crashes, stalls, the sweeper,
// the clock across UTC midnight, video jobs, refunds, payouts — run against the real pipeline over
// the in-memory market, with every invariant checked after every step. A failing seed replays
// exactly: one PRNG, one manual clock, deterministic ids for everything the simulation creates.
import { setLogLevel } from "../../src/lib/logger.js";
import type { PlantedDefect } from "../memory-stores.js";
import { checkDrained, checkInvariants } from "./invariants.js";
import { Prng } from "./prng.js";
import * as step from "./steps.js";
import { type SimOptions, SimWorld } from "./world.js";

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

/** Offers a request could clear on now (active, unexpired, on an active key). */
function activeOffers(w: SimWorld): number {
  const now = w.clock.now().getTime();
  return [...w.market.tables.offers.values()].filter(
    (o) =>
      o.status === "active" && o.expiresAt.getTime() > now && w.market.upstreamKey(o.upstreamKeyId).status === "active",
  ).length;
}

/** Runs one seed: `steps` drawn steps, then the drain; stops at the first broken invariant. */
export async function runSeed(o: SimOptions): Promise<SimResult> {
  setLogLevel("silent");
  const w = new SimWorld(new Prng(o.seed), o.defects ?? []);
  const p = w.prng;
  let violations: string[] = [];
  const done = (ok: boolean): SimResult => ({
    seed: o.seed,
    ok,
    steps: w.step,
    violations,
    trace: w.trace,
    stats: {
      requests: w.market.tables.requests.length,
      clears: w.market.tables.clears.length,
      refunds: w.market.ledger.refunds.size,
      payouts: w.market.ledger.paidOut.size,
      processes: w.procs.length,
    },
  });
  try {
    w.startProcess();
    step.addBuyer(w);
    step.addBuyer(w);
    step.addOffer(w);
    step.addOffer(w);
    for (w.step = 1; w.step <= o.steps; w.step++) {
      const kind = p.weighted({
        open: 30,
        finish: 22,
        advance: 10,
        deposit: 3,
        buyer: w.buyers.length < MAX_BUYERS ? 2 : 0,
        subKey: 5,
        revoke: 1,
        offer: w.market.tables.offers.size >= MAX_OFFERS ? 0 : activeOffers(w) < 3 ? 12 : 3,
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
      violations.push(...checkInvariants(w));
      if (violations.length > 0) return done(false);
    }
    // the drain: every request ends, every process closes, the sweeper takes the dead ones' escrow,
    // every video job becomes final; then nothing may be held anywhere
    w.step = o.steps + 1;
    while (w.inflight.some((f) => !f.proc.dead)) violations.push(...(await step.finish(w, { drain: true })));
    for (const proc of w.live()) {
      await proc.pipeline.close();
      proc.dead = true;
    }
    w.clock.advance(10 * 60_000);
    await step.sweep(w);
    for (const r of step.pendingVideoJobs(w)) w.market.releaseHeld(r);
    w.log("drained");
    violations.push(...checkInvariants(w), ...checkDrained(w));
    return done(violations.length === 0);
  } catch (e) {
    violations.push(`the simulation threw: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
    return done(false);
  } finally {
    // dead processes' heartbeat timers stop (their stores are cut off: nothing moves)
    for (const proc of w.procs) {
      proc.dead = true;
      await proc.pipeline.close().catch(() => undefined);
    }
  }
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
      step.deposit(w);
      return [];
    case "buyer":
      step.addBuyer(w);
      return [];
    case "subKey":
      step.addSubKey(w);
      return [];
    case "revoke":
      step.revokeKey(w);
      return [];
    case "offer":
      step.addOffer(w);
      return [];
    case "supply":
      step.supplyChange(w);
      return [];
    case "video":
      step.videoOutcome(w);
      return [];
    case "refund":
      step.lateRefund(w);
      return [];
    case "payout":
      step.payout(w);
      return [];
    case "sweep":
      await step.sweep(w);
      return [];
    case "stall":
      step.stall(w);
      return [];
    case "crash":
      step.crash(w);
      return [];
    case "restart":
      return step.restart(w);
    default:
      throw new Error(`unknown step ${kind}`);
  }
}

/**
 * Runs the pipeline's short wall-clock sleeps (escrow pressure 50 ms, a key poll 25 ms: `setTimeout`)
 * at once, until the returned function restores them. The simulation's time is the manual clock:
 * what those sleeps wait for happens in the same process's microtasks (in-memory stores), so only
 * the wall time changes, never an outcome (a seed replays the same with or without). `setInterval`
 * (the holder heartbeat, driven by the simulation itself) is left alone.
 */
export function zeroDelaySleeps(): () => void {
  const real = globalThis.setTimeout;
  const fast = ((fn: (...a: unknown[]) => void, _ms?: number, ...args: unknown[]) =>
    real(fn, 0, ...args)) as unknown as typeof setTimeout;
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
