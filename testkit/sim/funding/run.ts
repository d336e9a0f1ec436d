// The funding simulation (issue 38 item 7, the payments part; docs/decisions.md "Seeded money
// simulation (issue 38)"): one seed draws a schedule of payers signing authorizations for signup,
// top-up and refill, replays (in either envelope, on another route, several at once), forgeries,
// facilitator answers (settled, refused, 502 after settling, dropped, timeouts before and after
// settling, held settlements that land later, down), crashes between the settling row and the
// credit, cancellations on chain, a lagging node under the reconciler, reconciliation jobs, chain
// scans, confirmations and blocks at random points, and the clock past validBefore — run against
// the real FundingService and PaymentReconciler on a real database and a local chain, with every
// invariant checked after every step, then the drain.
import type { RedisClient } from "../../../src/adapters/redis/client.js";
import { setLogLevel } from "../../../src/lib/logger.js";
import { Prng } from "../prng.js";
import { checkDrained, checkFunding, type FundingSnapshot, snapshot } from "./invariants.js";
import type { FundingDefect } from "./plants.js";
import * as step from "./steps.js";
import { CONFIRMATION_BLOCKS, type FundingSimOptions, FundingWorld } from "./world.js";

export interface FundingSimResult {
  seed: number;
  ok: boolean;
  /** steps run (the failing one last; steps + 1 is the drain) */
  steps: number;
  violations: string[];
  trace: string[];
  stats: FundingWorld["stats"] & { payments: number; authorizations: number; ms: number };
}

const DRAIN_ROUNDS = 8;

/** Steps that touch the chain or the clock alone: the database is as the last snapshot read it. */
const CHAIN_ONLY = new Set(["cancel", "late", "mine", "tick", "minutes", "hours", "past", "lag"]);

/** Runs one seed: `steps` drawn steps, then the drain; stops at the first broken invariant. */
export async function runFundingSeed(o: FundingSimOptions, redis: RedisClient): Promise<FundingSimResult> {
  setLogLevel("silent");
  const started = performance.now();
  const prng = new Prng(o.seed);
  const w = await FundingWorld.start(prng, o.defects ?? [], redis);
  let violations: string[] = [];
  let payments = 0;
  const done = (ok: boolean): FundingSimResult => ({
    seed: o.seed,
    ok,
    steps: w.step,
    violations,
    trace: w.trace,
    stats: { ...w.stats, payments, authorizations: w.auths.length, ms: Math.round(performance.now() - started) },
  });
  const reversed = new Set<string>();
  let last: FundingSnapshot | undefined;
  const check = async (kind?: string) => {
    const s = await snapshot(w, kind && CHAIN_ONLY.has(kind) ? last : undefined);
    last = s;
    payments = s.payments.length;
    const v = checkFunding(w, s, reversed);
    for (const p of s.payments) if (p.journals.reversal) reversed.add(p.id);
    return { s, v };
  };
  try {
    for (let i = 0; i < 3; i++) await w.addPayer();
    for (w.step = 1; w.step <= o.steps; w.step++) {
      await step.catchUp(w);
      const kind = prng.weighted({
        pay: 24,
        replay: 10,
        hostile: 4,
        cancel: 3,
        late: w.standIn.held.length > 0 ? 5 : 0,
        worker: 6,
        scan: 5,
        confirm: 6,
        mine: 4,
        tick: 4,
        minutes: 4,
        hours: 1,
        past: 3,
        lag: w.node.frozenAt === null ? 4 : 0,
        payer: 1,
      });
      violations = await runStep(w, kind);
      violations.push(...(await check(kind)).v);
      if (violations.length > 0) return done(false);
    }
    w.step = o.steps + 1;
    violations = await drain(w);
    const { s, v } = await check();
    violations.push(...v, ...(await checkDrained(w, s)));
    return done(violations.length === 0);
  } catch (e) {
    violations.push(`the simulation threw: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
    return done(false);
  } finally {
    await w.close();
  }
}

async function runStep(w: FundingWorld, kind: string): Promise<string[]> {
  switch (kind) {
    case "pay":
      return step.pay(w);
    case "replay":
      return step.replay(w);
    case "hostile":
      return step.hostile(w);
    case "cancel":
      await step.cancel(w);
      return [];
    case "late":
      await step.late(w);
      return [];
    case "worker":
      await step.worker(w);
      return [];
    case "scan":
      await step.scan(w);
      return [];
    case "confirm":
      await step.confirm(w);
      return [];
    case "mine":
      await step.mine(w);
      return [];
    case "tick":
    case "minutes":
    case "hours":
    case "past":
      await step.clock(w, kind);
      return [];
    case "lag":
      await step.lag(w);
      return [];
    case "payer":
      await step.addPayer(w);
      return [];
    default:
      throw new Error(`unknown step ${kind}`);
  }
}

/**
 * The drain: the node catches up, every held settlement is released (it lands, or the chain
 * refuses it), the clock passes every validBefore, and reconciliation, the scan and confirmations
 * run until nothing is open (at most DRAIN_ROUNDS rounds).
 */
async function drain(w: FundingWorld): Promise<string[]> {
  w.node.frozenAt = null;
  while (w.standIn.held.length > 0) {
    const held = w.standIn.held[0];
    const r = await w.standIn.releaseHeld(0);
    w.log(
      `drain: held settlement of ${held ? w.paymentLabel(held.authorization.from, held.authorization.nonce) : "?"} ${r.ok ? "lands" : "fails"}`,
    );
  }
  const last = Math.max(w.nowS(), ...w.auths.map((a) => a.validBefore));
  await w.advance((last - w.nowS() + 60) * 1000);
  w.log(`drain: clock past every validBefore → ${w.rel(w.nowS())}`);
  for (let round = 1; round <= DRAIN_ROUNDS; round++) {
    await step.worker(w);
    await step.scan(w);
    await w.advance(CONFIRMATION_BLOCKS * 2 * 1000);
    await step.confirm(w);
    const open = await w.db.payment.count({ where: { status: { in: ["settling", "reconciling", "pending"] } } });
    if (open === 0 && w.queue.ids.length === 0) {
      w.log(`drained after ${round} round(s)`);
      return [];
    }
  }
  w.log(`not drained after ${DRAIN_ROUNDS} rounds`);
  return [];
}

/** How to replay a result exactly. */
export function fundingReplayCommand(r: { seed: number }, o: { steps: number; defects?: readonly FundingDefect[] }) {
  const plant = (o.defects ?? []).map((d) => ` --plant=${d}`).join("");
  return `npm run sim -- --funding --seed=${r.seed} --steps=${o.steps}${plant}`;
}

/** A failed run as a report: the seed, the broken rules, the last steps, the replay command. */
export function describeFundingFailure(
  r: FundingSimResult,
  o: { steps: number; defects?: readonly FundingDefect[] },
  tail = 40,
): string {
  return [
    `funding seed ${r.seed} FAILED at step ${r.steps}${r.steps > o.steps ? " (the drain)" : ""}:`,
    ...r.violations.map((v) => `  ✗ ${v}`),
    `last ${Math.min(tail, r.trace.length)} of ${r.trace.length} trace lines:`,
    ...r.trace.slice(-tail).map((l) => `  ${l}`),
    `replay: ${fundingReplayCommand(r, o)}`,
  ].join("\n");
}
