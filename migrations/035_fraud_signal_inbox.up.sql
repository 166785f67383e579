-- Fraud signals leave the hold's group commit as one row per batch, already
-- validated and hashed (no raw ID number or instrument is ever stored
-- here), and a drain job writes them into fraud_signals in id order. The
-- hold path pays one narrow insert instead of a savepoint and two indexed
-- multi-row upserts; the rows are in the same transaction as the holds, so
-- no signal lives only in memory.
CREATE TABLE fraud_signal_inbox (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- JSON of fraud's batch columns, kept as bytes: PostgreSQL only
    -- stores it, so the hold's transaction spends nothing parsing it
    rows       bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
