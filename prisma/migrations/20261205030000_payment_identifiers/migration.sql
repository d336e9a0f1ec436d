-- Issue 41: x402's `payment-identifier` extension. A v2 payment may carry an id (16-128 of
-- [A-Za-z0-9_-]) that makes its request idempotent: the same id with the same payment and request
-- answers the recorded response; the same id with another payment or request is 409. An id is the
-- payer's (its wallet signs the payment), bound to the first request that claims it: `fingerprint`
-- (sha-256 of the route, the JSON body and the payment payload), `claim_token` (the request that
-- claimed it; only that request frees it, when nothing moved), the response once recorded.
CREATE TABLE "payment_identifiers" (
    "payer_address" TEXT NOT NULL,
    "identifier" TEXT NOT NULL,
    "route" TEXT NOT NULL,
    "fingerprint" TEXT NOT NULL,
    "claim_token" UUID NOT NULL,
    "response_status" INTEGER,
    "response_body" JSONB,
    "response_headers" JSONB,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "completed_at" TIMESTAMPTZ(3),

    CONSTRAINT "payment_identifiers_pkey" PRIMARY KEY ("payer_address", "identifier"),
    CONSTRAINT "payment_identifiers_identifier_format" CHECK ("identifier" ~ '^[A-Za-z0-9_-]{16,128}$'),
    CONSTRAINT "payment_identifiers_recorded" CHECK (("completed_at" IS NULL) = ("response_status" IS NULL))
);
