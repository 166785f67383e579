-- The analyst's case (issue 37: 7): decisions per member, several per
-- cluster (a cancellation and a ban), each labelled for learning; a live
-- watch-list; appeals an analyst claims.

-- A cluster may carry several decisions, each on some of its members.
ALTER TABLE fraud_decisions DROP CONSTRAINT fraud_decisions_cluster_id_key;
CREATE INDEX fraud_decisions_cluster ON fraud_decisions (cluster_id);

-- What the decision says of its members, for the weights of the next
-- clustering: CLEAR (honest, a false positive), CONFIRMED (fraud acted on)
-- or UNSURE (watched).
ALTER TABLE fraud_decisions ADD COLUMN label text;
UPDATE fraud_decisions SET label = CASE outcome WHEN 'CLEAR' THEN 'CLEAR' WHEN 'WATCH' THEN 'UNSURE' ELSE 'CONFIRMED' END;
ALTER TABLE fraud_decisions ALTER COLUMN label SET NOT NULL,
    ADD CONSTRAINT fraud_decisions_label CHECK (label IN ('CLEAR', 'UNSURE', 'CONFIRMED')),
    ADD CONSTRAINT fraud_decisions_label_outcome CHECK ((label = 'CLEAR') = (outcome = 'CLEAR'));

-- The members a decision acts on: enforcement reads these, not the
-- cluster's, so a relative linked by one booking is spared the ring's ban.
-- One outcome once per member and cluster.
CREATE TABLE fraud_decision_members (
    decision_id bigint NOT NULL REFERENCES fraud_decisions (id),
    cluster_id  bigint NOT NULL REFERENCES fraud_clusters (id),
    user_id     bigint NOT NULL REFERENCES users (id),
    outcome     text NOT NULL,
    PRIMARY KEY (decision_id, user_id),
    UNIQUE (cluster_id, user_id, outcome)
);
CREATE INDEX fraud_decision_members_user ON fraud_decision_members (user_id);
INSERT INTO fraud_decision_members (decision_id, cluster_id, user_id, outcome)
    SELECT d.id, d.cluster_id, m.user_id, d.outcome
    FROM fraud_decisions d JOIN fraud_cluster_members m ON m.cluster_id = d.cluster_id;

-- WATCH acts: until the entry lapses, the member's booking challenges are
-- harder (admission reads it with users.risk_score).
CREATE TABLE fraud_watch (
    user_id     bigint PRIMARY KEY REFERENCES users (id),
    decision_id bigint NOT NULL REFERENCES fraud_decisions (id),
    until       timestamptz NOT NULL
);
ALTER TABLE fraud_enforcements DROP CONSTRAINT fraud_enforcements_action_check;
ALTER TABLE fraud_enforcements ADD CONSTRAINT fraud_enforcements_action_check
    CHECK (action IN ('CANCEL', 'BAN', 'EXTRA_CHALLENGE', 'WATCH', 'RESTORE'));

-- One analyst works an appeal at a time, as a cluster.
ALTER TABLE fraud_appeals
    ADD COLUMN claimed_by    bigint REFERENCES console_users (id),
    ADD COLUMN claimed_until timestamptz,
    ADD CONSTRAINT fraud_appeals_claim CHECK ((claimed_by IS NULL) = (claimed_until IS NULL));
