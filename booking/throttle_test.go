package booking_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"tatkal/booking"
	"tatkal/booking/inventory"
	"tatkal/booking/lab/testenv"
)

// fixedThrottle is a lever at a fixed rate for every shard (0: off).
type fixedThrottle int

func (f fixedThrottle) ShardThrottle(int64) (int, bool) { return int(f), f > 0 }
func (f fixedThrottle) Throttling() bool                { return f > 0 }
func (f fixedThrottle) ShardFrozen(int64) bool          { return false }
func (f fixedThrottle) Freezing() bool                  { return false }

// The throttle costs nothing with the lever off (not even Redis), paces
// with it set, and without Redis refuses as the hold path does
// (SEATS_UNREACHABLE, retryable), never letting the call through.
func TestThrottleOffOnAndWithoutRedis(t *testing.T) {
	ctx := context.Background()
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DialTimeout: time.Second, MaxRetries: -1}) // nothing listens
	defer dead.Close()
	if err := booking.NewThrottle(fixedThrottle(0), inventory.New(dead, "t"), nil).Admit(ctx, 1, booking.PaceHold); err != nil {
		t.Fatalf("lever off: %v", err)
	}
	err := booking.NewThrottle(fixedThrottle(5), inventory.New(dead, "t"), nil).Admit(ctx, 1, booking.PaceHold)
	if booking.ErrorCode(err) != booking.EUNAVAIL || booking.ErrorReason(err) != booking.ReasonSeatsUnreachable {
		t.Fatalf("without Redis: %v, want unavailable SEATS_UNREACHABLE", err)
	}

	rdb := testenv.Redis(t)
	th := booking.NewThrottle(fixedThrottle(1), inventory.New(rdb, testenv.RedisPrefix(t, rdb)), nil)
	if err := th.Admit(ctx, 1, booking.PacePayment); err != nil {
		t.Fatalf("first call: %v", err)
	}
	_ = th.Admit(ctx, 1, booking.PacePayment) // the one-interval burst
	err = th.Admit(ctx, 1, booking.PacePayment)
	if !booking.IsThrottled(err) || booking.ErrorCode(err) != booking.EOVERLOADED {
		t.Fatalf("over the rate: %v, want THROTTLED", err)
	}
	if d := booking.RetryAfterOf(err); d <= 0 || d > 2*time.Second {
		t.Fatalf("over the rate: wait %v", d)
	}
	if msg := booking.ErrorMessage(err); msg == "" || msg[:8] != "Payments" {
		t.Fatalf("payment refusal says %q", msg)
	}
}
