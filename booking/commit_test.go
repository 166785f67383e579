package booking_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/url"
	"sync/atomic"
	"testing"

	"tatkal/booking/db"
	"tatkal/booking/testenv"
	"tatkal/booking/teststack"
)

// pgProxy forwards connections to PostgreSQL and, when armed, cuts the
// first connection that inserts holds right after the server answered its
// COMMIT, before the client reads the answer: the transaction is durable,
// the client sees an error. A real network fault, the real server on the
// far side; other transactions (the simulators') pass untouched.
type pgProxy struct {
	ln      net.Listener
	target  string
	armed   atomic.Bool
	dropped atomic.Int32
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
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		client.Close()
		return
	}
	defer client.Close()
	defer server.Close()
	var hot atomic.Bool // this connection sent an insert into holds
	go func() {
		defer server.Close()
		const marker = "INSERT INTO holds"
		buf := make([]byte, 32<<10)
		var tail []byte
		for {
			n, err := client.Read(buf)
			if n > 0 {
				seen := append(tail, buf[:n]...)
				if bytes.Contains(seen, []byte(marker)) {
					hot.Store(true)
				}
				tail = append([]byte(nil), seen[max(0, len(seen)-len(marker)):]...)
				if _, err := server.Write(buf[:n]); err != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	// Every message from the server is a type byte and a length.
	r := bufio.NewReader(server)
	hdr := make([]byte, 5)
	for {
		if _, err := io.ReadFull(r, hdr); err != nil {
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
		if _, err := client.Write(append(hdr, body...)); err != nil {
			return
		}
	}
}

// Problem 11: the group commit's COMMIT succeeds but its answer is lost. The
// committer must read the rows back instead of undoing Redis under a
// durable hold: the passenger is told HELD and Redis keeps the seats.
func TestCommitWhoseAnswerIsLostIsNotUndone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := testenv.New(t)
	u, err := url.Parse(env.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := startPGProxy(t, u.Host)
	u.Host = proxy.ln.Addr().String()
	pool, err := db.Open(ctx, u.String(), 20)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	env.Pool = pool
	s := teststack.Start(t, env, teststack.Options{})
	shardID, date := s.DemoShard(t, 2, 0)
	users := s.Users(t, "lc", 1)

	proxy.armed.Store(true)
	res, err := s.Service.Hold(ctx, teststack.Caller(users[0]), holdReq(users[0], "lost-commit-1", date, "MMCT", "NDLS", pax("Asha Rao", 30, "F")))
	if proxy.dropped.Load() != 1 {
		t.Fatalf("the commit's answer was not dropped (%d)", proxy.dropped.Load())
	}
	if err != nil || res.Status != "HELD" {
		t.Fatalf("hold whose commit answer was lost: %+v %v, want HELD (the row is durable)", res, err)
	}
	var n int
	if err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM holds WHERE id = $1 AND state = 'HELD'`, res.HoldID).Scan(&n); err != nil || n != 1 {
		t.Fatalf("hold rows %d %v, want 1", n, err)
	}
	s.CheckInvariants(t, shardID)
	// The same key again: the same durable hold.
	again, err := s.Service.Hold(ctx, teststack.Caller(users[0]), holdReq(users[0], "lost-commit-1", date, "MMCT", "NDLS", pax("Asha Rao", 30, "F")))
	if err != nil || again.HoldID != res.HoldID {
		t.Fatalf("retry: %+v %v, want hold %s", again, err, res.HoldID)
	}
	s.CheckInvariants(t, shardID)
}
