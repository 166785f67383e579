-- Money that needs a person, wallet top-ups through a gateway, and
-- idempotency keys bound to their request.

-- A wallet top-up is a payment through a gateway like a ticket's, with no
-- hold: the wallet is credited only when the gateway confirms the capture.
ALTER TABLE payments ALTER COLUMN hold_id DROP NOT NULL;
ALTER TABLE payments
    ADD COLUMN purpose text NOT NULL DEFAULT 'HOLD' CHECK (purpose IN ('HOLD', 'TOPUP')),
    -- SHA-256 of the request an idempotency key first came with; a replay
    -- with another request is refused (IDEMPOTENCY_KEY_REUSED). Empty for
    -- rows older than this migration.
    ADD COLUMN request_hash text NOT NULL DEFAULT '',
    -- What the gateway says it captured, when it said so. Refunds return
    -- this, not what we asked for, when the two differ.
    ADD COLUMN captured_paise bigint CHECK (captured_paise >= 0),
    -- When the gateway confirmed the capture to a status inquiry (or the
    -- create answer): a signed callback alone is not the gateway's last word.
    ADD COLUMN gateway_confirmed_at timestamptz,
    ADD CONSTRAINT payments_purpose_hold CHECK ((purpose = 'HOLD') = (hold_id IS NOT NULL)),
    ADD CONSTRAINT payments_topup_method CHECK (purpose <> 'TOPUP' OR method <> 'WALLET');

ALTER TABLE refunds DROP CONSTRAINT refunds_reason_check;
ALTER TABLE refunds ADD CONSTRAINT refunds_reason_check CHECK (reason IN ('LATE_SUCCESS_NO_SEAT', 'DUPLICATE_CHARGE',
    'HOLD_EXPIRED', 'HOLD_CANCELLED', 'WAITLIST_CANCELLED', 'CORE_REJECTED', 'TDR', 'SYSTEM', 'AMOUNT_MISMATCH'));

-- payment_reviews: payments whose money a person must look at, because the
-- gateway contradicted itself or us. Reconciliation reads the open ones;
-- the console (Payments page) lists them. Kinds:
--   FAILED_AFTER_SUCCESS  the gateway says FAILED (inquiry, callback, or no
--                         record) for a payment we took as SUCCESS or REFUNDED,
--                         e.g. a success callback that inquiry contradicts
--   SUCCESS_UNCONFIRMED   a success callback the gateway never confirmed to
--                         inquiry by the payment's deadline
--   AMOUNT_MISMATCH       the gateway captured another amount or currency
--   REFUND_REFUSED        the gateway refused a refund (FAILED or 4xx); the
--                         wallet is the fallback, credited by a person
-- A payment with an open review is "in review": inquiry stops asking and
-- nothing automatic touches its money until the review is resolved.
CREATE TABLE payment_reviews (
    id          bigserial PRIMARY KEY,
    payment_id  uuid NOT NULL REFERENCES payments (id),
    refund_id   uuid REFERENCES refunds (id),
    kind        text NOT NULL CHECK (kind IN ('FAILED_AFTER_SUCCESS', 'SUCCESS_UNCONFIRMED', 'AMOUNT_MISMATCH', 'REFUND_REFUSED')),
    detail      jsonb NOT NULL DEFAULT '{}',
    created_at  timestamptz NOT NULL DEFAULT now(),
    resolved_at timestamptz,
    resolved_by text,
    resolution  text NOT NULL DEFAULT '',
    CHECK ((resolved_at IS NULL) = (resolved_by IS NULL))
);
-- One open review per payment and kind: raising it again changes nothing.
CREATE UNIQUE INDEX payment_reviews_one_open ON payment_reviews (payment_id, kind) WHERE resolved_at IS NULL;
CREATE INDEX payment_reviews_open ON payment_reviews (created_at) WHERE resolved_at IS NULL;
