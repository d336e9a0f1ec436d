// What one step of the funding simulation does (run.ts draws which). Calls go to the real
// FundingService and PaymentReconciler; each answer is checked against the chain at once.
import type { Hex } from "viem";
import type { FundingKind, FundingOutcome, FundingRequest } from "../../../src/domain/funding/funding-request.js";
import { DomainError } from "../../../src/lib/errors.js";
import { cancelAuthorization } from "../../funding.js";
import { chainState } from "./invariants.js";
import {
  authKey,
  type FacilitatorBehaviour,
  type FundingWorld,
  resourceOf,
  type SimAuth,
  type SimPayer,
} from "./world.js";

const MAX_PAYERS = 6;

/** How long an authorization stays valid when signed (x402 clients sign for minutes; some for hours). */
const VALIDITY_S = [300, 600, 1200, 3600, 3 * 3600] as const;

/** One call's answer, as the trace and the checks see it. */
type Answer =
  | { kind: "funded"; idempotent: boolean; wallet: string; transaction: string | null; apiKey: boolean }
  | { kind: "challenge"; code: string }
  | { kind: "error"; code: string; status: number; details: Record<string, unknown> }
  | { kind: "threw"; message: string };

function answerOf(r: { ok: true; value: FundingOutcome } | { ok: false; error: unknown }): Answer {
  if (r.ok) {
    const o = r.value;
    if (o.type === "challenge") return { kind: "challenge", code: o.code };
    return {
      kind: "funded",
      idempotent: o.body.idempotent === true,
      wallet: String(o.body.walletAddress ?? ""),
      transaction: typeof o.body.transaction === "string" ? o.body.transaction : null,
      apiKey: typeof o.body.apiKey === "string",
    };
  }
  const e = r.error;
  if (e instanceof DomainError) {
    return { kind: "error", code: e.code, status: e.status, details: e.details as Record<string, unknown> };
  }
  return { kind: "threw", message: e instanceof Error ? (e.stack ?? e.message) : String(e) };
}

function describe(a: Answer): string {
  switch (a.kind) {
    case "funded":
      return `200${a.idempotent ? " idempotent" : ""}${a.apiKey ? " +key" : ""}`;
    case "challenge":
      return `402 ${a.code}`;
    case "error": {
      const flags = ["reconciling", "credited"].filter((f) => a.details[f] === true);
      return `${a.status} ${a.code}${flags.length ? ` (${flags.join(", ")})` : ""}`;
    }
    case "threw":
      return "threw";
  }
}

/** A facilitator behaviour for a settle call (weights: most settle; every fault the brief names). */
export function drawBehaviour(w: FundingWorld, o: { concurrent: boolean }): FacilitatorBehaviour {
  const lagging = w.node.frozenAt !== null;
  return w.prng.weighted<FacilitatorBehaviour>({
    ok: 40,
    refuse: 6,
    "settle-then-502": 8,
    "settle-then-drop": 4,
    "502-no-settle": 5,
    "502-then-held": 6,
    "timeout-before-settle": 5,
    "timeout-after-settle": 6,
    down: 4,
    // the wrong verdict is only drawn where the reconciler can see the chain (it credits first)
    "settle-then-refuse": lagging ? 0 : 6,
    // a duplicate of a call whose process died would wait out its 15 s (wall clock) for it
    "crash-before-settle": o.concurrent ? 0 : 4,
    "crash-after-settle": o.concurrent ? 0 : 6,
  });
}

export async function addPayer(w: FundingWorld): Promise<void> {
  if (w.payers.length >= MAX_PAYERS) return;
  await w.addPayer();
}

/** The route a payer's next authorization is for: signup, or (with an account) top-up and refill too. */
async function routeFor(w: FundingWorld, payer: SimPayer): Promise<FundingKind> {
  if (!(await w.accountOf(payer))) return "signup";
  return w.prng.weighted<FundingKind>({ signup: 2, top_up: 3, refill: 2 });
}

