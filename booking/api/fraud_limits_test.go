package api_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"tatkal/booking"
	"tatkal/booking/fraud"
	"tatkal/booking/lab/testenv"
	"tatkal/booking/lab/teststack"
)

func paxBody(date time.Time, name string, age int, idRef string) string {
	id := ""
	if idRef != "" {
		id = fmt.Sprintf(`,"id_type":"PAN","id_ref":%q`, idRef)
	}
	return fmt.Sprintf(`{"train_no":"12951","journey_date":"%s","class":"3A","quota":"TQ","from":"MMCT","to":"NDLS","passengers":[{"name":%q,"age":%d,"gender":"M"%s}]}`,
		date.Format(time.DateOnly), name, age, id)
}

// highDemand asserts the uniform refusal: the answer of every suspected
// abuse, naming no signal.
func highDemand(t *testing.T, r reply, what string) {
	t.Helper()
	if r.status != 503 || r.body["reason"] != "HIGH_DEMAND" || r.body["detail"] != booking.ErrorMessage(booking.HighDemand()) {
		t.Fatalf("%s: %d %s, want the uniform high-demand refusal", what, r.status, r.raw)
	}
	for _, leak := range []string{"passenger", "account", "fraud", "limit"} {
		if strings.Contains(strings.ToLower(r.raw), leak) {
			t.Errorf("%s: the refusal names %q: %s", what, leak, r.raw)
		}
	}
}

// TestPassengerAcrossAccountsLimit: one passenger (by ID number, or by
// name and age when the ID changes) on the holds of at most two accounts a
// day; the third account is refused with the uniform answer and nothing is
// written; a released hold stops counting.
func TestPassengerAcrossAccountsLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := teststack.New(t, teststack.Options{PassengerLimit: true})
	shardID, date := s.DemoShard(t, 40, 0)
	u := s.Users(t, "pl", 5)
	held := map[int]string{}
	for i := range 2 {
		r := newClient(s, u[i]).hold(t, fmt.Sprintf("pl-hold-%04d", i), paxBody(date, "Ramesh Kumar", 41, "ABCDE1234F"))
		if r.status != 201 {
			t.Fatalf("account %d: %d %s", i, r.status, r.raw)
		}
		held[i] = r.body["hold_id"].(string)
	}
	before := stateOf(t, s, shardID)
	// Same ID number, another spelling of the name.
	highDemand(t, newClient(s, u[2]).hold(t, "pl-hold-0002", paxBody(date, "  RAMESH   kumar ", 41, "ABCDE1234F")), "third account, same ID")
	// Another ID, same name and age.
	highDemand(t, newClient(s, u[3]).hold(t, "pl-hold-0003", paxBody(date, "Ramesh Kumar", 41, "PQRST9876Z")), "fourth account, same name and age")
	if after := stateOf(t, s, shardID); after != before {
		t.Errorf("refused holds changed seats:\n%s\n%s", before, after)
	}
	var n int
	if err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM holds WHERE user_id = ANY($1)`, u[2:4]).Scan(&n); err != nil || n != 0 {
		t.Errorf("refused accounts have %d holds (err %v)", n, err)
	}
	// Another passenger is no business of the limit.
	if r := newClient(s, u[2]).hold(t, "pl-hold-0004", paxBody(date, "Suresh Kumar", 41, "SURES1111K")); r.status != 201 {
		t.Fatalf("another passenger: %d %s", r.status, r.raw)
	}
	// A cancelled hold no longer counts: the fifth account may now.
	if r := newClient(s, u[0]).do(t, "POST", "/v1/bookings/"+held[0]+"/cancel", nil, ""); r.status != 200 {
		t.Fatalf("cancel: %d %s", r.status, r.raw)
	}
	if r := newClient(s, u[4]).hold(t, "pl-hold-0005", paxBody(date, "Ramesh Kumar", 41, "ABCDE1234F")); r.status != 201 {
		t.Fatalf("after a release: %d %s", r.status, r.raw)
	}
	// The signals were queued with the holds, passengers keyed-hashed,
	// and are recorded by the drain.
	if _, err := fraud.Drain(ctx, s.Pool); err != nil {
		t.Fatal(err)
	}
	var sigs, pax int
	if err := s.Pool.QueryRow(ctx, `SELECT count(*), (SELECT count(*) FROM fraud_signal_passengers) FROM fraud_signals`).Scan(&sigs, &pax); err != nil {
		t.Fatal(err)
	}
	if sigs != 4 || pax != 4 {
		t.Errorf("fraud signals: %d holds, %d passengers; want 4 and 4", sigs, pax)
	}
	// The refused attempts are recorded too, for clustering (a third
	// account reaching for a passenger is a ring's evidence), not as holds'
	// signals, and the ID number only keyed-hashed.
	rows, err := s.Pool.Query(ctx, `SELECT user_id, name_norms[1], id_hashes[1] <> '' AND id_hashes[1] !~* 'ABCDE|PQRST', device_id,
		coalesce(host(ip), '') FROM fraud_refused_attempts ORDER BY attempted_at`)
	if err != nil {
		t.Fatal(err)
	}
	var tried []string
	for rows.Next() {
		var uid int64
		var name, dev, ip string
		var hashed bool
		if err := rows.Scan(&uid, &name, &hashed, &dev, &ip); err != nil {
			t.Fatal(err)
		}
		tried = append(tried, fmt.Sprintf("%d %s %v %s", uid, name, hashed, ip))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if want := []string{fmt.Sprintf("%d ramesh kumar true 127.0.0.1", u[2]), fmt.Sprintf("%d ramesh kumar true 127.0.0.1", u[3])}; strings.Join(tried, "; ") != strings.Join(want, "; ") {
		t.Errorf("refused attempts recorded %q, want %q", tried, want)
	}
	var raw int
	if err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM fraud_signal_passengers WHERE id_hash LIKE '%ABCDE%' OR name_norm = ''`).Scan(&raw); err != nil || raw != 0 {
		t.Errorf("%d passenger rows keep the raw ID (err %v)", raw, err)
	}
	var ip, dev string
	if err := s.Pool.QueryRow(ctx, `SELECT coalesce(host(ip), ''), device_id FROM fraud_signals WHERE hold_id = $1`, uuid.MustParse(held[1])).Scan(&ip, &dev); err != nil || ip != "127.0.0.1" {
		t.Errorf("signal of hold %s: ip %q device %q (err %v), want the client's address", held[1], ip, dev, err)
	}
}

