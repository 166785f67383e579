package api_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"tatkal/booking"
	"tatkal/booking/auth"
	"tatkal/booking/lab/seed"
	"tatkal/booking/lab/testenv"
	"tatkal/booking/lab/teststack"
)

// client is a passenger's HTTP client against the test server.
type client struct {
	base   string
	token  string
	device string // the account's device binding, sent as X-Device-Token unless a call names its own
	http   *http.Client
}

var sharedTransport = &http.Transport{MaxIdleConns: 4000, MaxIdleConnsPerHost: 4000, IdleConnTimeout: 30 * time.Second}

func newClient(s *teststack.Stack, userID int64) *client {
	return &client{base: s.Server.URL, token: s.Token(userID), device: s.DeviceBinding(userID),
		http: &http.Client{Transport: sharedTransport, Timeout: 60 * time.Second}}
}

type reply struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

func (c *client) do(t testing.TB, method, path string, headers map[string]string, body string) reply {
	t.Helper()
	if _, named := headers["X-Device-Token"]; !named && c.device != "" {
		h := map[string]string{"X-Device-Token": c.device}
		for k, v := range headers {
			h[k] = v
		}
		headers = h
	}
	r, err := testenv.Do(testenv.Request{Method: method, URL: c.base + path, Token: c.token, Header: headers, Body: body, Client: c.http})
	if err != nil {
		t.Error(err)
		return reply{}
	}
	return reply{status: r.Status, header: r.Header, body: r.JSON, raw: string(r.Raw)}
}

func holdBody(date time.Time, from, to string, n int) string {
	var ps []string
	for i := 0; i < n; i++ {
		ps = append(ps, fmt.Sprintf(`{"name":"Passenger %c","age":%d,"gender":"%s","id_type":"PAN","id_ref":"ABCDE1234F"}`,
			'A'+i, 25+i*20, []string{"M", "F"}[i%2]))
	}
	return fmt.Sprintf(`{"train_no":"12951","journey_date":"%s","class":"3A","quota":"TQ","from":"%s","to":"%s","passengers":[%s]}`,
		date.Format(time.DateOnly), from, to, strings.Join(ps, ","))
}

// hold holds with a solved booking challenge, as every hold carries one.
func (c *client) hold(t testing.TB, key, body string) reply {
	return c.do(t, "POST", "/v1/bookings/hold", map[string]string{"Idempotency-Key": key}, teststack.WithChallenge(t, c.base, c.token, key, body, nil))
}

// holdRetrying retries the answers that say "nothing changed, retry".
func (c *client) holdRetrying(t testing.TB, key, body string) (reply, int) {
	retries := 0
	for {
		r := c.hold(t, key, body)
		if r.status != http.StatusServiceUnavailable || retries > 200 {
			return r, retries
		}
		retries++
		time.Sleep(time.Duration(5+rand.IntN(20)) * time.Millisecond)
	}
}

type heldAnswer struct {
	user   int64
	holdID string
	from   int
	to     int
	berths []string
}

// verifyHeldAnswers checks every HELD answer against PostgreSQL: the row
// exists, belongs to the user, is for the journey, with the answered berths.
func verifyHeldAnswers(t *testing.T, s *teststack.Stack, shardID int64, held []heldAnswer) {
	t.Helper()
	ctx := context.Background()
	shard, err := s.Service.Catalog().ByID(ctx, shardID)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range held {
		var user int64
		var from, to int
		var berths []int32
		err := s.Pool.QueryRow(ctx, `SELECT user_id, from_seq, to_seq, berths FROM holds WHERE id = $1`, h.holdID).Scan(&user, &from, &to, &berths)
		if err != nil {
			t.Errorf("HELD answer %s has no row in PostgreSQL: %v", h.holdID, err)
			continue
		}
		if user != h.user || from != h.from || to != h.to || len(berths) != len(h.berths) {
			t.Errorf("hold %s row (user %d %d-%d %d berths) differs from the answer (user %d %d-%d %d berths)",
				h.holdID, user, from, to, len(berths), h.user, h.from, h.to, len(h.berths))
			continue
		}
		for i, b := range berths {
			sb := shard.Berths[b]
			if got := fmt.Sprintf("%s/%d", sb.Coach, sb.No); got != h.berths[i] {
				t.Errorf("hold %s passenger %d: row berth %s, answer %s", h.holdID, i, got, h.berths[i])
			}
		}
	}
}

