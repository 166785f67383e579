-- Fraud review, identity (issue 13): the per-person cap counts the verified
-- accounts of one phone (users.phone_hash, keyed with TATKAL_FRAUD_KEY).
-- The phone is named when the one-time code is asked for; the code goes to
-- that phone only, and the right code binds its keyed hash to the account.
ALTER TABLE otp_codes ADD COLUMN phone_hash text CHECK (length(phone_hash) <= 64);

-- Where an SMS goes when it is not the account's usual channel (the OTP
-- that verifies a phone); NULL: the account's own.
ALTER TABLE notifications ADD COLUMN address text CHECK (length(address) <= 32);