// TestMonthlyCap: an account's month's cap (24 verified, here 2) refuses
// the next ticket as the cap it is, changing nothing.
func TestMonthlyCap(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rules := booking.DefaultRules()
	rules.DailyCap, rules.MonthlyCap, rules.MonthlyCapVerified = 3, 1, 2
	s := teststack.New(t, teststack.Options{Rules: &rules})
	shardID, date := s.DemoShard(t, 40, 0)
	u := s.Users(t, "mc", 1)
	for i := range 2 {
		r := newClient(s, u[0]).hold(t, fmt.Sprintf("mc-month-%04d", i), holdBody(date, "MMCT", "NDLS", 1))
		if r.status != 201 {
			t.Fatalf("month hold %d: %d %s", i, r.status, r.raw)
		}
		if _, err := s.Service.Confirm(ctx, uuid.MustParse(r.body["hold_id"].(string))); err != nil {
			t.Fatal(err)
		}
	}
	before := stateOf(t, s, shardID)
	r := newClient(s, u[0]).hold(t, "mc-month-0002", holdBody(date, "MMCT", "NDLS", 1))
	if r.status != 429 || r.body["reason"] != "MONTHLY_CAP" {
		t.Fatalf("third ticket of the month: %d %s, want MONTHLY_CAP", r.status, r.raw)
	}
	if after := stateOf(t, s, shardID); after != before {
		t.Errorf("refused hold changed seats:\n%s\n%s", before, after)
	}
}

