// The simulation's steps (docs/decisions.md "Seeded money simulation (issue 38)"): each draws what it
// does from the world's one PRNG and drives the real pipeline (open, run with scripted upstream
// answers, abort) or the market's own operations on its database (funding, supply, and through the
// service's own code: video holds released, refunds, the payout run, the sweeper), and logs one
// trace line. A step that finds a broken promise of the pipeline itself
// (an error that is not a DomainError, a charge above what was held) returns it as a violation.
import type { UpstreamFailure } from "../../src/adapters/upstream/client.js";
import { flatJobPricer, textPricer } from "../../src/domain/inference/pipeline/admission.js";
import { Attempted, type AttemptResult } from "../../src/domain/inference/pipeline/attempt-loop.js";
import type { AttemptScope, RoutableModel, Settled } from "../../src/domain/inference/pipeline/session.js";
import { type Answered, answered } from "../../src/domain/inference/routing/lanes.js";
import type { Ending } from "../../src/domain/inference/settlement/ending.js";
import type { LimitReset } from "../../src/domain/keys/key-period.js";
import { DomainError } from "../../src/lib/errors.js";
import { TEXT_MODEL } from "../market-pipeline.js";
import type { InFlight, SimBuyer, SimKey, SimProcess, SimWorld } from "./world.js";
import { VIDEO_MODEL } from "./world.js";

/** A process's lease: 60 s, renewed every 15 s (holder-lease.ts). */
const LEASE_MS = 60_000;
/** The most requests in flight per process (below a supplier key's 16 slots: no attempt waits on a busy key, whose wait is timed on the manual clock). */
const MAX_IN_FLIGHT = 12;

export type Violation = string;

/** Errors the pipeline may answer a buyer with (DomainErrors); anything else escaping is a 500 the rules forbid. */
function outcomeOf(e: unknown): { code: string } | { violation: string } {
  if (e instanceof DomainError) return { code: e.code };
  return { violation: `a non-domain error escaped the pipeline: ${e instanceof Error ? e.message : String(e)}` };
}

// ─────────────────────────── actors and supply ───────────────────────────

export async function addBuyer(w: SimWorld): Promise<void> {
  const p = w.prng;
  const n = w.buyers.length + 1;
  const accountId = w.id(`b${n}`);
  const apiKeyId = w.id(`k${n}`);
  const deposit = p.chance(0.2) ? p.big(10_000n, 500_000n) : p.big(1_000_000n, 60_000_000n);
  await w.market.addBuyer({ confirmedMicroUsdc: deposit, ceilingCents: p.between(45, 80), accountId, apiKeyId });
  w.funded.set(accountId, deposit);
  const key: SimKey = {
    id: apiKeyId,
    label: w.label(apiKeyId),
    accountId,
    parent: null,
    limitMicroUsdc: null,
    reset: "never",
    maxPriceCents: null,
    models: [],
    revoked: false,
  };
  const buyer: SimBuyer = { accountId, label: `b${n}`, keys: [key] };
  w.buyers.push(buyer);
  if (p.chance(0.5)) await budget(w, key);
  w.log(`buyer ${buyer.label} deposits ${deposit}, key ${key.label}${describeKey(key)}`);
}

async function budget(w: SimWorld, key: SimKey): Promise<void> {
  const p = w.prng;
  key.limitMicroUsdc = p.chance(0.3) ? p.big(1_000n, 100_000n) : p.big(100_000n, 5_000_000n);
  key.reset = p.pick<LimitReset>(["daily", "daily", "weekly", "monthly", "never"]);
  await w.market.setKeyLimit(key.id, key.limitMicroUsdc, key.reset);
}

function describeKey(k: SimKey): string {
  const parts = [
    k.limitMicroUsdc !== null ? ` limit ${k.limitMicroUsdc}/${k.reset}` : "",
    k.maxPriceCents !== null ? ` max ${k.maxPriceCents}¢` : "",
    k.models.length > 0 ? ` models ${k.models.join(",")}` : "",
  ];
  return parts.join("");
}