/** A payer signs a new authorization (a fresh nonce; sometimes another payer's, or one of its own again) and sends it. */
export async function pay(w: FundingWorld): Promise<string[]> {
  const p = w.prng;
  const payer = p.pick(w.payers);
  const kind = await routeFor(w, payer);
  const amount = BigInt(p.between(2, 24)) * 500_000n;
  const mine = w.auths.filter((a) => a.payer === payer && !a.forged);
  const others = w.auths.filter((a) => a.payer !== payer && !a.forged);
  let nonce: Hex;
  let note = "";
  const r = p.int(100);
  if (r < 8 && others.length > 0) {
    // EIP-3009 nonces are the authorizer's: another payer's nonce is another payment
    const a = p.pick(others);
    nonce = a.nonce;
    note = ` (the nonce of ${a.label}, another payer's)`;
  } else if (r < 14 && mine.length > 0) {
    // the same nonce signed again for another amount: at most one of the two can ever move money
    const a = p.pick(mine);
    nonce = a.nonce;
    note = ` (the nonce of its own ${a.label}, another amount)`;
  } else {
    nonce = w.freshNonce();
  }
  const validBefore = w.nowS() + p.pick(VALIDITY_S);
  const auth = await w.sign(payer, {
    kind,
    amount: distinctAmount(w, payer, nonce, amount),
    nonce,
    validBefore,
  });
  w.log(
    `${payer.label} signs ${auth.label} ${w.paymentLabel(payer.address, nonce)} ${kind} ${usdc(auth.amount)} USDC, valid before ${w.rel(validBefore)}${note}`,
  );
  return submit(w, auth, { kind, caller: payer });
}

/** Another amount than every authorization of this payer with this nonce (so the chain tells them apart). */
function distinctAmount(w: FundingWorld, payer: SimPayer, nonce: Hex, amount: bigint): bigint {
  let a = amount;
  while (w.auths.some((x) => x.payer === payer && x.nonce === nonce.toLowerCase() && x.amount === a)) a += 500_000n;
  return a;
}

/**
 * Only a call whose process died leaves a row `settling` between steps; a call naming its
 * authorization waits 15 s of wall time for it (then 409), so the simulation sends none.
 */
async function settlingRow(w: FundingWorld, auth: SimAuth): Promise<boolean> {
  const row = await w.db.payment.findUnique({
    where: { payerAddress_authorizationNonce: { payerAddress: auth.payer.address, authorizationNonce: auth.nonce } },
    select: { status: true },
  });
  return row?.status === "settling";
}

/** The same header again (either envelope; now and then on another route, or several at once). */
export async function replay(w: FundingWorld): Promise<string[]> {
  const p = w.prng;
  const candidates = w.auths.filter((a) => !a.forged);
  if (candidates.length === 0) return [];
  const auth = p.pick(candidates);
  if (await settlingRow(w, auth)) {
    // only a call whose process died leaves a row settling between steps: its replay waits 15 s of
    // wall time for it and answers 409 (the funding integration tests cover that answer)
    w.log(`replay of ${auth.label} skipped: its row is settling (its call died)`);
    return [];
  }
  let kind = auth.kind;
  if (p.chance(0.15)) {
    kind = p.pick(["signup", "top_up", "refill"] as const);
    if (kind !== "signup" && !(await w.accountOf(auth.payer))) kind = "signup";
  }
  w.log(`replay ${auth.label} on ${kind}${kind !== auth.kind ? ` (signed for ${auth.kind})` : ""}`);
  return submit(w, auth, { kind, caller: auth.payer });
}

/**
 * A hostile call: a recorded authorization with a signature that is not its payer's (a forgery of
 * what the chain made public), or a payment signed by one wallet sent on another wallet's account.
 */
