import type pg from "pg";
import { marketAddSql } from "./market-totals.js";

/**
 * Generated traffic for the partitioning proofs (`npm run scale:rows`, 10 million requests, and the
 * plan test on a smaller set): requests spread evenly over the last `months` UTC months (the current
 * one ending now), their clears, and the funding that makes the books balance. Everything is made by
 * INSERT … SELECT generate_series inside Postgres, one month at a time into a table of its own that is
 * then ATTACHed as that month's partition (its indexes built once over the loaded rows, its foreign
 * keys validated in one pass), as a bulk load would.
 *
 * The account mix is skewed as real traffic is: a request's buyer is `floor(buyers × u³)` for a
 * uniform u, so the busiest buyer makes about (1/buyers)^⅓ of all requests (3.7% of them with 20,000
 * buyers), the busiest 1% about a fifth, and the median buyer a few dozen. 95% of requests succeed
 * and carry a clear (against one of `suppliers` offers); 5% fail with none. In the newest `v7Months`
 * months a request's id is a v7 uuid (its time the start) and its support reference (none stored);
 * before, its id is random and it stores a v4 reference, as a database that lived through the changes
 * would have. Deterministic for a given `seed`.
 */
export interface ScaleRowsOptions {
  requests: number;
  months: number;
  buyers: number;
  suppliers: number;
  /** the end of the generated traffic (its month is the newest) */
  now: Date;
  /** months (newest first) whose request ids are v7 and their references; older ones store v4 references (default: half) */
  v7Months?: number;
  /** setseed's argument, -1..1 */
  seed?: number;
  /**
   * a succeeded request's lone attempt stored as its clear (attempts `[]`), as endings have written it
   * since docs/decisions.md "A lone successful attempt is its clear" (default: stored, as before)
   */
  loneAttemptAsClear?: boolean;
}

export interface ScaleRowsResult {
  requests: number;
  clears: number;
  /** the months generated, oldest first (YYYY-MM) */
  months: string[];
  /** the busiest buyer and how many requests it made */
  busiest: { accountId: string; requests: number };
  /** loading the rows (requests and clears, indexes and foreign keys included), ms */
  loadMs: number;
  /** funding journals and balances, ms */
  booksMs: number;
}

const MODELS = ["llama-3.3-70b", "qwen3-235b", "deepseek-v3.2", "venice-uncensored", "mistral-31-24b"];