/** A sub-key under any key of a buyer (a tree up to four deep), budgeted or not. */
export async function addSubKey(w: SimWorld): Promise<void> {
  const p = w.prng;
  const buyer = p.pick(w.buyers);
  const parent = p.pick(buyer.keys);
  let depth = 0;
  for (let k: SimKey | null = parent; k; k = k.parent) depth++;
  if (depth >= 4) {
    w.log(`sub-key under ${parent.label}: too deep, skipped`);
    return;
  }
  const label = `${parent.label}.${buyer.keys.filter((k) => k.parent === parent).length + 1}`;
  const id = w.id(label);
  const inherited = w.rules(parent).models;
  const key: SimKey = {
    id,
    label,
    accountId: buyer.accountId,
    parent,
    limitMicroUsdc: null,
    reset: "never",
    maxPriceCents: p.chance(0.25) ? p.between(30, 80) : null,
    models: p.chance(0.2) ? [p.pick(inherited.length > 0 ? inherited : [TEXT_MODEL.id, VIDEO_MODEL.id])] : [],
    revoked: false,
  };
  const ancestorIds: string[] = [];
  for (let k: SimKey | null = parent; k; k = k.parent) ancestorIds.unshift(k.id);
  await w.market.addApiKey({ id, accountId: buyer.accountId, ancestorIds });
  buyer.keys.push(key);
  if (p.chance(0.6)) await budget(w, key);
  w.log(`sub-key ${label}${describeKey(key)}`);
}

export async function revokeKey(w: SimWorld): Promise<void> {
  const keys = w.prng.pick(w.buyers).keys;
  // mostly sub-keys: a revoked root silences its whole tree
  const key = w.prng.chance(0.2)
    ? w.prng.pick(keys)
    : w.prng.pick(keys.filter((k) => k.parent !== null).concat(keys[0] ?? []));
  key.revoked = true;
  await w.market.revokeApiKey(key.id);
  w.log(`revoke ${key.label}`);
}

export async function deposit(w: SimWorld): Promise<void> {
  const p = w.prng;
  const buyer = p.pick(w.buyers);
  const amount = p.big(100_000n, 20_000_000n);
  await w.market.deposit(buyer.accountId, amount);
  w.funded.set(buyer.accountId, (w.funded.get(buyer.accountId) ?? 0n) + amount);
  w.log(`deposit ${amount} to ${buyer.label}`);
}

export async function addOffer(w: SimWorld): Promise<void> {
  const p = w.prng;
  let supplier = w.suppliers.length > 0 && p.chance(0.7) ? p.pick(w.suppliers) : null;
  if (!supplier) {
    const label = `s${w.suppliers.length + 1}`;
    supplier = { accountId: w.id(label), label, offers: [] };
    await w.market.addSupplier(supplier.accountId);
    w.suppliers.push(supplier);
  }
  const label = `o${w.offers.length + 1}`;
  const now = w.clock.now().getTime();
  const quantity = p.chance(0.2) ? p.big(1_000n, 200_000n) : p.big(1_000_000n, 200_000_000n);
  const price = p.chance(0.8) ? p.between(30, 55) : p.between(56, 80);
  const { offerId, upstreamKeyId } = await w.market.addOffer({
    priceCents: price,
    quantityMicroDiem: quantity,
    keyBalanceMicroDiem: p.chance(0.1) ? null : p.chance(0.2) ? p.big(0n, 100_000n) : p.big(1_000_000n, 300_000_000n),
    supplierAccountId: supplier.accountId,
    expiresAt: new Date(now + (p.chance(0.2) ? p.between(60_000, 3_600_000) : p.between(3_600_000, 5 * 86_400_000))),
    offerId: w.id(label),
    upstreamKeyId: w.id(`${label}.key`),
  });
  supplier.offers.push(offerId);
  w.offers.push(offerId);
  w.supplyChanged();
  w.log(`offer ${label} by ${supplier.label}: ${quantity} µDIEM at ${price}¢ on ${w.label(upstreamKeyId)}`);
}

