-- Appeals (issue 32, 7). Upholding an appeal against a decision that took
-- two analysts (a ban, a bulk cancellation) takes two as well: the first
-- analyst proposes it (proposed_by), a second who took no part in the
-- decision nor in the proposal upholds it (decided_by).
ALTER TABLE fraud_appeals
    ADD COLUMN proposed_by bigint REFERENCES console_users (id),
    ADD COLUMN proposed_at timestamptz,
    ADD CONSTRAINT fraud_appeals_second_analyst
        CHECK (status <> 'UPHELD' OR proposed_by IS NULL OR decided_by <> proposed_by);

-- An upheld appeal against a cancellation refunds the full fare.
ALTER TABLE refunds DROP CONSTRAINT refunds_reason_check;
ALTER TABLE refunds ADD CONSTRAINT refunds_reason_check CHECK (reason IN ('LATE_SUCCESS_NO_SEAT', 'DUPLICATE_CHARGE',
    'HOLD_EXPIRED', 'HOLD_CANCELLED', 'WAITLIST_CANCELLED', 'CORE_REJECTED', 'TDR', 'SYSTEM', 'AMOUNT_MISMATCH', 'APPEAL_UPHELD'));
