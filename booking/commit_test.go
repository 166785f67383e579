package booking_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/url"
	"regexp"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"tatkal/booking"
	"tatkal/booking/db"
	"tatkal/booking/lab/testenv"
	"tatkal/booking/lab/teststack"
)

// pgProxy forwards connections to PostgreSQL and, when armed, cuts the
// first connection whose transaction runs the marked statement (by default
// an insert into holds; setMarker picks another) right after the server
// answered its COMMIT, before the client reads the answer: the transaction
// is durable, the client sees an error. A real network fault, the real
// server on the far side; other transactions (the simulators') pass
// untouched.
type pgProxy struct {
	ln      net.Listener
	target  string
	armed   atomic.Bool
	dropped atomic.Int32
	// marker is a piece of the SQL that makes a transaction hot (empty:
	// defaultMarker); named are the prepared statements seen to carry a
	// marker, by the marker: pgx sends a statement's SQL only when it
	// prepares it on a connection, and names it afterwards.
	markerMu sync.Mutex
	marker   string
	named    map[string][][]byte
	// cutBeforeCommit, when armed, plays PostgreSQL going away just as the
	// hold batch's COMMIT is sent: the COMMIT never reaches the server
	// (which rolls the transaction back), and every connection, old or new,
	// fails until down is cleared.
	cutBeforeCommit atomic.Bool
	down            atomic.Bool
	// cutAfterCommitSent, when armed, passes the hold batch's COMMIT to the
	// server and then cuts the client: the server goes on committing while
	// the client already sees an error.
	cutAfterCommitSent atomic.Bool
	cancelsLost        atomic.Bool // set with it: cancel requests never reach the server
	// delayCommit, when armed, cuts the client as the hold batch's COMMIT
	// is sent and keeps the COMMIT on its way (a half-open connection: the
	// server holds the transaction open, idle) until release is closed;
	// then it is delivered, and lateDone is closed once the server has
	// answered it or the connection is gone.
	delayCommit atomic.Bool
	release     chan struct{}
	lateDone    chan struct{}
}

// cancelRequestCode opens the packet of a PostgreSQL cancel request.
const cancelRequestCode = 80877102

// commitQuery is the simple-protocol message pgx sends to commit;
// commitParse is the COMMIT the group commit sends behind its last batch
// (db.BatchTx), as pgx first parses it on a connection: later batches name
// the prepared statement instead, so a test cutting there makes its
// stack's first hold.
var (
	commitQuery = []byte("Q\x00\x00\x00\x0bcommit\x00")
	commitParse = []byte("COMMIT\x00")
	// commitPrepared finds the name pgx gives the COMMIT it parses.
	commitPrepared = regexp.MustCompile("(stmtcache_[0-9a-f]+)\x00COMMIT\x00")
)

// defaultMarker makes the hold batch's transaction hot.
const defaultMarker = "INSERT INTO holds"

// setMarker makes transactions running a statement whose SQL holds marker
// hot from now on ("": the hold batch's).
func (p *pgProxy) setMarker(marker string) {
	p.markerMu.Lock()
	defer p.markerMu.Unlock()
	p.marker = marker
}

func (p *pgProxy) currentMarker() string {
	p.markerMu.Lock()
	defer p.markerMu.Unlock()
	if p.marker == "" {
		return defaultMarker
	}
	return p.marker
}

// parseNamed finds the name pgx gives a statement it prepares (a Parse
// message: the name, then the SQL).
var parseNamed = regexp.MustCompile("(stmtcache_[0-9a-f]+)\x00([^\x00]*)")

// runsMarker says whether the client's bytes run a statement carrying
// marker: its SQL, or the name of a statement prepared from it (learned
// here, on any connection: pgx names a statement by its SQL's hash).
func (p *pgProxy) runsMarker(seen []byte, marker string) bool {
	m := []byte(marker)
	p.markerMu.Lock()
	defer p.markerMu.Unlock()
	if bytes.Contains(seen, m) {
		for _, sub := range parseNamed.FindAllSubmatch(seen, -1) {
			if bytes.Contains(sub[2], m) && !slices.ContainsFunc(p.named[marker], func(n []byte) bool { return bytes.Equal(n, sub[1]) }) {
				if p.named == nil {
					p.named = map[string][][]byte{}
				}
				p.named[marker] = append(p.named[marker], append([]byte(nil), sub[1]...))
			}
		}
		return true
	}
	for _, n := range p.named[marker] {
		if bytes.Contains(seen, n) {
			return true
		}
	}
	return false
}

func startPGProxy(t *testing.T, target string) *pgProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &pgProxy{ln: ln, target: target}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return p
}

