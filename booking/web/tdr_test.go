package web_test

import (
	"context"
	"fmt"
	"html"
	"net/url"
	"strings"
	"testing"
	"time"

	"tatkal/booking"
	"tatkal/booking/auth"
	"tatkal/booking/i18n"
	"tatkal/booking/lab/seed"
	"tatkal/booking/lab/teststack"
	"tatkal/booking/payment"
	"tatkal/booking/tdr"
)

// The warnings of issue 39, item 15, on the pages, in English and Hindi:
// before paying for a waitlist place (charting, clerkage) and not for a
// seat; the late-success rule beside every pay button and on the rules
// page; before a new hold for a journey whose earlier payment the bank
// has not settled. And a confirmed ticket's TDR: offered, refused when too
// early with the rule's words, then its state as finance decides it.
func TestWarningsAndTDRPages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := teststack.New(t, teststack.Options{Routes: teststack.QuietRoutes()})
	_, date := s.DemoShard(t, 1, 5)
	hash, err := auth.HashPassword("pw-warnings", auth.Argon2Params{MemoryKiB: 64, Time: 1, Threads: 1})
	teststack.Must(t, err, "hash")
	ids, err := seed.Users(ctx, s.Pool, seed.UsersSpec{Count: 3, Prefix: "wrn", PasswordHash: hash, WalletRupees: 20000})
	teststack.Must(t, err, "seed users")
	var logins [3]string
	for i, id := range ids {
		teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT login FROM users WHERE id = $1`, id).Scan(&logins[i]), "login")
	}
	hold := func(i int) booking.HoldResult {
		h, err := s.Service.Hold(ctx, teststack.Caller(ids[i]), booking.HoldRequest{UserID: ids[i], IdempotencyKey: fmt.Sprintf("wrn-hold-%d", i),
			Train: "12951", Date: date, Class: "3A", Quota: "TQ", From: "MMCT", To: "NDLS", Passengers: []booking.Passenger{{Name: fmt.Sprintf("Warn Person %c", 'A'+i),
				Age: 40, Gender: "F", IDType: "PAN", IDRef: fmt.Sprintf("WARNP%04dL", i)}}})
		teststack.Must(t, err, "hold")
		return h
	}
	// as the page writes them, HTML-escaped
	en := func(key string) string { return html.EscapeString(i18n.Text("en", key)) }
	hi := func(key string) string { return html.EscapeString(i18n.Text("hi", key)) }

	seat, wl := hold(0), hold(1)
	if seat.Status != "HELD" || wl.Status != "WAITLIST_OFFERED" {
		t.Fatalf("holds %s %s", seat.Status, wl.Status)
	}
	b0, b1 := newBrowser(t, s), newBrowser(t, s)
	b0.signIn(logins[0], "pw-warnings")
	b1.signIn(logins[1], "pw-warnings")
	_, _, page := b0.get("/bookings/" + seat.HoldID.String())
	if strings.Contains(page, `data-testid="warn-waitlist"`) || !strings.Contains(page, `data-testid="late-success"`) {
		t.Fatalf("a seat's pay form: waitlist warning shown, or no late-success rule:\n%.3000s", page)
	}
	_, _, page = b1.get("/bookings/" + wl.HoldID.String())
	if !strings.Contains(page, `data-testid="warn-waitlist"`) || !strings.Contains(page, en("warn.waitlist")[:60]) ||
		!strings.Contains(page, `data-testid="late-success"`) {
		t.Fatalf("a waitlist place's pay form has no warning:\n%.3000s", page)
	}
	b1.post("/bookings/"+wl.HoldID.String(), "/lang", url.Values{"lang": {"hi"}, "back": {"/bookings/" + wl.HoldID.String()}})
	_, _, page = b1.get("/bookings/" + wl.HoldID.String())
	if !strings.Contains(page, hi("warn.waitlist")) || !strings.Contains(page, hi("rule.latesuccess")) || strings.Contains(page, en("warn.waitlist")) {
		t.Fatalf("the Hindi page's warnings are not in Hindi:\n%.3000s", page)
	}

	// An earlier UPI payment still with the bank: the journey's page warns
	// before a new hold, with its deadline.
	third := hold(2)
	if third.Status != "WAITLIST_OFFERED" {
		t.Fatalf("third hold %s", third.Status)
	}
	v, err := s.Payments.Initiate(ctx, teststack.Caller(ids[2]), payment.InitiateRequest{HoldID: third.HoldID, Method: payment.UPI, VPA: "warn@okbank",
		IdempotencyKey: "wrn-pay-2"})
	if err != nil || v.State == payment.Success || v.State == payment.Failed {
		t.Fatalf("UPI payment: %+v %v; want it unresolved", v, err)
	}
	b2 := newBrowser(t, s)
	b2.signIn(logins[2], "pw-warnings")
	journey := "/book?" + url.Values{"train": {"12951"}, "date": {date.Format(time.DateOnly)}, "class": {"3A"}, "from": {"MMCT"}, "to": {"NDLS"}}.Encode()
	_, _, page = b2.get(journey)
	by := v.Deadline.In(booking.IST).Format("15:04")
	if !strings.Contains(page, `data-testid="warn-unresolved"`) || !strings.Contains(page, by) {
		t.Fatalf("no warning of the unresolved payment (deadline %s):\n%.4000s", by, page)
	}
	if _, _, page = b0.get(journey); strings.Contains(page, `data-testid="warn-unresolved"`) {
		t.Fatal("a passenger with no unresolved payment is warned")
	}

	// Rules, for everyone.
	_, _, page = newBrowser(t, s).get("/rules")
	if !strings.Contains(page, `data-testid="rules-late"`) || !strings.Contains(page, en("rule.latesuccess")) || !strings.Contains(page, `data-testid="rules-tdr"`) {
		t.Fatalf("rules page:\n%.3000s", page)
	}

	// TDR: the confirmed ticket offers it; five days early it is refused
	// with the rule; filed (at the train's time), the page shows its state.
	_, err = s.Payments.Initiate(ctx, teststack.Caller(ids[0]), payment.InitiateRequest{HoldID: seat.HoldID, Method: payment.Wallet, IdempotencyKey: "wrn-pay-0"})
	teststack.Must(t, err, "wallet pay")
	_, _, page = b0.get("/bookings/" + seat.HoldID.String())
	if !strings.Contains(page, `data-testid="tdr-link"`) {
		t.Fatalf("a confirmed ticket offers no TDR:\n%.3000s", page)
	}
	tdrPath := "/bookings/" + seat.HoldID.String() + "/tdr"
	status, _, page := b0.post(tdrPath, tdrPath, url.Values{"reason": {"TRAIN_LATE"}, "late_minutes": {"200"}})
	if status != 400 || !strings.Contains(page, "A TDR is taken from") || !strings.Contains(page, `data-testid="tdr-form"`) {
		t.Fatalf("an early TDR: %d\n%.3000s", status, page)
	}
	var departs time.Time
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT ($1::date + departs_at) AT TIME ZONE 'Asia/Kolkata' FROM trains WHERE number = '12951'`,
		date.Format(time.DateOnly)).Scan(&departs), "departure")
	svc := &tdr.Service{Pool: s.Pool, Refunds: payment.NewRefunds(s.River), Now: func() time.Time { return departs.Add(time.Hour) }}
	filed, err := svc.File(ctx, ids[0], seat.HoldID, tdr.Claim{Reason: tdr.TrainLate, LateMinutes: 240})
	teststack.Must(t, err, "file")
	_, _, page = b0.get(tdrPath)
	if !strings.Contains(page, `data-state="FILED"`) || !strings.Contains(page, en("tdr.state.FILED")) {
		t.Fatalf("filed TDR page:\n%.3000s", page)
	}
	teststack.Must(t, svc.Refuse(ctx, filed.ID, "finance1", "It left MMCT on time."), "refuse")
	_, _, page = b0.get(tdrPath)
	if !strings.Contains(page, `data-state="REFUSED"`) || !strings.Contains(page, "It left MMCT on time.") {
		t.Fatalf("refused TDR page:\n%.3000s", page)
	}
}
