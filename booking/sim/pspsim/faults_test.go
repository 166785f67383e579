package pspsim

import (
	mrand "math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"tatkal/booking/lab/testenv"
	"tatkal/booking/payment/pspapi"
)

func seeded(seed uint64) *Server {
	return &Server{seed: seed, rng: mrand.New(mrand.NewPCG(seed, 1))}
}

func TestChanceIsAPureFunctionOfSeedAndKey(t *testing.T) {
	a, a2, other := seeded(7), seeded(7), seeded(8)
	hits, differ := 0, 0
	for i := range 4000 {
		ref := "m-" + strconv.Itoa(i)
		x := a.chance(0.3, "swiftpay", ref, "decline")
		if x != a2.chance(0.3, "swiftpay", ref, "decline") {
			t.Fatalf("same seed, same key, different answers for %s", ref)
		}
		if x != other.chance(0.3, "swiftpay", ref, "decline") {
			differ++
		}
		if x {
			hits++
		}
		if a.chance(0, ref) || !a.chance(1, ref) {
			t.Fatal("rates 0 and 1 are not certain")
		}
	}
	if hits < 1100 || hits > 1300 {
		t.Fatalf("rate 0.3 hit %d of 4000", hits)
	}
	if differ < 1000 {
		t.Fatalf("another seed changed only %d of 4000 decisions", differ)
	}
}

func TestLatencyDistribution(t *testing.T) {
	s := seeded(3)
	rc := pspapi.RouteConfig{LatencyP50Ms: 100, LatencyP99Ms: 1000}
	var ds []time.Duration
	for range 20000 {
		ds = append(ds, s.latency(rc))
	}
	slices.Sort(ds)
	p50, p99, top := ds[len(ds)/2], ds[len(ds)*99/100], ds[len(ds)-1]
	if p50 < 90*time.Millisecond || p50 > 110*time.Millisecond {
		t.Errorf("p50 = %v, want ~100ms", p50)
	}
	if p99 < 850*time.Millisecond || p99 > 1150*time.Millisecond {
		t.Errorf("p99 = %v, want ~1s", p99)
	}
	if top > 3*time.Second {
		t.Errorf("max = %v, want the tail cut at 3×p99", top)
	}
	if d := s.latency(pspapi.RouteConfig{}); d != 0 {
		t.Errorf("zero config latency = %v", d)
	}
	if d := s.latency(pspapi.RouteConfig{LatencyP50Ms: 40, LatencyP99Ms: 40}); d != 40*time.Millisecond {
		t.Errorf("flat latency = %v", d)
	}
}

// The seed decides which payments are declined, end to end.
func TestSeedDecidesFatesEndToEnd(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{seed: 42, route: func(rc *pspapi.RouteConfig) { rc.DeclineRate = 0.5; rc.AutoApproveMs = 0 }})
	var refs []pspapi.Payment
	want := map[string]string{}
	declined := 0
	for i := range 12 {
		ref := "pay-fate-" + strconv.Itoa(i)
		refs = append(refs, b.create(t, "bharatpg", b.createReq(ref, pspapi.UPI, 100)))
		want[ref] = pspapi.StatusSuccess
		if seeded(42).chance(0.5, "bharatpg", ref, "decline") {
			want[ref] = pspapi.StatusFailed
			declined++
		}
	}
	if declined == 0 || declined == 12 {
		t.Fatalf("seed 42 declines %d of 12; pick keys that exercise both", declined)
	}
	for _, p := range refs {
		testenv.Eventually(t, 3*time.Second, "final status of "+p.MerchantRef, func() error {
			return testenv.Want(len(b.hooks.of(p.PSPRef)) == 1, "not yet")
		})
		if got := b.hooks.of(p.PSPRef)[0].Status; got != want[p.MerchantRef] {
			t.Errorf("%s: %s, want %s", p.MerchantRef, got, want[p.MerchantRef])
		}
	}
}
