-- An analyst's CLEAR leaves an expiring allow-list entry per member of the
-- cleared cluster (issue 37): the links among the accounts of one CLEAR
-- (the office desk on its corporate card, the household on the parent's
-- card) are not held against them again until expires_at. A link to an
-- account outside the decision still counts, so a cleared desk that
-- starts booking with a ring is found.
CREATE TABLE fraud_allow (
    decision_id bigint NOT NULL REFERENCES fraud_decisions (id),
    user_id     bigint NOT NULL REFERENCES users (id),
    expires_at  timestamptz NOT NULL,
    PRIMARY KEY (decision_id, user_id)
);
CREATE INDEX fraud_allow_user ON fraud_allow (user_id, expires_at);
