import type { Redis } from "ioredis";
import { createPublicClient, erc20Abi, http } from "viem";
import { usdcAbi } from "../../src/adapters/chain/usdc-abi.js";
import type { Db } from "../../src/adapters/db.js";
import type { RedisClient } from "../../src/adapters/redis/client.js";
import type { RedisKeys } from "../../src/adapters/redis/keys.js";
import { assertBooksBalance } from "../books.js";
import type { SoakLoad } from "./load.js";

/**
 * The soak's end-of-run invariants, each a pass/fail with the figures behind it. They run once the
 * services have stopped (their escrow and gate slots given back) and the sweeper has released what
 * the SIGKILLed processes held.
 */

export interface Invariant {
  invariant: string;
  ok: boolean;
  [figure: string]: unknown;
}

const n = (v: unknown): number => Number(v ?? 0);
const big = (v: unknown): string => String(v ?? 0);

async function one<T>(db: Db, sql: string): Promise<T> {
  const rows = await db.$queryRawUnsafe<T[]>(sql);
  return rows[0] as T;
}

export async function checkInvariants(
  db: Db,
  opts: {
    load: SoakLoad;
    /** a ready client of the soak's Redis or cluster (disconnected here) */
    redis: () => Promise<RedisClient>;
    redisKeys: RedisKeys;
    /**
     * gate holder leases count as live only past this instant (epoch ms): the last SIGKILL plus the
     * holder lease, so a killed process's slots are back as the gates treat them however soon the
     * check runs after the kill
     */
    gateLeasesAsOfMs?: number;
    chain: { rpcUrl: string; usdcAddress: `0x${string}`; payTo: `0x${string}` };
  },
): Promise<Invariant[]> {
  const out: Invariant[] = [];

  // books: every journal and clear sums to zero; balances equal their books; reserved equals the slices
  try {
    await assertBooksBalance(db);
    out.push({ invariant: "books_balance", ok: true });
  } catch (e) {
    out.push({ invariant: "books_balance", ok: false, error: (e as Error).message.slice(0, 2000) });
  }

  // no deadlock: two paths that lock the same rows in different orders (docs/decisions.md "One lock
  // order for keys and offers", "Account locks do not hold up endings") fail one of them at random;
  // the processes have stopped, so every backend's count is in
  const locks = await one<{ deadlocks: bigint }>(
    db,
    "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()",
  );
  out.push({ invariant: "no_deadlock", ok: n(locks.deadlocks) === 0, deadlocks: n(locks.deadlocks) });

  // no negative balance anywhere; reserved within what it reserves against
  const neg = await one<{ accounts: bigint; offers: bigint; platform: bigint }>(
    db,
    `SELECT (SELECT count(*) FROM accounts WHERE confirmed_micro_usdc < 0 OR pending_micro_usdc < 0
               OR reserved_micro_usdc < 0 OR supplier_held_micro_usdc < 0
               OR reserved_micro_usdc > confirmed_micro_usdc) AS accounts,
            (SELECT count(*) FROM offers WHERE remaining_micro_diem < 0 OR reserved_micro_diem < 0
               OR reserved_micro_diem > remaining_micro_diem OR remaining_micro_diem > quantity_micro_diem) AS offers,
            (SELECT COALESCE(SUM(amount_micro_usdc), 0) FROM ledger_lines(p_books => '{platform_fee}')) AS platform`,
  );
  out.push({
    invariant: "no_negative_balance",
    ok: n(neg.accounts) === 0 && n(neg.offers) === 0 && BigInt(neg.platform) >= 0n,
    badAccounts: n(neg.accounts),
    badOffers: n(neg.offers),
    platformFeeMicroUsdc: big(neg.platform),
  });

  // no offer oversold: what it lost is what its clears burned, less DIEM a video refund gave back
  const offers = await db.$queryRawUnsafe<
    { id: string; price: number; q: bigint; r: bigint; burned: bigint; returnable: bigint; refunds: bigint }[]
  >(
    `SELECT o.id, o.price_cents_per_dollar AS price, o.quantity_micro_diem AS q, o.remaining_micro_diem AS r,
            COALESCE(SUM(c.burn_micro_diem), 0)::bigint AS burned,
            COALESCE(SUM(c.burn_micro_diem) FILTER (WHERE c.refunded_at IS NOT NULL AND v.upstream_refunded), 0)::bigint
              AS returnable,
            count(c.refunded_at)::bigint AS refunds
       FROM offers o LEFT JOIN clears c ON c.offer_id = o.id LEFT JOIN video_jobs v ON v.request_id = c.request_id
      GROUP BY o.id ORDER BY o.price_cents_per_dollar`,
  );
  const oversold = offers.filter((o) => {
    const sold = BigInt(o.q) - BigInt(o.r);
    const burned = BigInt(o.burned);
    const low = burned - BigInt(o.returnable);
    // without refunds the burn is exact; with refunds it lies between the net and the gross burn
    return sold < low || sold > burned || low > BigInt(o.q) || (n(o.refunds) === 0 && sold !== burned);
  });
  out.push({
    invariant: "no_offer_oversold",
    ok: oversold.length === 0,
    offers: offers.map((o) => ({
      price: o.price,
      quantityMicroDiem: big(o.q),
      remainingMicroDiem: big(o.r),
      clearsBurnMicroDiem: big(o.burned),
      refundedClears: n(o.refunds),
    })),
    oversold: oversold.map((o) => o.id),
  });

  // every settled payment credited (once), on the books and against the chain
  const pay = await one<{
    uncredited: bigint;
    unconfirmed: bigint;
    pending: bigint;
    credited: bigint;
    count: bigint;
  }>(
    db,
    `SELECT
       (SELECT count(*) FROM payments p WHERE p.status IN ('pending', 'confirmed') AND (
          SELECT count(*) FROM ledger_transactions t JOIN ledger_entries e ON e.transaction_id = t.id
           WHERE t.payment_id = p.id AND t.kind = 'top_up' AND e.book = 'buyer_pending'
             AND e.amount_micro_usdc = p.amount_micro_usdc) <> 1) AS uncredited,
       (SELECT count(*) FROM payments p WHERE p.status = 'confirmed' AND (
          SELECT count(*) FROM ledger_transactions t WHERE t.payment_id = p.id AND t.kind = 'confirmation') <> 1)
         AS unconfirmed,
       (SELECT count(*) FROM payments WHERE status = 'pending') AS pending,
       (SELECT COALESCE(SUM(amount_micro_usdc), 0) FROM payments WHERE status IN ('pending', 'confirmed')) AS credited,
       (SELECT count(*) FROM payments WHERE status IN ('pending', 'confirmed')) AS count`,
  );
  const chain = createPublicClient({ transport: http(opts.chain.rpcUrl) });
  const received = await chain.readContract({
    address: opts.chain.usdcAddress,
    abi: erc20Abi,
    functionName: "balanceOf",
    args: [opts.chain.payTo],
  });
  const byTx = await db.payment.findMany({
    where: { settlementTxHash: { in: [...opts.load.settled.keys()].map((t) => t.toLowerCase()) } },
    select: { settlementTxHash: true, amountMicroUsdc: true, status: true },
  });
  const creditedTx = new Map(byTx.map((p) => [p.settlementTxHash?.toLowerCase(), p]));
  // an uncredited payment is stuck only if its money moved: its authorization was used on chain.
  // One whose authorization is still unused moved nothing; reconciliation watches it until its
  // validBefore (a process killed between the intent row and the broadcast leaves one; issue 26)
  const uncreditedRows = await db.payment.findMany({
    where: {
      OR: [{ status: { in: ["settling", "reconciling"] } }, { status: "failed", settlementTxHash: { not: null } }],
    },
    select: { payerAddress: true, authorizationNonce: true, status: true },
  });
  let stuck = 0;
  let watchedUnused = 0;
  for (const p of uncreditedRows) {
    const used = await chain.readContract({
      address: opts.chain.usdcAddress,
      abi: usdcAbi,
      functionName: "authorizationState",
      args: [p.payerAddress as `0x${string}`, p.authorizationNonce as `0x${string}`],
    });
    if (used) stuck++;
    else if (p.status !== "failed") watchedUnused++;
  }
  const answeredNotCredited = [...opts.load.settled].filter(([tx, amount]) => {
    const p = creditedTx.get(tx.toLowerCase());
    return !p || p.amountMicroUsdc !== amount || (p.status !== "pending" && p.status !== "confirmed");
  });
  out.push({
    invariant: "settled_payments_credited",
    ok:
      n(pay.uncredited) === 0 &&
      n(pay.unconfirmed) === 0 &&
      stuck === 0 &&
      received === BigInt(pay.credited) &&
      answeredNotCredited.length === 0,
    payments: n(pay.count),
    creditedMicroUsdc: big(pay.credited),
    receivedOnChainMicroUsdc: received.toString(),
    stillPending: n(pay.pending),
    withoutTheirCredit: n(pay.uncredited) + n(pay.unconfirmed),
    stuckOrFailedAfterSettling: stuck,
    unsettledAuthorizationsWatched: watchedUnused,
    answeredButNotCredited: answeredNotCredited.length,
  });

  // every escrow slice back
  const esc = await one<{ be: bigint; oe: bigint; ra: bigint; ro: bigint; holders: bigint }>(
    db,
    `SELECT (SELECT count(*) FROM buyer_escrows) AS be, (SELECT count(*) FROM offer_escrows) AS oe,
            (SELECT COALESCE(SUM(reserved_micro_usdc), 0) FROM accounts) AS ra,
            (SELECT COALESCE(SUM(reserved_micro_diem), 0) FROM offers) AS ro,
            (SELECT count(*) FROM escrow_holders) AS holders`,
  );
  out.push({
    invariant: "escrow_back",
    ok: n(esc.be) === 0 && n(esc.oe) === 0 && BigInt(esc.ra) === 0n && BigInt(esc.ro) === 0n,
    buyerSlices: n(esc.be),
    offerSlices: n(esc.oe),
    reservedMicroUsdc: big(esc.ra),
    reservedMicroDiem: big(esc.ro),
    holderRowsLeft: n(esc.holders),
  });

  out.push(await checkGates(await opts.redis(), opts.redisKeys, opts.gateLeasesAsOfMs ?? 0));

  // no request both charged and failed, on the books and as the clients saw it
  const cf = await one<{ failed: bigint; odd: bigint; inProgress: bigint }>(
    db,
    `SELECT (SELECT count(*) FROM inference_requests r JOIN clears c ON c.request_id = r.id
              WHERE r.status IN ('failed', 'settle_failed')) AS failed,
            (SELECT count(*) FROM clears c JOIN inference_requests r ON r.id = c.request_id
              WHERE r.status NOT IN ('succeeded', 'incomplete') OR r.cost_micro_usdc IS DISTINCT FROM c.gross_micro_usdc)
              AS odd,
            (SELECT count(*) FROM inference_requests WHERE status = 'in_progress') AS "inProgress"`,
  );
  const refs = [...opts.load.paid.keys(), ...opts.load.refused, ...opts.load.unfinishedStreams];
  const charged = new Map<string, bigint>();
  for (let i = 0; i < refs.length; i += 5000) {
    const chunk = refs.slice(i, i + 5000);
    const rows = await db.$queryRaw<{ ref: string; gross: bigint }[]>`
      SELECT COALESCE(r.support_reference, r.id)::text AS ref, c.gross_micro_usdc AS gross
        FROM inference_requests r JOIN clears c ON c.request_id = r.id
       WHERE r.id = ANY(${chunk}::uuid[]) OR r.support_reference = ANY(${chunk}::uuid[])`;
    for (const r of rows) charged.set(r.ref, BigInt(r.gross));
  }
  const refusedButCharged = [...opts.load.refused].filter((ref) => charged.has(ref));
  const paidMismatch = [...opts.load.paid].filter(([ref, cost]) => charged.get(ref) !== cost);
  const unfinishedCharged = [...opts.load.unfinishedStreams].filter((ref) => charged.has(ref)).length;
  out.push({
    invariant: "no_request_charged_and_failed",
    ok: n(cf.failed) === 0 && n(cf.odd) === 0 && refusedButCharged.length === 0 && paidMismatch.length === 0,
    failedWithClear: n(cf.failed),
    clearsOnOddRequests: n(cf.odd),
    refusalsWithReference: opts.load.refused.size,
    refusedButCharged: refusedButCharged.slice(0, 10),
    answersWithCost: opts.load.paid.size,
    costNotOnTheBooks: paidMismatch.slice(0, 10).map(([ref, cost]) => ({
      ref,
      toldMicroUsdc: cost.toString(),
      booked: charged.get(ref)?.toString() ?? null,
    })),
    // streams cut before their cost frame (killed API, client timeout): charged only if settlement committed
    unfinishedStreams: opts.load.unfinishedStreams.size,
    unfinishedStreamsCharged: unfinishedCharged,
    requestsLeftInProgress: n(cf.inProgress),
  });

  // each charge booked once (the clear is the transfer its lines derive from: no clear journal
  // is written), refunded at most once with its journal; video jobs charged once
  const once = await one<{ journals: bigint; refunds: bigint; videoMismatch: bigint; nonVideoRefunds: bigint }>(
    db,
    `SELECT
       (SELECT count(*) FROM ledger_transactions t WHERE t.kind = 'clear') AS journals,
       (SELECT count(*) FROM clears c WHERE (SELECT count(*) FROM ledger_transactions t
           WHERE t.clear_id = c.id AND t.kind = 'refund') <> CASE WHEN c.refunded_at IS NOT NULL AND c.gross_micro_usdc > 0
                                                                    THEN 1 ELSE 0 END) AS refunds,
       (SELECT count(*) FROM video_jobs v LEFT JOIN clears c ON c.request_id = v.request_id
          WHERE c.id IS NULL OR c.gross_micro_usdc <> v.charge_micro_usdc
             OR (v.status = 'refunded') <> (c.refunded_at IS NOT NULL)) AS "videoMismatch",
       (SELECT count(*) FROM clears WHERE modality <> 'video' AND refunded_at IS NOT NULL) AS "nonVideoRefunds"`,
  );
  const jobs = await db.$queryRawUnsafe<{ status: string; n: bigint }[]>(
    "SELECT status::text, count(*) AS n FROM video_jobs GROUP BY status ORDER BY status",
  );
  out.push({
    invariant: "charged_once",
    ok: n(once.journals) === 0 && n(once.refunds) === 0 && n(once.videoMismatch) === 0 && n(once.nonVideoRefunds) === 0,
    clearJournals: n(once.journals),
    refundJournalMismatch: n(once.refunds),
    videoJobsNotChargedOnce: n(once.videoMismatch),
    refundsOfNonVideoClears: n(once.nonVideoRefunds),
    videoJobs: Object.fromEntries(jobs.map((j) => [j.status, n(j.n)])),
  });
  return out;
}