// TestPersonDailyCap: the day's cap counts a person's verified accounts
// together (one verified phone), and the refusal is exactly an account's
// own daily-cap refusal.
func TestPersonDailyCap(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := teststack.New(t, teststack.Options{})
	shardID, date := s.DemoShard(t, 40, 0)
	u := s.Users(t, "pc", 3)
	if _, err := s.Pool.Exec(ctx, `UPDATE users SET phone_hash = 'person-1' WHERE id = ANY($1)`, u[1:]); err != nil {
		t.Fatal(err)
	}
	// u[0] alone and u[1] for the person: two tickets each.
	for _, who := range u[:2] {
		for i := range 2 {
			r := newClient(s, who).hold(t, fmt.Sprintf("pc-%d-%04d", who, i), holdBody(date, "MMCT", "NDLS", 1))
			if r.status != 201 {
				t.Fatalf("hold %d of %d: %d %s", i, who, r.status, r.raw)
			}
			if _, err := s.Service.Confirm(ctx, uuid.MustParse(r.body["hold_id"].(string))); err != nil {
				t.Fatal(err)
			}
		}
	}
	before := stateOf(t, s, shardID)
	own := newClient(s, u[0]).hold(t, "pc-own-0003", holdBody(date, "MMCT", "NDLS", 1))
	person := newClient(s, u[2]).hold(t, "pc-person-0003", holdBody(date, "MMCT", "NDLS", 1))
	if person.status != 429 || person.body["reason"] != "DAILY_CAP" {
		t.Fatalf("third account of one person: %d %s, want DAILY_CAP", person.status, person.raw)
	}
	if own.status != person.status || own.raw != person.raw {
		t.Errorf("a person's cap answers %s; an account's own cap %s: they must be the same", person.raw, own.raw)
	}
	if after := stateOf(t, s, shardID); after != before {
		t.Errorf("refused holds changed seats:\n%s\n%s", before, after)
	}
	var n int
	if err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM holds WHERE user_id = $1`, u[2]).Scan(&n); err != nil || n != 0 {
		t.Errorf("refused account has %d holds (err %v)", n, err)
	}
}

// TestPersonCapAfterPhoneVerification: the per-person cap applies to
// accounts whose identity was verified through the API with one phone
// (spelled two ways): the second account of that person is refused the
// ticket past the person's daily cap with the very answer an account's own
// cap gives, and nothing changes; an account verified with another phone is
// no business of the cap.
func TestPersonCapAfterPhoneVerification(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := teststack.New(t, teststack.Options{})
	shardID, date := s.DemoShard(t, 40, 0)
	u := s.Users(t, "pv", 4)
	verify := func(uid int64, phone string) {
		t.Helper()
		c := newClient(s, uid)
		if r := c.do(t, "POST", "/v1/auth/otp/request", nil, fmt.Sprintf(`{"phone":%q}`, phone)); r.status != 200 {
			t.Fatalf("otp request %d: %d %s", uid, r.status, r.raw)
		}
		var body string
		if err := s.Pool.QueryRow(ctx, `SELECT body FROM notifications WHERE user_id = $1 AND kind = 'OTP' AND address IS NOT NULL
			ORDER BY id DESC LIMIT 1`, uid).Scan(&body); err != nil {
			t.Fatal(err)
		}
		code := body[strings.Index(body, "is ")+3:][:6]
		if r := c.do(t, "POST", "/v1/auth/otp/verify", nil, fmt.Sprintf(`{"code":%q}`, code)); r.status != 200 {
			t.Fatalf("otp verify %d: %d %s", uid, r.status, r.raw)
		}
	}
	if r := newClient(s, u[1]).do(t, "POST", "/v1/auth/otp/request", nil, `{"phone":"555"}`); r.status != 400 || r.body["reason"] != "BAD_PHONE" {
		t.Fatalf("bad phone: %d %s", r.status, r.raw)
	}
	verify(u[1], "+91 98765 43210")
	verify(u[2], "098765-43210")
	verify(u[3], "9123456789")
	var same int
	if err := s.Pool.QueryRow(ctx, `SELECT count(DISTINCT phone_hash) FROM users WHERE id = ANY($1)`, u[1:3]).Scan(&same); err != nil || same != 1 {
		t.Fatalf("one phone gave %d identities (err %v)", same, err)
	}
	// u[0] alone and u[1] for the person: two tickets each (the cap is 2 here).
	for _, who := range u[:2] {
		for i := range 2 {
			r := newClient(s, who).hold(t, fmt.Sprintf("pv-%d-%04d", who, i), holdBody(date, "MMCT", "NDLS", 1))
			if r.status != 201 {
				t.Fatalf("hold %d of %d: %d %s", i, who, r.status, r.raw)
			}
			if _, err := s.Service.Confirm(ctx, uuid.MustParse(r.body["hold_id"].(string))); err != nil {
				t.Fatal(err)
			}
		}
	}
	before := stateOf(t, s, shardID)
	own := newClient(s, u[0]).hold(t, "pv-own-0003", holdBody(date, "MMCT", "NDLS", 1))
	person := newClient(s, u[2]).hold(t, "pv-person-0003", holdBody(date, "MMCT", "NDLS", 1))
	if person.status != 429 || person.body["reason"] != "DAILY_CAP" {
		t.Fatalf("second account of one phone: %d %s, want DAILY_CAP", person.status, person.raw)
	}
	if own.status != person.status || own.raw != person.raw {
		t.Errorf("a person's cap answers %s; an account's own cap %s: they must be the same", person.raw, own.raw)
	}
	if after := stateOf(t, s, shardID); after != before {
		t.Errorf("refused holds changed seats:\n%s\n%s", before, after)
	}
	if r := newClient(s, u[3]).hold(t, "pv-other-0001", holdBody(date, "MMCT", "NDLS", 1)); r.status != 201 {
		t.Errorf("another phone's account: %d %s", r.status, r.raw)
	}
}

// TestLimitsAcrossProcesses: the passenger limit and the person's daily
// cap hold between two app processes on one database, each with its own
// group commit. The first process's transaction (the second account's
// hold) is paused before its COMMIT; the third account's hold through the
// other process must wait for it, on the passenger's (or the phone's)
// lock, and then be refused, instead of reading around the uncommitted
// hold and letting the passenger onto a third account.
func TestLimitsAcrossProcesses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		limit  bool // the passenger limit; off, the person's cap alone decides
		body   func(date time.Time, i int) string
		phone  bool // the three accounts are one verified person
		refuse func(t *testing.T, r reply)
	}{
		{name: "passenger", limit: true,
			body:   func(date time.Time, i int) string { return paxBody(date, "Ramesh Kumar", 41, "ABCDE1234F") },
			refuse: func(t *testing.T, r reply) { highDemand(t, r, "third account through the other process") }},
		{name: "person", phone: true,
			body: func(date time.Time, i int) string {
				return paxBody(date, fmt.Sprintf("Traveller %c", 'A'+i), 30+i, fmt.Sprintf("TRAV%c%04dK", 'A'+i, 1000+i))
			},
			refuse: func(t *testing.T, r reply) {
				if r.status != 429 || r.body["reason"] != "DAILY_CAP" {
					t.Errorf("third account of one person through the other process: %d %s, want DAILY_CAP", r.status, r.raw)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			var armed atomic.Bool
			paused, release := make(chan struct{}), make(chan struct{})
			pause := func(ctx context.Context, point string) {
				if point == "commit.before-commit" && armed.CompareAndSwap(true, false) {
					close(paused)
					<-release
				}
			}
			env := testenv.New(t)
			a := teststack.Start(t, env, teststack.Options{Pause: pause, PassengerLimit: tc.limit})
			b := teststack.Start(t, env, teststack.Options{SimulatorsOf: a, PassengerLimit: tc.limit})
			// Registered after the stacks', so it runs before theirs: a test
			// that fails while the transaction is paused must not leave the
			// stack's shutdown waiting for it.
			var releaseOnce sync.Once
			free := func() { releaseOnce.Do(func() { close(release) }) }
			t.Cleanup(free)
			_, date := a.DemoShard(t, 40, 0)
			u := a.Users(t, "xp"+tc.name, 3)
			if tc.phone {
				if _, err := a.Pool.Exec(ctx, `UPDATE users SET phone_hash = 'person-xp', id_verification_status = 'VERIFIED' WHERE id = ANY($1)`, u); err != nil {
					t.Fatal(err)
				}
			}
			if r := newClient(a, u[0]).hold(t, "xp-hold-0000", tc.body(date, 0)); r.status != 201 {
				t.Fatalf("first account: %d %s", r.status, r.raw)
			}
			armed.Store(true)
			second, third := make(chan reply, 1), make(chan reply, 1)
			go func() { second <- newClient(a, u[1]).hold(t, "xp-hold-0001", tc.body(date, 1)) }()
			select {
			case <-paused:
			case <-time.After(30 * time.Second):
				t.Fatal("the second account's hold never reached its COMMIT")
			}
			go func() { third <- newClient(b, u[2]).hold(t, "xp-hold-0002", tc.body(date, 2)) }()
			var early *reply
			for deadline := time.Now().Add(30 * time.Second); early == nil; {
				var waiting bool
				if err := a.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE datname = current_database()
					AND wait_event_type = 'Lock' AND wait_event = 'advisory')`).Scan(&waiting); err != nil {
					t.Fatal(err)
				}
				if waiting {
					break
				}
				select {
				case r := <-third:
					early = &r // answered around the paused transaction: the bug
				case <-time.After(20 * time.Millisecond):
				}
				if time.Now().After(deadline) {
					t.Fatal("the third account's hold neither waited nor answered")
				}
			}
			free()
			if r := <-second; r.status != 201 {
				t.Fatalf("second account: %d %s", r.status, r.raw)
			}
			r := early
			if r == nil {
				got := <-third
				r = &got
			} else {
				t.Errorf("the third account was answered (%d) while the second's hold was uncommitted", r.status)
			}
			tc.refuse(t, *r)
			var n int
			if err := a.Pool.QueryRow(ctx, `SELECT count(DISTINCT user_id) FROM holds WHERE state IN ('HELD', 'CONFIRMED')`).Scan(&n); err != nil || n != 2 {
				t.Errorf("%d accounts hold (err %v), want 2", n, err)
			}
		})
	}
}
