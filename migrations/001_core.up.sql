-- Core schema: users, the rail network, Tatkal shards, holds, bookings, money
-- tables the payments work fills in, and the append-only audit log.
-- Money is always integer paise.

CREATE EXTENSION IF NOT EXISTS btree_gist;

CREATE TABLE settings (
    key        text PRIMARY KEY,
    value      text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE users (
    id                     bigserial PRIMARY KEY,
    login                  text NOT NULL UNIQUE,
    password_hash          text NOT NULL,
    phone_hash             text,
    user_type              text NOT NULL DEFAULT 'INDIVIDUAL' CHECK (user_type IN ('INDIVIDUAL', 'AGENT')),
    id_verification_status text NOT NULL DEFAULT 'UNVERIFIED' CHECK (id_verification_status IN ('UNVERIFIED', 'VERIFIED')),
    risk_score             real NOT NULL DEFAULT 0,
    created_at             timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE passenger_master (
    id           bigserial PRIMARY KEY,
    user_id      bigint NOT NULL REFERENCES users (id),
    name         text NOT NULL CHECK (length(name) BETWEEN 1 AND 60),
    age          int NOT NULL CHECK (age BETWEEN 0 AND 125),
    gender       text NOT NULL CHECK (gender IN ('M', 'F', 'T')),
    berth_pref   text NOT NULL DEFAULT '',
    id_type      text NOT NULL DEFAULT '',
    id_ref       text NOT NULL DEFAULT '',
    validated    boolean NOT NULL DEFAULT false,
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX passenger_master_user ON passenger_master (user_id);

CREATE TABLE stations (
    code   text PRIMARY KEY,
    name   text NOT NULL,
    -- first PNR digit for trains originating here (DOMAIN.md, "Codes")
    region smallint NOT NULL CHECK (region BETWEEN 1 AND 9)
);

CREATE TABLE trains (
    number text PRIMARY KEY CHECK (number ~ '^[0-9]{5}$'),
    name   text NOT NULL,
    -- superfast trains pay the superfast surcharge
    superfast  boolean NOT NULL DEFAULT true,
    -- local (IST) departure time from the origin station
    departs_at time NOT NULL
);

CREATE TABLE train_stops (
    train_number text NOT NULL REFERENCES trains (number),
    seq          int NOT NULL CHECK (seq >= 0),
    station_code text NOT NULL REFERENCES stations (code),
    -- minutes after the origin's departure on day 0
    arrive_min   int,
    depart_min   int,
    km           int NOT NULL CHECK (km >= 0),
    PRIMARY KEY (train_number, seq),
    UNIQUE (train_number, station_code)
);

CREATE TABLE coaches (
    train_number text NOT NULL REFERENCES trains (number),
    class        text NOT NULL CHECK (class IN ('1A', '2A', '3A', '3E', 'SL', '2S', 'CC', 'EC')),
    coach        text NOT NULL,
    seq          int NOT NULL,
    berths       int NOT NULL CHECK (berths > 0),
    PRIMARY KEY (train_number, coach)
);

CREATE TABLE berths (
    train_number text NOT NULL,
    coach        text NOT NULL,
    berth_no     int NOT NULL,
    -- LB MB UB SL SU (berths) or WS MS AS (chair car seats)
    berth_type   text NOT NULL,
    PRIMARY KEY (train_number, coach, berth_no),
    FOREIGN KEY (train_number, coach) REFERENCES coaches (train_number, coach)
);

-- Fares and Tatkal rules are data (DOMAIN.md, "Fares").
CREATE TABLE fare_rules (
    class               text PRIMARY KEY,
    paise_per_km        int NOT NULL,
    reservation_paise   int NOT NULL,
    superfast_paise     int NOT NULL,
    tatkal_pct          int NOT NULL,
    tatkal_min_paise    int NOT NULL,
    tatkal_max_paise    int NOT NULL,
    tatkal_min_km       int NOT NULL,
    gst_bps             int NOT NULL,
    ac                  boolean NOT NULL,
    -- clerkage on cancelling a waitlisted ticket, per passenger
    clerkage_paise      int NOT NULL
);

-- One Tatkal inventory shard: train | journey date | class | quota.
CREATE TABLE inventory_shards (
    id              bigserial PRIMARY KEY,
    train_number    text NOT NULL REFERENCES trains (number),
    journey_date    date NOT NULL,
    class           text NOT NULL,
    quota           text NOT NULL DEFAULT 'TQ' CHECK (quota IN ('TQ', 'PT', 'GN')),
    total_berths    int NOT NULL CHECK (total_berths > 0),
    legs            int NOT NULL CHECK (legs BETWEEN 1 AND 16),
    waitlist_cap    int NOT NULL DEFAULT 0 CHECK (waitlist_cap >= 0),
    window_opens_at timestamptz NOT NULL,
    window_closes_at timestamptz NOT NULL,
    mode            text NOT NULL DEFAULT 'direct' CHECK (mode IN ('direct', 'queue')),
    -- bumped on every rebuild of the Redis state; writers with an older epoch cannot commit
    epoch           bigint NOT NULL DEFAULT 0,
    created_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (train_number, journey_date, class, quota)
);

-- The berths a shard sells, in the order the Redis state indexes them.
CREATE TABLE shard_berths (
    shard_id   bigint NOT NULL REFERENCES inventory_shards (id),
    idx        int NOT NULL,
    coach      text NOT NULL,
    berth_no   int NOT NULL,
    berth_type text NOT NULL,
    PRIMARY KEY (shard_id, idx),
    UNIQUE (shard_id, coach, berth_no)
);

CREATE TABLE holds (
    id              uuid PRIMARY KEY,
    shard_id        bigint NOT NULL REFERENCES inventory_shards (id),
    user_id         bigint NOT NULL REFERENCES users (id),
    idempotency_key text NOT NULL,
    kind            text NOT NULL CHECK (kind IN ('SEAT', 'WAITLIST')),
    from_seq        int NOT NULL,
    to_seq          int NOT NULL CHECK (to_seq > from_seq),
    seat_count      int NOT NULL CHECK (seat_count BETWEEN 1 AND 4),
    -- shard berth indexes, one per passenger in order (empty for waitlist)
    berths          int[] NOT NULL DEFAULT '{}',
    waitlist_no     int,
    passengers      jsonb NOT NULL,
    fare_paise      bigint NOT NULL CHECK (fare_paise >= 0),
    fare_breakup    jsonb NOT NULL,
    state           text NOT NULL CHECK (state IN ('HELD', 'CONFIRMED', 'EXPIRED', 'RELEASED', 'CANCELLED')),
    state_reason    text NOT NULL DEFAULT '',
    epoch           bigint NOT NULL,
    opening_day     date NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    expires_at      timestamptz NOT NULL,
    extended        boolean NOT NULL DEFAULT false,
    updated_at      timestamptz NOT NULL DEFAULT now(),
    admission_token_id text,
    state_version   bigint NOT NULL DEFAULT 0,
    UNIQUE (user_id, idempotency_key)
);
-- One live hold per account, across every shard: the durable backstop of the Lua check.
CREATE UNIQUE INDEX holds_one_live_per_user ON holds (user_id) WHERE state = 'HELD';
CREATE INDEX holds_expiry ON holds (expires_at) WHERE state = 'HELD';
CREATE INDEX holds_shard_state ON holds (shard_id, state);
CREATE INDEX holds_user_day ON holds (user_id, opening_day);

CREATE TABLE bookings (
    id           bigserial PRIMARY KEY,
    pnr          text NOT NULL UNIQUE CHECK (pnr ~ '^[1-9][0-9]{9}$'),
    hold_id      uuid NOT NULL UNIQUE REFERENCES holds (id),
    user_id      bigint NOT NULL REFERENCES users (id),
    shard_id     bigint NOT NULL REFERENCES inventory_shards (id),
    from_seq     int NOT NULL,
    to_seq       int NOT NULL,
    status       text NOT NULL CHECK (status IN ('CONFIRMED', 'WAITLISTED', 'CANCELLED')),
    waitlist_no  int,
    fare_paise   bigint NOT NULL,
    refund_due_paise bigint NOT NULL DEFAULT 0,
    booked_at    timestamptz NOT NULL DEFAULT now(),
    cancelled_at timestamptz
);
CREATE INDEX bookings_shard ON bookings (shard_id);
CREATE INDEX bookings_user ON bookings (user_id);

CREATE TABLE booking_passengers (
    booking_id  bigint NOT NULL REFERENCES bookings (id),
    seq         int NOT NULL,
    shard_id    bigint NOT NULL,
    name        text NOT NULL,
    age         int NOT NULL,
    gender      text NOT NULL,
    id_type     text NOT NULL DEFAULT '',
    id_ref      text NOT NULL DEFAULT '',
    berth_idx   int,
    coach       text,
    berth_no    int,
    berth_type  text,
    from_seq    int NOT NULL,
    to_seq      int NOT NULL,
    status      text NOT NULL CHECK (status IN ('CONFIRMED', 'WAITLISTED', 'CANCELLED')),
    PRIMARY KEY (booking_id, seq),
    CHECK (status <> 'CONFIRMED' OR berth_idx IS NOT NULL),
    -- Invariant 1 held by the database itself: no berth sold twice for overlapping legs.
    EXCLUDE USING gist (shard_id WITH =, berth_idx WITH =, int4range(from_seq, to_seq) WITH &&)
        WHERE (status = 'CONFIRMED')
);

CREATE TABLE payments (
    id              uuid PRIMARY KEY,
    hold_id         uuid NOT NULL REFERENCES holds (id),
    psp             text NOT NULL,
    route           text NOT NULL,
    method          text NOT NULL,
    amount_paise    bigint NOT NULL CHECK (amount_paise >= 0),
    state           text NOT NULL,
    psp_ref         text UNIQUE,
    idempotency_key text NOT NULL UNIQUE,
    initiated_at    timestamptz NOT NULL DEFAULT now(),
    resolved_at     timestamptz
);

CREATE TABLE refunds (
    id           uuid PRIMARY KEY,
    payment_id   uuid REFERENCES payments (id),
    booking_id   bigint REFERENCES bookings (id),
    reason       text NOT NULL,
    amount_paise bigint NOT NULL CHECK (amount_paise >= 0),
    state        text NOT NULL,
    initiated_at timestamptz NOT NULL DEFAULT now(),
    completed_at timestamptz
);

CREATE TABLE admission_log (
    token_id   text PRIMARY KEY,
    session_id text,
    user_id    bigint,
    intent     text NOT NULL,
    issued_at  timestamptz NOT NULL,
    used_at    timestamptz,
    outcome    text
);

CREATE TABLE reconciliation_exceptions (
    id          uuid PRIMARY KEY,
    kind        text NOT NULL CHECK (kind IN ('PAID_NOT_BOOKED', 'BOOKED_NOT_PAID', 'DUPLICATE', 'ORPHAN', 'AMOUNT_MISMATCH')),
    payment_id  uuid,
    hold_id     uuid,
    detected_at timestamptz NOT NULL DEFAULT now(),
    owner       text,
    resolved_at timestamptz
);

-- Append-only: who did what, when, to what.
CREATE TABLE audit_log (
    id        bigserial PRIMARY KEY,
    at        timestamptz NOT NULL DEFAULT now(),
    actor     text NOT NULL,
    action    text NOT NULL,
    subject   text NOT NULL DEFAULT '',
    detail    jsonb NOT NULL DEFAULT '{}'
);

CREATE FUNCTION audit_log_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit_log is append-only';
END $$;
CREATE TRIGGER audit_log_no_change BEFORE UPDATE OR DELETE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION audit_log_append_only();