export async function hostile(w: FundingWorld): Promise<string[]> {
  const p = w.prng;
  const genuine = w.auths.filter((a) => !a.forged);
  if (genuine.length === 0 || w.payers.length < 2) return [];
  if (p.chance(0.6)) {
    const target = p.pick(genuine);
    if (await settlingRow(w, target)) {
      w.log(`a forgery of ${target.label} skipped: its row is settling (its call died)`);
      return [];
    }
    const forger = p.pick(w.payers.filter((x) => x !== target.payer));
    const forged = await w.sign(target.payer, {
      kind: target.kind,
      amount: target.amount,
      nonce: target.nonce,
      validBefore: target.validBefore,
      signer: forger,
    });
    w.log(`${forger.label} forges ${target.label}'s authorization as ${forged.label}`);
    return submit(w, forged, { kind: target.kind, caller: target.payer });
  }
  const withAccount: SimPayer[] = [];
  for (const x of w.payers) if (await w.accountOf(x)) withAccount.push(x);
  if (withAccount.length === 0) return [];
  const victim = p.pick(withAccount);
  const payer = p.pick(w.payers.filter((x) => x !== victim));
  const auth = await w.sign(payer, {
    kind: "top_up",
    amount: BigInt(p.between(2, 10)) * 500_000n,
    nonce: w.freshNonce(),
    validBefore: w.nowS() + 600,
  });
  w.log(`${payer.label} signs ${auth.label} and sends it as a top-up of ${victim.label}'s account`);
  return submit(w, auth, { kind: "top_up", caller: victim, mismatched: true });
}

/**
 * Sends `auth`'s header (one call, or two or three at once) with a facilitator behaviour drawn for
 * it, and checks every answer against the chain and the payment's row at once.
 */
async function submit(
  w: FundingWorld,
  auth: SimAuth,
  o: { kind: FundingKind; caller: SimPayer; mismatched?: boolean },
): Promise<string[]> {
  const p = w.prng;
  const copies = p.chance(0.15) ? p.between(2, 3) : 1;
  const behaviour = drawBehaviour(w, { concurrent: copies > 1 });
  const version = p.chance(0.3) ? 2 : 1;
  const key = authKey(auth.payer.address, auth.nonce);
  const accountId = o.kind === "signup" ? null : await w.accountOf(o.caller);
  const req: FundingRequest = {
    kind: o.kind,
    body: { amountMicroUsdc: Number(auth.amount) },
    payment: w.header(auth, version),
    resource: resourceOf(o.kind),
    ...(accountId ? { caller: { accountId, walletAddress: o.caller.address } } : {}),
  };
  w.behaviours.set(key, behaviour);
  w.stats.calls += copies;
  w.stats.behaviours[behaviour] = (w.stats.behaviours[behaviour] ?? 0) + 1;
  if (copies > 1) w.stats.duplicates++;
  if (auth.forged) w.stats.forged++;
  // duplicates: at once, or the later ones' verify slow (it answers after the first one's settlement)
  const slow = copies > 1 && p.chance(0.5);
  if (slow) {
    const gate = { verifies: 0, opened: Promise.resolve(), open: () => {} };
    gate.opened = new Promise<void>((resolve) => {
      gate.open = resolve;
    });
    w.verifyGates.set(key, gate);
  }
  const calls = Array.from({ length: copies }, () =>
    w.service
      .fund(req)
      .then(
        (value) => ({ ok: true as const, value }),
        (error: unknown) => ({ ok: false as const, error }),
      )
      .finally(() => w.verifyGates.get(key)?.open()),
  );
  let results: Awaited<(typeof calls)[number]>[];
  try {
    const r = await w.unlessDead(Promise.all(calls));
    if (r.died) {
      w.stats.crashes++;
      w.log(`  v${version} → the process died during settle (${behaviour})`);
      return [];
    }
    results = r.value;
  } finally {
    w.behaviours.delete(key);
    w.verifyGates.delete(key);
  }
  const answers = results.map(answerOf);
  const [row, chain] = await Promise.all([
    w.db.payment.findUnique({
      where: { payerAddress_authorizationNonce: { payerAddress: auth.payer.address, authorizationNonce: auth.nonce } },
    }),
    chainState(w),
  ]);
  const moved = (chain.settlements.get(key) ?? []).some((t) => t.valueMicroUsdc === auth.amount);
  const credited = row?.status === "pending" || row?.status === "confirmed";
  const summary =
    copies === 1
      ? answers[0]
        ? describe(answers[0])
        : ""
      : // which duplicate wins the claim is a race: the trace shows what they left behind
        `${copies} at once${slow ? ", the later verifies slow" : ""}`;
  w.log(
    `  v${version} ${behaviour} → ${summary}; row ${row ? `${row.status}${row.amountMicroUsdc !== auth.amount ? ` (${usdc(row.amountMicroUsdc)})` : ""}` : "none"}${moved ? ", moved on chain" : ""}`,
  );
  const v: string[] = [];
  const who = `${auth.label}${copies > 1 ? ` (one of ${copies} at once)` : ""}`;
  for (const a of answers) {
    if (a.kind === "funded") {
      w.stats.funded++;
      if (auth.forged) v.push(`${who}: a forged payment was answered 200, showing ${a.wallet}'s account`);
      if (o.mismatched) v.push(`${who}: a payment on another wallet's account was answered 200`);
      if (a.wallet !== auth.payer.address) v.push(`${who}: answered 200 with ${a.wallet}'s account, not its payer's`);
      if (!row || !credited) {
        v.push(`${who}: answered 200 but its payment is ${row?.status ?? "missing"}`);
      } else if (a.transaction?.toLowerCase() !== row.settlementTxHash?.toLowerCase()) {
        v.push(`${who}: answered transaction ${a.transaction}, recorded ${row.settlementTxHash}`);
      }
      if (!moved && !auth.forged) v.push(`${who}: answered 200 but nothing moved on chain for it`);
    } else if (
      a.kind === "challenge" ||
      (a.kind === "error" && (a.code === "facilitator_unavailable" || a.code === "payer_mismatch"))
    ) {
      // "nothing was charged": the chain must agree for the authorization this call carried
      if (moved && !auth.forged && !o.mismatched) {
        v.push(`${who}: answered ${describe(a)} ("nothing was charged") but its transfer is on chain`);
      }
      if (a.kind === "error" && a.code === "payer_mismatch" && !o.mismatched) v.push(`${who}: payer_mismatch`);
    } else if (a.kind === "error" && a.code === "payment_unfinished") {
      if (a.details.reconciling !== true && a.details.credited !== true) {
        v.push(`${who}: 409 payment_unfinished neither reconciling nor credited (it needs a human)`);
      }
      if (a.details.credited === true && !credited) {
        v.push(`${who}: 409 says credited but its payment credited nothing`);
      }
    } else if (a.kind === "error") {
      v.push(`${who}: unexpected ${a.status} ${a.code}`);
    } else {
      v.push(`${who}: the funding service threw (a 500): ${a.message}`);
    }
  }
  if (o.mismatched && answers.some((a) => !(a.kind === "error" && a.code === "payer_mismatch"))) {
    v.push(`${who}: a payment signed by another wallet was not refused as payer_mismatch`);
  }
  return v;
}

