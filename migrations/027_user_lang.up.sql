-- The passenger's language (the site's English/Hindi switch), so the
-- messages sent to them (booking.NotifyT) are written in it.
ALTER TABLE users ADD COLUMN lang text NOT NULL DEFAULT 'en' CHECK (lang IN ('en', 'hi'));
