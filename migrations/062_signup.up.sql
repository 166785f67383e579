-- Sign-up (issue 39: 12): a passenger opens an account with a mobile number
-- proven by a one-time code and an e-mail address, then verifies their
-- identity through the identity verifier (an Aadhaar-style KYC service).

-- The account's contact points. phone is the mobile number proven at
-- sign-up (the login of an account opened here, and where its SMS go);
-- one account per number. email is where its e-mails go.
ALTER TABLE users
    ADD COLUMN phone        text CHECK (phone ~ '^[6-9][0-9]{9}$'),
    ADD COLUMN email        text CHECK (length(email) BETWEEN 3 AND 254),
    -- An account opened here is identity-verified by the verifier only
    -- (its phone is already proven); seeded accounts keep the phone code.
    ADD COLUMN kyc_required boolean NOT NULL DEFAULT false,
    -- The verifier's word: a keyed hash of the identity number (one
    -- account per identity, the number itself never kept), the
    -- verifier's reference and when.
    ADD COLUMN kyc_hash     text CHECK (length(kyc_hash) <= 64),
    ADD COLUMN kyc_ref      text CHECK (length(kyc_ref) <= 64),
    ADD COLUMN kyc_at       timestamptz;
CREATE UNIQUE INDEX users_phone ON users (phone) WHERE phone IS NOT NULL;
CREATE UNIQUE INDEX users_kyc_hash ON users (kyc_hash) WHERE kyc_hash IS NOT NULL;

-- A sign-up code goes to a number that has no account yet: the message
-- names its address and no user.
ALTER TABLE notifications ALTER COLUMN user_id DROP NOT NULL;
ALTER TABLE notifications DROP CONSTRAINT notifications_address_check;
ALTER TABLE notifications ADD CONSTRAINT notifications_address_check CHECK (length(address) <= 254);
ALTER TABLE notifications ADD CONSTRAINT notifications_recipient CHECK (user_id IS NOT NULL OR address IS NOT NULL);

-- One-time codes before an account exists (sign-up) or without a session
-- (password reset). Only keyed hashes are kept: of the number, of the code
-- and of the requesting address's network. A request that sent no code
-- (a sign-up for a number that has an account, a reset for one that has
-- none: the answer is the same either way) is a row with no code, so it
-- counts against the limits like any other.
CREATE TABLE signup_codes (
    id          bigserial PRIMARY KEY,
    purpose     text NOT NULL CHECK (purpose IN ('SIGNUP', 'RESET')),
    phone_mac   text NOT NULL CHECK (length(phone_mac) <= 64),
    net_mac     text NOT NULL CHECK (length(net_mac) <= 64),
    code_mac    text CHECK (length(code_mac) <= 64),
    attempts    int NOT NULL DEFAULT 0,
    created_at  timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL,
    consumed_at timestamptz
);
CREATE INDEX signup_codes_phone ON signup_codes (phone_mac, created_at DESC);
CREATE INDEX signup_codes_net ON signup_codes (net_mac, created_at DESC);