/** What a supplier (or the balance sync) changes: pause, resume, cancel, a new key balance, a key restored. */
export async function supplyChange(w: SimWorld): Promise<void> {
  const p = w.prng;
  if (w.offers.length === 0) return;
  const o = await w.market.offer(p.pick(w.offers));
  const k = await w.market.upstreamKey(o.upstreamKeyId);
  const what = p.weighted({ pause: 2, resume: 4, cancel: 1, balance: 4, restore: 5 });
  if (what === "pause" && o.status === "active") o.status = "paused";
  else if (what === "resume" && o.status === "paused") o.status = "active";
  else if (what === "cancel" && (o.status === "active" || o.status === "paused")) {
    o.status = "cancelled";
    await w.market.updateOffer(o.id, { status: o.status, endedAt: w.clock.now() });
  } else if (what === "balance") k.lastBalanceMicroDiem = p.chance(0.1) ? null : p.big(0n, 300_000_000n);
  else if (what === "restore") {
    k.status = "active";
    k.cooldownUntil = null;
  }
  if (what === "pause" || what === "resume") await w.market.updateOffer(o.id, { status: o.status });
  if (what === "balance") await w.market.updateUpstreamKey(k.id, { lastBalanceMicroDiem: k.lastBalanceMicroDiem });
  if (what === "restore") await w.market.updateUpstreamKey(k.id, { status: "active", cooldownUntil: null });
  w.supplyChanged();
  w.log(`supply ${what} ${w.label(o.id)} → ${o.status}, key ${k.status} balance ${k.lastBalanceMicroDiem}`);
}

// ─────────────────────────── requests ───────────────────────────

/** A buyer's request admitted on a process (or refused); hostile variants call what their key does not allow. */
export async function open(w: SimWorld): Promise<Violation[]> {
  const p = w.prng;
  const procs = w.live().filter((x) => w.inflight.filter((f) => f.proc === x).length < MAX_IN_FLIGHT);
  if (procs.length === 0) return [];
  const proc = p.pick(procs);
  const buyer = p.pick(w.buyers);
  let key = p.pick(buyer.keys);
  const hostile = p.weighted({ none: 14, foreign: 1, model: 1, ceiling: 1, huge: 1, revoked: 1 });
  let accountId = buyer.accountId;
  if (hostile === "foreign") accountId = p.pick(w.buyers).accountId;
  if (hostile === "revoked") key = p.pick(w.buyers.flatMap((b) => b.keys.filter((k) => k.revoked)).concat([key]));
  const rules = w.rules(key);
  const video = hostile === "model" ? !rules.models.includes(VIDEO_MODEL.id) : p.chance(0.25);
  const model = video ? VIDEO_MODEL : TEXT_MODEL;
  const stream = !video && p.chance(0.5);
  const maxPriceCents = hostile === "ceiling" ? p.between(1, 35) : p.chance(0.1) ? p.between(30, 80) : undefined;
  const promptEstimate = p.between(1, hostile === "huge" ? 2_000_000 : 4000);
  const maxTokens = hostile === "huge" ? 1_000_000 : p.chance(0.3) ? undefined : p.between(1, 4096);
  const quote = p.big(1_000n, hostile === "huge" ? 500_000_000n : 3_000_000n);
  const quoteMs = p.between(0, 3_000);
  const label = `r${w.step}`;
  const requestId = w.id(label);
  const what = `${label} ${hostile !== "none" ? `[${hostile}] ` : ""}${key.label} on ${proc.label}: ${video ? `video quote ${quote} in ${quoteMs} ms` : `text ${promptEstimate}+${maxTokens ?? "∞"}${stream ? " stream" : ""}`}${maxPriceCents !== undefined ? ` max ${maxPriceCents}¢` : ""}`;
  try {
    const session = await proc.pipeline.open({
      accountId,
      apiKeyId: key.id,
      requestId,
      route: video ? "video_queue" : "chat",
      modality: model.modality,
      model: model.id,
      stream,
      key: rules,
      ...(maxPriceCents !== undefined ? { maxPriceCents } : {}),
      ...(video
        ? {
            // the quote is asked of the upstream once the request is open: it takes a moment of the clock
            askPrice: async () => {
              w.clock.advance(quoteMs);
              return flatJobPricer(quote);
            },
          }
        : { price: (m: RoutableModel) => textPricer(m, promptEstimate, maxTokens) }),
    });
    w.inflight.push({ label, session, proc, key, video });
    w.log(
      `open ${what} → admitted max ${session.plan.maxChargeMicroUsdc} hold ${session.budgetHold ?? "-"} on ${w.label(session.attempt.offerId)}`,
    );
    return [];
  } catch (e) {
    const o = outcomeOf(e);
    w.log(`open ${what} → ${"code" in o ? o.code : o.violation}`);
    return "violation" in o ? [o.violation] : [];
  }
}

type Answer =
  | { kind: "ok" }
  | { kind: "incomplete" }
  | { kind: "uncharged" }
  | { kind: "failed"; failure: UpstreamFailure }
  | { kind: "truncated" }
  | { kind: "reject" }
  | { kind: "closed" }
  | { kind: "lost" };

