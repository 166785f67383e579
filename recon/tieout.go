package recon

// The books that tie out, each to the paisa: a gateway's settlement
// statement of a day (captures − refunds − chargebacks − fees − GST = the
// payout its lines announce = what the bank credited for it) and the
// wallets' roll-forward of a day (opening + top-ups + refunds in − spends
// − withdrawals = closing, against the ledger's own running balances and
// against the payments and refunds that moved the money). Where a term
// differs, the difference is shown, never absorbed.

import (
	"context"
	"fmt"
	"time"

	"tatkal/booking"
)

// SettlementStatement is a gateway's current settlement file of a day as a
// statement, with the bank's side of its payouts.
type SettlementStatement struct {
	Gateway     string    `json:"gateway"`
	Day         time.Time `json:"day"`
	FileID      int64     `json:"file_id"` // 0: no file for the day
	Lines       int       `json:"lines"`
	Captures    int64     `json:"captures_paise"`
	Refunds     int64     `json:"refunds_paise"`
	Chargebacks int64     `json:"chargebacks_paise"`
	Fees        int64     `json:"fees_paise"`
	GST         int64     `json:"gst_paise"`
	// Payout is the sum of the lines' own net: what the gateway says it pays.
	Payout   int64       `json:"payout_paise"`
	Payouts  []string    `json:"payouts"`
	Bank     int64       `json:"bank_paise"` // what the bank's current statements moved for those payouts (credits less debits)
	BankDays []time.Time `json:"bank_days"`  // the statement dates those movements are on
}

// Net is the terms' result: captures − refunds − chargebacks − fees − GST.
func (s SettlementStatement) Net() int64 {
	return s.Captures - s.Refunds - s.Chargebacks - s.Fees - s.GST
}

// PayoutDifference is the lines' own net less Net: not zero when a line's
// net is not its amount less its fee and GST.
func (s SettlementStatement) PayoutDifference() int64 { return s.Payout - s.Net() }

// BankDifference is the bank's movement less the payout: a short or
// missing credit (the PAYOUT_MISMATCH exceptions) shows here.
func (s SettlementStatement) BankDifference() int64 { return s.Bank - s.Payout }

// TiesOut says whether the statement holds to the paisa.
func (s SettlementStatement) TiesOut() bool {
	return s.PayoutDifference() == 0 && s.BankDifference() == 0
}

// Settlement computes a gateway's settlement statement of a file day.
func (s *Service) Settlement(ctx context.Context, gateway string, day time.Time) (SettlementStatement, error) {
	if !gatewayID.MatchString(gateway) || gateway == Wallet || gateway == Core || gateway == Bank {
		return SettlementStatement{}, booking.Errorf(booking.EINVALID, "NO_GATEWAY", "A settlement statement is a gateway's, not %q.", gateway)
	}
	st := SettlementStatement{Gateway: gateway, Day: dateOnly(day), Payouts: []string{}, BankDays: []time.Time{}}
	// The file's lines, one pass; the bank's lines of its payouts by the
	// (source, gateway, ext_ref) index.
	err := s.pool.QueryRow(ctx, `WITH f AS (SELECT id FROM recon_files WHERE source = 'SETTLEMENT' AND gateway = $1 AND business_date = $2
			AND superseded_by IS NULL)
		, l AS (SELECT kind, amount_paise AS amount, fee_paise AS fee, tax_paise AS tax, net_paise AS net, payout_id FROM recon_lines
			WHERE file_id IN (SELECT id FROM f) AND current AND source = 'SETTLEMENT')
		, p AS (SELECT DISTINCT payout_id FROM l WHERE payout_id <> '')
		, b AS (SELECT net_paise, business_date FROM recon_lines WHERE current AND source = 'BANK' AND gateway = $1
			AND ext_ref IN (SELECT payout_id FROM p))
		SELECT coalesce((SELECT id FROM f), 0), count(*),
			coalesce(sum(amount) FILTER (WHERE kind = 'CAPTURE'), 0)::bigint, coalesce(sum(amount) FILTER (WHERE kind = 'REFUND'), 0)::bigint,
			coalesce(sum(amount) FILTER (WHERE kind = 'CHARGEBACK'), 0)::bigint, coalesce(sum(fee), 0)::bigint, coalesce(sum(tax), 0)::bigint,
			coalesce(sum(net), 0)::bigint,
			ARRAY(SELECT payout_id FROM p ORDER BY 1), (SELECT coalesce(sum(net_paise), 0)::bigint FROM b),
			ARRAY(SELECT DISTINCT business_date FROM b ORDER BY 1)
		FROM l`, gateway, pgDate(day)).Scan(&st.FileID, &st.Lines, &st.Captures, &st.Refunds, &st.Chargebacks, &st.Fees, &st.GST,
		&st.Payout, &st.Payouts, &st.Bank, &st.BankDays)
	if err != nil {
		return st, fmt.Errorf("settlement statement %s %s: %w", gateway, st.Day.Format(time.DateOnly), err)
	}
	return st, nil
}

