package recon

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xuri/excelize/v2"
)

// The amount at stake (issue 35, 4): by hand, in copies of the real files,
// the gateway captures ₹3 more than we charged, overcharges a card's fee
// by ₹2 (+₹0.36 GST), the core's fare is ₹2 off, and the bank pays the
// day's payout ₹5 short. Each exception keeps its gross amount as context
// and its difference as what is at stake; the run's, the day's, the
// ageing's and the overdue totals, the amount filter, the workbook and a
// write-off count ₹12.36, not the ₹1,49,452.04-sized payout and payments.
// Before, the ₹5 short payout was carried, totalled and written off as the
// whole payout.
func TestAtStakeIsTheDifference(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	const gw = "swiftpay"
	m := w.make(append(cleanSet(gw, 4), clean(gw, "UPI", 150000), clean(gw, "CARD", 333300), clean(gw, "NB", 175000))...)
	upi, card, nb := m[4], m[5], m[6]
	w.ingestDay(gw)

	// The settlement file: ₹3 more on the UPI capture (no fee on UPI), ₹2
	// more fee and ₹0.36 more GST on the card capture, nets to match.
	settlement := w.editCSV(w.realFile(SourceSettlement, gw, w.day), func(r []string) bool {
		if r[0] != "CAPTURE" {
			return true
		}
		add := func(i int, paise int64) { r[i] = rupeesOf(w.paiseOf(r[i]) + paise) }
		switch r[2] {
		case upi.ID.String():
			add(6, 300)
			add(9, 300)
		case card.ID.String():
			add(7, 200)
			add(8, 36)
			add(9, -236)
		}
		return true
	})
	w.upload(SourceSettlement, gw, w.day, settlement)
	// The bank: the payout of the edited lines, ₹5 short.
	payout := "SWP" + w.day.Format("20060102")
	credited := w.day.AddDate(0, 0, 1)
	statement := w.editCSV(w.realFile(SourceBank, "", credited), func(r []string) bool {
		if strings.HasSuffix(r[2], "SETTLEMENT-"+payout) {
			r[5] = rupeesOf(w.paiseOf(r[5]) + 300 - 236 - 500)
		}
		return true
	})
	w.upload(SourceBank, "", credited, statement)
	// The core: the NB booking's fare ₹2 more.
	core := w.editCSV(w.realFile(SourceCore, "", w.shard.Journey), func(r []string) bool {
		if r[0] == nb.PNR {
			r[13] = strconv.FormatInt(nb.Amount+200, 10)
		}
		return true
	})
	w.upload(SourceCore, "", w.shard.Journey, core)

	sum := w.run(gw)
	var net int64
	w.must(w.env.Pool.QueryRow(w.ctx, `SELECT sum(net_paise) FROM recon_lines WHERE current AND source = 'SETTLEMENT' AND payout_id = $1`,
		payout).Scan(&net))
	type row struct {
		amount, diff, stake int64
	}
	want := map[string]row{
		AmountMismatch: {upi.Amount, 300, 300},
		FeeMismatch:    {0, 236, 236}, // the gross is the line's fee and GST, checked below
		PayoutMismatch: {net, -500, 500},
		CoreMismatch:   {nb.Amount, 200, 200},
	}
	byKind := map[string]Exception{}
	for _, e := range w.exceptions(gw) {
		byKind[e.Kind] = e
		x, ok := want[e.Kind]
		if !ok {
			t.Errorf("unexpected %s %s", e.Kind, e.Ref)
			continue
		}
		if e.Kind == FeeMismatch {
			x.amount = bps(card.Amount, 180) + 200 + bps(bps(card.Amount, 180), 1800) + 36
		}
		if e.AmountPaise != x.amount || e.DiffPaise != x.diff || e.StakePaise != x.stake {
			t.Errorf("%s: amount %d diff %d stake %d; want %d %d %d", e.Kind, e.AmountPaise, e.DiffPaise, e.StakePaise, x.amount, x.diff, x.stake)
		}
	}
	if len(byKind) != len(want) {
		t.Fatalf("exceptions %v, want one of each of %v", byKind, want)
	}
	const stake = 300 + 236 + 500 + 200
	if sum.AmountUnmatched != stake {
		t.Fatalf("the run's unmatched amount %d, want %d at stake", sum.AmountUnmatched, stake)
	}

	// Totals: the day's, the ageing's, the overdue's.
	n, paise, err := w.svc.CountExceptions(w.ctx, Filter{Gateway: gw, BusinessDate: w.day, State: "UNRESOLVED"})
	w.must(err)
	if n != 4 || paise != stake {
		t.Fatalf("the day's unresolved: %d for %d paise, want 4 for %d", n, paise, stake)
	}
	runs, err := w.svc.Runs(w.ctx, gw, w.day, w.day)
	w.must(err)
	if len(runs) != 1 || runs[0].UnresolvedPaise != stake {
		t.Fatalf("runs %+v", runs)
	}
	ageing, err := w.svc.Ageing(w.ctx)
	w.must(err)
	var aged int64
	for _, a := range ageing {
		aged += a.Paise
	}
	if aged != stake {
		t.Fatalf("ageing at risk %d, want %d", aged, stake)
	}
	// The amount filter reads the stake: above ₹4 only the short payout,
	// up to ₹2.50 the fee and the fare.
	for _, c := range []struct {
		f    Filter
		want []string
	}{
		{Filter{MinPaise: 400}, []string{PayoutMismatch}},
		{Filter{MaxPaise: 250}, []string{CoreMismatch, FeeMismatch}},
	} {
		ex, err := w.svc.Exceptions(w.ctx, c.f)
		w.must(err)
		var kinds []string
		for _, e := range ex {
			kinds = append(kinds, e.Kind)
		}
		slices.Sort(kinds)
		if !slices.Equal(kinds, c.want) {
			t.Errorf("filter %+v: %v, want %v", c.f, kinds, c.want)
		}
	}

	// The workbook's Summary totals the stake by kind; each kind's sheet
	// shows the stake beside the gross amount.
	var buf bytes.Buffer
	w.must(w.svc.WriteXLSX(w.ctx, sum.ID, &buf))
	f, err := excelize.OpenReader(&buf)
	w.must(err)
	defer f.Close()
	rows, err := f.GetRows("Summary", excelize.Options{RawCellValue: true})
	w.must(err)
	var summary string
	for _, r := range rows {
		if len(r) == 9 && r[0] == PayoutMismatch {
			summary = r[8]
		}
		if len(r) > 1 && r[0] == "At stake, unmatched" && r[1] != "12.36" {
			t.Errorf("summary's unmatched %q, want 12.36", r[1])
		}
	}
	if summary != "5" {
		t.Fatalf("summary's stake of the payout mismatch %q, want 5", summary)
	}
	sheet, err := f.GetRows(PayoutMismatch, excelize.Options{RawCellValue: true})
	w.must(err)
	var got3 []float64
	for _, c := range sheet[1][14:17] {
		v, err := strconv.ParseFloat(c, 64)
		w.must(err)
		got3 = append(got3, v)
	}
	if want := []float64{5, rupees(net), -5}; !slices.Equal(sheet[0][14:17], []string{"At stake (₹)", "Amount (₹)", "Difference (₹)"}) ||
		!slices.Equal(got3, want) {
		t.Fatalf("payout sheet: %q %v, want %v", sheet[0][14:17], got3, want)
	}

	// Overdue, then written off: ₹5, not the payout.
	now := time.Now().Add(100 * time.Hour)
	w.svc.cfg.Now = func() time.Time { return now }
	if o, ok, err := w.svc.Overdue(w.ctx); err != nil || !ok || o.Paise != stake {
		t.Fatalf("overdue %+v %v %v, want %d at stake", o, ok, err, stake)
	}
	short := byKind[PayoutMismatch]
	w.must(w.svc.ProposeWriteOff(w.ctx, short.ID, "finance1", "five rupees, not worth chasing"))
	w.must(w.svc.ApproveWriteOff(w.ctx, short.ID, "finance2", "agreed"))
	w.run(gw)
	got, err := w.svc.Exception(w.ctx, short.ID)
	w.must(err)
	if got.State != StateWrittenOff || got.WrittenOffPaise == nil || *got.WrittenOffPaise != 500 {
		t.Fatalf("written off: %s %v", got.State, got.WrittenOffPaise)
	}
	hist, err := w.svc.History(w.ctx, short.ID)
	w.must(err)
	last := hist[len(hist)-1]
	if last.Action != "WRITTEN_OFF:WRITTEN_OFF" || !strings.Contains(last.Note, "writes off ₹5.00 of ₹") {
		t.Fatalf("history's write-off %+v", last)
	}
	if n := w.count(`SELECT count(*) FROM audit_log WHERE subject = $1 AND detail->>'note' LIKE '%writes off ₹5.00 of%'`,
		"recon_exception:"+short.ID.String()); n != 2 {
		t.Fatalf("%d audit records say what the write-off wrote off, want the proposal and the approval", n)
	}
	if n, paise, err := w.svc.CountExceptions(w.ctx, Filter{State: "UNRESOLVED"}); err != nil || n != 3 || paise != stake-500 {
		t.Fatalf("after the write-off: %d unresolved for %d paise (%v)", n, paise, err)
	}
}
