-- Charting reaches the reservation core: the chart as prepared (frozen, so
-- every retry sends the same bytes), the core's acknowledgement, and a
-- terminal state for a chart that could not be prepared or delivered.

-- FAILED: the chart job gave up (an alarm is raised); the shard sells
-- nothing more and people must settle it by hand.
ALTER TABLE inventory_shards DROP CONSTRAINT inventory_shards_chart_state_check;
ALTER TABLE inventory_shards ADD CONSTRAINT inventory_shards_chart_state_check
    CHECK (chart_state IN ('OPEN', 'CHARTING', 'CHARTED', 'FAILED'));

ALTER TABLE inventory_shards
    ADD COLUMN chart_body       jsonb,
    -- '' until charted; PENDING until the core acknowledges; SENT; FAILED
    -- when the core refused the chart or never took it.
    ADD COLUMN chart_core_state text NOT NULL DEFAULT ''
        CHECK (chart_core_state IN ('', 'PENDING', 'SENT', 'FAILED')),
    ADD COLUMN chart_core_ref   text NOT NULL DEFAULT '',
    ADD COLUMN chart_sent_at    timestamptz,
    ADD COLUMN chart_error      text NOT NULL DEFAULT '';