/**
 * No gate slot held: every gate hash in the soak's Redis holds no slot of a holder whose lease is
 * live as of `asOfMs` or now, whichever is later (a SIGKILLed process's slots count as back once its
 * lease has run out, as the gates treat them; the services have stopped, so no lease is renewed).
 */
async function checkGates(redis: RedisClient, keys: RedisKeys, asOfMs: number): Promise<Invariant> {
  /** every key matching `pattern`: on a cluster, on every master */
  const scanAll = async (pattern: string): Promise<string[]> => {
    const nodes: Redis[] =
      "nodes" in redis && typeof redis.nodes === "function" ? redis.nodes("master") : [redis as Redis];
    const out: string[] = [];
    for (const node of nodes) {
      let cursor = "0";
      do {
        const [next, found] = await node.scan(cursor, "MATCH", pattern, "COUNT", 500);
        cursor = next;
        out.push(...found);
      } while (cursor !== "0");
    }
    return out;
  };
  try {
    const [sec, usec] = await redis.time();
    const now = Math.max(asOfMs, Number(sec) * 1000 + Math.floor(Number(usec) / 1000));
    const holdersKey = keys.gateHolders();
    let live = 0;
    let dead = 0;
    // which gates and holders, to tell a late grow from a holder that never went away
    const liveSample: { gate: string; holder: string; slots: number; leaseLeftMs: number }[] = [];
    // every gate shares the prefix of a buyer key's gate (hash-tagged on a cluster)
    const gateKeys = await scanAll(keys.apiKeyInFlight("*").replace(/apikey:\*$/, "*"));
    for (const key of gateKeys) {
      const slots = await redis.hgetall(key);
      for (const [holder, v] of Object.entries(slots)) {
        const lease = await redis.zscore(holdersKey, holder);
        if (lease !== null && Number(lease) >= now) {
          live += Number(v);
          if (liveSample.length < 8)
            liveSample.push({ gate: key, holder, slots: Number(v), leaseLeftMs: Number(lease) - now });
        } else dead += Number(v);
      }
    }
    const liveHolders = await redis.zcount(holdersKey, now, "+inf");
    const inflight = await scanAll(`${keys.prefix}:inflight:*`);
    return {
      invariant: "gate_slots_back",
      ok: live === 0,
      gateKeys: gateKeys.length,
      slotsOfLiveHolders: live,
      slotsOfExpiredHolders: dead,
      liveHolders,
      inFlightMarkersLeft: inflight.length,
      leasesCountedAsOf: new Date(now).toISOString(),
      ...(liveSample.length > 0 ? { liveSample } : {}),
    };
  } finally {
    redis.disconnect();
  }
}

