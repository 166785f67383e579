package recon

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/xuri/excelize/v2"

	"tatkal/booking"
	"tatkal/booking/lab/seed"
)

// A gateway's settlement statement ties out to the paisa on a clean day:
// captures − refunds − chargebacks − fees − GST, each term what our
// payments and the contract say, is the payout its lines announce and the
// bank's credit. On a day edited by hand (a chargeback line, a line whose
// net is a rupee short of its own amount less fee and GST, the bank's
// credit ₹5 short) it shows each difference where it arises instead.
func TestSettlementStatementTiesOut(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	const gw = "bharatpg"
	specs := cleanSet(gw, 9)
	m := w.make(specs...)
	w.ingestDay(gw)
	var captures, refunds, fees, gst int64
	nrefunds := 0
	for i, s := range specs {
		captures += s.amount
		refunds += s.refund
		if s.refund > 0 {
			nrefunds++
		}
		fee := bps(s.amount, DefaultContracts()[gw][s.method])
		fees, gst = fees+fee, gst+bps(fee, 1800)
		if m[i].Refund != s.refund {
			t.Fatalf("fixture %d refunded %d", i, m[i].Refund)
		}
	}
	st, err := w.svc.Settlement(w.ctx, gw, w.day)
	w.must(err)
	payout := "BPGUTR" + w.day.Format("20060102")
	credited := w.day.AddDate(0, 0, 1)
	if st.FileID == 0 || st.Lines != 9+nrefunds || st.Captures != captures || st.Refunds != refunds || st.Chargebacks != 0 || st.Fees != fees ||
		st.GST != gst || st.Net() != captures-refunds-fees-gst || st.Payout != st.Net() || st.Bank != st.Payout || !st.TiesOut() ||
		len(st.Payouts) != 1 || st.Payouts[0] != payout || len(st.BankDays) != 1 || !st.BankDays[0].Equal(dateOnly(credited)) {
		t.Fatalf("clean statement %+v (want captures %d refunds %d fees %d gst %d)", st, captures, refunds, fees, gst)
	}

	// bharatpg's file: settlement_date, utr, entry_type, pg_txn_id,
	// merchant_txn_ref, merchant_refund_ref, pg_refund_id, pay_method,
	// txn_amount_paise, commission_paise, igst_paise, settled_paise, ...
	var cb []string
	settlement := w.editCSV(w.realFile(SourceSettlement, gw, w.day), func(r []string) bool {
		if r[2] == "SALE" && r[4] == m[0].ID.String() {
			// A chargeback of ₹1,200 on it, copied from its line.
			cb = append([]string(nil), r...)
			cb[2], cb[8], cb[9], cb[10], cb[11] = "CHBK", "120000", "0", "0", "-120000"
			// Its net a rupee short of its amount less fee and GST.
			r[11] = strconv.FormatInt(w.paise(r[8])-w.paise(r[9])-w.paise(r[10])-100, 10)
		}
		return true
	})
	if cb == nil {
		t.Fatal("no sale line of the first payment")
	}
	settlement = w.editCSV(settlement, nil, cb)
	w.upload(SourceSettlement, gw, w.day, settlement)
	statement := w.editCSV(w.realFile(SourceBank, "", credited), func(r []string) bool {
		if strings.HasSuffix(r[2], "SETTLEMENT-"+payout) {
			r[5] = rupeesOf(w.paiseOf(r[5]) - 120000 - 100 - 500)
		}
		return true
	})
	w.upload(SourceBank, "", credited, statement)

	st, err = w.svc.Settlement(w.ctx, gw, w.day)
	w.must(err)
	if st.Chargebacks != 120000 || st.Captures != captures || st.Net() != captures-refunds-120000-fees-gst ||
		st.PayoutDifference() != -100 || st.BankDifference() != -500 || st.TiesOut() {
		t.Fatalf("edited statement %+v: net %d, payout difference %d, bank difference %d", st, st.Net(), st.PayoutDifference(), st.BankDifference())
	}
	// The bank's ₹5 is the run's payout mismatch, to the paisa; the day's
	// workbook shows the statement.
	run := w.run(gw)
	tiesOut := w.tiesOutRows(run)
	if got := tiesOut["Payout (the lines' net)"]; got[3] != "-1" {
		t.Errorf("workbook's payout row %q, want a difference of -1", got)
	}
	if got := tiesOut["Bank credit"]; got[1] != strconv.FormatFloat(rupees(st.Bank), 'f', -1, 64) || got[3] != "-5" {
		t.Errorf("workbook's bank row %q, want %v less 5", got, rupees(st.Bank))
	}
	if got := tiesOut["− Chargebacks"]; got[1] != "1200" {
		t.Errorf("workbook's chargebacks row %q", got)
	}
	var diff int64
	w.must(w.env.Pool.QueryRow(w.ctx, `SELECT diff_paise FROM reconciliation_exceptions WHERE kind = 'PAYOUT_MISMATCH' AND ref = $1`, payout).Scan(&diff))
	if diff != st.BankDifference() {
		t.Fatalf("payout mismatch %d, statement's bank difference %d", diff, st.BankDifference())
	}
	if _, err := w.svc.Settlement(w.ctx, Wallet, w.day); code(err) != booking.EINVALID {
		t.Fatal("a settlement statement of the wallet")
	}
}

