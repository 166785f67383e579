-- 039: login attempts in flight. The login guard reserves an attempt
-- before the password is hashed, under an advisory lock on the attempt's
-- subjects, and counts reservations like failures: parallel wrong
-- passwords can no longer all pass the check that reads the counters
-- before any of them is recorded. A failure turns its reservation into a
-- counted failure in one transaction, a success or a refusal deletes it,
-- and one left by a process that died mid-check stops counting at
-- expires_at, so it cannot lock the owner out for longer than that.
CREATE TABLE login_reservations (
    attempt    text NOT NULL CHECK (length(attempt) <= 40),
    subject    text NOT NULL CHECK (length(subject) <= 100),
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (attempt, subject)
);
CREATE INDEX login_reservations_subject ON login_reservations (subject, expires_at);
