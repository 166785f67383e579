-- A witness of the randomised cohort while it lives in Redis alone (from
-- the first entrant to the seal): how many entrants the leader last saw
-- and the mark of the queue they were in (its creation time, written by
-- ENTER). A queue found with another mark or fewer entrants before its
-- seal was lost (a wipe, a failover): the draw reopens for re-entry
-- instead of sealing what is left.
-- How often that happened and when last are published with the window.
ALTER TABLE admission_windows
    ADD COLUMN cohort_seen int NOT NULL DEFAULT 0,
    ADD COLUMN cohort_mark text NOT NULL DEFAULT '',
    ADD COLUMN draws_reopened int NOT NULL DEFAULT 0,
    ADD COLUMN draw_reopened_at timestamptz;
