-- The bank leg reconciled per statement date (the "bank" run): a credit or
-- a debit on the statement that no gateway's settlement file announces as
-- a payout is an exception of its own.
ALTER TABLE reconciliation_exceptions DROP CONSTRAINT reconciliation_exceptions_kind_check,
    ADD CONSTRAINT reconciliation_exceptions_kind_check CHECK (kind IN ('PAID_NOT_BOOKED', 'STATUS_MISMATCH', 'BOOKED_NOT_PAID',
        'DUPLICATE_CHARGE', 'AMOUNT_MISMATCH', 'FEE_MISMATCH', 'MISSING_IN_SETTLEMENT', 'REFUND_NOT_SETTLED', 'REFUND_MISMATCH',
        'PAYOUT_MISMATCH', 'CORE_MISSING', 'CORE_ORPHAN', 'CORE_MISMATCH', 'ORPHAN_LINE', 'DUPLICATE_LINE', 'CHARGEBACK',
        'UNEXPLAINED_CREDIT', 'UNEXPLAINED_DEBIT'));
