package admission

import (
	"context"
	"sync"
	"testing"
	"time"

	"tatkal/booking/admission/token"
	"tatkal/booking/instrument"
)

// TestConcurrentEntriesOneTicket: one account entering from many
// goroutines at once gets one place and one ticket.
func TestConcurrentEntriesOneTicket(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	shard := b.shard(t, "3A", 0, time.Now().Add(time.Minute), "queue")
	c := b.caller(77)
	var wg sync.WaitGroup
	tickets := make(chan string, 32)
	var created sync.Map
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := b.svc.Enter(ctx, c, intentOf(shard))
			if err != nil {
				t.Errorf("enter: %v", err)
				return
			}
			if !v.AlreadyInQueue {
				created.Store(i, true)
			}
			tickets <- v.Ticket
		}()
	}
	wg.Wait()
	close(tickets)
	first := ""
	for tk := range tickets {
		if first == "" {
			first = tk
		}
		if tk != first {
			t.Fatalf("two tickets: %s %s", first, tk)
		}
	}
	n := 0
	created.Range(func(any, any) bool { n++; return true })
	if n != 1 {
		t.Fatalf("%d entries created, want 1", n)
	}
	if card, _ := b.env.Redis.ZCard(ctx, b.svc.qkey(shard.ID, "z")).Result(); card != 1 {
		t.Fatalf("queue holds %d", card)
	}
}

// TestOverloadedTierAnswersStatically: past MaxInFlight the gate refuses at once.
func TestOverloadedTierAnswersStatically(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.MaxInFlight = 2 })
	r1, ok1 := b.svc.Acquire()
	r2, ok2 := b.svc.Acquire()
	_, ok3 := b.svc.Acquire()
	if !ok1 || !ok2 || ok3 {
		t.Fatalf("gate of 2: %v %v %v", ok1, ok2, ok3)
	}
	r1()
	if r, ok := b.svc.Acquire(); !ok {
		t.Fatal("a freed slot was not reusable")
	} else {
		r()
	}
	r2()
}

// TestChallengeSingleUse: a solved challenge passes once; replays,
// another attempt or a wrong answer get the uniform high-demand answer.
func TestChallengeSingleUse(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.ChallengeBits, c.RiskyExtraBits = 8, 4 })
	ctx := context.Background()
	c := b.caller(5)
	c.Attestation = b.svc.attest.Attest(5, "dev5", time.Now().Add(time.Hour))
	ch, err := b.svc.Challenge(ctx, c, "attempt-0001")
	if err != nil || ch.Bits != 8 {
		t.Fatalf("challenge: %+v %v", ch, err)
	}
	risky := c
	risky.Attestation = ""
	if rc, _ := b.svc.Challenge(ctx, risky, "attempt-0001"); rc.Bits != 12 {
		t.Fatalf("risky client got %d bits", rc.Bits)
	}
	nonce := token.Solve(ch.Challenge, ch.Bits)
	if err := b.svc.CheckChallenge(ctx, c, ch.Challenge, nonce, "attempt-0002"); !IsHighDemand(err) {
		t.Fatalf("other attempt: %v", err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	passed := 0
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := b.svc.CheckChallenge(ctx, c, ch.Challenge, nonce, "attempt-0001"); err == nil {
				mu.Lock()
				passed++
				mu.Unlock()
			} else if !IsHighDemand(err) {
				t.Errorf("replay: %v", err)
			}
		}()
	}
	wg.Wait()
	if passed != 1 {
		t.Fatalf("challenge passed %d times", passed)
	}
}

// TestInstrumentLimit: a UPI handle that paid for more accounts than
// allowed is refused for a further account, with the uniform answer; the
// check itself counts nothing, only captures do.
func TestInstrumentLimit(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	name := instrument.UPI("Asha@OKBank")
	for uid := int64(1); uid <= 5; uid++ {
		if err := b.svc.CheckInstrument(ctx, name, uid, 3); err != nil {
			t.Fatalf("account %d before any capture: %v", uid, err)
		}
	}
	for uid := int64(1); uid <= 3; uid++ {
		if err := instrument.Record(ctx, b.env.Redis, b.env.KeyPrefix, instrument.Use{UserID: uid, Instrument: name}); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.svc.CheckInstrument(ctx, name, 2, 3); err != nil {
		t.Fatalf("an account already counted: %v", err)
	}
	if err := b.svc.CheckInstrument(ctx, instrument.UPI("asha@okbank"), 4, 3); !IsHighDemand(err) {
		t.Fatalf("fourth account: %v", err)
	}
}