// The wallets' roll-forward: opening + top-ups + refunds in − spends −
// withdrawals = closing, to the paisa, against the ledger's running
// balances and against the payments and refunds behind each term. A top-up
// that succeeded without reaching the ledger and an entry whose running
// balance is a paisa off show as differences of their own. The wallet run
// counts its wallet payments (it counted none).
func TestWalletRollForward(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	users, err := seed.Users(w.ctx, w.env.Pool, seed.UsersSpec{Count: 1, Prefix: "rf" + uuid.NewString()[:6], PasswordHash: "x"})
	w.must(err)
	a, b := w.userID, users[0]
	balance := map[int64]int64{}
	post := func(user int64, kind, ref string, amount int64, at time.Time, off int64) {
		t.Helper()
		balance[user] += amount
		w.must2(w.env.Pool.Exec(w.ctx, `INSERT INTO wallet_entries (user_id, kind, ref, amount_paise, balance_after, at) VALUES ($1, $2, $3, $4, $5, $6)`,
			user, kind, ref, amount, balance[user]+off, at))
	}
	topup := func(user, amount int64, at time.Time, ledger bool) {
		t.Helper()
		id := uuid.Must(uuid.NewV7())
		w.must2(w.env.Pool.Exec(w.ctx, `INSERT INTO payments (id, user_id, psp, route, method, amount_paise, state, idempotency_key, deadline,
			initiated_at, resolved_at, purpose) VALUES ($1, $2, 'swiftpay', 'UPI', 'UPI', $3, 'SUCCESS', $4, $5, $5, $5, 'TOPUP')`,
			id, user, amount, "t"+id.String(), at))
		if ledger {
			post(user, "TOPUP", id.String(), amount, at, 0)
		}
	}
	at := func(d time.Duration) time.Time { return w.day.Add(d) }
	// The day before: a top-up of ₹5,000.
	topup(a, 500000, at(-14*time.Hour), true)
	// The day: a top-up of ₹2,000 and three wallet payments (booked, in
	// the core's export), one of them partly refunded to the wallet.
	topup(a, 200000, at(9*time.Hour), true)
	pays := w.make(
		spec{gateway: "", method: "WALLET", amount: 150000, ours: "SUCCESS", booked: true, synced: true},
		spec{gateway: "", method: "WALLET", amount: 110000, ours: "SUCCESS", booked: true, synced: true},
		spec{gateway: "", method: "WALLET", amount: 90000, ours: "SUCCESS", booked: true, synced: true},
	)
	for _, p := range pays {
		var initiated time.Time
		w.must(w.env.Pool.QueryRow(w.ctx, `SELECT initiated_at FROM payments WHERE id = $1`, p.ID).Scan(&initiated))
		post(a, "DEBIT", p.ID.String(), -p.Amount, initiated, 0)
	}
	refund := uuid.Must(uuid.NewV7())
	w.must2(w.env.Pool.Exec(w.ctx, `INSERT INTO refunds (id, payment_id, reason, amount_paise, state, initiated_at, completed_at)
		VALUES ($1, $2, 'SYSTEM', 50000, 'PROCESSED', $3, $3)`, refund, pays[0].ID, at(15*time.Hour)))
	post(a, "REFUND", refund.String(), 50000, at(15*time.Hour), 0)

	rf, err := w.svc.WalletRollForward(w.ctx, w.day)
	w.must(err)
	spent := int64(150000 + 110000 + 90000)
	if rf.Opening != 500000 || rf.TopUps != 200000 || rf.RefundsIn != 50000 || rf.Spends != spent || rf.Withdrawals != 0 ||
		rf.Closing() != 500000+200000+50000-spent || rf.LedgerClosing != rf.Closing() || !rf.TiesOut() ||
		rf.OurTopUps != rf.TopUps || rf.OurSpends != rf.Spends || rf.OurRefundsIn != rf.RefundsIn ||
		rf.Count[TermTopUps] != 1 || rf.Count[TermSpends] != 3 || rf.Count[TermRefundsIn] != 1 {
		t.Fatalf("clean roll-forward %+v (closing %d)", rf, rf.Closing())
	}
	_, err = w.svc.FetchCore(w.ctx, w.src, w.shard.Journey, "job:test")
	w.must(err)
	// The wallet run: its 3 payments and the refund are its items (it
	// counted none), the refund to a wallet is in no gateway's file (it
	// was a REFUND_NOT_SETTLED).
	if sum := w.run(Wallet); sum.OurItems != 4 || sum.Matched != 3 || sum.Exceptions != 0 {
		t.Fatalf("wallet run %+v, want its 3 payments and a refund counted, the payments' bookings matched", sum)
	}

	// Our records, by hand: a top-up of ₹300 that succeeded and never
	// reached the ledger; another wallet's top-up; a spend whose running
	// balance is a paisa high.
	topup(a, 30000, at(16*time.Hour), false)
	topup(b, 10000, at(17*time.Hour), true)
	spend := w.make(spec{gateway: "", method: "WALLET", amount: 2000, ours: "SUCCESS", at: 7 * time.Hour})[0]
	post(a, "DEBIT", spend.ID.String(), -2000, at(18*time.Hour), 1)

	rf, err = w.svc.WalletRollForward(w.ctx, w.day)
	w.must(err)
	if rf.TopUps != 210000 || rf.OurTopUps != 240000 || rf.Spends != spent+2000 || rf.OurSpends != rf.Spends ||
		rf.ClosingDifference() != 1 || rf.TiesOut() {
		t.Fatalf("faulty roll-forward %+v: closing %d, ledger %d", rf, rf.Closing(), rf.LedgerClosing)
	}
	tiesOut := w.tiesOutRows(w.run(Wallet))
	if got := tiesOut["+ Top-ups"]; got[1] != "2100" || got[2] != "2400" || got[3] != "-300" {
		t.Errorf("workbook's top-ups row %q", got)
	}
	if got := tiesOut["= Closing"]; got[3] != "0.01" {
		t.Errorf("workbook's closing row %q, want a paisa's difference", got)
	}
	// The next day opens where the ledger closed.
	next, err := w.svc.WalletRollForward(w.ctx, w.day.AddDate(0, 0, 1))
	w.must(err)
	if next.Opening != rf.LedgerClosing || next.Closing() != next.Opening || !next.TiesOut() {
		t.Fatalf("next day %+v", next)
	}
}

// tiesOutRows reads a run's workbook's Ties out sheet, rows by their term
// (raw values, padded to the sheet's columns).
func (w *world) tiesOutRows(run RunSummary) map[string][]string {
	w.t.Helper()
	var buf bytes.Buffer
	w.must(w.svc.WriteXLSX(w.ctx, run.ID, &buf))
	f, err := excelize.OpenReader(&buf)
	w.must(err)
	defer f.Close()
	rows, err := f.GetRows(TiesOutSheet, excelize.Options{RawCellValue: true})
	w.must(err)
	out := map[string][]string{}
	for _, r := range rows[1:] {
		out[r[0]] = append(r, make([]string, len(tiesOutColumns)-len(r))...)
	}
	return out
}
