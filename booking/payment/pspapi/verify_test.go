package pspapi

import (
	"errors"
	"strconv"
	"testing"
	"time"
)

// During a rotation a merchant accepts callbacks signed with the new or
// the old secret, and nothing else; a replay is a replay whatever the key.
func TestVerifyAnyAcceptsEveryLiveSecret(t *testing.T) {
	t.Parallel()
	now := time.Now()
	body := []byte(`{"event_id":"e1"}`)
	secrets := [][]byte{[]byte("new-secret-0123456789"), []byte("old-secret-0123456789")}
	ts := func(t time.Time) string { return strconv.FormatInt(t.Unix(), 10) }
	for _, s := range secrets {
		if err := VerifyAny(secrets, ts(now), Sign(s, now, body), body, now); err != nil {
			t.Errorf("signed with %s: %v", s, err)
		}
	}
	if err := VerifyAny(secrets, ts(now), Sign([]byte("whsec_dev_swiftpay"), now, body), body, now); !errors.Is(err, ErrBadSignature) {
		t.Errorf("signed with another secret: %v, want ErrBadSignature", err)
	}
	if err := VerifyAny(nil, ts(now), Sign(nil, now, body), body, now); !errors.Is(err, ErrBadSignature) {
		t.Errorf("no secrets configured: %v, want ErrBadSignature", err)
	}
	old := now.Add(-time.Hour)
	if err := VerifyAny(secrets, ts(old), Sign(secrets[1], old, body), body, now); !errors.Is(err, ErrReplayed) {
		t.Errorf("old timestamp: %v, want ErrReplayed", err)
	}
}
