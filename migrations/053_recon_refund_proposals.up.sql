-- "Refund now" from an exception: a person's refund is a money move on a
-- person's word, so one finance person proposes it and a second (never
-- the proposer, nor whoever uploaded a file behind the exception or ran
-- the run that found it) approves it; the refund then goes through the
-- payment's own refund path. One proposal per exception; a refusal or a
-- withdrawal deletes it (the exception's history keeps both).
CREATE TABLE recon_refund_proposals (
    exception_id uuid PRIMARY KEY REFERENCES reconciliation_exceptions (id),
    proposed_by  text NOT NULL CHECK (proposed_by <> ''),
    note         text NOT NULL DEFAULT '',
    proposed_at  timestamptz NOT NULL DEFAULT now()
);
