-- What an exception puts at stake, apart from the gross amount it is
-- about: a ₹5 short payout of ₹1,49,452.04 stakes ₹5, not the payout.
-- Totals, ageing, filters, the approval limit and write-offs read it;
-- amount_paise stays as the context. Each rule of a run states it (no
-- default); exceptions found before get their kind's rule here and are
-- stated anew by their next run.
ALTER TABLE reconciliation_exceptions ADD COLUMN stake_paise bigint NOT NULL DEFAULT 0 CHECK (stake_paise >= 0),
    -- What the write-off wrote off: the stake when its second person
    -- approved it (a later rerun may restate the stake, not the write-off).
    ADD COLUMN written_off_paise bigint CHECK (written_off_paise >= 0);
UPDATE reconciliation_exceptions SET stake_paise = CASE
    WHEN kind IN ('AMOUNT_MISMATCH', 'FEE_MISMATCH', 'REFUND_MISMATCH', 'PAYOUT_MISMATCH') THEN abs(diff_paise)
    WHEN kind = 'CORE_MISMATCH' AND diff_paise <> 0 THEN abs(diff_paise)
    ELSE abs(amount_paise) END;
UPDATE reconciliation_exceptions SET written_off_paise = stake_paise WHERE state = 'WRITTEN_OFF';
ALTER TABLE reconciliation_exceptions ALTER COLUMN stake_paise DROP DEFAULT;

-- The core leg hands its findings over with their stake.
ALTER TABLE recon_run_found ADD COLUMN stake bigint NOT NULL DEFAULT 0;
