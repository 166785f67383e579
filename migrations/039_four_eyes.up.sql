-- Four eyes on money: an outside file is evidence, never the truth, and a
-- person's money move waits for a second person.

-- Where a reconciliation file came from. FETCHED: our own job fetched it
-- from the gateway's, bank's or core's API with our key; it is accepted as
-- it arrives. UPLOAD: a person brought it (console or CLI); its lines start
-- no automatic resolution until a second person, not the uploader, accepts
-- it. Files from before this migration count as fetched only when a job
-- ingested them.
ALTER TABLE recon_files
    ADD COLUMN origin text NOT NULL DEFAULT 'UPLOAD' CHECK (origin IN ('FETCHED', 'UPLOAD')),
    ADD COLUMN accepted_by text,
    ADD COLUMN accepted_at timestamptz,
    ADD CONSTRAINT recon_files_accepted CHECK ((accepted_by IS NULL) = (accepted_at IS NULL)),
    ADD CONSTRAINT recon_files_not_self_accepted CHECK (origin = 'FETCHED' OR accepted_by IS DISTINCT FROM ingested_by);
UPDATE recon_files SET origin = 'FETCHED', accepted_by = ingested_by, accepted_at = ingested_at WHERE ingested_by LIKE 'job:%';

-- A person's proposal on a payment review (credit the refused refund to
-- the wallet, or close the alarm), carried out only when a second person
-- approves it after a fresh answer from the gateway.
ALTER TABLE payment_reviews
    ADD COLUMN proposal text CHECK (proposal IN ('WALLET', 'RESOLVE')),
    ADD COLUMN proposed_by text,
    ADD COLUMN proposal_note text NOT NULL DEFAULT '',
    ADD COLUMN proposed_at timestamptz,
    ADD COLUMN approved_by text,
    ADD CONSTRAINT payment_reviews_proposal CHECK ((proposal IS NULL) = (proposed_by IS NULL) AND (proposal IS NULL) = (proposed_at IS NULL)),
    ADD CONSTRAINT payment_reviews_four_eyes CHECK (approved_by IS NULL OR approved_by IS DISTINCT FROM proposed_by);
