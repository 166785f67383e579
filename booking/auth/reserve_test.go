package auth_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"tatkal/booking/auth"
	"tatkal/booking/lab/testenv"
)

var cheap = auth.Argon2Params{MemoryKiB: 64, Time: 1, Threads: 1}

// parallelGuesses makes n wrong-password attempts at login from ip at
// once on g, whose Pause must be hold's: each admitted check waits until
// every attempt is either refused or waiting in its check, so all of them
// decide on the counters as they were before any failure was recorded.
// It returns the answers and the number of password checks run.
func parallelGuesses(t *testing.T, g *auth.Guard, hold *checkpoint, login, ip string, n int) ([]error, int32) {
	t.Helper()
	var checks atomic.Int32
	answers := make(chan error, n)
	for range n {
		go func() {
			answers <- g.Attempt(context.Background(), login, ip, auth.Proof{}, func(context.Context) (bool, error) {
				checks.Add(1)
				return false, nil
			})
		}()
	}
	var got []error
	for waiting := 0; waiting+len(got) < n; {
		select {
		case <-hold.arrived:
			waiting++
		case err := <-answers:
			got = append(got, err)
		}
	}
	close(hold.release)
	for len(got) < n {
		got = append(got, <-answers)
	}
	return got, checks.Load()
}

// checkpoint holds password checks at the guard's "login.checking" pause.
type checkpoint struct{ arrived, release chan struct{} }

func newCheckpoint(n int) *checkpoint {
	return &checkpoint{arrived: make(chan struct{}, n), release: make(chan struct{})}
}

func (c *checkpoint) pause(ctx context.Context, point string) {
	if point != "login.checking" {
		return
	}
	c.arrived <- struct{}{}
	select {
	case <-c.release:
	case <-ctx.Done():
	}
}

// Twenty wrong passwords at once for one account from one address get the
// five checks five in a row would (they got eight, then twenty): the
// attempt is reserved before hashing, so the rest are refused with a
// Retry-After, and exactly five failures are on record.
func TestParallelGuessesGetOnlyTheAllowance(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	hold := newCheckpoint(20)
	g := auth.NewGuard(auth.GuardConfig{Pool: env.Pool, Slots: 20, Pause: hold.pause, DummyParams: cheap})
	answers, checks := parallelGuesses(t, g, hold, "asha", "192.0.2.1", 20)
	wrong, refused := 0, 0
	for _, err := range answers {
		var th *auth.Throttled
		switch {
		case errors.Is(err, auth.ErrWrongCredentials):
			wrong++
		case errors.As(err, &th) && th.RetryAfter > 0:
			refused++
		default:
			t.Errorf("answer %v, want a wrong password or a refusal with a delay", err)
		}
	}
	var recorded, reserved int
	ctx := context.Background()
	if err := env.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM login_failures WHERE login = 'asha'), (SELECT count(*) FROM login_reservations)`).
		Scan(&recorded, &reserved); err != nil {
		t.Fatal(err)
	}
	if wrong != 5 || refused != 15 || checks != 5 || recorded != 5 || reserved != 0 {
		t.Fatalf("%d checked wrong, %d refused, %d checks, %d recorded, %d reservations left; want 5, 15, 5, 5, 0",
			wrong, refused, checks, recorded, reserved)
	}
}

// A process that dies between reserving an attempt and recording it (a
// panic in the check stands in for it) holds the allowance only until the
// reservation expires: the owner is refused meanwhile, never for good.
// Signing in leaves nothing reserved, and successes do not count against
// the address.
func TestReservationsOfDeadAttemptsExpire(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	clk := &testenv.Clock{}
	g := auth.NewGuard(auth.GuardConfig{Pool: env.Pool, Now: clk.Now, Reservation: time.Minute, DummyParams: cheap})
	ctx := context.Background()
	const ip = "198.51.100.7"
	right := func(context.Context) (bool, error) { return true, nil }
	wrong := func(context.Context) (bool, error) { return false, nil }
	for i := range 5 {
		func() {
			defer func() {
				if recover() == nil {
					t.Fatalf("attempt %d did not die", i)
				}
			}()
			g.Attempt(ctx, "asha", ip, auth.Proof{}, func(context.Context) (bool, error) { panic("the process dies mid-check") }) //nolint:errcheck
		}()
	}
	var th *auth.Throttled
	if err := g.Attempt(ctx, "asha", ip, auth.Proof{}, right); !errors.As(err, &th) {
		t.Fatalf("five attempts in flight, then the owner: %v, want refused", err)
	}
	clk.Advance(time.Minute + time.Second)
	if err := g.Attempt(ctx, "asha", ip, auth.Proof{}, right); err != nil {
		t.Fatalf("the owner once the dead attempts' reservations expired: %v", err)
	}
	var reserved int
	if err := env.Pool.QueryRow(ctx, `SELECT count(*) FROM login_reservations`).Scan(&reserved); err != nil {
		t.Fatal(err)
	}
	if reserved != 0 {
		t.Fatalf("%d reservations left after a sign-in", reserved)
	}
	// An address allowed three failures: two, then sign-ins to other
	// accounts, then a third is still checked, and only then it is locked.
	g = auth.NewGuard(auth.GuardConfig{Pool: env.Pool, Now: clk.Now, PerIP: 3, DummyParams: cheap})
	for i := range 2 {
		if err := g.Attempt(ctx, fmt.Sprintf("other%d", i), ip, auth.Proof{}, wrong); !errors.Is(err, auth.ErrWrongCredentials) {
			t.Fatalf("wrong password %d: %v", i, err)
		}
	}
	for i := range 5 {
		if err := g.Attempt(ctx, fmt.Sprintf("mine%d", i), ip, auth.Proof{}, right); err != nil {
			t.Fatalf("sign-in %d: %v", i, err)
		}
	}
	if err := g.Attempt(ctx, "other9", ip, auth.Proof{}, wrong); !errors.Is(err, auth.ErrWrongCredentials) {
		t.Fatalf("the address's third failure: %v: the sign-ins were counted against it", err)
	}
	if err := g.Attempt(ctx, "mine9", ip, auth.Proof{}, right); !errors.As(err, &th) {
		t.Fatalf("after the address's three failures: %v, want refused", err)
	}
}
