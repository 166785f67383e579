-- A run reconciles the reservation core's leg on a second connection, beside
-- the settlement leg (two cores instead of one); what that leg finds is
-- handed to the run's own transaction through this table and deleted there.
-- Unlogged: a crash loses only a run that did not finish, which is rerun.
CREATE UNLOGGED TABLE recon_run_found (
    run_id     bigint NOT NULL,
    kind       text NOT NULL,
    ref        text NOT NULL,
    hold_id    uuid,
    pnr        text NOT NULL DEFAULT '',
    amount     bigint NOT NULL,
    diff       bigint NOT NULL DEFAULT 0,
    path       text NOT NULL,
    evidence   jsonb NOT NULL DEFAULT '{}'
);
CREATE INDEX recon_run_found_run ON recon_run_found (run_id);

-- An exception's runs are the run that writes it, in the same transaction,
-- and runs are never deleted: the per-row checks of these two keys were a
-- quarter of the cost of opening a day's 100,000 exceptions.
ALTER TABLE reconciliation_exceptions DROP CONSTRAINT reconciliation_exceptions_first_run_id_fkey,
    DROP CONSTRAINT reconciliation_exceptions_last_run_id_fkey;