func berthsOf(r reply) []string {
	var out []string
	list, _ := r.body["berths"].([]any)
	for _, b := range list {
		m := b.(map[string]any)
		out = append(out, fmt.Sprintf("%s/%d", m["coach"], int(m["berth"].(float64))))
	}
	return out
}

// A rush: 600 passengers at once through HTTP on a 64-berth shard, on
// journeys over mixed segments, more than twice the holds in flight the
// server lets in, four times what the shard holds. Nothing is oversold,
// the invariants hold, and every HELD answer has its row in PostgreSQL.
// TATKAL_RUSH_USERS sets the rush's size (2,000 shows the same in four
// times as long).
func TestRushNeverOversells(t *testing.T) { testenv.EachRedis(t, testRushNeverOversells) }

func testRushNeverOversells(t *testing.T, redisURL string) {
	s := teststack.New(t, teststack.Options{MaxHoldsInFlight: 256, RedisURL: redisURL})
	shardID, date := s.DemoShard(t, 64, 0)
	users := 600
	if testing.Short() {
		users = 400
	}
	if n, err := strconv.Atoi(os.Getenv("TATKAL_RUSH_USERS")); err == nil && n > 0 {
		users = n
	}
	ids := s.Users(t, "rush", users)

	var mu sync.Mutex
	var held []heldAnswer
	var soldOut, shedRetries atomic.Int64
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 99))
			a := rng.IntN(7)
			b := a + 1 + rng.IntN(7-a)
			n := 1 + rng.IntN(2)
			c := newClient(s, id)
			<-start
			r, retries := c.holdRetrying(t, fmt.Sprintf("rush-%06d", i), holdBody(date, teststack.Stations12951[a], teststack.Stations12951[b], n))
			shedRetries.Add(int64(retries))
			switch {
			case r.status == http.StatusCreated && r.body["status"] == "HELD":
				mu.Lock()
				held = append(held, heldAnswer{user: id, holdID: r.body["hold_id"].(string), from: a, to: b, berths: berthsOf(r)})
				mu.Unlock()
			case r.status == http.StatusOK && r.body["status"] == "SOLD_OUT":
				soldOut.Add(1)
			default:
				t.Errorf("user %d: unexpected answer %d %s", id, r.status, r.raw)
			}
		}()
	}
	close(start)
	wg.Wait()
	t.Logf("%d users: %d HELD, %d SOLD_OUT, %d retries after 503", users, len(held), soldOut.Load(), shedRetries.Load())
	if len(held) == 0 || soldOut.Load() == 0 {
		t.Fatalf("the rush did not fill the shard: %d held, %d sold out", len(held), soldOut.Load())
	}
	verifyHeldAnswers(t, s, shardID, held)
	rep := s.CheckInvariants(t, shardID)
	for _, l := range rep.Legs {
		if l.RedisHeld > l.Total {
			t.Errorf("leg %d oversold: %d held of %d", l.Leg, l.RedisHeld, l.Total)
		}
	}
	var rows int
	if err := s.Pool.QueryRow(context.Background(), `SELECT count(*) FROM holds WHERE shard_id = $1`, shardID).Scan(&rows); err != nil || rows != len(held) {
		t.Fatalf("%d hold rows for %d HELD answers (%v)", rows, len(held), err)
	}
	// Confirm every hold: the database's own exclusion constraint would
	// refuse any berth sold twice on overlapping legs.
	for _, h := range held {
		if _, err := s.Service.Confirm(context.Background(), mustUUID(t, h.holdID)); err != nil {
			t.Fatalf("confirm %s: %v", h.holdID, err)
		}
	}
	s.CheckInvariants(t, shardID)
}

