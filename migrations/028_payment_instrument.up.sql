-- The instrument a card or net-banking payment was made with, as the
-- gateway reports it once the customer approved: "card:" and the card's
-- fingerprint, or "nb:" and the bank account's reference (never a card or
-- account number). UPI payments keep their address in vpa. The fraud
-- signals key a shared instrument on it (lifecycle.go recordConfirmSignal).
ALTER TABLE payments ADD COLUMN instrument_ref text NOT NULL DEFAULT '';
