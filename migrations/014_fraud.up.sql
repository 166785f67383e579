-- Fraud review (issue 13): signals recorded per hold and booking, the
-- account graph built from them after each window, and the clusters it
-- finds with their evidence.

-- One row per hold, written in batches after the hold is durable (never on
-- the hold path itself) and updated once the booking and its payment
-- instrument are known. No foreign key to holds: signals are an append-side
-- record that must never make a hold's own write fail.
CREATE TABLE fraud_signals (
    hold_id            uuid PRIMARY KEY,
    booking_id         bigint,
    shard_id           bigint NOT NULL REFERENCES inventory_shards (id),
    user_id            bigint NOT NULL REFERENCES users (id),
    -- the window this hold raced in: every Tatkal shard of one opening
    -- shares it, so one clustering run covers one opening
    window_opens_at    timestamptz NOT NULL,
    account_created_at timestamptz NOT NULL,
    account_age_days   int NOT NULL,
    identity_verified  boolean NOT NULL,
    agent              boolean NOT NULL,
    device_id          text NOT NULL DEFAULT '' CHECK (length(device_id) <= 128),
    ip                 inet,
    -- the /24 (IPv4) or /48 (IPv6) the address sits in
    ip_net24           cidr,
    attested           boolean NOT NULL DEFAULT false,
    -- challenge solve time; NULL when no challenge was shown
    solve_ms           int CHECK (solve_ms >= 0),
    held_at            timestamptz NOT NULL,
    -- milliseconds from the window opening to the hold (negative: before)
    since_open_ms      bigint NOT NULL,
    -- UPI address, hashed card fingerprint or net-banking account, keyed-hashed
    instrument_fp      text NOT NULL DEFAULT '' CHECK (length(instrument_fp) <= 128),
    recorded_at        timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX fraud_signals_window_user ON fraud_signals (window_opens_at, user_id);
CREATE INDEX fraud_signals_window_held ON fraud_signals (window_opens_at, held_at);

-- The passengers of a hold: normalised name, age, keyed hash of the ID
-- number (ID numbers are low-entropy, so an unkeyed hash would be reversible).
CREATE TABLE fraud_signal_passengers (
    hold_id    uuid NOT NULL REFERENCES fraud_signals (hold_id),
    seq        int NOT NULL CHECK (seq BETWEEN 0 AND 5),
    name_norm  text NOT NULL CHECK (length(name_norm) <= 60),
    age        int NOT NULL CHECK (age BETWEEN 0 AND 125),
    id_hash    text NOT NULL DEFAULT '',
    PRIMARY KEY (hold_id, seq)
);

-- Edges of the account graph, one per pair of accounts per window
-- (user_a < user_b), with the evidence that links them. Kept so that a
-- later window's run can join this window's links to its own.
CREATE TABLE fraud_edges (
    window_opens_at timestamptz NOT NULL,
    user_a          bigint NOT NULL REFERENCES users (id),
    user_b          bigint NOT NULL REFERENCES users (id),
    weight          real NOT NULL CHECK (weight > 0),
    -- [{"kind": "device", "weight": 0.4, "detail": "..."}]
    evidence        jsonb NOT NULL,
    PRIMARY KEY (window_opens_at, user_a, user_b),
    CHECK (user_a < user_b)
);
CREATE INDEX fraud_edges_a ON fraud_edges (user_a, window_opens_at);
CREATE INDEX fraud_edges_b ON fraud_edges (user_b, window_opens_at);

-- Clusters found by a window's run: connected components of strong edges.
CREATE TABLE fraud_clusters (
    id              bigserial PRIMARY KEY,
    window_opens_at timestamptz NOT NULL,
    score           real NOT NULL,
    flagged         boolean NOT NULL,
    members         int NOT NULL CHECK (members >= 2),
    -- {"why": [...], "kinds": {...}, "edges": [...]}: what an analyst reads
    evidence        jsonb NOT NULL,
    -- OPEN until an analyst decides; a rerun of the window replaces only
    -- open clusters nobody holds a claim on
    status          text NOT NULL DEFAULT 'OPEN' CHECK (status IN ('OPEN', 'CLOSED')),
    -- one analyst at a time: the claim lapses at claimed_until
    claimed_by      bigint REFERENCES console_users (id),
    claimed_until   timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now(),
    CHECK ((claimed_by IS NULL) = (claimed_until IS NULL))
);
CREATE INDEX fraud_clusters_queue ON fraud_clusters (score DESC) WHERE flagged AND status = 'OPEN';
CREATE INDEX fraud_clusters_window ON fraud_clusters (window_opens_at);

CREATE TABLE fraud_cluster_members (
    cluster_id bigint NOT NULL REFERENCES fraud_clusters (id),
    user_id    bigint NOT NULL REFERENCES users (id),
    PRIMARY KEY (cluster_id, user_id)
);
CREATE INDEX fraud_cluster_members_user ON fraud_cluster_members (user_id);

-- One row per clustering run of a window (the last one wins): when it ran
-- and what it found, for the "clusters per window" figure and to know which
-- closed windows still need a run.
CREATE TABLE fraud_runs (
    window_opens_at timestamptz PRIMARY KEY,
    ran_at          timestamptz NOT NULL DEFAULT now(),
    signals         int NOT NULL,
    edges           int NOT NULL,
    clusters        int NOT NULL,
    flagged         int NOT NULL
);

-- An analyst's decision on a cluster, with its reason code. Cancelling
-- bookings and banning accounts act on many people, so they wait for a
-- second analyst's approval. Nothing a member sees changes here:
-- enforcement runs later, in a batch, and stamps enforced_at.
CREATE TABLE fraud_decisions (
    id          bigserial PRIMARY KEY,
    cluster_id  bigint NOT NULL UNIQUE REFERENCES fraud_clusters (id),
    analyst_id  bigint NOT NULL REFERENCES console_users (id),
    outcome     text NOT NULL CHECK (outcome IN ('CLEAR', 'WATCH', 'EXTRA_CHALLENGE', 'CANCEL_BOOKINGS', 'BAN')),
    reason_code text NOT NULL CHECK (reason_code IN ('FALSE_POSITIVE', 'FAMILY_OR_OFFICE', 'SHARED_DEVICES',
                    'SHARED_INSTRUMENTS', 'PASSENGER_RESALE', 'AUTOMATION', 'AGENT_VIA_PERSONAL', 'OTHER')),
    note        text NOT NULL DEFAULT '' CHECK (length(note) <= 2000),
    decided_at  timestamptz NOT NULL DEFAULT now(),
    needs_approval boolean NOT NULL,
    approved_by bigint REFERENCES console_users (id),
    approved_at timestamptz,
    enforced_at timestamptz,
    CHECK (approved_by IS NULL OR approved_by <> analyst_id),
    CHECK (enforced_at IS NULL OR NOT needs_approval OR approved_at IS NOT NULL)
);
CREATE INDEX fraud_decisions_to_enforce ON fraud_decisions (decided_at)
    WHERE enforced_at IS NULL;
