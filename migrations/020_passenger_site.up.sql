-- The passenger site: a saved payment preference and language per account,
-- so that at 10:00 the pay step is one tap (seeds/000 section 4.2).
CREATE TABLE user_prefs (
    user_id    bigint PRIMARY KEY REFERENCES users (id),
    pay_method text NOT NULL DEFAULT '' CHECK (pay_method IN ('', 'WALLET', 'UPI', 'CARD', 'NB')),
    vpa        text NOT NULL DEFAULT '' CHECK (length(vpa) <= 64),
    bank       text NOT NULL DEFAULT '' CHECK (length(bank) <= 32),
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- Saved passengers are listed per account, newest last; removal is a flag
-- so a past booking's passenger is never rewritten.
ALTER TABLE passenger_master ADD COLUMN removed_at timestamptz;
