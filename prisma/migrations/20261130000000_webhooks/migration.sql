-- Signed webhooks (issue 30, docs/decisions.md "Webhooks (issue 30)").
-- * webhook_endpoints: where an account wants its events. The signing secret is sealed like a
--   supplier's upstream key (AES-256-GCM, key id for rotation); only the service opens it, to sign.
--   At most 10 per account, counted under the account row's lock (as API keys are).
-- * webhook_events: the outbox. One row per event and subscribed endpoint, written in the same
--   transaction as the event itself (a confirmation, a settlement, a refund…), so an event is never
--   lost when a process dies right after it; the row's id is the `webhook-id` of every attempt.
--   `dedupe_key` makes an event once per endpoint where the event has a natural key (a key's
--   budget exhausted once per period).
CREATE TYPE webhook_endpoint_status AS ENUM ('active', 'disabled');
CREATE TYPE webhook_event_status AS ENUM ('pending', 'delivered', 'failed');

CREATE TABLE webhook_endpoints (
  id uuid NOT NULL DEFAULT gen_random_uuid(),
  account_id uuid NOT NULL,
  url text NOT NULL,
  description text,
  events text[],
  secret_ciphertext bytea NOT NULL,
  secret_iv bytea NOT NULL,
  secret_tag bytea NOT NULL,
  encryption_key_id text NOT NULL,
  balance_low_threshold_micro_usdc bigint,
  status webhook_endpoint_status NOT NULL DEFAULT 'active',
  disabled_reason text,
  disabled_at timestamptz(3),
  consecutive_failures integer NOT NULL DEFAULT 0,
  created_at timestamptz(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
  updated_at timestamptz(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
  CONSTRAINT webhook_endpoints_pkey PRIMARY KEY (id),
  CONSTRAINT webhook_endpoints_account_id_fkey FOREIGN KEY (account_id) REFERENCES accounts(id) ON DELETE CASCADE ON UPDATE CASCADE,
  CONSTRAINT webhook_endpoints_url_length CHECK (char_length(url) BETWEEN 1 AND 2048),
  CONSTRAINT webhook_endpoints_description_length CHECK (description IS NULL OR char_length(description) <= 256),
  CONSTRAINT webhook_endpoints_events_present CHECK (events IS NOT NULL AND cardinality(events) >= 1),
  CONSTRAINT webhook_endpoints_threshold_positive CHECK (balance_low_threshold_micro_usdc IS NULL OR balance_low_threshold_micro_usdc > 0),
  CONSTRAINT webhook_endpoints_failures_nonnegative CHECK (consecutive_failures >= 0)
);
CREATE INDEX webhook_endpoints_account_id_idx ON webhook_endpoints (account_id);

CREATE TABLE webhook_events (
  id uuid NOT NULL DEFAULT gen_random_uuid(),
  endpoint_id uuid NOT NULL,
  type text NOT NULL,
  payload jsonb NOT NULL,
  dedupe_key text,
  status webhook_event_status NOT NULL DEFAULT 'pending',
  attempts integer NOT NULL DEFAULT 0,
  next_attempt_at timestamptz(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
  last_status_code integer,
  last_error text,
  last_attempt_at timestamptz(3),
  delivered_at timestamptz(3),
  created_at timestamptz(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
  CONSTRAINT webhook_events_pkey PRIMARY KEY (id),
  CONSTRAINT webhook_events_endpoint_id_fkey FOREIGN KEY (endpoint_id) REFERENCES webhook_endpoints(id) ON DELETE CASCADE ON UPDATE CASCADE,
  CONSTRAINT webhook_events_attempts_nonnegative CHECK (attempts >= 0)
);
CREATE INDEX webhook_events_endpoint_id_created_at_id_idx ON webhook_events (endpoint_id, created_at DESC, id DESC);
-- the sweeper's scan: pending rows by due time
CREATE INDEX webhook_events_pending_due_idx ON webhook_events (next_attempt_at) WHERE status = 'pending';
-- one event per endpoint and natural key
CREATE UNIQUE INDEX webhook_events_one_per_key ON webhook_events (endpoint_id, dedupe_key) WHERE dedupe_key IS NOT NULL;
