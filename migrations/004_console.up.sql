-- The operator console: its users and sessions, the control levers and
-- every proposed change to them. Changes are also written to audit_log.

CREATE TABLE console_users (
    id            bigserial PRIMARY KEY,
    login         text NOT NULL UNIQUE CHECK (login ~ '^[a-z0-9._-]{3,40}$'),
    name          text NOT NULL,
    role          text NOT NULL CHECK (role IN ('ops', 'finance', 'fraud', 'admin')),
    password_hash text NOT NULL,
    disabled      boolean NOT NULL DEFAULT false,
    created_at    timestamptz NOT NULL DEFAULT now()
);

-- A session is a random token kept by the browser; only its SHA-256 is
-- stored. Each carries its own CSRF token for the forms it renders.
CREATE TABLE console_sessions (
    token_hash  bytea PRIMARY KEY,
    user_id     bigint NOT NULL REFERENCES console_users (id),
    csrf_token  text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL
);
CREATE INDEX console_sessions_expiry ON console_sessions (expires_at);

-- Levers in force: one row per (name, scope). Scope is 'global', a
-- method ('CARD') or a shard ('shard:12'). Absent rows mean the default.
CREATE TABLE console_levers (
    name       text NOT NULL,
    scope      text NOT NULL,
    value      text NOT NULL,
    -- bounds of numeric levers, as checked when the value was set
    min_value  bigint,
    max_value  bigint,
    change_id  bigint,
    updated_by text NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (name, scope)
);

-- Every proposed change. Dangerous ones wait for a second admin.
CREATE TABLE lever_changes (
    id             bigserial PRIMARY KEY,
    name           text NOT NULL,
    scope          text NOT NULL,
    old_value      text NOT NULL,
    new_value      text NOT NULL,
    reason         text NOT NULL CHECK (length(reason) BETWEEN 3 AND 500),
    dangerous      boolean NOT NULL,
    state          text NOT NULL CHECK (state IN ('PENDING', 'APPLIED', 'REJECTED', 'REVERTED', 'SUPERSEDED')),
    proposed_by    text NOT NULL,
    proposed_at    timestamptz NOT NULL DEFAULT now(),
    approved_by    text,
    approved_at    timestamptz,
    applied_at     timestamptz,
    -- automatic revert: so long after being applied, old_value comes back
    revert_after   interval,
    revert_at      timestamptz,
    reverted_at    timestamptz,
    CHECK (approved_by IS NULL OR approved_by <> proposed_by)
);
CREATE INDEX lever_changes_pending ON lever_changes (proposed_at) WHERE state = 'PENDING';
CREATE INDEX lever_changes_revert ON lever_changes (revert_at) WHERE state = 'APPLIED' AND revert_at IS NOT NULL;
CREATE INDEX audit_log_at ON audit_log (at DESC);
