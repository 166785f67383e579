-- The booking lifecycle behind the passenger site: delivered messages,
-- waitlist promotion and chart preparation.

-- Messages are delivered: each row of the outbox carries its delivery
-- state. The idempotency key is the row's own, sent with every attempt, so
-- the gateway delivers a message once however often we ask.
ALTER TABLE notifications
    ADD COLUMN state           text NOT NULL DEFAULT 'PENDING'
        CHECK (state IN ('PENDING', 'QUEUED', 'SENT', 'DELIVERED', 'UNDELIVERED', 'FAILED')),
    ADD COLUMN idempotency_key uuid NOT NULL DEFAULT gen_random_uuid() UNIQUE,
    ADD COLUMN gateway_id      text NOT NULL DEFAULT '',
    ADD COLUMN attempts        int NOT NULL DEFAULT 0,
    ADD COLUMN last_error      text NOT NULL DEFAULT '',
    -- The e-ticket PDF, drawn once at the first attempt so that every
    -- retry sends the same bytes under the same key.
    ADD COLUMN attachment_name text NOT NULL DEFAULT '',
    ADD COLUMN attachment      bytea,
    ADD COLUMN delivered_at    timestamptz;
UPDATE notifications SET state = 'SENT' WHERE sent_at IS NOT NULL;
-- The relay reads the rows no send job carries yet.
CREATE INDEX notifications_pending ON notifications (id) WHERE state = 'PENDING';

-- Chart preparation: a shard is charted once; after that it sells nothing
-- and its waitlist is gone (confirmed or cancelled with a refund).
ALTER TABLE inventory_shards
    ADD COLUMN chart_state text NOT NULL DEFAULT 'OPEN' CHECK (chart_state IN ('OPEN', 'CHARTING', 'CHARTED')),
    ADD COLUMN charted_at  timestamptz,
    ADD COLUMN chart_ref   text NOT NULL DEFAULT '';

-- A waitlisted booking promoted onto a cancelled berth remembers when.
ALTER TABLE bookings
    ADD COLUMN promoted_at timestamptz;
