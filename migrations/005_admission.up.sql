-- The fair waiting room: one admission window per queue-mode shard with its
-- committed seed, the randomised cohort snapshotted when admission starts,
-- the admission log in admission order, one-time codes and device bindings.

-- One window per shard. seed_sha256 is published before the window opens;
-- seed is shown only once revealed_at is set (after the randomisation
-- window has closed and the cohort is sealed).
CREATE TABLE admission_windows (
    shard_id          bigint PRIMARY KEY REFERENCES inventory_shards (id),
    seed              bytea NOT NULL CHECK (length(seed) = 32),
    seed_sha256       text NOT NULL,
    prequeue_opens_at timestamptz NOT NULL,
    opens_at          timestamptz NOT NULL,
    randomise_until   timestamptz NOT NULL,
    sealed_at         timestamptz,
    revealed_at       timestamptz,
    cohort_size       int,
    created_at        timestamptz NOT NULL DEFAULT now(),
    CHECK (prequeue_opens_at <= opens_at AND opens_at <= randomise_until)
);

-- Everyone who entered inside the randomisation window, with the score
-- the keyed hash gave their ticket: what anyone needs to recompute the order.
CREATE TABLE admission_entrants (
    shard_id bigint NOT NULL REFERENCES admission_windows (shard_id),
    ticket   text NOT NULL,
    user_id  bigint NOT NULL,
    score    bigint NOT NULL,
    PRIMARY KEY (shard_id, ticket),
    UNIQUE (shard_id, user_id)
);

-- The log of admissions, in order: seq is the admitted entrant's place in
-- the queue, unique per shard, so no one is admitted twice.
ALTER TABLE admission_log
    ADD COLUMN shard_id  bigint,
    ADD COLUMN seq       bigint,
    ADD COLUMN ticket    text,
    ADD COLUMN fence     bigint,
    ADD COLUMN expires_at timestamptz;
CREATE UNIQUE INDEX admission_log_shard_seq ON admission_log (shard_id, seq);
CREATE UNIQUE INDEX admission_log_shard_user ON admission_log (shard_id, user_id);

-- One-time codes for identity verification, kept as HMACs only.
CREATE TABLE otp_codes (
    id          bigserial PRIMARY KEY,
    user_id     bigint NOT NULL REFERENCES users (id),
    code_mac    text NOT NULL,
    purpose     text NOT NULL DEFAULT 'VERIFY_IDENTITY',
    attempts    int NOT NULL DEFAULT 0,
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL,
    consumed_at timestamptz
);
CREATE INDEX otp_codes_user ON otp_codes (user_id, created_at DESC);

ALTER TABLE users ADD COLUMN verified_at timestamptz;

-- Device bindings: which accounts use which device (a hash of the client's
-- device token), for the accounts-per-device limit and post-window clustering.
CREATE TABLE devices (
    device_id  text NOT NULL,
    user_id    bigint NOT NULL REFERENCES users (id),
    bound_at   timestamptz NOT NULL DEFAULT now(),
    attested   boolean NOT NULL DEFAULT false,
    PRIMARY KEY (device_id, user_id)
);
CREATE INDEX devices_user ON devices (user_id);
