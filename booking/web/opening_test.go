package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"tatkal/booking"
	"tatkal/booking/auth"
	"tatkal/booking/lab/seed"
	"tatkal/booking/lab/teststack"
	"tatkal/booking/payment"
)

var holdButton = regexp.MustCompile(`<button[^>]*data-testid="hold"[^>]*>`)

// Without JavaScript (or with site.js failed to load on a weak link) Hold
// is there to press before the opening; the server refuses an early hold
// in words and holds nothing.
func TestEarlyHoldWithoutJavaScript(t *testing.T) {
	t.Parallel()
	s := teststack.New(t, teststack.Options{})
	ctx := context.Background()
	open := -time.Hour
	_, err := seed.Demo(ctx, s.Pool, seed.DemoOptions{OpensIn: &open})
	teststack.Must(t, err, "seed demo")
	date := time.Now().In(booking.IST).AddDate(0, 0, 5)
	date = time.Date(date.Year(), date.Month(), date.Day(), 0, 0, 0, 0, booking.IST)
	id, err := seed.Shard(ctx, s.Pool, seed.ShardSpec{Train: "12951", Date: date, Class: "3A", Berths: 4, OpensAt: time.Now().Add(time.Hour)})
	teststack.Must(t, err, "seed shard")
	_, err = s.Service.Rebuild(ctx, id)
	teststack.Must(t, err, "load shard")
	users := s.Users(t, "nojs", 1)
	pax, err := s.Service.SavePassenger(ctx, users[0], booking.Passenger{Name: "Meera Pillai", Age: 41, Gender: "F", IDType: "PAN", IDRef: "ABCDE1234F"})
	teststack.Must(t, err, "save passenger")
	b := newBrowser(t, s)
	b.signIn("nojs00001", "pw-nojs")
	window := "/book?train=12951&date=" + date.Format("2006-01-02") + "&class=3A&from=MMCT&to=NDLS"
	status, _, page := b.get(window)
	button := holdButton.FindString(page)
	if status != 200 || button == "" || strings.Contains(button, "disabled") {
		t.Fatalf("before the opening, without JavaScript, Hold is %q (page %d)", button, status)
	}
	status, _, page = b.post(window, "/book", url.Values{"train": {"12951"}, "date": {date.Format("2006-01-02")}, "class": {"3A"},
		"from": {"MMCT"}, "to": {"NDLS"}, "key": {"web-early-1"}, "pax": {fmt.Sprint(pax.ID)}})
	if status != http.StatusConflict || !strings.Contains(page, "opens at") || !strings.Contains(page, `data-testid="error"`) {
		t.Fatalf("an early hold: %d, want 409 saying when it opens:\n%.3000s", status, page)
	}
	var n int
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT count(*) FROM holds`).Scan(&n), "count holds")
	if n != 0 {
		t.Fatalf("an early hold left %d holds", n)
	}
}

// The window page says how many of the day's Tatkal tickets are left,
// counted as the hold's own rule counts them (a cancelled booking too),
// and once none are left Hold is off with the reason, exactly when the
// server starts refusing.
func TestTatkalLeftToday(t *testing.T) {
	t.Parallel()
	s := teststack.New(t, teststack.Options{})
	_, date := s.DemoShard(t, 8, 0)
	ctx := context.Background()
	hash, err := auth.HashPassword("pw-left", auth.Argon2Params{MemoryKiB: 64, Time: 1, Threads: 1})
	teststack.Must(t, err, "hash")
	ids, err := seed.Users(ctx, s.Pool, seed.UsersSpec{Count: 1, Prefix: "left", PasswordHash: hash, WalletRupees: 20000})
	teststack.Must(t, err, "seed users")
	user := ids[0]
	b := newBrowser(t, s)
	b.signIn("left00001", "pw-left")
	window := "/book?train=12951&date=" + date.Format("2006-01-02") + "&class=3A&from=MMCT&to=NDLS"
	left := func() (string, string) {
		t.Helper()
		_, _, page := b.get(window)
		m := regexp.MustCompile(`data-testid="tatkal-left">([^<]*)<`).FindStringSubmatch(page)
		if m == nil {
			t.Fatalf("the window page does not say what is left today:\n%.3000s", page)
		}
		return m[1], holdButton.FindString(page)
	}
	book := func(i int) (booking.HoldResult, error) {
		h, err := s.Service.Hold(ctx, teststack.Caller(user), booking.HoldRequest{UserID: user, IdempotencyKey: fmt.Sprintf("left-hold-%d", i), Train: "12951",
			Date: date, Class: "3A", From: "MMCT", To: "NDLS", Passengers: []booking.Passenger{{Name: "Meera Pillai", Age: 41, Gender: "F",
				IDType: "PAN", IDRef: "ABCDE1234F"}}})
		if err != nil {
			return h, err
		}
		v, err := s.Payments.Initiate(ctx, teststack.Caller(user), payment.InitiateRequest{HoldID: h.HoldID, Method: payment.Wallet, IdempotencyKey: fmt.Sprintf("left-pay-%d", i)})
		if err != nil || v.State != payment.Success {
			t.Fatalf("wallet pay %d: %+v %v", i, v, err)
		}
		return h, nil
	}
	if got, btn := left(); got != "Tatkal tickets left today: 2 of 2" || strings.Contains(btn, "disabled") {
		t.Fatalf("before any booking: %q, %s", got, btn)
	}
	first, err := book(1)
	teststack.Must(t, err, "first booking")
	if got, _ := left(); got != "Tatkal tickets left today: 1 of 2" {
		t.Fatalf("after one booking: %q", got)
	}
	_, err = book(2)
	teststack.Must(t, err, "second booking")
	// Cancelling a confirmed ticket gives no ticket back (the rule counts it).
	s.Recorded(t, first.HoldID) // the core has it: cancellable
	_, err = s.Service.CancelBooking(ctx, user, first.HoldID, nil)
	teststack.Must(t, err, "cancel the first booking")
	got, btn := left()
	if !strings.Contains(got, "cancelled tickets count too") || !strings.Contains(btn, "disabled") || !strings.Contains(btn, `aria-describedby="hold-note"`) {
		t.Fatalf("after two bookings, one cancelled: %q, Hold %s; want none left, Hold off with the reason", got, btn)
	}
	if _, err := book(3); booking.ErrorReason(err) != "DAILY_CAP" {
		t.Fatalf("a third hold: %v, want DAILY_CAP (the page said none left)", err)
	}
}

// A sold-out journey shows no Hold button but the journeys still open
// between the same stations that day; the search results show no Book
// button for it either.
func TestSoldOutOffersAlternatives(t *testing.T) {
	t.Parallel()
	s := teststack.New(t, teststack.Options{})
	_, date := s.DemoShard(t, 1, 0) // 3A: one berth, no waitlist
	ctx := context.Background()
	alt, err := seed.Shard(ctx, s.Pool, seed.ShardSpec{Train: "12951", Date: date, Class: "2A", Berths: 4, OpensAt: time.Now().Add(-time.Minute)})
	teststack.Must(t, err, "seed 2A")
	_, err = s.Service.Rebuild(ctx, alt)
	teststack.Must(t, err, "load 2A")
	users := s.Users(t, "sold", 2)
	h, err := s.Service.Hold(ctx, teststack.Caller(users[0]), booking.HoldRequest{UserID: users[0], IdempotencyKey: "sold-hold-1", Train: "12951",
		Date: date, Class: "3A", From: "MMCT", To: "NDLS", Passengers: []booking.Passenger{{Name: "Meera Pillai", Age: 41, Gender: "F",
			IDType: "PAN", IDRef: "ABCDE1234F"}}})
	if err != nil || h.Status != "HELD" {
		t.Fatalf("hold the last berth: %+v %v", h, err)
	}
	time.Sleep(1100 * time.Millisecond) // past the availability cache's second
	b := newBrowser(t, s)
	b.signIn("sold00002", "pw-sold")
	_, _, page := b.get("/book?train=12951&date=" + date.Format("2006-01-02") + "&class=3A&from=MMCT&to=NDLS")
	if !strings.Contains(page, `data-testid="soldout"`) || holdButton.MatchString(page) || !strings.Contains(page, `data-testid="alt-12951-2A"`) {
		t.Fatalf("the sold-out window page: want no Hold, the open 2A offered:\n%.4000s", page)
	}
	_, _, page = b.get("/search?from=MMCT&to=NDLS&date=" + date.Format("2006-01-02"))
	row := regexp.MustCompile(`(?s)data-testid="result-12951-3A".*?</li>`).FindString(page)
	if row == "" || strings.Contains(row, `data-testid="book"`) || !strings.Contains(row, `data-testid="soldout-note"`) {
		t.Fatalf("the sold-out result: want no Book button:\n%s", row)
	}
}
