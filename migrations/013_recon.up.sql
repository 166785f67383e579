-- Reconciliation: the outside records (gateway settlement files, the bank's
-- statement of payouts, the reservation core's export) kept with their
-- lineage, normalised into one table of lines, matched set-wise against
-- ours by runs, and every difference an exception with an owner, an SLA
-- and a history.

-- Every file ever ingested. The same bytes for the same (source, gateway,
-- day) are one file; a different file for that day supersedes the current
-- one, and both stay.
CREATE TABLE recon_files (
    id            bigserial PRIMARY KEY,
    source        text NOT NULL CHECK (source IN ('SETTLEMENT', 'BANK', 'CORE')),
    gateway       text NOT NULL DEFAULT '',   -- '' for the bank and the core
    format        text NOT NULL,
    business_date date NOT NULL,               -- the file's day (journey date for the core)
    sha256        text NOT NULL CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    row_count     int NOT NULL CHECK (row_count >= 0),
    byte_count    bigint NOT NULL CHECK (byte_count >= 0),
    name          text NOT NULL DEFAULT '',
    ingested_at   timestamptz NOT NULL DEFAULT now(),
    ingested_by   text NOT NULL CHECK (ingested_by <> ''),  -- a person, or job:<name>
    superseded_by bigint REFERENCES recon_files (id) DEFERRABLE INITIALLY DEFERRED,
    superseded_at timestamptz,
    UNIQUE (source, gateway, business_date, sha256)
);
CREATE UNIQUE INDEX recon_files_current ON recon_files (source, gateway, business_date) WHERE superseded_by IS NULL;

-- One normalised line per raw line, keyed by source and external reference,
-- the raw line kept for evidence. current is false once its file is
-- superseded, so matching reads only the indexed current lines.
CREATE TABLE recon_lines (
    id            bigserial PRIMARY KEY,
    -- No foreign key: a per-row check would cost more than the COPY itself;
    -- lines are only ever written with their file, in one transaction.
    file_id       bigint NOT NULL,
    line_no       int NOT NULL,
    source        text NOT NULL,
    gateway       text NOT NULL,
    business_date date NOT NULL,
    kind          text NOT NULL CHECK (kind IN ('CAPTURE', 'REFUND', 'CHARGEBACK', 'PAYOUT', 'BOOKING')),
    ext_ref       text NOT NULL,              -- psp_ref, refund ref, payout id or PNR
    merchant_ref  text NOT NULL DEFAULT '',   -- our payment id (our refund id on refunds)
    parent_ref    text NOT NULL DEFAULT '',   -- a refund's or chargeback's payment psp_ref; a payout line's gateway
    method        text NOT NULL DEFAULT '',
    amount_paise  bigint NOT NULL,            -- positive; kind says the direction (a debit payout is negative)
    fee_paise     bigint NOT NULL DEFAULT 0,
    tax_paise     bigint NOT NULL DEFAULT 0,
    net_paise     bigint NOT NULL DEFAULT 0,  -- signed, what the line adds to its payout
    event_at      timestamptz,
    value_date    date,                       -- settlement or credit date
    payout_id     text NOT NULL DEFAULT '',
    status        text NOT NULL DEFAULT '',   -- the core's booking state
    passengers    int NOT NULL DEFAULT 0,
    raw           text NOT NULL,
    current       boolean NOT NULL DEFAULT true,
    UNIQUE (file_id, line_no)
);
-- Two indexes only: each costs more at ingest than the COPY itself. Runs
-- read a gateway's days; lookups go by source and external reference.
CREATE INDEX recon_lines_ext ON recon_lines (source, gateway, ext_ref) WHERE current;
CREATE INDEX recon_lines_day ON recon_lines (source, gateway, business_date) WHERE current;

-- A run reconciles one business date for one gateway; each run is kept.
CREATE TABLE recon_runs (
    id               bigserial PRIMARY KEY,
    gateway          text NOT NULL,
    business_date    date NOT NULL,
    as_of            timestamptz NOT NULL,
    run_by           text NOT NULL,
    started_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    finished_at      timestamptz,
    our_items        int NOT NULL DEFAULT 0,
    lines            int NOT NULL DEFAULT 0,
    matched          int NOT NULL DEFAULT 0,
    amount_matched   bigint NOT NULL DEFAULT 0,
    amount_unmatched bigint NOT NULL DEFAULT 0,
    fees_paise       bigint NOT NULL DEFAULT 0,
    tax_paise        bigint NOT NULL DEFAULT 0,
    net_paise        bigint NOT NULL DEFAULT 0,
    payouts_paise    bigint NOT NULL DEFAULT 0,
    exceptions       int NOT NULL DEFAULT 0,
    new_exceptions   int NOT NULL DEFAULT 0,
    cleared          int NOT NULL DEFAULT 0,
    files            bigint[] NOT NULL DEFAULT '{}'
);
CREATE INDEX recon_runs_day ON recon_runs (gateway, business_date, id DESC);

-- What a run matched, rule by rule: the Matched sheet of the workbook.
CREATE TABLE recon_matches (
    run_id       bigint NOT NULL,  -- no foreign key: a run writes a row per match, checked per row it would double the cost
    rule         text NOT NULL,
    our_ref      text NOT NULL,
    ext_ref      text NOT NULL,
    amount_paise bigint NOT NULL,
    fee_paise    bigint NOT NULL DEFAULT 0,
    tax_paise    bigint NOT NULL DEFAULT 0,
    event_at     timestamptz,
    value_date   date
);
CREATE INDEX recon_matches_run ON recon_matches (run_id);

-- The table the source design sketched, never used: replaced by the whole thing.
DROP TABLE reconciliation_exceptions;
CREATE TABLE reconciliation_exceptions (
    id              uuid PRIMARY KEY,
    kind            text NOT NULL CHECK (kind IN ('PAID_NOT_BOOKED', 'STATUS_MISMATCH', 'BOOKED_NOT_PAID', 'DUPLICATE_CHARGE',
        'AMOUNT_MISMATCH', 'FEE_MISMATCH', 'MISSING_IN_SETTLEMENT', 'REFUND_NOT_SETTLED', 'REFUND_MISMATCH', 'PAYOUT_MISMATCH',
        'CORE_MISSING', 'CORE_ORPHAN', 'CORE_MISMATCH', 'ORPHAN_LINE', 'DUPLICATE_LINE', 'CHARGEBACK')),
    ref             text NOT NULL,            -- what it is about, unique per kind: a rerun finds the same row
    gateway         text NOT NULL,            -- the run scope that owns it
    business_date   date NOT NULL,
    payment_id      uuid,
    hold_id         uuid,
    refund_id       uuid,
    pnr             text NOT NULL DEFAULT '',
    psp_ref         text NOT NULL DEFAULT '',
    payout_id       text NOT NULL DEFAULT '',
    amount_paise    bigint NOT NULL DEFAULT 0,
    diff_paise      bigint NOT NULL DEFAULT 0,
    owner_team      text NOT NULL,
    path            text NOT NULL CHECK (path IN ('AUTO', 'INQUIRY', 'RESYNC', 'MANUAL')),
    state           text NOT NULL DEFAULT 'OPEN' CHECK (state IN ('OPEN', 'INVESTIGATING', 'RESOLVED', 'WRITTEN_OFF')),
    assignee        text NOT NULL DEFAULT '',
    resolution      text NOT NULL DEFAULT '',
    detected_at     timestamptz NOT NULL DEFAULT now(),
    due_at          timestamptz NOT NULL,
    first_run_id    bigint NOT NULL REFERENCES recon_runs (id),
    last_run_id     bigint NOT NULL REFERENCES recon_runs (id),
    evidence        jsonb NOT NULL DEFAULT '{}',
    needs_approval  boolean NOT NULL DEFAULT false, -- an automatic money move above the limit waits for a second person
    approved_by     text NOT NULL DEFAULT '',
    writeoff_by     text NOT NULL DEFAULT '',       -- who proposed the write-off
    resolved_at     timestamptz,
    resolved_by     text NOT NULL DEFAULT '',
    escalated_at    timestamptz,
    UNIQUE (kind, ref),
    CHECK ((state IN ('RESOLVED', 'WRITTEN_OFF')) = (resolved_at IS NOT NULL))
);
CREATE INDEX reconciliation_exceptions_scope ON reconciliation_exceptions (gateway, business_date, state);
CREATE INDEX reconciliation_exceptions_open ON reconciliation_exceptions (due_at) WHERE state IN ('OPEN', 'INVESTIGATING');
CREATE INDEX reconciliation_exceptions_payment ON reconciliation_exceptions (payment_id) WHERE payment_id IS NOT NULL;

-- Every change of an exception, notes included. Append-only.
CREATE TABLE reconciliation_exception_events (
    id           bigserial PRIMARY KEY,
    exception_id uuid NOT NULL REFERENCES reconciliation_exceptions (id),
    at           timestamptz NOT NULL DEFAULT now(),
    actor        text NOT NULL,
    action       text NOT NULL,
    from_state   text NOT NULL DEFAULT '',
    to_state     text NOT NULL DEFAULT '',
    note         text NOT NULL DEFAULT '',
    run_id       bigint
);
CREATE INDEX reconciliation_exception_events_exc ON reconciliation_exception_events (exception_id, id);
CREATE TRIGGER reconciliation_exception_events_no_change BEFORE UPDATE OR DELETE ON reconciliation_exception_events
    FOR EACH ROW EXECUTE FUNCTION audit_log_append_only();

-- Our side, looked up by day and by reference.
CREATE INDEX IF NOT EXISTS payments_psp_day ON payments (psp, initiated_at);
CREATE INDEX IF NOT EXISTS bookings_booked_at ON bookings (booked_at);
CREATE INDEX IF NOT EXISTS refunds_gateway_ref ON refunds (gateway_ref) WHERE gateway_ref <> '';

-- A settlement line's merchant reference as our uuid, or NULL when it is
-- not one (a gateway may carry anything there).
CREATE FUNCTION recon_uuid(ref text) RETURNS uuid LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN ref ~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN ref::uuid END
$$;
