-- Fraud review, live side (issue 13): the passenger limit across accounts,
-- the per-person cap, enforcement of decisions in batches, and appeals.

-- The passengers of every Tatkal hold, by keyed hash (ID number, or
-- normalised name + age), written with the hold in the group commit: the
-- same passenger across more than a few accounts' holds in one day is
-- refused. A row counts while its hold is HELD or CONFIRMED.
CREATE TABLE fraud_passenger_day (
    day     date NOT NULL,
    pkey    text NOT NULL CHECK (length(pkey) <= 64),
    user_id bigint NOT NULL REFERENCES users (id),
    hold_id uuid NOT NULL REFERENCES holds (id),
    PRIMARY KEY (day, pkey, hold_id)
);

-- The per-person cap counts the holds of every verified account of one
-- phone (the OTP-verified identity).
CREATE INDEX users_phone_verified ON users (phone_hash) WHERE id_verification_status = 'VERIFIED';

-- A banned account cannot sign in or book; an upheld appeal clears it.
-- risk_score >= 1 makes the account's booking challenges harder
-- (the graduated response before a ban).
ALTER TABLE users ADD COLUMN banned_at timestamptz;

-- Enforcement runs later than the decision, in a batch: nothing a member
-- sees changes before enforce_after.
ALTER TABLE fraud_decisions ADD COLUMN enforce_after timestamptz;

-- One row per thing a decision did to one member (a booking cancelled, an
-- account banned or challenged), written in the same transaction as the
-- act: a rerun of the job finds the row and does not act twice.
CREATE TABLE fraud_enforcements (
    decision_id  bigint NOT NULL REFERENCES fraud_decisions (id),
    user_id      bigint NOT NULL REFERENCES users (id),
    -- the booking's hold for CANCEL, the nil UUID for account actions
    hold_id      uuid NOT NULL,
    action       text NOT NULL CHECK (action IN ('CANCEL', 'BAN', 'EXTRA_CHALLENGE', 'RESTORE')),
    refund_paise bigint NOT NULL DEFAULT 0,
    done_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (decision_id, user_id, hold_id, action)
);
CREATE INDEX fraud_enforcements_user ON fraud_enforcements (user_id);

-- A member's appeal against an enforced decision; analysts answer it.
CREATE TABLE fraud_appeals (
    id          bigserial PRIMARY KEY,
    user_id     bigint NOT NULL REFERENCES users (id),
    decision_id bigint NOT NULL REFERENCES fraud_decisions (id),
    statement   text NOT NULL CHECK (length(statement) BETWEEN 1 AND 2000),
    status      text NOT NULL DEFAULT 'OPEN' CHECK (status IN ('OPEN', 'UPHELD', 'REJECTED')),
    created_at  timestamptz NOT NULL DEFAULT now(),
    decided_by  bigint REFERENCES console_users (id),
    decided_at  timestamptz,
    note        text NOT NULL DEFAULT '' CHECK (length(note) <= 2000),
    CHECK ((status = 'OPEN') = (decided_at IS NULL))
);
-- one open appeal per member and decision
CREATE UNIQUE INDEX fraud_appeals_one_open ON fraud_appeals (user_id, decision_id) WHERE status = 'OPEN';
CREATE INDEX fraud_appeals_queue ON fraud_appeals (created_at) WHERE status = 'OPEN';
