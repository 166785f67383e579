-- 016: a way past an account's sign-in lock for whoever solves a proof of
-- work, and hold idempotency keys bound to the request they came with.

-- One open challenge per account at one address (the guard's account-at-IP
-- subject), so asking again and again adds no rows. A challenge opens the
-- account's lock only, never an address's; it is deleted when used, so it
-- works once, and pruned once expired.
CREATE TABLE login_challenges (
    subject    text PRIMARY KEY CHECK (length(subject) <= 100),
    id         text NOT NULL UNIQUE CHECK (length(id) <= 64),
    account    text NOT NULL CHECK (length(account) <= 100),  -- the guard's account subject it opens
    bits       int NOT NULL CHECK (bits BETWEEN 1 AND 64),
    expires_at timestamptz NOT NULL
);
CREATE INDEX login_challenges_expires_at ON login_challenges (expires_at);

-- SHA-256 of the hold request an idempotency key first came with; the same
-- key with another request is refused (IDEMPOTENCY_KEY_REUSED). Empty for
-- rows from before, which are not compared.
ALTER TABLE holds ADD COLUMN request_hash text NOT NULL DEFAULT '' CHECK (length(request_hash) <= 64);

-- The one-time value of the console's create-token form: sending the same
-- form again (a reload) finds the token it made instead of making another.
ALTER TABLE console_api_tokens ADD COLUMN form_nonce text UNIQUE CHECK (length(form_nonce) <= 64);