/** Totals to print: clears and volume, by modality; refunds; payments. */
export async function volumeFigures(db: Db): Promise<Record<string, unknown>> {
  const clears = await db.$queryRawUnsafe<
    { modality: string; n: bigint; gross: bigint; fee: bigint; share: bigint; burn: bigint; refunded: bigint }[]
  >(
    `SELECT modality::text, count(*) AS n, SUM(gross_micro_usdc) AS gross, SUM(fee_micro_usdc) AS fee,
            SUM(supplier_micro_usdc) AS share, SUM(burn_micro_diem) AS burn, count(refunded_at) AS refunded
       FROM clears GROUP BY modality ORDER BY modality`,
  );
  const requests = await db.$queryRawUnsafe<{ route: string; status: string; n: bigint }[]>(
    "SELECT route::text, status::text, count(*) AS n FROM inference_requests GROUP BY 1, 2 ORDER BY 1, 2",
  );
  const payments = await db.$queryRawUnsafe<{ kind: string; status: string; n: bigint; amount: bigint }[]>(
    "SELECT kind::text, status::text, count(*) AS n, SUM(amount_micro_usdc) AS amount FROM payments GROUP BY 1, 2 ORDER BY 1, 2",
  );
  const total = clears.reduce(
    (t, c) => ({ n: t.n + n(c.n), gross: t.gross + BigInt(c.gross), burn: t.burn + BigInt(c.burn) }),
    { n: 0, gross: 0n, burn: 0n },
  );
  return {
    clears: total.n,
    volumeMicroUsdc: total.gross.toString(),
    burnMicroDiem: total.burn.toString(),
    byModality: Object.fromEntries(
      clears.map((c) => [
        c.modality,
        {
          clears: n(c.n),
          grossMicroUsdc: big(c.gross),
          feeMicroUsdc: big(c.fee),
          supplierMicroUsdc: big(c.share),
          burnMicroDiem: big(c.burn),
          refunded: n(c.refunded),
        },
      ]),
    ),
    requestRecords: Object.fromEntries(requests.map((r) => [`${r.route}:${r.status}`, n(r.n)])),
    payments: Object.fromEntries(
      payments.map((p) => [`${p.kind}:${p.status}`, { count: n(p.n), amountMicroUsdc: big(p.amount) }]),
    ),
  };
}
