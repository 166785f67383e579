-- A run's workbook and CSV read its exceptions by scope (gateway and day)
-- or by the run that last found them: without an index on the run, that OR
-- read every exception ever recorded.
CREATE INDEX reconciliation_exceptions_last_run ON reconciliation_exceptions (last_run_id);

-- The console's messages to its users (console users have no phone or
-- e-mail): the escalation job's note to finance that exceptions passed
-- their SLA, one per user and escalation, shown on the finance home.
CREATE TABLE console_messages (
    id         bigserial PRIMARY KEY,
    user_id    bigint NOT NULL REFERENCES console_users (id),
    kind       text NOT NULL,
    ref        text NOT NULL,
    body       text NOT NULL,
    link       text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (user_id, kind, ref)
);
CREATE INDEX console_messages_user ON console_messages (user_id, id);
