// Package instrument counts, per payment instrument (a UPI address), the
// accounts whose payments with it were captured in the last 30 days. One
// address paying for many accounts is a tout's signature: admission
// refuses a further account past MaxAccounts (admission.InstrumentGuard).
//
// Only a capture counts, never a request: naming an address costs nothing,
// so counting at initiation let anyone block a stranger's address with a
// few ₹1 top-ups they never paid (issue 32). The payment path counts a
// capture once its transaction has committed (payment.Service.apply).
//
// The sets live in Redis, which may lose them: an account missing from one
// is only counted again at its next capture with the address, so a loss or
// a failed write lets an address pay for more accounts for a while, never
// fewer. The fraud clustering, which reads PostgreSQL, still links them.
package instrument

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// MaxAccounts is how many accounts may pay with one UPI address within
// Window.
const MaxAccounts = 3

// Window is how long an account stays counted against an address after
// the address's last capture.
const Window = 30 * 24 * time.Hour

// UPI names a UPI address as an instrument ("" for none).
func UPI(vpa string) string {
	if vpa == "" {
		return ""
	}
	return "upi:" + strings.ToLower(vpa)
}

// Use is an account that paid with an instrument.
type Use struct {
	UserID     int64
	Instrument string // UPI's name for it; "" counts nothing
}

// key is the set of an instrument's accounts. Its family is not the one
// the counts taken at initiation used (":inst:"), so those, which anyone
// could inflate, count nothing from the day this one holds.
func key(prefix, instrument string) string {
	h := sha256.Sum256([]byte("instrument|" + instrument))
	return prefix + ":instc:" + hex.EncodeToString(h[:12])
}

// Allowed reports whether userID may pay with instrument: it already did
// (a capture counted it), or fewer than max accounts did. It counts
// nothing.
func Allowed(ctx context.Context, rdb redis.UniversalClient, prefix, instrument string, userID int64, max int) (bool, error) {
	k := key(prefix, instrument)
	pipe := rdb.Pipeline()
	member := pipe.SIsMember(ctx, k, userID)
	card := pipe.SCard(ctx, k)
	if _, err := pipe.Exec(ctx); err != nil {
		return false, fmt.Errorf("accounts of an instrument: %w", err)
	}
	return member.Val() || card.Val() < int64(max), nil
}

// Record counts captured payments' accounts against their instruments, in
// one round trip, and keeps each set Window past its last capture. Call it
// only after the captures have committed.
func Record(ctx context.Context, rdb redis.UniversalClient, prefix string, uses ...Use) error {
	pipe := rdb.Pipeline()
	n := 0
	for _, u := range uses {
		if u.Instrument == "" {
			continue
		}
		k := key(prefix, u.Instrument)
		pipe.SAdd(ctx, k, u.UserID)
		pipe.Expire(ctx, k, Window)
		n++
	}
	if n == 0 {
		return nil
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("count %d captured instruments: %w", n, err)
	}
	return nil
}