// One Idempotency-Key replayed concurrently yields one hold and the same
// answer every time.
func TestIdempotencyKeyReplayedConcurrently(t *testing.T) {
	t.Parallel()
	s := teststack.New(t, teststack.Options{})
	shardID, date := s.DemoShard(t, 8, 0)
	ids := s.Users(t, "idem", 1)
	c := newClient(s, ids[0])
	body := holdBody(date, "BVI", "NAD", 2)
	answers := make([]reply, 50)
	var wg sync.WaitGroup
	for i := range answers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i], _ = c.holdRetrying(t, "same-key-0001", body)
		}()
	}
	wg.Wait()
	first := answers[0]
	if first.status != http.StatusCreated || first.body["status"] != "HELD" {
		t.Fatalf("first answer %d %s", first.status, first.raw)
	}
	replayed := 0
	for i, a := range answers {
		if a.status != first.status || a.body["hold_id"] != first.body["hold_id"] || a.body["hold_expires_at"] != first.body["hold_expires_at"] ||
			fmt.Sprint(a.body["berths"]) != fmt.Sprint(first.body["berths"]) || fmt.Sprint(a.body["fare"]) != fmt.Sprint(first.body["fare"]) {
			t.Errorf("answer %d differs:\n%s\n%s", i, a.raw, first.raw)
		}
		if a.header.Get("Idempotent-Replayed") == "true" {
			replayed++
		}
	}
	if replayed != len(answers)-1 {
		t.Errorf("%d answers marked replayed, want %d", replayed, len(answers)-1)
	}
	var n int
	if err := s.Pool.QueryRow(context.Background(), `SELECT count(*) FROM holds`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d holds for one key (%v)", n, err)
	}
	rep := s.CheckInvariants(t, shardID)
	if rep.Legs[1].RedisHeld != 2 {
		t.Fatalf("held on leg BVI-ST: %d, want 2", rep.Legs[1].RedisHeld)
	}
}

// Redis loses everything mid-rush: holds are refused until the shard is
// rebuilt from PostgreSQL, then granted again, and nothing is oversold.
func TestRedisWipedMidRush(t *testing.T) {
	t.Parallel()
	s := teststack.New(t, teststack.Options{MaxHoldsInFlight: 256, Work: true, SweepInterval: time.Second})
	shardID, date := s.DemoShard(t, 64, 0)
	ids := s.Users(t, "wipe", 600)

	var mu sync.Mutex
	var held []heldAnswer
	var refused, heldAfterWipe atomic.Int64
	var wiped atomic.Bool
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			a := rng.IntN(7)
			b := a + 1 + rng.IntN(7-a)
			c := newClient(s, id)
			<-start
			time.Sleep(time.Duration(rng.IntN(1500)) * time.Millisecond)
			key := fmt.Sprintf("wipe-%06d", i)
			for {
				r := c.hold(t, key, holdBody(date, teststack.Stations12951[a], teststack.Stations12951[b], 1))
				if r.status == http.StatusServiceUnavailable {
					if r.body["reason"] == "SHARD_REBUILDING" {
						refused.Add(1)
					}
					time.Sleep(20 * time.Millisecond)
					continue
				}
				if r.status == http.StatusCreated {
					mu.Lock()
					held = append(held, heldAnswer{user: id, holdID: r.body["hold_id"].(string), from: a, to: b, berths: berthsOf(r)})
					mu.Unlock()
					if wiped.Load() {
						heldAfterWipe.Add(1)
					}
				} else if r.status != http.StatusOK {
					t.Errorf("user %d: %d %s", id, r.status, r.raw)
				}
				return
			}
		}()
	}
	close(start)
	time.Sleep(500 * time.Millisecond)
	// Everything the shard had in Redis disappears at once, as on a restart.
	if err := s.Store.Wipe(context.Background(), shardID); err != nil {
		t.Fatal(err)
	}
	wiped.Store(true)
	wg.Wait()
	t.Logf("%d HELD (%d after the wipe), %d refusals while rebuilding", len(held), heldAfterWipe.Load(), refused.Load())
	if refused.Load() == 0 {
		t.Errorf("no hold was refused after the wipe")
	}
	if heldAfterWipe.Load() == 0 {
		t.Errorf("no hold was granted after the rebuild")
	}
	verifyHeldAnswers(t, s, shardID, held)
	s.CheckInvariants(t, shardID)
}

