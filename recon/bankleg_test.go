package recon

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"tatkal/booking"
)

// The bank leg, per statement date (issue 35, 3): a ₹777 credit that no
// payout explains, a debit nobody announced, and a credit narrated as a
// payout no settlement file carries, written by hand into a copy of the
// bank's real statement. The statement date's bank run finds each once,
// as its own kind, owned by treasury; the gateway runs find none of them;
// a clean statement raises nothing; reruns change nothing; the bank's
// corrected statement clears what it corrects. Before, the ₹777 was
// reported nowhere.
func TestBankLegUnexplainedLines(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.make(append(cleanSet("swiftpay", 6), cleanSet("bharatpg", 6)...)...)
	for _, gw := range []string{"swiftpay", "bharatpg"} {
		w.ingestDay(gw)
	}
	credited := w.day.AddDate(0, 0, 1) // the day's payouts land on T+1
	bank := func(day time.Time) RunSummary {
		t.Helper()
		sum, err := w.svc.Run(w.ctx, RunRequest{Gateway: Bank, Date: day, AsOf: w.day.AddDate(0, 0, 4), By: "finance1"})
		w.must(err)
		return sum
	}
	bankExceptions := func(day time.Time) []Exception {
		t.Helper()
		ex, err := w.svc.Exceptions(w.ctx, Filter{Gateway: Bank, BusinessDate: day, Limit: 100})
		w.must(err)
		return ex
	}

	// A clean statement: both gateways' payouts, announced by their files.
	clean := bank(credited)
	if ex := bankExceptions(credited); len(ex) != 0 || clean.Exceptions != 0 || clean.Lines != 2 || clean.Matched != 2 ||
		clean.OurItems != 2 || clean.Payouts != clean.Net || clean.Payouts <= 0 {
		t.Fatalf("clean statement: run %+v, exceptions %+v", clean, ex)
	}

	// The analyst's copy of the statement, three lines added.
	d := credited.Format("02-Jan-2006")
	const credit777, debitRef, phantomRef = "HDFCN000000777777", "HDFCN000000555555", "HDFCN000000999999"
	phantomPayout := "SWP20250530" // a payout id of a file that never came
	statement := w.editCSV(w.realFile(SourceBank, "", credited), nil,
		[]string{d, d, "NEFT CR-ACME TRAVELS-INV 4411", credit777, "", "777.00"},
		[]string{d, d, "ACH DR-UNKNOWN MANDATE 88812", debitRef, "1200.00", ""},
		[]string{d, d, "NEFT CR-SWIFTPAY SETTLEMENT-" + phantomPayout, phantomRef, "", "4321.09"})
	w.upload(SourceBank, "", credited, statement)

	// The gateways' runs: their payouts still match their credits, and
	// the statement's other lines are not theirs to find.
	for _, gw := range []string{"swiftpay", "bharatpg"} {
		if sum := w.run(gw); sum.Exceptions != 0 {
			t.Fatalf("%s run found %d exceptions: %+v", gw, sum.Exceptions, w.exceptions(gw))
		}
	}

	day := credited.Format(time.DateOnly)
	wants := []string{
		fmt.Sprintf("%s %s|%s amount 77700 diff 77700 stake 77700 payout %q", UnexplainedCredit, day, credit777, ""),
		fmt.Sprintf("%s %s|%s amount 120000 diff -120000 stake 120000 payout %q", UnexplainedDebit, day, debitRef, ""),
		fmt.Sprintf("%s %s|%s amount 432109 diff 432109 stake 432109 payout %q", UnexplainedCredit, day, phantomRef, phantomPayout),
	}
	check := func(sum RunSummary) []Exception {
		t.Helper()
		ex := bankExceptions(credited)
		var got []string
		for _, e := range ex {
			got = append(got, fmt.Sprintf("%s %s amount %d diff %d stake %d payout %q", e.Kind, e.Ref, e.AmountPaise, e.DiffPaise, e.StakePaise, e.PayoutID))
			if e.Owner != "treasury" || e.Path != PathManual || e.State != StateOpen || e.Gateway != Bank {
				t.Errorf("%s %s: owner %s path %s state %s gateway %s", e.Kind, e.Ref, e.Owner, e.Path, e.State, e.Gateway)
			}
		}
		slices.Sort(got)
		want := slices.Sorted(slices.Values(wants))
		if !slices.Equal(got, want) {
			t.Fatalf("bank exceptions:\n got  %s\n want %s", strings.Join(got, "\n      "), strings.Join(want, "\n      "))
		}
		if sum.Exceptions != 3 || sum.Lines != 5 || sum.Matched != 2 || sum.AmountUnmatched != 77700+120000+432109 {
			t.Fatalf("bank run %+v", sum)
		}
		return ex
	}
	first := bank(credited)
	ex := check(first)
	if first.NewExceptions != 3 {
		t.Fatalf("first bank run: %+v", first)
	}
	// The exception shows the statement's line itself.
	var credit Exception
	for _, e := range ex {
		if e.Kind == UnexplainedCredit && strings.HasSuffix(e.Ref, credit777) {
			credit = e
		}
	}
	legs, err := w.svc.Legs(w.ctx, credit)
	w.must(err)
	if len(legs.Bank) != 1 || !strings.Contains(legs.Bank[0].Raw, "ACME TRAVELS") || legs.Bank[0].NetPaise != 77700 {
		t.Fatalf("legs of the ₹777 credit: %+v", legs.Bank)
	}

	// Reruns change nothing; the other statement dates have none of it.
	events := `SELECT count(*) FROM reconciliation_exception_events`
	before := w.count(events)
	again := bank(credited)
	check(again)
	if again.NewExceptions != 0 || again.Cleared != 0 || w.count(events) != before {
		t.Fatalf("rerun changed things: %+v", again)
	}
	for _, other := range []time.Time{credited.AddDate(0, 0, 1), credited.AddDate(0, 0, 2)} {
		if sum := bank(other); sum.Exceptions != 0 || len(bankExceptions(other)) != 0 {
			t.Fatalf("statement of %s: %+v", other.Format(time.DateOnly), sum)
		}
	}
	if n := w.count(`SELECT count(*) FROM reconciliation_exceptions WHERE kind IN ('UNEXPLAINED_CREDIT', 'UNEXPLAINED_DEBIT')`); n != 3 {
		t.Fatalf("%d unexplained bank lines recorded, want 3", n)
	}

	// Closed with what treasury can say of a bank line, not a payment's codes.
	if err := w.svc.ResolveManually(w.ctx, credit.ID, "treasury1", "REFUNDED", "sent back", nil); code(err) != booking.EINVALID {
		t.Fatalf("a payment's code on a bank credit: %v", err)
	} else if !strings.Contains(err.Error(), "RETURNED_TO_SENDER") {
		t.Fatalf("the refusal does not offer the bank's codes: %v", err)
	}

	// The bank corrects its statement: the ₹777 was never ours to list.
	corrected := w.editCSV(statement, func(rec []string) bool { return rec[3] != credit777 })
	w.upload(SourceBank, "", credited, corrected)
	third := bank(credited)
	if third.Cleared != 1 || third.NewExceptions != 0 || third.Exceptions != 2 {
		t.Fatalf("after the corrected statement: %+v", third)
	}
	got, err := w.svc.Exception(w.ctx, credit.ID)
	w.must(err)
	if got.State != StateResolved || got.Resolution != ClearedOnRerun {
		t.Fatalf("the corrected credit: %s %s", got.State, got.Resolution)
	}
}
