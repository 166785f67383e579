package auth_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"tatkal/booking/auth"
	"tatkal/booking/lab/testenv"
)

func TestSessionTokenCarriesGenerationAndID(t *testing.T) {
	t.Parallel()
	g, err := auth.NewSigner([]byte(strings.Repeat("s", 32)))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	in := auth.Session{UserID: 7, Verified: true, CreatedAt: now.Add(-time.Hour).Truncate(time.Second).UTC(),
		ExpiresAt: now.Add(time.Hour).Truncate(time.Second).UTC(), Generation: 3, ID: auth.NewSessionID()}
	out, err := g.Verify(g.Sign(in), now)
	if err != nil || out != in {
		t.Fatalf("round trip: %+v %v, want %+v", out, err, in)
	}
	// A token from before revocation existed still verifies, as generation 0.
	legacy := auth.Session{UserID: 7, ExpiresAt: now.Add(time.Hour)}
	if out, err := g.Verify(g.Sign(legacy), now); err != nil || out.Generation != 0 {
		t.Fatalf("legacy: %+v %v", out, err)
	}
	if _, err := g.Verify(g.Sign(in)+"x", now); err == nil {
		t.Fatal("a tampered token verified")
	}
}

// Logging out one session after another keeps at most PerUser revoked ids
// per account; one more revokes every session instead.
func TestRevocationsStayBoundedPerAccount(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	var uid int64
	if err := env.Pool.QueryRow(ctx, `INSERT INTO users (login, password_hash) VALUES ('rv1', 'x') RETURNING id`).Scan(&uid); err != nil {
		t.Fatal(err)
	}
	r := auth.NewRevocations(auth.RevocationConfig{Pool: env.Pool, PerUser: 3})
	var sessions []auth.Session
	for range 4 {
		s := auth.Session{UserID: uid, ID: auth.NewSessionID(), ExpiresAt: time.Now().Add(time.Hour)}
		sessions = append(sessions, s)
		if err := r.Check(ctx, s); err != nil {
			t.Fatalf("fresh session: %v", err)
		}
		if err := r.Logout(ctx, s); err != nil {
			t.Fatal(err)
		}
		if err := r.Check(ctx, s); !errors.Is(err, auth.ErrRevoked) {
			t.Fatalf("logged-out session: %v", err)
		}
	}
	var gen, rows int
	env.Pool.QueryRow(ctx, `SELECT session_generation, (SELECT count(*) FROM session_revocations WHERE session_id IS NOT NULL) FROM users WHERE id = $1`, uid).
		Scan(&gen, &rows) //nolint:errcheck
	if gen != 1 || rows != 3 {
		t.Fatalf("generation %d, %d single revocations; want 1 and 3", gen, rows)
	}
	// A new process learns all of it from PostgreSQL.
	fresh := auth.NewRevocations(auth.RevocationConfig{Pool: env.Pool})
	for i, s := range sessions {
		if err := fresh.Check(ctx, s); !errors.Is(err, auth.ErrRevoked) {
			t.Fatalf("session %d on a new process: %v", i, err)
		}
	}
	if err := fresh.Check(ctx, auth.Session{UserID: uid, Generation: 1, ID: "new"}); err != nil {
		t.Fatalf("a session of the new generation: %v", err)
	}
}

// When revocations cannot be loaded for longer than MaxStale, sessions are
// refused rather than trusted.
func TestRevocationsFailClosed(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	r := auth.NewRevocations(auth.RevocationConfig{Pool: env.Pool, Refresh: 10 * time.Millisecond, MaxStale: 50 * time.Millisecond})
	if err := r.Check(ctx, auth.Session{UserID: 1}); err != nil {
		t.Fatal(err)
	}
	env.Pool.Close()
	time.Sleep(60 * time.Millisecond)
	if err := r.Check(ctx, auth.Session{UserID: 1}); !errors.Is(err, auth.ErrRevocationsUnknown) {
		t.Fatalf("with the database gone: %v, want ErrRevocationsUnknown", err)
	}
}
