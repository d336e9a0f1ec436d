-- Issue 38: a webhook delivery lane, when released, hands the account's free lanes to the oldest due
-- pending row of each of its endpoints (WebhookOutbox.nextDue): one short index read per endpoint,
-- whatever the endpoint's delivered history or the other accounts' backlog.
CREATE INDEX webhook_events_pending_per_endpoint_idx ON webhook_events (endpoint_id, next_attempt_at) WHERE status = 'pending';
