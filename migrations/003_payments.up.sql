-- Payments, the wallet ledger, refunds, notifications and reservation-core
-- sync. Every rupee taken ends as a ticket or a refund.

ALTER TABLE payments DROP CONSTRAINT payments_idempotency_key_key;
ALTER TABLE payments
    ADD COLUMN user_id       bigint NOT NULL REFERENCES users (id),
    ADD COLUMN deadline      timestamptz NOT NULL,
    ADD COLUMN failure_reason text NOT NULL DEFAULT '',
    ADD COLUMN bank_ref      text NOT NULL DEFAULT '',
    ADD COLUMN next_action   jsonb,
    ADD COLUMN vpa           text NOT NULL DEFAULT '',
    ADD COLUMN bank          text NOT NULL DEFAULT '',
    ADD COLUMN inquiries     int NOT NULL DEFAULT 0,
    ADD COLUMN updated_at    timestamptz NOT NULL DEFAULT now(),
    ADD CONSTRAINT payments_state_check CHECK (state IN
        ('INITIATED', 'AWAITING_USER', 'PENDING_AT_BANK', 'SUCCESS', 'FAILED', 'UNKNOWN', 'REFUNDED')),
    ADD CONSTRAINT payments_method_check CHECK (method IN ('WALLET', 'UPI', 'CARD', 'NB')),
    ADD CONSTRAINT payments_user_key UNIQUE (user_id, idempotency_key);
-- One unresolved payment per hold: a second initiate waits for the first.
CREATE UNIQUE INDEX payments_one_open_per_hold ON payments (hold_id)
    WHERE state IN ('INITIATED', 'AWAITING_USER', 'PENDING_AT_BANK', 'UNKNOWN');
CREATE INDEX payments_unresolved ON payments (deadline)
    WHERE state IN ('INITIATED', 'AWAITING_USER', 'PENDING_AT_BANK', 'UNKNOWN');
CREATE INDEX payments_hold ON payments (hold_id);

-- Every state change of a payment, with its cause. Append-only.
CREATE TABLE payment_events (
    id         bigserial PRIMARY KEY,
    payment_id uuid NOT NULL REFERENCES payments (id),
    at         timestamptz NOT NULL DEFAULT now(),
    from_state text NOT NULL,
    to_state   text NOT NULL,
    cause      text NOT NULL,
    detail     jsonb NOT NULL DEFAULT '{}'
);
CREATE INDEX payment_events_payment ON payment_events (payment_id, id);
CREATE TRIGGER payment_events_no_change BEFORE UPDATE OR DELETE ON payment_events
    FOR EACH ROW EXECUTE FUNCTION audit_log_append_only();

-- Webhooks already applied, so a duplicate changes nothing.
CREATE TABLE webhook_events (
    gateway     text NOT NULL,
    event_id    text NOT NULL,
    payment_id  uuid NOT NULL,
    status      text NOT NULL,
    received_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (gateway, event_id)
);

-- The wallet: a balance that can never go negative and the ledger that
-- explains it. Each entry is unique per (kind, ref), so a retried debit or
-- refund is applied once.
CREATE TABLE wallet_accounts (
    user_id       bigint PRIMARY KEY REFERENCES users (id),
    balance_paise bigint NOT NULL DEFAULT 0 CHECK (balance_paise >= 0),
    updated_at    timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE wallet_entries (
    id            bigserial PRIMARY KEY,
    user_id       bigint NOT NULL REFERENCES users (id),
    kind          text NOT NULL CHECK (kind IN ('TOPUP', 'DEBIT', 'REFUND')),
    ref           text NOT NULL,
    amount_paise  bigint NOT NULL CHECK (amount_paise <> 0),
    balance_after bigint NOT NULL CHECK (balance_after >= 0),
    at            timestamptz NOT NULL DEFAULT now(),
    UNIQUE (kind, ref)
);
CREATE INDEX wallet_entries_user ON wallet_entries (user_id, id);
CREATE TRIGGER wallet_entries_no_change BEFORE UPDATE OR DELETE ON wallet_entries
    FOR EACH ROW EXECUTE FUNCTION audit_log_append_only();

-- Refunds: one per payment (a payment is refunded once, in full or less clerkage).
ALTER TABLE refunds
    ADD COLUMN gateway_ref  text NOT NULL DEFAULT '',
    ADD COLUMN expected_at  timestamptz,
    ADD COLUMN attempts     int NOT NULL DEFAULT 0,
    ADD COLUMN last_error   text NOT NULL DEFAULT '',
    ADD CONSTRAINT refunds_state_check CHECK (state IN ('PENDING', 'PROCESSED', 'FAILED')),
    ADD CONSTRAINT refunds_reason_check CHECK (reason IN ('LATE_SUCCESS_NO_SEAT', 'DUPLICATE_CHARGE', 'HOLD_EXPIRED',
        'HOLD_CANCELLED', 'WAITLIST_CANCELLED', 'CORE_REJECTED', 'TDR', 'SYSTEM')),
    ADD CONSTRAINT refunds_one_per_payment UNIQUE (payment_id);

-- Messages to passengers: e-tickets, payment and refund notices. Tests and
-- the console read them here; a sender would drain it.
CREATE TABLE notifications (
    id         bigserial PRIMARY KEY,
    user_id    bigint NOT NULL REFERENCES users (id),
    channel    text NOT NULL CHECK (channel IN ('SMS', 'EMAIL')),
    kind       text NOT NULL,
    ref        text NOT NULL,
    subject    text NOT NULL DEFAULT '',
    body       text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    sent_at    timestamptz,
    UNIQUE (kind, ref, channel)
);
CREATE INDEX notifications_user ON notifications (user_id, id);

-- Reservation-core sync: a confirmed booking is CONFIRMING until the core acknowledges.
ALTER TABLE bookings
    ADD COLUMN prs_state     text NOT NULL DEFAULT 'PENDING' CHECK (prs_state IN ('PENDING', 'SYNCED', 'REJECTED')),
    ADD COLUMN prs_ref       text NOT NULL DEFAULT '',
    ADD COLUMN prs_synced_at timestamptz,
    ADD COLUMN cancel_reason text NOT NULL DEFAULT '';

-- Payment routes: gateway per method with a weight; changeable at runtime.
CREATE TABLE payment_routes (
    gateway    text NOT NULL,
    method     text NOT NULL CHECK (method IN ('UPI', 'CARD', 'NB')),
    weight     int NOT NULL CHECK (weight BETWEEN 0 AND 1000),
    enabled    boolean NOT NULL DEFAULT true,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (gateway, method)
);
INSERT INTO payment_routes (gateway, method, weight) VALUES
    ('swiftpay', 'UPI', 60), ('bharatpg', 'UPI', 40),
    ('swiftpay', 'CARD', 50), ('bharatpg', 'CARD', 50),
    ('swiftpay', 'NB', 30), ('bharatpg', 'NB', 70);
