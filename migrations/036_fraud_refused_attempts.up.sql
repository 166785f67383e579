-- Holds the passenger limit refused (issue 13): a third account trying to
-- book a passenger two others already hold that day is a tout's ring
-- reaching past the limit, and the strongest evidence it leaves, yet a
-- refused hold writes no hold and so no signal. The group commit queues
-- the refused attempts in the same inbox row as its holds' signals
-- (fraud_signal_inbox), and the drain writes them here; clustering links
-- the account that tried with the accounts that hold those passengers.
CREATE TABLE fraud_refused_attempts (
    -- the id the refused hold would have had; no hold row has it
    attempt_id      uuid PRIMARY KEY,
    shard_id        bigint NOT NULL REFERENCES inventory_shards (id),
    user_id         bigint NOT NULL REFERENCES users (id),
    window_opens_at timestamptz NOT NULL,
    device_id       text NOT NULL DEFAULT '' CHECK (length(device_id) <= 128),
    ip              inet,
    ip_net24        cidr,
    attested        boolean NOT NULL DEFAULT false,
    solve_ms        int CHECK (solve_ms >= 0),
    attempted_at    timestamptz NOT NULL,
    since_open_ms   bigint NOT NULL,
    -- the passengers as fraud_signal_passengers keeps them, in order:
    -- normalised name, age and keyed hash of the ID number ('' without one)
    name_norms      text[] NOT NULL,
    ages            int[] NOT NULL,
    id_hashes       text[] NOT NULL,
    recorded_at     timestamptz NOT NULL DEFAULT now(),
    CHECK (cardinality(name_norms) BETWEEN 1 AND 6 AND cardinality(ages) = cardinality(name_norms)
           AND cardinality(id_hashes) = cardinality(name_norms))
);
CREATE INDEX fraud_refused_attempts_window_user ON fraud_refused_attempts (window_opens_at, user_id);