/** One upstream answer from Venice's documented set (VENICE_API.md "Errors"), or the buyer leaving. */
function drawAnswer(w: SimWorld, f: InFlight): Answer {
  const p = w.prng;
  const k = p.weighted({
    ok: 30,
    incomplete: f.session.stream ? 4 : 0,
    uncharged: 1,
    e402: 2,
    e401: 1,
    e403: 1,
    e429: 2,
    e500: 1,
    e503: 2,
    timeout: 1,
    network: 1,
    truncated: 2,
    reject: 1,
    closed: 1,
    lost: f.video ? 1 : 0,
  });
  switch (k) {
    case "e402":
      return { kind: "failed", failure: { kind: "payment", status: 402, message: "Insufficient balance" } };
    case "e401":
    case "e403":
      return {
        kind: "failed",
        failure: { kind: "auth", status: k === "e401" ? 401 : 403, message: "Invalid API key" },
      };
    case "e429":
      return { kind: "failed", failure: { kind: "rate_limited", status: 429, message: "Rate limit", retryAfter: 1 } };
    case "e500":
    case "e503":
      return {
        kind: "failed",
        failure: { kind: "server", status: k === "e500" ? 500 : 503, message: "Upstream error" },
      };
    case "timeout":
      return { kind: "failed", failure: { kind: "timeout", message: "timed out" } };
    case "network":
      return { kind: "failed", failure: { kind: "network", message: "ECONNRESET" } };
    default:
      return { kind: k };
  }
}

/** Ends a request in flight: its attempts answered by a drawn schedule (fall-forward included), maybe with a fault at commit. */
export async function finish(w: SimWorld, o: { drain?: boolean } = {}): Promise<Violation[]> {
  const p = w.prng;
  const live = w.inflight.filter((f) => !f.proc.dead);
  if (live.length === 0) return [];
  const f = p.pick(live);
  w.inflight.splice(w.inflight.indexOf(f), 1);
  const s = f.session;
  const fault = o.drain ? "none" : p.weighted({ none: 30, crash: 1, lostAck: 1, abort: 1 });
  const answers: string[] = [];
  const bad: Violation[] = [];
  if (fault === "abort") {
    // the transport gave up on it (the buyer's socket closed before the call was made)
    await f.proc.pipeline.abort(s, "client_closed");
    w.log(`end ${f.label} → aborted by the transport`);
    return [];
  }
  if (fault === "crash") w.market.faults.failNextCommit = new Error("connection lost before COMMIT");
  if (fault === "lostAck") w.market.faults.loseNextAck = new Error("connection lost after COMMIT");
  const call = async (scope: AttemptScope): Promise<AttemptResult<Answered<string>, string>> => {
    const a = o.drain ? { kind: "ok" as const } : drawAnswer(w, f);
    answers.push(a.kind === "failed" ? String(a.failure.status ?? a.failure.kind) : a.kind);
    switch (a.kind) {
      case "failed":
        return Attempted.failed(a.failure);
      case "truncated":
        return Attempted.retry("stream closed before its first content");
      case "reject":
        return Attempted.reject(new DomainError("invalid_request", "The request was refused: bad parameter"));
      case "closed":
        return Attempted.closed("closed");
      case "lost":
        return Attempted.lost(
          "queue answer lost",
          new DomainError("upstream_error", "the queue call's answer was lost"),
        );
      case "uncharged":
        return answered({ kind: "uncharged", reason: "upstream_not_charged" }, "uncharged");
      case "incomplete": {
        scope.preCallBalance(p.chance(0.5) ? p.big(0n, 5_000_000n) : null);
        const ending: Ending = {
          kind: "incomplete",
          stream: { approxPromptTokens: p.between(1, 8000), relayedChars: p.between(1, 40_000) },
        };
        return answered(ending, "incomplete");
      }
      default: {
        const ending: Ending = f.video
          ? {
              kind: "settled",
              usage: { promptTokens: 0, completionTokens: 0 },
              extra: {
                videoJob: {
                  id: w.id(`${f.label}.job`),
                  queueId: w.id(`${f.label}.queue`),
                  upstreamQueueId: `up-${f.label}`,
                  upstreamQuoteMicroDiem: 0n,
                  body: {},
                  downloadUrl: null,
                },
              },
            }
          : {
              kind: "settled",
              usage: {
                promptTokens: p.between(0, s.plan.promptEstimate * 2 + 1),
                completionTokens: p.between(0, Math.ceil(s.plan.admittedMaxTokens * 1.2) + 1),
              },
            };
        return answered(ending, "ok");
      }
    }
  };
  try {
    const r = await f.proc.pipeline.run(s, call);
    if (typeof r === "string") {
      w.log(`end ${f.label} [${answers.join(",")}] → buyer left`);
    } else {
      bad.push(...chargeWithinHold(f, r.settled));
      w.log(
        `end ${f.label} [${answers.join(",")}]${fault !== "none" ? ` ${fault}` : ""} → charged ${r.settled.costMicroUsdc} at ${r.settled.clearingPriceCents}¢`,
      );
    }
  } catch (e) {
    const out = outcomeOf(e);
    // settle_failed promises nothing was charged: a commit whose acknowledgement was lost did happen
    const clear = await clearOf(w, s.requestId);
    const committed = clear ? ` (committed: charged ${clear.grossMicroUsdc})` : "";
    if (clear && "code" in out && out.code === "settle_failed")
      bad.push(`${f.label} answered settle_failed ("nothing was charged") but was charged ${clear.grossMicroUsdc}`);
    w.log(
      `end ${f.label} [${answers.join(",")}]${fault !== "none" ? ` ${fault}` : ""} → ${"code" in out ? out.code : out.violation}${committed}`,
    );
    if ("violation" in out) bad.push(out.violation);
  } finally {
    w.market.faults.failNextCommit = null;
    w.market.faults.loseNextAck = null;
  }
  return bad;
}

