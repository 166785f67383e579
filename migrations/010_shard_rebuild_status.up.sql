-- A rebuild bumps the shard's epoch before it loads Redis: when the load
-- fails, the shard refuses every hold until a rebuild succeeds. The failure
-- is kept on the shard row so the sweeper retries it and the console shows
-- it red; a successful rebuild clears it.
ALTER TABLE inventory_shards
    ADD COLUMN rebuild_failed_at timestamptz,
    ADD COLUMN rebuild_error     text;