func mustUUID(t *testing.T, s string) uuid.UUID {
	t.Helper()
	id, err := uuid.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// Bad requests each get a clear 4xx with a stable code, and change nothing.
func TestBadRequestsChangeNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := teststack.New(t, teststack.Options{})
	shardID, date := s.DemoShard(t, 8, 0)
	ids := s.Users(t, "bad", 2)
	later := date.AddDate(0, 0, 1)
	if _, err := seed.Shard(ctx, s.Pool, seed.ShardSpec{Train: "12951", Date: later, Class: "3A", Berths: 4, OpensAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	closed := date.AddDate(0, 0, 2)
	if _, err := seed.Shard(ctx, s.Pool, seed.ShardSpec{Train: "12951", Date: closed, Class: "3A", Berths: 4,
		OpensAt: time.Now().Add(-2 * time.Hour), ClosesAt: time.Now().Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	unverified, err := seed.Users(ctx, s.Pool, seed.UsersSpec{Count: 1, Prefix: "unv", PasswordHash: "x", Unverified: true})
	if err != nil {
		t.Fatal(err)
	}
	owner := newClient(s, ids[0])
	other := newClient(s, ids[1])
	existing := owner.hold(t, "existing-0001", holdBody(date, "MMCT", "BVI", 1))
	if existing.status != http.StatusCreated {
		t.Fatalf("setup hold: %s", existing.raw)
	}
	existingID := existing.body["hold_id"].(string)

	good := holdBody(date, "MMCT", "NDLS", 1)
	withPax := func(p string) string {
		return fmt.Sprintf(`{"train_no":"12951","journey_date":"%s","class":"3A","from":"MMCT","to":"NDLS","passengers":[%s]}`, date.Format(time.DateOnly), p)
	}
	okPax := `{"name":"Asha Rao","age":30,"gender":"F","id_type":"PAN","id_ref":"ABCDE1234F"}`
	agent := &client{base: s.Server.URL, http: owner.http, token: s.Signer.Sign(auth.Session{UserID: ids[1], Verified: true, Agent: true,
		CreatedAt: time.Now().AddDate(0, -1, 0), ExpiresAt: time.Now().Add(time.Hour)})}
	expired := &client{base: s.Server.URL, http: owner.http, token: s.Signer.Sign(auth.Session{UserID: ids[1], Verified: true,
		CreatedAt: time.Now().AddDate(0, -1, 0), ExpiresAt: time.Now().Add(-time.Second)})}

	cases := []struct {
		name    string
		c       *client
		method  string
		path    string
		headers map[string]string
		body    string
		status  int
		reason  string
	}{
		{"no session", &client{base: s.Server.URL, http: owner.http}, "POST", "/v1/bookings/hold", map[string]string{"Idempotency-Key": "k-00000001"}, good, 401, "NO_SESSION"},
		{"forged session", &client{base: s.Server.URL, http: owner.http, token: "st_eyJ1Ijo5OTl9.forged"}, "POST", "/v1/bookings/hold", map[string]string{"Idempotency-Key": "k-00000002"}, good, 401, "BAD_SESSION"},
		{"expired session", expired, "POST", "/v1/bookings/hold", map[string]string{"Idempotency-Key": "k-00000003"}, good, 401, "BAD_SESSION"},
		{"missing idempotency key", owner, "POST", "/v1/bookings/hold", nil, good, 400, "MISSING_IDEMPOTENCY_KEY"},
		{"short idempotency key", other, "POST", "/v1/bookings/hold", map[string]string{"Idempotency-Key": "abc"}, good, 400, "BAD_IDEMPOTENCY_KEY"},
		{"wrong content type", other, "POST", "/v1/bookings/hold", map[string]string{"Idempotency-Key": "k-00000004", "Content-Type": "text/plain"}, good, 400, "BAD_CONTENT_TYPE"},
		{"malformed json", other, "POST", "/v1/bookings/hold", map[string]string{"Idempotency-Key": "k-00000005"}, `{"train_no":`, 400, "MALFORMED_JSON"},
		{"two objects", other, "POST", "/v1/bookings/hold", map[string]string{"Idempotency-Key": "k-00000006"}, good + good, 400, "MALFORMED_JSON"},
		{"empty body", other, "POST", "/v1/bookings/hold", map[string]string{"Idempotency-Key": "k-00000007", "Content-Type": "application/json"}, "", 400, "EMPTY_BODY"},
		{"oversized body", other, "POST", "/v1/bookings/hold", map[string]string{"Idempotency-Key": "k-00000008"}, withPax(okPax + strings.Repeat(" ", 20000)), 400, "BODY_TOO_LARGE"},
		{"wrong type for passengers", other, "POST", "/v1/bookings/hold", map[string]string{"Idempotency-Key": "k-00000009"}, `{"train_no":"12951","passengers":"four"}`, 400, "WRONG_TYPE"},
		{"wrong type for age", other, "POST", "/v1/bookings/hold", map[string]string{"Idempotency-Key": "k-00000010"}, withPax(`{"name":"Asha Rao","age":"thirty","gender":"F"}`), 400, "WRONG_TYPE"},
		{"unknown field (a concession)", other, "POST", "/v1/bookings/hold", map[string]string{"Idempotency-Key": "k-00000011"}, withPax(`{"name":"Asha Rao","age":30,"gender":"F","concession":"SENIOR"}`), 400, "UNKNOWN_FIELD"},
		{"missing field", other, "POST", "/v1/bookings/hold", map[string]string{"Idempotency-Key": "k-00000012"}, `{"train_no":"12951","journey_date":"2030-01-01","passengers":[]}`, 400, "MISSING_FIELD"},
		{"bad date", other, "POST", "/v1/bookings/hold", map[string]string{"Idempotency-Key": "k-00000013"}, strings.Replace(good, date.Format(time.DateOnly), "01/12/2026", 1), 400, "BAD_DATE"},
		{"unknown train", other, "POST", "/v1/bookings/hold", map[string]string{"Idempotency-Key": "k-00000014"}, strings.Replace(good, "12951", "99999", 1), 404, "NO_SUCH_SHARD"},
		{"date with no Tatkal quota", other, "POST", "/v1/bookings/hold", map[string]string{"Idempotency-Key": "k-00000015"}, strings.Replace(good, date.Format(time.DateOnly), "2031-05-05", 1), 404, "NO_SUCH_SHARD"},
		{"window not yet open", other, "POST", "/v1/bookings/hold", map[string]string{"Idempotency-Key": "k-00000016"}, holdBody(later, "MMCT", "NDLS", 1), 409, "WINDOW_NOT_OPEN"},
		{"window closed", other, "POST", "/v1/bookings/hold", map[string]string{"Idempotency-Key": "k-00000017"}, holdBody(closed, "MMCT", "NDLS", 1), 409, "WINDOW_CLOSED"},
		{"unknown station", other, "POST", "/v1/bookings/hold", map[string]string{"Idempotency-Key": "k-00000018"}, holdBody(date, "XYZ", "NDLS", 1), 400, "BAD_STATION"},
		{"reversed journey", other, "POST", "/v1/bookings/hold", map[string]string{"Idempotency-Key": "k-00000019"}, holdBody(date, "NDLS", "MMCT", 1), 400, "BAD_JOURNEY"},
		{"five passengers", other, "POST", "/v1/bookings/hold", map[string]string{"Idempotency-Key": "k-00000020"}, holdBody(date, "MMCT", "NDLS", 5), 400, "TOO_MANY_PASSENGERS"},
		{"no passengers", other, "POST", "/v1/bookings/hold", map[string]string{"Idempotency-Key": "k-00000021"}, withPax(""), 400, "NO_PASSENGERS"},
		{"nobody carries an ID", other, "POST", "/v1/bookings/hold", map[string]string{"Idempotency-Key": "k-00000022"}, withPax(`{"name":"Asha Rao","age":30,"gender":"F"}`), 400, "NO_ID"},
		{"malformed ID number", other, "POST", "/v1/bookings/hold", map[string]string{"Idempotency-Key": "k-00000023"}, withPax(`{"name":"Asha Rao","age":30,"gender":"F","id_type":"PAN","id_ref":"12345"}`), 400, "BAD_ID_REF"},
		{"child under five", other, "POST", "/v1/bookings/hold", map[string]string{"Idempotency-Key": "k-00000024"}, withPax(okPax + `,{"name":"Baby Rao","age":2,"gender":"F"}`), 400, "CHILD_UNDER_5"},
		{"bad gender", other, "POST", "/v1/bookings/hold", map[string]string{"Idempotency-Key": "k-00000025"}, withPax(`{"name":"Asha Rao","age":30,"gender":"X","id_type":"PAN","id_ref":"ABCDE1234F"}`), 400, "BAD_GENDER"},
		{"berth preference the class lacks", other, "POST", "/v1/bookings/hold", map[string]string{"Idempotency-Key": "k-00000026"}, withPax(`{"name":"Asha Rao","age":30,"gender":"F","berth_pref":"WS","id_type":"PAN","id_ref":"ABCDE1234F"}`), 400, "BAD_BERTH_PREF"},
		{"unverified account", newClient(s, unverified[0]), "POST", "/v1/bookings/hold", map[string]string{"Idempotency-Key": "k-00000027"}, good, 0, ""},
		{"agent in the first 30 minutes", agent, "POST", "/v1/bookings/hold", map[string]string{"Idempotency-Key": "k-00000028"}, good, 403, "AGENT_BARRED"},
		{"second live hold", owner, "POST", "/v1/bookings/hold", map[string]string{"Idempotency-Key": "k-00000029"}, good, 429, "LIVE_HOLD_EXISTS"},
		{"someone else's hold status", other, "GET", "/v1/bookings/" + existingID + "/status", nil, "", 404, "NO_SUCH_HOLD"},
		{"someone else's hold cancel", other, "POST", "/v1/bookings/" + existingID + "/cancel", nil, "", 404, "NO_SUCH_HOLD"},
		{"malformed hold id", owner, "GET", "/v1/bookings/not-a-hold/status", nil, "", 400, "BAD_HOLD_ID"},
		{"wrong method", owner, "GET", "/v1/bookings/hold", nil, "", 400, "METHOD_NOT_ALLOWED"},
		{"availability without a class", owner, "GET", "/v1/availability?train=12951&date=" + date.Format(time.DateOnly), nil, "", 400, "MISSING_FIELD"},
	}
	// The unverified account: a token that says unverified.
	cases[28].c = &client{base: s.Server.URL, http: owner.http, token: s.Signer.Sign(auth.Session{UserID: unverified[0], Verified: false,
		CreatedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour)})}
	cases[28].status, cases[28].reason = 403, "NOT_VERIFIED"

	before := stateOf(t, s, shardID)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body := tc.body
			if tc.reason == "LIVE_HOLD_EXISTS" { // a limit past the booking check: the hold carries one
				body = teststack.WithChallenge(t, tc.c.base, tc.c.token, tc.headers["Idempotency-Key"], body, nil)
			}
			r := tc.c.do(t, tc.method, tc.path, tc.headers, body)
			if r.status != tc.status || r.body["reason"] != tc.reason {
				t.Fatalf("got %d %v, want %d %s: %s", r.status, r.body["reason"], tc.status, tc.reason, r.raw)
			}
			if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
				t.Errorf("Content-Type %q, want application/problem+json", ct)
			}
			if d, _ := r.body["detail"].(string); len(d) < 10 {
				t.Errorf("no message a person understands: %q", d)
			}
			if after := stateOf(t, s, shardID); after != before {
				t.Fatalf("state changed:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
	if len(cases) < 20 {
		t.Fatalf("only %d cases", len(cases))
	}
}

// stateOf summarises everything a request could change.
func stateOf(t *testing.T, s *teststack.Stack, shardID int64) string {
	t.Helper()
	var holds, bookings, jobs int
	if err := s.Pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM holds), (SELECT count(*) FROM bookings), (SELECT count(*) FROM river_job)`).
		Scan(&holds, &bookings, &jobs); err != nil {
		t.Fatal(err)
	}
	snap, err := s.Store.Snapshot(context.Background(), shardID)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("holds=%d bookings=%d jobs=%d redis-holds=%d occupancy=%v held=%v", holds, bookings, jobs, len(snap.Holds), snap.Occupancy, snap.Held)
}

// Login, then a whole booking through the API: hold, status, cancel.
func TestLoginHoldStatusCancel(t *testing.T) {
	t.Parallel()
	s := teststack.New(t, teststack.Options{})
	_, date := s.DemoShard(t, 8, 0)
	s.Users(t, "flow", 1)
	anon := &client{base: s.Server.URL, http: &http.Client{Transport: sharedTransport}}
	bad := anon.do(t, "POST", "/v1/auth/login", nil, `{"login":"flow00001","password":"wrong"}`)
	if bad.status != 401 || bad.body["reason"] != "WRONG_CREDENTIALS" {
		t.Fatalf("wrong password: %d %s", bad.status, bad.raw)
	}
	login := anon.do(t, "POST", "/v1/auth/login", nil, `{"login":"flow00001","password":"pw-flow"}`)
	if login.status != 200 {
		t.Fatalf("login: %d %s", login.status, login.raw)
	}
	c := &client{base: s.Server.URL, http: anon.http, token: login.body["token"].(string)}
	bind := c.do(t, "POST", "/v1/devices/bind", nil, `{"device_token":"flow-phone-0001-abcdef"}`)
	if bind.status != 200 {
		t.Fatalf("bind device: %d %s", bind.status, bind.raw)
	}
	c.device = bind.body["device_binding"].(string)
	prep := c.do(t, "POST", "/v1/session/prepare", nil, fmt.Sprintf(`{"device_token":"d1","client_time":%q,"intent":{"train_no":"12951","journey_date":%q,"class":"3A"}}`,
		time.Now().Add(-1500*time.Millisecond).Format(time.RFC3339Nano), date.Format(time.DateOnly)))
	if prep.status != 200 || prep.body["window_opens_at"] == nil {
		t.Fatalf("prepare: %d %s", prep.status, prep.raw)
	}
	if off := prep.body["server_time_offset_ms"].(float64); off < 1000 || off > 5000 {
		t.Errorf("clock offset %v ms, want about 1500", off)
	}
	av := c.do(t, "GET", "/v1/availability?train=12951&class=3A&date="+date.Format(time.DateOnly)+"&from=BVI&to=KOTA", nil, "")
	if av.status != 200 || av.body["status_band"] != booking.BandAvailable || av.body["approx_count"].(float64) != 8 {
		t.Fatalf("availability: %s", av.raw)
	}
	h := c.hold(t, "flow-hold-0001", holdBody(date, "BVI", "KOTA", 2))
	if h.status != 201 || h.body["status"] != "HELD" {
		t.Fatalf("hold: %d %s", h.status, h.raw)
	}
	id := h.body["hold_id"].(string)
	st := c.do(t, "GET", "/v1/bookings/"+id+"/status", nil, "")
	if st.status != 200 || st.body["state"] != "HELD" || !strings.Contains(st.body["message"].(string), "Pay before") {
		t.Fatalf("status: %s", st.raw)
	}
	cx := c.do(t, "POST", "/v1/bookings/"+id+"/cancel", nil, "")
	if cx.status != 200 || cx.body["state"] != "CANCELLED" {
		t.Fatalf("cancel: %s", cx.raw)
	}
	spec := c.do(t, "GET", "/v1/openapi.json", nil, "")
	if spec.status != 200 || spec.body["openapi"] == nil {
		t.Fatalf("openapi: %d", spec.status)
	}
}

// When more hold requests arrive than may be in flight, the excess is shed
// at once with 503 and Retry-After, and nothing is held for them.
func TestOverloadIsShedImmediately(t *testing.T) {
	t.Parallel()
	s := teststack.New(t, teststack.Options{MaxHoldsInFlight: 1})
	shardID, date := s.DemoShard(t, 400, 0)
	ids := s.Users(t, "shed", 300)
	var shed, ok atomic.Int64
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := newClient(s, id).hold(t, fmt.Sprintf("shed-%05d", i), holdBody(date, "MMCT", "NDLS", 1))
			switch r.status {
			case http.StatusServiceUnavailable:
				if r.header.Get("Retry-After") == "" || r.body["code"] != "overloaded" {
					t.Errorf("shed answer without Retry-After or code: %v %s", r.header, r.raw)
				}
				shed.Add(1)
			case http.StatusCreated:
				ok.Add(1)
			default:
				t.Errorf("unexpected %d %s", r.status, r.raw)
			}
		}()
	}
	wg.Wait()
	if shed.Load() == 0 || ok.Load() == 0 {
		t.Fatalf("%d shed, %d held: want both", shed.Load(), ok.Load())
	}
	var rows int64
	if err := s.Pool.QueryRow(context.Background(), `SELECT count(*) FROM holds`).Scan(&rows); err != nil || rows != ok.Load() {
		t.Fatalf("%d rows for %d held (%v)", rows, ok.Load(), err)
	}
	s.CheckInvariants(t, shardID)
}