// WalletRollForward is the day's movement of every wallet together. The
// terms come from the ledger (wallet_entries); the opening and the
// ledger's closing are the balances its entries carry (balance_after of
// each wallet's last entry before the day and by its end); the "ours"
// figures are the payments and refunds that should have moved the money.
type WalletRollForward struct {
	Day       time.Time `json:"day"`
	Opening   int64     `json:"opening_paise"`
	TopUps    int64     `json:"topups_paise"`
	RefundsIn int64     `json:"refunds_in_paise"`
	Spends    int64     `json:"spends_paise"`
	// Withdrawals: the ledger has no withdrawal kind (money leaves a wallet
	// only as a spend); a negative entry of another kind would count here.
	Withdrawals   int64 `json:"withdrawals_paise"`
	LedgerClosing int64 `json:"ledger_closing_paise"`
	// What our records say those movements were: succeeded top-up
	// payments, processed refunds of wallet payments, wallet payments made.
	OurTopUps    int64 `json:"our_topups_paise"`
	OurRefundsIn int64 `json:"our_refunds_in_paise"`
	OurSpends    int64 `json:"our_spends_paise"`
	// Count is the number of entries behind each ledger term.
	Count map[string]int `json:"count"`
}

// Wallet roll-forward terms, as Count and the console's links name them.
const (
	TermTopUps      = "topups"
	TermRefundsIn   = "refunds_in"
	TermSpends      = "spends"
	TermWithdrawals = "withdrawals"
)

// Closing is opening + top-ups + refunds in − spends − withdrawals.
func (r WalletRollForward) Closing() int64 {
	return r.Opening + r.TopUps + r.RefundsIn - r.Spends - r.Withdrawals
}

// ClosingDifference is the ledger's closing balance less Closing: not
// zero when an entry's running balance does not follow from the one before.
func (r WalletRollForward) ClosingDifference() int64 { return r.LedgerClosing - r.Closing() }

// TiesOut says whether the roll-forward holds to the paisa, inside the
// ledger and against our payments and refunds.
func (r WalletRollForward) TiesOut() bool {
	return r.ClosingDifference() == 0 && r.TopUps == r.OurTopUps && r.RefundsIn == r.OurRefundsIn && r.Spends == r.OurSpends
}

// WalletRollForward computes the wallets' roll-forward of a day (IST).
func (s *Service) WalletRollForward(ctx context.Context, day time.Time) (WalletRollForward, error) {
	start, end := dayBounds(day)
	r := WalletRollForward{Day: dateOnly(day), Count: map[string]int{}}
	var nTop, nRef, nSpend, nOut int
	err := s.pool.QueryRow(ctx, `WITH d AS (SELECT kind, amount_paise AS amount FROM wallet_entries WHERE at >= $1 AND at < $2)
		SELECT
			(SELECT coalesce(sum(balance_after), 0)::bigint FROM (SELECT DISTINCT ON (user_id) balance_after FROM wallet_entries
			 WHERE at < $1 ORDER BY user_id, id DESC) o),
			(SELECT coalesce(sum(amount), 0)::bigint FROM d WHERE kind = 'TOPUP' AND amount > 0), (SELECT count(*) FROM d WHERE kind = 'TOPUP' AND amount > 0),
			(SELECT coalesce(sum(amount), 0)::bigint FROM d WHERE kind = 'REFUND' AND amount > 0), (SELECT count(*) FROM d WHERE kind = 'REFUND' AND amount > 0),
			(SELECT coalesce(-sum(amount), 0)::bigint FROM d WHERE kind = 'DEBIT'), (SELECT count(*) FROM d WHERE kind = 'DEBIT'),
			(SELECT coalesce(-sum(amount), 0)::bigint FROM d WHERE kind <> 'DEBIT' AND amount < 0), (SELECT count(*) FROM d WHERE kind <> 'DEBIT' AND amount < 0),
			(SELECT coalesce(sum(balance_after), 0)::bigint FROM (SELECT DISTINCT ON (user_id) balance_after FROM wallet_entries
			 WHERE at < $2 ORDER BY user_id, id DESC) c),
			(SELECT coalesce(sum(amount_paise), 0)::bigint FROM payments WHERE purpose = 'TOPUP' AND state = 'SUCCESS'
			 AND resolved_at >= $1 AND resolved_at < $2),
			(SELECT coalesce(sum(r.amount_paise), 0)::bigint FROM refunds r JOIN payments p ON p.id = r.payment_id
			 WHERE p.method = 'WALLET' AND r.state = 'PROCESSED' AND r.completed_at >= $1 AND r.completed_at < $2),
			(SELECT coalesce(sum(amount_paise), 0)::bigint FROM payments WHERE method = 'WALLET' AND state IN ('SUCCESS', 'REFUNDED')
			 AND initiated_at >= $1 AND initiated_at < $2)`, start, end).Scan(
		&r.Opening, &r.TopUps, &nTop, &r.RefundsIn, &nRef, &r.Spends, &nSpend, &r.Withdrawals, &nOut, &r.LedgerClosing,
		&r.OurTopUps, &r.OurRefundsIn, &r.OurSpends)
	if err != nil {
		return r, fmt.Errorf("wallet roll-forward %s: %w", r.Day.Format(time.DateOnly), err)
	}
	r.Count[TermTopUps], r.Count[TermRefundsIn], r.Count[TermSpends], r.Count[TermWithdrawals] = nTop, nRef, nSpend, nOut
	return r, nil
}
