-- File versions (issue 35, item 7).

-- Who last made a file its day's current version by hand, when: an earlier
-- version put back by a person. That person's word is then behind the
-- exceptions its lines raise, as an uploader's is (four eyes).
ALTER TABLE recon_files ADD COLUMN current_by text, ADD COLUMN current_at timestamptz,
    ADD CONSTRAINT recon_files_current_by CHECK ((current_by IS NULL) = (current_at IS NULL));

-- An upload waiting for its clerk's confirmation after the totals preview:
-- the bytes are kept here, in chunks, and nowhere else; confirming ingests
-- them as any upload, cancelling deletes them. Previews older than a day
-- are purged by the next preview.
CREATE TABLE recon_upload_previews (
    id            uuid PRIMARY KEY,
    uploaded_by   text NOT NULL CHECK (uploaded_by <> ''),
    source        text NOT NULL,
    gateway       text NOT NULL DEFAULT '',
    format        text NOT NULL,
    business_date date NOT NULL,
    name          text NOT NULL DEFAULT '',
    sha256        text NOT NULL,
    byte_count    bigint NOT NULL,
    totals        jsonb NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE recon_upload_chunks (
    preview_id uuid NOT NULL REFERENCES recon_upload_previews (id) ON DELETE CASCADE,
    seq        int NOT NULL,
    data       bytea NOT NULL,
    PRIMARY KEY (preview_id, seq)
);
