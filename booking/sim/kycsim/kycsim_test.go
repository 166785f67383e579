package kycsim_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"

	"go.uber.org/goleak"

	"tatkal/booking/kyc"
	"tatkal/booking/lab/testenv"
	"tatkal/booking/sim/kycsim"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testenv.LeakOptions()...) }

func start(t *testing.T, f kyc.Faults) (*kyc.Client, *kycsim.Server) {
	t.Helper()
	env := testenv.New(t)
	sim, err := kycsim.New(context.Background(), kycsim.Config{Pool: env.Pool, APIKey: "kyc-test-key-0123456789", AdminToken: "admin-test-token-0123456789", Faults: &f, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(srv.Close)
	return kyc.NewClient(srv.URL, "kyc-test-key-0123456789", srv.Client()), sim
}

func number(eleven string) string { return eleven + string(kyc.CheckDigit(eleven)) }

// TestRegisterAndKeys: the register is first come; the same number with
// another name or year is a MISMATCH, a wrong check digit INVALID_NUMBER;
// a key answers its first decision again, and is refused for another
// question; a wrong API key is refused outright.
func TestRegisterAndKeys(t *testing.T) {
	t.Parallel()
	c, _ := start(t, kyc.Faults{})
	ctx := context.Background()
	n := number("29876543210")
	asha := kyc.Request{Number: n, Name: "Asha Rao", YearOfBirth: 1990, Consent: true}
	first, err := c.Verify(ctx, "k-1", asha)
	if err != nil || first.Status != kyc.Verified || first.Masked != "XXXX XXXX "+n[8:] {
		t.Fatalf("first: %+v %v", first, err)
	}
	if again, err := c.Verify(ctx, "k-1", asha); err != nil || again.Ref != first.Ref {
		t.Fatalf("same key: %+v %v, want %s again", again, err, first.Ref)
	}
	if _, err := c.Verify(ctx, "k-1", kyc.Request{Number: n, Name: "Ravi", YearOfBirth: 1990, Consent: true}); !errors.Is(err, kyc.ErrRefused) {
		t.Fatalf("key reused for another question: %v", err)
	}
	if r, err := c.Verify(ctx, "k-2", kyc.Request{Number: n, Name: "  asha   RAO ", YearOfBirth: 1990, Consent: true}); err != nil || r.Status != kyc.Verified {
		t.Fatalf("same person, other spacing: %+v %v", r, err)
	}
	if r, err := c.Verify(ctx, "k-3", kyc.Request{Number: n, Name: "Asha Rao", YearOfBirth: 1991, Consent: true}); err != nil || r.Status != kyc.Mismatch {
		t.Fatalf("another year: %+v %v", r, err)
	}
	bad := n[:11] + string('0'+(n[11]-'0'+1)%10)
	if r, err := c.Verify(ctx, "k-4", kyc.Request{Number: bad, Name: "Asha Rao", YearOfBirth: 1990, Consent: true}); err != nil || r.Status != kyc.InvalidNumber {
		t.Fatalf("wrong check digit: %+v %v", r, err)
	}
	if _, err := c.Verify(ctx, "k-5", kyc.Request{Number: n, Name: "Asha Rao", YearOfBirth: 1990}); !errors.Is(err, kyc.ErrRefused) {
		t.Fatalf("no consent: %v", err)
	}
}

// TestFaults: a failing verifier decides nothing (503, retryable); one
// that loses its answer decided, and the same key later gets the decision.
func TestFaults(t *testing.T) {
	t.Parallel()
	c, sim := start(t, kyc.Faults{FailRate: 1})
	ctx := context.Background()
	req := kyc.Request{Number: number("31234512345"), Name: "Kavya Raman", YearOfBirth: 1985, Consent: true}
	if _, err := c.Verify(ctx, "f-1", req); err == nil || errors.Is(err, kyc.ErrRefused) {
		t.Fatalf("down: %v, want a retryable error", err)
	}
	if err := sim.SetFaults(kyc.Faults{LostReplyRate: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Verify(ctx, "f-1", req); err == nil {
		t.Fatal("a lost answer came through")
	}
	if err := sim.SetFaults(kyc.Faults{}); err != nil {
		t.Fatal(err)
	}
	r, err := c.Verify(ctx, "f-1", req)
	if err != nil || r.Status != kyc.Verified {
		t.Fatalf("after the faults: %+v %v", r, err)
	}
	calls, err := sim.Calls(ctx, "f-1")
	if err != nil || calls["FAILED"] != 1 || calls["VERIFIED_REPLY_LOST"] != 1 || calls["VERIFIED"] != 1 {
		t.Fatalf("calls %v %v", calls, err)
	}
	if err := sim.SetFaults(kyc.Faults{FailRate: 0.7, LostReplyRate: 0.7}); err == nil {
		t.Fatal("rates over 1 accepted")
	}
}
