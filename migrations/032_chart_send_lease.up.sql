-- A chart sent again by an operator is leased: chart_sending_since is when
-- that send began (NULL when the chart job owns the delivery). A send
-- that never finished (its process died mid-send) leaves the chart
-- PENDING with an old stamp, and the console offers it again once the
-- lease has run out, instead of showing it "in hand" forever.
ALTER TABLE inventory_shards ADD COLUMN chart_sending_since timestamptz;
