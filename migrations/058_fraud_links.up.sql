-- Fraud links (issue 37): a retyped name still finds its passenger, and
-- accounts are flagged one by one, not a cluster as a whole.

-- A passenger's name as it sounds (fraud.NameKey: each word's consonant
-- skeleton, the words sorted), so "Ramesh Kumaar" and "Kumar Rmesh" are
-- one name; clustering pairs them at ages one apart. '' when unknown
-- (signals recorded before this migration).
ALTER TABLE fraud_signal_passengers ADD COLUMN name_key text NOT NULL DEFAULT '' CHECK (length(name_key) <= 60);
ALTER TABLE fraud_refused_attempts ADD COLUMN name_keys text[];

-- Each member's own score and whether the member is flagged: a relative
-- linked by one booking, or an employee on the corporate card, is not
-- flagged with the ring or desk beside them. Members of clusters flagged
-- before per-member scores were flagged whole.
ALTER TABLE fraud_cluster_members
    ADD COLUMN score real NOT NULL DEFAULT 0,
    ADD COLUMN flagged boolean NOT NULL DEFAULT false,
    -- the member's score without the signals that spared it, and why
    -- it was spared or not flagged: what a near miss shows an analyst
    ADD COLUMN why text NOT NULL DEFAULT '' CHECK (length(why) <= 500);
UPDATE fraud_cluster_members m SET flagged = true FROM fraud_clusters c WHERE c.id = m.cluster_id AND c.flagged;
CREATE INDEX fraud_cluster_members_near ON fraud_cluster_members (score DESC) WHERE NOT flagged;