/** A payer cancels one of its authorizations on chain (EIP-3009 `cancelAuthorization`); refused once it was used. */
export async function cancel(w: FundingWorld): Promise<void> {
  const open = w.auths.filter((a) => !a.forged && !a.cancelled);
  if (open.length === 0) return;
  // a payer mostly cancels what it was told is unfinished (409 reconciling) or never heard back on
  const stuck = await w.db.payment.findMany({
    where: { status: { in: ["settling", "reconciling"] } },
    select: { payerAddress: true, authorizationNonce: true },
  });
  const unfinished = open.filter((a) =>
    stuck.some((r) => r.payerAddress === a.payer.address && r.authorizationNonce === a.nonce),
  );
  const auth = w.prng.pick(unfinished.length > 0 && w.prng.chance(0.8) ? unfinished : open);
  try {
    await cancelAuthorization(w.chain, auth.payer, auth.nonce);
    for (const a of w.auths) if (a.payer === auth.payer && a.nonce === auth.nonce) a.cancelled = true;
    w.stats.cancels++;
    w.log(`${auth.payer.label} cancels ${auth.label} on chain`);
  } catch {
    w.log(`${auth.payer.label} cannot cancel ${auth.label}: its nonce is used`);
  }
}

/** A settlement the facilitator held (after its 502 or the service's timeout) lands now, or fails on chain. */
export async function late(w: FundingWorld): Promise<void> {
  if (w.standIn.held.length === 0) return;
  const i = w.prng.int(w.standIn.held.length);
  const held = w.standIn.held[i];
  const label = held ? w.paymentLabel(held.authorization.from, held.authorization.nonce) : "?";
  const r = await w.standIn.releaseHeld(i);
  if (r.ok) w.stats.heldLanded++;
  w.log(
    `the facilitator's held settlement of ${label} ${r.ok ? "lands" : `fails (${r.failure.reason ?? r.failure.kind})`}`,
  );
}