/** Fills the (migrated, empty) database `c` is connected to. */
export async function generateScaleRows(c: pg.Client, opts: ScaleRowsOptions): Promise<ScaleRowsResult> {
  const { requests, months, buyers, suppliers } = opts;
  if (months < 1 || requests < months || buyers < 1 || suppliers < 1) throw new Error("generateScaleRows: bad sizes");
  const v7Months = opts.v7Months ?? Math.ceil(months / 2);
  const end = new Date(opts.now);
  const newest = new Date(Date.UTC(end.getUTCFullYear(), end.getUTCMonth(), 1));
  const monthStarts = Array.from(
    { length: months },
    (_, i) => new Date(Date.UTC(newest.getUTCFullYear(), newest.getUTCMonth() - (months - 1 - i), 1)),
  );
  await c.query("SELECT setseed($1)", [opts.seed ?? 0.42]);

  // accounts: buyers 1..B, then suppliers; each supplier with one key and one offer big enough for all
  await c.query(
    `INSERT INTO accounts (id, wallet_address, auth_provider, created_at)
     SELECT md5('scale-account:' || g)::uuid, '0x' || lpad(to_hex(g), 40, '0'), 'siwe', $2
       FROM generate_series(1, $1::int) g`,
    [buyers + suppliers, monthStarts[0]],
  );
  await c.query(
    `INSERT INTO upstream_keys (id, account_id, label, secret_ciphertext, secret_iv, secret_tag, encryption_key_id,
                                secret_fingerprint, secret_last4)
     SELECT md5('scale-key:' || s)::uuid, md5('scale-account:' || ($1::int + s))::uuid, 'scale', '\\x00', '\\x00',
            '\\x00', 'v1', 'fp-' || s, 'abcd'
       FROM generate_series(1, $2::int) s`,
    [buyers, suppliers],
  );
  await c.query(
    `INSERT INTO offers (id, account_id, upstream_key_id, price_cents_per_dollar, quantity_micro_diem,
                         remaining_micro_diem, expires_at)
     SELECT md5('scale-offer:' || s)::uuid, md5('scale-account:' || ($1::int + s))::uuid, md5('scale-key:' || s)::uuid,
            30 + s % 30, 9000000000000000, 9000000000000000, $3
       FROM generate_series(1, $2::int) s`,
    [buyers, suppliers, new Date(end.getTime() + 86_400_000)],
  );

  // the partition for anything older ends where the generated months begin
  for (const t of ["inference_requests", "clears"]) {
    const used = await c.query(`SELECT 1 FROM ${t}_before LIMIT 1`);
    if (used.rowCount) throw new Error(`generateScaleRows: ${t}_before has rows already`);
    await c.query(`ALTER TABLE ${t} DETACH PARTITION ${t}_before`);
    await c.query(`DROP TABLE ${t}_before`);
    await c.query(
      `CREATE TABLE ${t}_before PARTITION OF ${t} FOR VALUES FROM (MINVALUE) TO ('${monthStarts[0]?.toISOString()}')`,
    );
  }

  // the buyers, by number (the skewed pick indexes this), and each supplier's attempt, succeeded and failed
  const buyerIds = (
    await c.query<{ ids: string[] }>(
      `SELECT array_agg(md5('scale-account:' || g)::uuid::text ORDER BY g) AS ids FROM generate_series(1, $1::int) g`,
      [buyers],
    )
  ).rows[0]?.ids;
  const attempts = (
    await c.query<{ a: string[] }>(
      `SELECT array_agg(jsonb_build_array(jsonb_build_object('ordinal', 1, 'upstreamKeyId', md5('scale-key:' || s)::uuid,
                'offerId', md5('scale-offer:' || s)::uuid, 'priceCents', 30 + s % 30, 'outcome', o.outcome,
                'upstreamStatus', o.status, 'errorKind', NULL, 'startedAt', $2::timestamptz,
                'endedAt', $2::timestamptz + interval '2 seconds'))::text ORDER BY s, o.n) AS a
         FROM generate_series(1, $1::int) s
        CROSS JOIN (VALUES (1, 'succeeded', 200), (2, 'retryable_failure', 503)) AS o(n, outcome, status)`,
      [suppliers, monthStarts[0]],
    )
  ).rows[0]?.a;
  // a bulk load: index builds in memory, no wait for the WAL at each commit
  await c.query("SET maintenance_work_mem = '512MB'");
  await c.query("SET synchronous_commit = off");

  const loadStart = performance.now();
  let made = 0;
  for (const [i, start] of monthStarts.entries()) {
    const next = new Date(Date.UTC(start.getUTCFullYear(), start.getUTCMonth() + 1, 1));
    const until = i === months - 1 ? end : next;
    const n = Math.floor(requests / months) + (i < requests % months ? 1 : 0);
    const v7 = i >= months - v7Months;
    const suffix = `_y${start.getUTCFullYear()}m${String(start.getUTCMonth() + 1).padStart(2, "0")}`;
    for (const t of ["inference_requests", "clears"]) {
      // an attached (empty) partition of this month, made at start-up, gives way to the loaded one
      const attached = await c.query(
        `SELECT 1 FROM pg_inherits WHERE inhparent = $1::regclass AND inhrelid = to_regclass($2)`,
        [t, t + suffix],
      );
      if (attached.rowCount) {
        const used = await c.query(`SELECT 1 FROM ${t + suffix} LIMIT 1`);
        if (used.rowCount) throw new Error(`generateScaleRows: ${t + suffix} has rows already`);
        await c.query(`ALTER TABLE ${t} DETACH PARTITION ${t + suffix}`);
        await c.query(`DROP TABLE ${t + suffix}`);
      }
      await c.query(
        `CREATE TABLE ${t + suffix} (LIKE ${t} INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING STORAGE)`,
      );
    }
    // the request's start spreads evenly over [start, until); its buyer is skewed (u³); its supplier and
    // model by its number; 1 in 20 fails; a succeeded one burns 200-8,191 micro-DIEM-ish tokens. Its
    // attempt (one) is its supplier's template, its v7 id the start's milliseconds and the
    // random bits of a v4 uuid: nothing per row but arithmetic, array lookups and gen_random_uuid
    await c.query(
      `INSERT INTO inference_requests${suffix}
         (id, support_reference, account_id, route, modality, model, stream, status, error_code, max_price_cents,
          clearing_price_cents, admitted_max_tokens, prompt_tokens, completion_tokens, cached_tokens,
          burn_micro_diem, cost_micro_usdc, attempt_count, attempts, started_at, first_byte_at, completed_at)
       SELECT CASE WHEN $6::boolean THEN r.ref ELSE r.id END, CASE WHEN $6::boolean THEN NULL ELSE r.ref END, r.account, 'chat', r.modality, r.model, r.g % 3 = 0, r.status,
              CASE WHEN r.ok THEN NULL ELSE 'upstream_unavailable' END, 80,
              CASE WHEN r.ok THEN r.price END, 4096, r.prompt, CASE WHEN r.ok THEN r.completion END, 0,
              CASE WHEN r.ok THEN r.burn END, CASE WHEN r.ok THEN (r.burn * r.price) / 100 END, 1,
              ($8::jsonb[])[2 * r.s - CASE WHEN r.ok THEN 1 ELSE 0 END],
              r.started, r.started + interval '300 milliseconds', r.started + interval '2 seconds'
         FROM (SELECT q.*, 30 + q.s % 30 AS price, (q.prompt + q.completion) * 3 AS burn,
                      CASE WHEN q.ok THEN 'succeeded' ELSE 'failed' END::inference_status AS status,
                      CASE WHEN $6::boolean THEN (
                        lpad(to_hex((extract(epoch FROM q.started) * 1000)::bigint), 12, '0') || '7' ||
                        substr(q.u, 16, 3) || substr(q.u, 20, 4) || substr(q.u, 25, 12))::uuid
                      ELSE q.u::uuid END AS ref
                 FROM (SELECT g, gen_random_uuid() AS id, gen_random_uuid()::text AS u,
                              ($3::uuid[])[1 + floor(cardinality($3::uuid[]) * power(random(), 3))::int] AS account,
                              1 + g % $4::int AS s, g % 20 <> 0 AS ok,
                              CASE WHEN g % 12 = 0 THEN 'image' ELSE 'text' END::modality AS modality,
                              ($7::text[])[1 + g % 5] AS model,
                              date_trunc('milliseconds', $1::timestamptz + ($2::timestamptz - $1::timestamptz) * (g - 1) / $5::int)
                                AS started,
                              (100 + (g::bigint * 7919) % 4000)::int AS prompt, (50 + (g::bigint * 104729) % 2000)::int AS completion
                         FROM generate_series(1, $5::int) g) q) r`,
      [start, until, buyerIds, suppliers, n, v7, MODELS, attempts],
    );
    await c.query(
      `INSERT INTO clears${suffix}
         (id, request_id, buyer_account_id, supplier_account_id, offer_id, upstream_key_id, model, modality,
          price_cents_per_dollar, ceiling_cents, burn_micro_diem, gross_micro_usdc, fee_micro_usdc,
          supplier_micro_usdc, created_at)
       SELECT gen_random_uuid(), r.id, r.account_id, o.account_id, o.id, o.upstream_key_id, r.model, r.modality,
              r.clearing_price_cents, 80, r.burn_micro_diem, r.cost_micro_usdc, r.cost_micro_usdc / 10,
              r.cost_micro_usdc - r.cost_micro_usdc / 10, r.completed_at
         FROM inference_requests${suffix} r
         JOIN offers o ON o.id = (r.attempts->0->>'offerId')::uuid
        WHERE r.status = 'succeeded'`,
    );
    if (opts.loneAttemptAsClear) {
      // rewritten whole, so its pages are as full as appends of rows this size leave them
      await c.query(`UPDATE inference_requests${suffix} SET attempts = '[]' WHERE status = 'succeeded'`);
      await c.query(`VACUUM FULL inference_requests${suffix}`);
    }
    for (const t of ["inference_requests", "clears"]) {
      await c.query(
        `ALTER TABLE ${t} ATTACH PARTITION ${t + suffix} FOR VALUES FROM ('${start.toISOString()}') TO ('${next.toISOString()}')`,
      );
    }
    // as the folds would have counted them (the rows are written as folded: no holder), a day at a time
    for (let d = start.getTime(); d < until.getTime(); d += 86_400_000) {
      await c.query(marketAddSql("c.created_at >= $1 AND c.created_at < $2"), [new Date(d), new Date(d + 86_400_000)]);
    }
    made += n;
  }
  const loadMs = performance.now() - loadStart;

  // each buyer funded with what it spent and 1 USDC more (top_up then confirmation, at the first
  // month's start); each supplier owed its shares
  const booksStart = performance.now();
  await c.query("BEGIN");
  await c.query(
    `CREATE TEMP TABLE scale_spent ON COMMIT DROP AS
       SELECT a.id AS account, COALESCE(s.spent, 0)::bigint + 1000000 AS funded
         FROM accounts a LEFT JOIN (SELECT buyer_account_id, sum(gross_micro_usdc) AS spent FROM clears GROUP BY 1) s
           ON s.buyer_account_id = a.id
        WHERE a.id IN (SELECT md5('scale-account:' || g)::uuid FROM generate_series(1, $1::int) g)`,
    [buyers],
  );
  await c.query(
    `INSERT INTO ledger_transactions (id, kind, idempotency_key, created_at)
     SELECT md5('scale-topup:' || account)::uuid, 'top_up'::ledger_transaction_kind, 'scale-topup:' || account,
            $1::timestamptz
       FROM scale_spent
     UNION ALL
     SELECT md5('scale-confirm:' || account)::uuid, 'confirmation', 'scale-confirm:' || account, $1 FROM scale_spent`,
    [monthStarts[0]],
  );
  await c.query(
    `INSERT INTO ledger_entries (transaction_id, account_id, book, kind, amount_micro_usdc, created_at)
     SELECT md5('scale-topup:' || account)::uuid, NULL::uuid, 'external'::ledger_book, 'top_up'::ledger_entry_kind,
            -funded, $1::timestamptz FROM scale_spent
     UNION ALL
     SELECT md5('scale-topup:' || account)::uuid, account, 'buyer_pending', 'top_up', funded, $1 FROM scale_spent
     UNION ALL
     SELECT md5('scale-confirm:' || account)::uuid, account, 'buyer_pending', 'confirmation', -funded, $1 FROM scale_spent
     UNION ALL
     SELECT md5('scale-confirm:' || account)::uuid, account, 'buyer_confirmed', 'confirmation', funded, $1 FROM scale_spent`,
    [monthStarts[0]],
  );
  await c.query(
    `UPDATE accounts a SET confirmed_micro_usdc = 1000000, has_ever_funded = true, first_funded_at = $1
       FROM scale_spent s WHERE a.id = s.account`,
    [monthStarts[0]],
  );
  await c.query(
    `UPDATE accounts a SET supplier_payable_micro_usdc = s.owed
       FROM (SELECT supplier_account_id, sum(supplier_micro_usdc)::bigint AS owed FROM clears GROUP BY 1) s
      WHERE a.id = s.supplier_account_id`,
  );
  await c.query("COMMIT");
  await c.query("ANALYZE");
  const booksMs = performance.now() - booksStart;

  const clears = await c.query<{ n: string }>("SELECT count(*)::text AS n FROM clears");
  const busiest = await c.query<{ account_id: string; n: string }>(
    `SELECT account_id, count(*)::text AS n FROM inference_requests
      WHERE account_id = md5('scale-account:1')::uuid GROUP BY 1`,
  );
  return {
    requests: made,
    clears: Number(clears.rows[0]?.n ?? 0),
    months: monthStarts.map((m) => m.toISOString().slice(0, 7)),
    busiest: { accountId: busiest.rows[0]?.account_id ?? "", requests: Number(busiest.rows[0]?.n ?? 0) },
    loadMs,
    booksMs,
  };
}
