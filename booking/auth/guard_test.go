package auth_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"tatkal/booking/admission/token"
	"tatkal/booking/auth"
	"tatkal/booking/lab/testenv"
)

// Backoff, then a challenge: an attacker who locks an account from
// elsewhere does not lock its owner out, since a solved challenge opens the
// account's lock (for one password check, right or wrong); a used, forged
// or unsolved challenge opens nothing, and no challenge opens an address's
// lock.
func TestChallengeOpensOnlyTheAccountLock(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	g := auth.NewGuard(auth.GuardConfig{Pool: env.Pool, PerAccount: 3, PerAccountIP: 5, PerIP: 8, BaseDelay: time.Hour,
		ChallengeBits: 8, DummyParams: auth.Argon2Params{MemoryKiB: 64, Time: 1, Threads: 1}})
	const attacker, owner, sprayer = "192.0.2.1", "198.51.100.7", "203.0.113.9"
	checks := 0
	try := func(login, ip string, proof auth.Proof, right bool) error {
		return g.Attempt(ctx, login, ip, proof, func(context.Context) (bool, error) { checks++; return right, nil })
	}
	throttled := func(err error) *auth.Throttled {
		t.Helper()
		var th *auth.Throttled
		if !errors.As(err, &th) {
			t.Fatalf("want a throttled refusal, got %v", err)
		}
		return th
	}
	solved := func(c *auth.Challenge) auth.Proof {
		return auth.Proof{Challenge: c.Token, Nonce: token.Solve(c.Token, c.Bits)}
	}
	challenge := func(ip string) *auth.Challenge {
		t.Helper()
		c, err := g.Challenge(ctx, "asha", ip)
		if err != nil || c == nil {
			t.Fatalf("challenge for the owner at %s: %v %v", ip, c, err)
		}
		return c
	}

	if c, err := g.Challenge(ctx, "asha", owner); c != nil || err != nil {
		t.Fatalf("an unlocked account was given a challenge: %+v %v", c, err)
	}
	for i := range 3 {
		if err := try("asha", attacker, auth.Proof{}, false); !errors.Is(err, auth.ErrWrongCredentials) {
			t.Fatalf("attacker's guess %d: %v", i, err)
		}
	}
	// The owner, elsewhere, with the right password: the account's lock.
	if th := throttled(try("asha", owner, auth.Proof{}, true)); !th.AccountOnly || th.BadProof {
		t.Fatalf("owner without a challenge: %+v, want the account's lock only", th)
	}
	c := challenge(owner)
	if again := challenge(owner); again.Token != c.Token {
		t.Fatal("asking again gave another challenge: every ask would write a row")
	}
	before := checks
	// Forged: a well-formed token the server never issued.
	forged := "lc_" + fmt.Sprintf("%036x", 42)
	if th := throttled(try("asha", owner, auth.Proof{Challenge: forged, Nonce: token.Solve(forged, 8)}, true)); !th.BadProof {
		t.Fatalf("forged challenge: %+v", th)
	}
	// Wrong password with a solved challenge: checked, wrong, still locked.
	if err := try("asha", owner, solved(c), false); !errors.Is(err, auth.ErrWrongCredentials) {
		t.Fatalf("wrong password with a solved challenge: %v", err)
	}
	// The same challenge again, now with the right password: used up.
	if th := throttled(try("asha", owner, solved(c), true)); !th.BadProof {
		t.Fatalf("reused challenge: %+v", th)
	}
	// An unsolved one is used up too.
	c = challenge(owner)
	wrong := "x"
	for token.LeadingZeroBits(c.Token, wrong) >= c.Bits {
		wrong += "x"
	}
	if th := throttled(try("asha", owner, auth.Proof{Challenge: c.Token, Nonce: wrong}, true)); !th.BadProof {
		t.Fatalf("unsolved challenge: %+v", th)
	}
	if th := throttled(try("asha", owner, solved(c), true)); !th.BadProof {
		t.Fatalf("a challenge tried unsolved, then solved: %+v", th)
	}
	if checks != before+1 {
		t.Fatalf("%d password checks for refused challenges, want only the one with a valid challenge", checks-before-1)
	}
	// Right password, solved challenge, account locked: in.
	if err := try("asha", owner, solved(challenge(owner)), true); err != nil {
		t.Fatalf("owner with a solved challenge and the right password: %v", err)
	}

	// An address's lock is never opened: a challenge fetched before the
	// sprayer's address was locked is refused after.
	for i := range 3 {
		if err := try("asha", "192.0.2.2", auth.Proof{}, false); !errors.Is(err, auth.ErrWrongCredentials) {
			t.Fatalf("second attacker's guess %d: %v", i, err)
		}
	}
	if th := throttled(try("asha", owner, auth.Proof{}, true)); !th.AccountOnly {
		t.Fatalf("account not relocked: %+v", th)
	}
	held := challenge(sprayer)
	for i := range 8 {
		if err := try(fmt.Sprintf("u%d", i), sprayer, auth.Proof{}, false); !errors.Is(err, auth.ErrWrongCredentials) {
			t.Fatalf("spray %d: %v", i, err)
		}
	}
	before = checks
	if th := throttled(try("asha", sprayer, solved(held), true)); th.AccountOnly {
		t.Fatalf("locked address with a solved challenge: %+v, want the address's lock", th)
	}
	if c, err := g.Challenge(ctx, "asha", sprayer); c != nil || err == nil {
		t.Fatalf("a locked address was given a challenge: %+v %v", c, err)
	}
	if checks != before {
		t.Fatal("a password was checked from a locked address")
	}
}