func (p *pgProxy) serve(client net.Conn) {
	if p.down.Load() {
		client.Close()
		return
	}
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		client.Close()
		return
	}
	defer client.Close()
	defer server.Close()
	if p.cutAfterCommitSent.Load() || p.cancelsLost.Load() || p.delayCommit.Load() {
		// A partition loses the cancel request pgx sends for the query of
		// a connection it lost: read the first packet's length and code.
		head := make([]byte, 8)
		if _, err := io.ReadFull(client, head); err != nil {
			return
		}
		if binary.BigEndian.Uint32(head) == 16 && binary.BigEndian.Uint32(head[4:]) == cancelRequestCode {
			return
		}
		if _, err := server.Write(head); err != nil {
			return
		}
	}
	var hot atomic.Bool // this connection's transaction ran the marked statement
	var cut atomic.Bool // the client was cut after its COMMIT: the server is heard out
	go func() {
		defer func() {
			if !cut.Load() {
				server.Close()
			}
		}()
		buf := make([]byte, 32<<10)
		var tail, commitName []byte
		for {
			n, err := client.Read(buf)
			if p.down.Load() {
				return
			}
			if n > 0 {
				marker := p.currentMarker()
				seen := append(tail, buf[:n]...)
				if p.runsMarker(seen, marker) {
					hot.Store(true)
				}
				commits := bytes.Contains(buf[:n], commitQuery) || bytes.Contains(buf[:n], commitParse)
				if hot.Load() && commits && p.cutBeforeCommit.CompareAndSwap(true, false) {
					p.down.Store(true)
					p.dropped.Add(1)
					client.Close()
					return
				}
				// Enough for a marker or a statement's name cut in two.
				tail = append([]byte(nil), seen[max(0, len(seen)-max(len(marker), 80)):]...)
				// The COMMIT's execution, not pgx's preparing of it: the
				// write that binds the statement the COMMIT was parsed as.
				if m := commitPrepared.FindSubmatch(buf[:n]); m != nil {
					commitName = append([]byte(nil), m[1]...)
				}
				runsCommit := commitName != nil && !commits && bytes.Contains(buf[:n], commitName)
				if hot.Load() && runsCommit && p.delayCommit.CompareAndSwap(true, false) {
					p.dropped.Add(1)
					p.cancelsLost.Store(true)
					cut.Store(true)
					client.Close()
					<-p.release
					server.Write(buf[:n]) //nolint:errcheck // a server that ended the transaction has closed it
					return
				}
				if _, err := server.Write(buf[:n]); err != nil {
					return
				}
				if hot.Load() && runsCommit && p.cutAfterCommitSent.CompareAndSwap(true, false) {
					p.dropped.Add(1)
					p.cancelsLost.Store(true)
					cut.Store(true)
					client.Close()
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	defer func() {
		if cut.Load() && p.lateDone != nil {
			close(p.lateDone)
		}
	}()
	// Every message from the server is a type byte and a length.
	r := bufio.NewReader(server)
	hdr := make([]byte, 5)
	for {
		if _, err := io.ReadFull(r, hdr); err != nil || p.down.Load() {
			return
		}
		body := make([]byte, int(binary.BigEndian.Uint32(hdr[1:]))-4)
		if _, err := io.ReadFull(r, body); err != nil {
			return
		}
		if hdr[0] == 'C' && string(body) == "COMMIT\x00" && hot.Load() && p.armed.CompareAndSwap(true, false) {
			p.dropped.Add(1)
			return // committed; the client never hears it
		}
		if hdr[0] == 'Z' && len(body) == 1 && body[0] == 'I' && !cut.Load() {
			// The transaction is over (ReadyForQuery, idle): the
			// connection's next one is hot only if it runs the marker too.
			// pgx sends nothing more before it reads this.
			hot.Store(false)
		}
		if cut.Load() {
			// Closing now could reset the connection before the server has
			// read the COMMIT; it goes once the server is ready again.
			if hdr[0] == 'Z' {
				return
			}
			continue
		}
		if _, err := client.Write(append(hdr, body...)); err != nil {
			return
		}
	}
}

// proxiedStack is a test stack whose pool reaches PostgreSQL through a
// pgProxy (the simulators' pools go direct).
func proxiedStack(t *testing.T) (*teststack.Stack, *pgProxy) {
	t.Helper()
	return proxiedStackWith(t, teststack.Options{})
}

// proxiedStackWith is proxiedStack with options.
func proxiedStackWith(t *testing.T, opts teststack.Options) (*teststack.Stack, *pgProxy) {
	t.Helper()
	env := testenv.New(t)
	u, err := url.Parse(env.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := startPGProxy(t, u.Host)
	u.Host = proxy.ln.Addr().String()
	pool, err := db.Open(context.Background(), u.String(), 20)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	env.Pool = pool
	return teststack.Start(t, env, opts), proxy
}

// Problem 11: the group commit's COMMIT succeeds but its answer is lost. The
// committer must read the rows back instead of undoing Redis under a
// durable hold: the passenger is told HELD and Redis keeps the seats.
func TestCommitWhoseAnswerIsLostIsNotUndone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, proxy := proxiedStack(t)
	shardID, date := s.DemoShard(t, 2, 0)
	users := s.Users(t, "lc", 1)

	proxy.armed.Store(true)
	res := holdStandsThroughTheCut(t, s, proxy, shardID, holdReq(users[0], "lost-commit-1", date, "MMCT", "NDLS", pax("Asha Rao", 30, "F")))
	// The same key again: the same durable hold.
	again, err := s.Service.Hold(ctx, teststack.Caller(users[0]), holdReq(users[0], "lost-commit-1", date, "MMCT", "NDLS", pax("Asha Rao", 30, "F")))
	if err != nil || again.HoldID != res.HoldID {
		t.Fatalf("retry: %+v %v, want hold %s", again, err, res.HoldID)
	}
	s.CheckInvariants(t, shardID)
}

// The connection fails while the server is still committing the hold batch
// (a deferred trigger keeps its COMMIT at work for a second and a half): the
// committer's read-back must wait for that backend to finish, or it reads
// no rows, undoes Redis, and the rows then commit under seats Redis gave
// back. The passenger is told HELD and Redis and PostgreSQL agree.
func TestReadBackWaitsForACommitStillAtWork(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, proxy := proxiedStack(t)
	shardID, date := s.DemoShard(t, 2, 0)
	users := s.Users(t, "slowc", 1)
	if _, err := s.Pool.Exec(ctx, `
		CREATE FUNCTION slow_commit() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN PERFORM pg_sleep(1.5); RETURN NULL; END $$;
		CREATE CONSTRAINT TRIGGER holds_slow_commit AFTER INSERT ON holds
			DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION slow_commit()`); err != nil {
		t.Fatal(err)
	}

	proxy.cutAfterCommitSent.Store(true)
	holdStandsThroughTheCut(t, s, proxy, shardID, holdReq(users[0], "slow-commit-1", date, "MMCT", "NDLS", pax("Asha Rao", 30, "F")))
}

// The COMMIT of a hold batch is still on its way when the connection fails
// (a half-open connection: the server keeps the transaction open and idle
// until the COMMIT arrives). The committer must not read the rows back and
// undo Redis while the COMMIT can still land: it stops that transaction
// first. The passenger is told NOT_SAVED; the COMMIT delivered afterwards
// commits nothing; the retry holds afresh; Redis and PostgreSQL agree.
// With a read-back that only counts rows, the late COMMIT commits the hold
// under seats Redis gave back.
func TestCommitStillOnItsWayIsStopped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, proxy := proxiedStack(t)
	shardID, date := s.DemoShard(t, 2, 0)
	users := s.Users(t, "late", 1)
	req := holdReq(users[0], "late-commit-1", date, "MMCT", "NDLS", pax("Asha Rao", 30, "F"))

	proxy.release, proxy.lateDone = make(chan struct{}), make(chan struct{})
	var release sync.Once // a failing test still lets the held COMMIT go
	t.Cleanup(func() { release.Do(func() { close(proxy.release) }) })
	proxy.delayCommit.Store(true)
	holdIsNotSavedThroughTheCut(t, s, proxy, req)
	release.Do(func() { close(proxy.release) })
	select {
	case <-proxy.lateDone:
	case <-time.After(10 * time.Second):
		t.Fatal("the late COMMIT was neither answered nor refused in 10 s")
	}
	var n int
	if err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM holds WHERE user_id = $1`, users[0]).Scan(&n); err != nil || n != 0 {
		t.Fatalf("hold rows after the late COMMIT: %d %v, want 0 (Redis gave the seats back)", n, err)
	}
	s.CheckInvariants(t, shardID)
	res, err := s.Service.Hold(ctx, teststack.Caller(users[0]), req)
	if err != nil || res.Status != "HELD" {
		t.Fatalf("retry: %+v %v, want HELD", res, err)
	}
	s.CheckInvariants(t, shardID)
}

// holdIsNotSavedThroughTheCut tries req's hold with one of proxy's cuts
// armed: the cut happens once and the passenger is told NOT_SAVED.
func holdIsNotSavedThroughTheCut(t *testing.T, s *teststack.Stack, proxy *pgProxy, req booking.HoldRequest) {
	t.Helper()
	_, err := s.Service.Hold(context.Background(), teststack.Caller(req.UserID), req)
	if proxy.dropped.Load() != 1 {
		t.Fatalf("the connection was not cut at its COMMIT (%d)", proxy.dropped.Load())
	}
	if code := booking.ErrorReason(err); code != "NOT_SAVED" {
		t.Fatalf("hold through the cut: %v (%q), want NOT_SAVED", err, code)
	}
}

// holdStandsThroughTheCut makes req's hold with one of proxy's cuts armed:
// the cut happens once, the passenger is told HELD, the row is durable and
// Redis and PostgreSQL agree.
func holdStandsThroughTheCut(t *testing.T, s *teststack.Stack, proxy *pgProxy, shardID int64, req booking.HoldRequest) booking.HoldResult {
	t.Helper()
	ctx := context.Background()
	res, err := s.Service.Hold(ctx, teststack.Caller(req.UserID), req)
	if proxy.dropped.Load() != 1 {
		t.Fatalf("the connection was not cut at its COMMIT (%d)", proxy.dropped.Load())
	}
	if err != nil || res.Status != "HELD" {
		t.Fatalf("hold through the cut: %+v %v, want HELD (the row is durable)", res, err)
	}
	var n int
	if err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM holds WHERE id = $1 AND state = 'HELD'`, res.HoldID).Scan(&n); err != nil || n != 1 {
		t.Fatalf("hold rows %d %v, want 1", n, err)
	}
	s.CheckInvariants(t, shardID)
	return res
}

// PostgreSQL goes away as the group commit sends its COMMIT and stays away
// past the committer's read-back: the hold is in doubt, so Redis keeps its
// seats and the passenger is told NOT_SAVED. Once PostgreSQL is back the
// service finds the hold never committed and undoes it, so the retry holds
// afresh within seconds instead of hearing IN_PROGRESS until the hold would
// have lapsed.
func TestHoldInDoubtIsSettledWhenPostgresReturns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, proxy := proxiedStack(t)
	shardID, date := s.DemoShard(t, 2, 0)
	users := s.Users(t, "doubt", 1)
	req := holdReq(users[0], "doubt-key-1", date, "MMCT", "NDLS", pax("Asha Rao", 30, "F"))

	proxy.cutBeforeCommit.Store(true)
	holdIsNotSavedThroughTheCut(t, s, proxy, req)
	proxy.down.Store(false)

	var answers []string
	testenv.Eventually(t, 20*time.Second, "the retry held after PostgreSQL's return", func() error {
		res, err := s.Service.Hold(ctx, teststack.Caller(users[0]), req)
		if err == nil && res.Status == "HELD" {
			return nil
		}
		answers = append(answers, fmt.Sprintf("%s %v", res.Status, err))
		return fmt.Errorf("answers %v", answers)
	})
	t.Logf("answers before the retry held: %v", answers)
	var n int
	if err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM holds WHERE user_id = $1 AND state = 'HELD'`, users[0]).Scan(&n); err != nil || n != 1 {
		t.Fatalf("live hold rows %d %v, want 1", n, err)
	}
	s.CheckInvariants(t, shardID)
}

// Issue 33 (2): a late success's retake whose COMMIT committed but whose
// answer was lost must not undo Redis: the ticket is durable, so its berth
// stays sold. Before, the retake released its Redis hold on any error: the
// booking stood CONFIRMED in PostgreSQL with its berth free in Redis, the
// next passenger held and paid it, and the shard's rebuild then failed
// with "berth taken twice".
func TestRetakeWhoseCommitAnswerIsLostKeepsItsBerth(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, proxy := proxiedStack(t)
	shardID, date := s.DemoShard(t, 1, 0)
	users := s.Users(t, "rl", 2)
	h := mustHold(t, s, users[0], "retake-lost-1", date)
	lapse(t, s, h.HoldID)
	proxy.setMarker("re-held after a late payment")
	proxy.armed.Store(true)
	res, outcome, err := s.Service.RetakeAndConfirm(ctx, h.HoldID, func(pgx.Tx, booking.ConfirmResult) error { return nil })
	if proxy.dropped.Load() != 1 {
		t.Fatalf("the retake's COMMIT answer was not cut (%d)", proxy.dropped.Load())
	}
	if err != nil || outcome != booking.RetakeConfirmed || res.PNR == "" {
		t.Fatalf("retake whose COMMIT committed: %+v %s %v, want CONFIRMED with its PNR", res, outcome, err)
	}
	var state string
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT status FROM bookings WHERE hold_id = $1`, h.HoldID).Scan(&state), "booking")
	if state != booking.BookingConfirmed {
		t.Fatalf("booking %s", state)
	}
	s.CheckInvariants(t, shardID)
	r, err := s.Service.Hold(ctx, teststack.Caller(users[1]), holdReq(users[1], "retake-lost-2", date, "MMCT", "NDLS", pax("Kiran Shah", 30, "M")))
	if err != nil || r.Status != "SOLD_OUT" {
		t.Fatalf("the next passenger on the retaken berth: %+v %v, want SOLD_OUT", r, err)
	}
	if _, err := s.Service.Rebuild(ctx, shardID); err != nil {
		t.Fatalf("rebuild after the retake: %v", err)
	}
}
