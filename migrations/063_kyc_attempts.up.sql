-- Identity checks an account may ask of the verifier a day: without a
-- bound, a signed-in account could test Aadhaar numbers and brute-force
-- their holders' names and years of birth through our verifier.
ALTER TABLE users ADD COLUMN kyc_attempt_day date, ADD COLUMN kyc_attempts integer NOT NULL DEFAULT 0;