/** A charge never exceeds the request's admitted maximum nor its key budget hold. */
function chargeWithinHold(f: InFlight, settled: Settled): Violation[] {
  const s = f.session;
  const bad: Violation[] = [];
  if (settled.costMicroUsdc > s.plan.maxChargeMicroUsdc)
    bad.push(`${f.label} charged ${settled.costMicroUsdc} > its admitted maximum ${s.plan.maxChargeMicroUsdc}`);
  if (s.budgetHold !== null && settled.costMicroUsdc > s.budgetHold)
    bad.push(`${f.label} charged ${settled.costMicroUsdc} > its budget hold ${s.budgetHold}`);
  return bad;
}

// ─────────────────────────── video jobs, refunds, payouts ───────────────────────────

/** A request's clear, if it was charged. */
async function clearOf(w: SimWorld, requestId: string): Promise<{ id: string; grossMicroUsdc: bigint } | null> {
  const r = await w.market.sql.query<{ id: string; gross: bigint }>(
    "SELECT id, gross_micro_usdc AS gross FROM clears WHERE request_id = $1",
    [requestId],
  );
  const row = r.rows[0];
  return row ? { id: row.id, grossMicroUsdc: row.gross } : null;
}

/**
 * Video jobs charged and queued whose job is not final yet (what the job poller sees in
 * `video_jobs`): request ids, in id order (the simulation's ids, so a pick among them replays).
 */
export async function pendingVideoJobs(w: SimWorld): Promise<string[]> {
  const r = await w.market.sql.query<{ request: string }>(
    `SELECT c.request_id AS request FROM clears c JOIN video_jobs v ON v.request_id = c.request_id
      WHERE c.refunded_at IS NULL
        AND NOT EXISTS (SELECT 1 FROM ledger_transactions t WHERE t.clear_id = c.id AND t.kind = 'release')
      ORDER BY c.request_id`,
  );
  return r.rows.map((row) => row.request);
}

/** A video job becomes final (its held share released) or fails (its clear refunded); a status may arrive twice. */
export async function videoOutcome(w: SimWorld): Promise<void> {
  const p = w.prng;
  const pending = await pendingVideoJobs(w);
  if (pending.length === 0) return;
  const requestId = p.pick(pending);
  const clear = await clearOf(w, requestId);
  const outcome = p.weighted({ final: 3, failed: 1 });
  const twice = p.chance(0.3);
  if (outcome === "final") {
    const moved = await w.market.releaseHeld(requestId);
    const again = twice ? ` again → ${await w.market.releaseHeld(requestId)}` : "";
    w.log(`video ${w.label(requestId)} final → released ${moved}${again}`);
  } else {
    const refunded = clear ? await w.market.refundClear(clear.id) : false;
    const again = twice && clear ? ` again → ${await w.market.refundClear(clear.id)}` : "";
    w.log(`video ${w.label(requestId)} failed → refunded ${refunded}${again}`);
  }
}