function tally(w: FundingWorld, outcome: string): void {
  if (outcome === "credited") w.stats.reconciledCredited++;
  if (outcome === "failed") w.stats.reconciledFailed++;
}

/** The reconciliation worker runs each queued job once; a job still waiting stays queued (BullMQ retries it). */
export async function worker(w: FundingWorld): Promise<void> {
  const ids = [...w.queue.ids];
  if (ids.length === 0) return;
  const out: string[] = [];
  for (const id of ids) {
    const outcome = await w.reconciler.reconcilePayment(id);
    tally(w, outcome);
    const p = await w.db.payment.findUnique({ where: { id } });
    out.push(`${p ? w.paymentLabel(p.payerAddress, p.authorizationNonce) : id} ${outcome}`);
    if (outcome !== "waiting") w.queue.ids.splice(w.queue.ids.indexOf(id), 1);
  }
  w.log(`reconciliation jobs: ${out.join(", ")}`);
}

export async function scan(w: FundingWorld): Promise<void> {
  const r = await w.reconciler.reconcileOutstanding();
  w.stats.reconciledCredited += r.credited;
  w.stats.reconciledFailed += r.failed;
  w.log(`chain scan: ${r.credited} credited, ${r.failed} failed, ${r.waiting} waiting`);
}

export async function confirm(w: FundingWorld): Promise<void> {
  const r = await w.reconciler.confirmPending();
  w.stats.reversed += r.reversed;
  w.log(`confirmations: ${r.confirmed} confirmed, ${r.reversed} reversed, ${r.waiting} waiting`);
}

export async function mine(w: FundingWorld): Promise<void> {
  const n = w.prng.between(1, 6);
  await w.testClient.mine({ blocks: n });
  w.log(`${n} blocks`);
}

/** The reconciler's node stops where the chain is now, for a few steps. */
export async function lag(w: FundingWorld): Promise<void> {
  if (w.node.frozenAt !== null) return;
  const steps = w.prng.between(3, 12);
  w.node.frozenAt = await w.head();
  w.lagUntil = w.step + steps;
  w.stats.lags++;
  w.log(`the reconciler's node falls behind for ${steps} steps`);
}

export async function catchUp(w: FundingWorld): Promise<void> {
  if (w.node.frozenAt === null || w.step < w.lagUntil) return;
  w.node.frozenAt = null;
  w.lagUntil = 0;
  w.log("the reconciler's node catches up");
}

/** The clock moves: seconds, minutes, hours, or just past the next open authorization's validBefore. */
export async function clock(w: FundingWorld, how: "tick" | "minutes" | "hours" | "past"): Promise<void> {
  const p = w.prng;
  let s: number;
  switch (how) {
    case "tick":
      s = p.between(5, 60);
      break;
    case "minutes":
      s = p.between(61, 600);
      break;
    case "hours":
      s = p.between(1, 3) * 3600 + p.between(0, 59) * 60;
      break;
    case "past": {
      const now = w.nowS();
      const next = w.auths.map((a) => a.validBefore).filter((t) => t > now);
      s = next.length > 0 ? Math.min(...next) - now + p.between(0, 20) : 600;
      break;
    }
  }
  await w.advance(s * 1000);
  w.log(`clock +${s}s → ${w.rel(w.nowS())}`);
}

function usdc(n: bigint): string {
  const frac = (n % 1_000_000n).toString().padStart(6, "0").replace(/0+$/, "");
  return `${n / 1_000_000n}${frac ? `.${frac}` : ""}`;
}
