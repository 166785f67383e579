-- Alarms: what the invariant watch (console/alarms) found wrong, for ops to
-- see and acknowledge. One open alarm per kind and scope: a condition that
-- lasts is one row however many passes see it, resolved by the watch when
-- the condition ends. Acknowledging is a person's (by id; the login is kept
-- for display) and audited.
CREATE TABLE alarms (
    id                 bigserial PRIMARY KEY,
    raised_at          timestamptz NOT NULL DEFAULT now(),
    kind               text NOT NULL CHECK (kind ~ '^[a-z_]{1,40}$'),
    scope              text NOT NULL DEFAULT '' CHECK (length(scope) <= 100),
    detail             text NOT NULL DEFAULT '' CHECK (length(detail) <= 4000),
    -- the last pass that still saw the condition
    seen_at            timestamptz NOT NULL DEFAULT now(),
    resolved_at        timestamptz,
    acknowledged_by    text,
    acknowledged_by_id bigint REFERENCES console_users (id),
    acknowledged_at    timestamptz,
    -- the lever change the watch made for it (a shard's freeze), if any
    lever_change_id    bigint REFERENCES lever_changes (id),
    CHECK ((acknowledged_by IS NULL) = (acknowledged_at IS NULL))
);
CREATE UNIQUE INDEX alarms_open ON alarms (kind, scope) WHERE resolved_at IS NULL;
CREATE INDEX alarms_unacknowledged ON alarms (raised_at) WHERE acknowledged_at IS NULL;
