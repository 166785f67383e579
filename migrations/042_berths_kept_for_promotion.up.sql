-- 041: a confirmed booking cancelled while someone waits on the shard's
-- waitlist keeps its berths for the promotion (PromoteArgs) until that
-- promotion has run. Kept in PostgreSQL, not only in Redis: the sweeper,
-- a rebuild and the invariant check read PostgreSQL, and each of them used
-- to see a cancelled booking that occupies nothing and free its berths
-- for the next hold before the waitlist had its turn. The promotion (or
-- charting, which promotes first) clears the mark for the whole shard in
-- its transaction; the sweeper runs a promotion overdue past its grace.
ALTER TABLE bookings ADD COLUMN kept_for_promotion boolean NOT NULL DEFAULT false;
CREATE INDEX bookings_kept_for_promotion ON bookings (shard_id) WHERE kept_for_promotion;
