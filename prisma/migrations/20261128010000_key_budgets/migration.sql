-- Per-key budgets that cannot be overrun (issue 28, docs/decisions.md "Key budgets").
-- * api_key_spend: what each API key was charged, per UTC day of the request's start (net of video
--   refunds). Every ending adds its charges here in the same transaction as the charge
--   (svc_end_items); a key's spend in a period (day, week from Monday, month, all time) is the sum of
--   its days in that period, so a period rolls over with no job and a changed `limitReset` needs no
--   migration of figures.
-- * key_budget_holds: one row per request admitted on a key with a limit: its maximum charge, held
--   against the key's budget from admission (svc_key_reserve) until its ending deletes it in the
--   same transaction as its charge (svc_end_items). A hold belongs to the escrow holder (the router
--   process) that took it: when the holder's lease expires, the sweeper drops its holds.
CREATE TABLE api_key_spend (
  api_key_id uuid NOT NULL REFERENCES api_keys(id) ON DELETE CASCADE,
  day date NOT NULL,
  spent_micro_usdc bigint NOT NULL DEFAULT 0 CHECK (spent_micro_usdc >= 0),
  PRIMARY KEY (api_key_id, day)
);

CREATE TABLE key_budget_holds (
  request_id uuid PRIMARY KEY,
  api_key_id uuid NOT NULL REFERENCES api_keys(id) ON DELETE CASCADE,
  holder uuid NOT NULL REFERENCES escrow_holders(id) ON DELETE CASCADE,
  amount_micro_usdc bigint NOT NULL CHECK (amount_micro_usdc > 0),
  created_at timestamptz(3) NOT NULL DEFAULT now()
);
CREATE INDEX key_budget_holds_api_key_id_idx ON key_budget_holds (api_key_id);
CREATE INDEX key_budget_holds_holder_idx ON key_budget_holds (holder);

-- what existing keys were charged (net of refunded video jobs), so a limit set now counts today's spend
INSERT INTO api_key_spend (api_key_id, day, spent_micro_usdc)
SELECT s.api_key_id, s.day, s.spent
  FROM (SELECT r.api_key_id, (r.started_at AT TIME ZONE 'UTC')::date AS day,
               sum(r.cost_micro_usdc - CASE WHEN j.status = 'refunded' THEN j.charge_micro_usdc ELSE 0 END)::bigint AS spent
          FROM inference_requests r LEFT JOIN video_jobs j ON j.request_id = r.id
         WHERE r.api_key_id IS NOT NULL AND r.cost_micro_usdc > 0
         GROUP BY 1, 2) s
 WHERE s.spent > 0;
