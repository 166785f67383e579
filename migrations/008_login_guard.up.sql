-- 008: the login guard (failure counters with backoff, a bounded record of
-- passenger sign-in failures) and revocable passenger sessions.

-- One row per throttled subject: an account, an IP (an IPv6 /64), or an
-- account at an IP, each within a scope (passenger or console). Subjects
-- are hashed, so caller input never sits here at its own size.
CREATE TABLE login_throttle (
    subject      text PRIMARY KEY CHECK (length(subject) <= 100),
    allowance    int NOT NULL CHECK (allowance > 0),  -- failures before backoff starts
    failures     int NOT NULL CHECK (failures > 0),
    last_failure timestamptz NOT NULL,
    locked_until timestamptz NOT NULL
);
CREATE INDEX login_throttle_last_failure ON login_throttle (last_failure);

-- Wrong sign-ins, kept 30 days (pruned by the guard as it writes). Only
-- attempts that were actually checked land here; throttled ones do not, so
-- a flood cannot grow it faster than the throttle allows.
CREATE TABLE login_failures (
    id    bigserial PRIMARY KEY,
    scope text NOT NULL CHECK (scope IN ('passenger', 'console')),
    login text NOT NULL CHECK (length(login) <= 64),
    ip    text NOT NULL CHECK (length(ip) <= 64),
    at    timestamptz NOT NULL
);
CREATE INDEX login_failures_at ON login_failures (at);

-- Passenger session tokens carry the generation they were issued in;
-- "log out everywhere" raises it, and tokens below it stop working.
ALTER TABLE users ADD COLUMN session_generation int NOT NULL DEFAULT 0;

-- Revocations, read by every app process about once a second. A row lives
-- until the tokens it revokes would have expired anyway.
CREATE TABLE session_revocations (
    id         bigserial PRIMARY KEY,
    user_id    bigint NOT NULL REFERENCES users (id),
    generation int NOT NULL,  -- tokens of an older generation are dead
    session_id text CHECK (length(session_id) <= 32),  -- one session (logout), or NULL (every session)
    expires_at timestamptz NOT NULL,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX session_revocations_created_at ON session_revocations (created_at);
CREATE INDEX session_revocations_user ON session_revocations (user_id, expires_at);
