-- The post-window review (issue 36, 6): written once per shard after its
-- Tatkal window closes (booking/winreview), kept, and shown on the console.
CREATE TABLE window_reviews (
    shard_id   bigint PRIMARY KEY REFERENCES inventory_shards (id),
    written_at timestamptz NOT NULL DEFAULT now(),
    figures    jsonb NOT NULL
);
CREATE INDEX window_reviews_written ON window_reviews (written_at DESC);
