-- A settlement line's merchant reference as our uuid, parsed once at
-- ingest: matching a million lines by recon_uuid()'s case-insensitive
-- regex cost more than the join itself. NULL when the reference is not a
-- uuid (a gateway may carry anything there).
ALTER TABLE recon_lines ADD COLUMN merchant_uuid uuid;
UPDATE recon_lines SET merchant_uuid = recon_uuid(merchant_ref) WHERE merchant_ref <> '' AND recon_uuid(merchant_ref) IS NOT NULL;

-- A day's current lines are read through its current file (the
-- (file_id, line_no) key), so the day index only cost ingest time: with
-- the external-reference one it was most of a COPY's cost.
DROP INDEX recon_lines_day;