/** A delivered video refunded later (a dispute): its share comes off payable, which may go below 0 after a payout. */
export async function lateRefund(w: SimWorld): Promise<void> {
  const r = await w.market.sql.query<{ id: string; request: string }>(
    `SELECT c.id, c.request_id AS request FROM clears c JOIN video_jobs v ON v.request_id = c.request_id
      ORDER BY c.request_id`,
  );
  if (r.rows.length === 0) return;
  const c = w.prng.pick(r.rows);
  const first = await w.market.refundClear(c.id);
  const twice = await w.market.refundClear(c.id);
  w.log(`refund ${w.label(c.request)} → ${first}, again → ${twice}`);
}

/** The payout run: every supplier whose payable balance reached the minimum is paid it, once a UTC day. */
export async function payout(w: SimWorld): Promise<void> {
  if (w.suppliers.length === 0) return;
  w.log(`payout run → ${await w.market.payoutRun()} paid`);
}

// ─────────────────────────── time and processes ───────────────────────────

/** The clock moves; processes that are not stalled heartbeat (their lease renewed), as their timer would. */
export async function advance(w: SimWorld): Promise<void> {
  const p = w.prng;
  const now = w.clock.now();
  const kind = p.weighted({ tick: 12, minute: 3, hours: 1, midnight: 1 });
  let ms: number;
  if (kind === "tick") ms = p.between(1, 5_000);
  else if (kind === "minute") ms = p.between(5_000, 50_000);
  else if (kind === "hours") ms = p.between(3_600_000, 30 * 3_600_000);
  else {
    // to just before the next UTC midnight: requests admitted now end in the next day
    const next = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1);
    ms = Math.max(1, next - now.getTime() - p.between(1, 3_000));
  }
  w.clock.advance(ms);
  await heartbeat(w);
  w.log(`clock +${ms} ms (${kind}) → ${w.clock.now().toISOString()}`);
}

export async function heartbeat(w: SimWorld): Promise<void> {
  for (const proc of w.live()) {
    if (proc.stalledUntil > w.clock.now().getTime()) continue;
    await proc.pipeline.escrow.heartbeat();
  }
}

/** A process stops heartbeating for longer than its lease: the sweeper may take its escrow. */
export function stall(w: SimWorld): void {
  const proc = w.prng.pick(w.live());
  proc.stalledUntil = w.clock.now().getTime() + LEASE_MS + w.prng.between(1_000, 120_000);
  w.log(`${proc.label} stalls until ${new Date(proc.stalledUntil).toISOString()}`);
}

/** The sweeper: the slices (and budget holds) of holders whose lease expired go back. */
export async function sweep(w: SimWorld): Promise<void> {
  const n = await w.market.stores().escrow.releaseExpired(w.clock.now(), 500);
  w.log(`sweep → ${n} holders released`);
}

/** A process dies between two steps: its requests in flight vanish (no record, no charge); a new one starts. */
export async function crash(w: SimWorld): Promise<void> {
  const proc = w.prng.pick(w.live());
  await w.kill(proc);
  const lost = w.inflight.filter((f) => f.proc === proc);
  for (const f of lost) w.inflight.splice(w.inflight.indexOf(f), 1);
  const next = w.startProcess();
  w.log(`${proc.label} crashes with ${lost.length} in flight; ${next.label} starts`);
}

/** A clean restart: the process drains its requests (each ends), closes (gives its escrow back), a new one starts. */
export async function restart(w: SimWorld): Promise<Violation[]> {
  const proc = w.prng.pick(w.live());
  const bad: Violation[] = [];
  while (w.inflight.some((f) => f.proc === proc)) bad.push(...(await finishOn(w, proc)));
  await proc.pipeline.close();
  await w.kill(proc);
  const next = w.startProcess();
  w.log(`${proc.label} restarts cleanly; ${next.label} starts`);
  return bad;
}

async function finishOn(w: SimWorld, proc: SimProcess): Promise<Violation[]> {
  // finish() picks among the live requests: move this process's first to be the only pick
  const mine = w.inflight.filter((f) => f.proc === proc);
  const others = w.inflight.filter((f) => f.proc !== proc);
  w.inflight.length = 0;
  w.inflight.push(mine[0] as InFlight);
  try {
    return await finish(w, { drain: true });
  } finally {
    w.inflight.push(...mine.slice(1), ...others);
  }
}
