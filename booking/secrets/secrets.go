// Package secrets reads the shared secrets a deployment is configured
// with: the gateways' API keys and webhook secrets (several per gateway
// during a rotation), the reservation core's key, the session key. None
// has a default: a value compiled into the source is public, so a process
// that would use one refuses to start (see SECURITY.md).
package secrets

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
)

// Hint says how to make a secret.
const Hint = "make one with: openssl rand -hex 32"

// MinLen is the shortest secret accepted: 16 characters leave no room for
// guessing; openssl rand -hex 32 gives 64.
const MinLen = 16

// devValues were compiled into earlier versions and so are known to
// anyone who read the source.
var devValues = []string{
	"whsec_dev_swiftpay", "whsec_dev_bharatpg", "sk_dev_swiftpay", "sk_dev_bharatpg",
	"prs-dev-key", "dev-admin", "test-core", "test-admin",
}

// Check says what is wrong with secret value v of variable name: missing,
// too short or a known development value. nil means usable.
func Check(name, v string) error {
	switch {
	case v == "":
		return fmt.Errorf("%s is not set; %s", name, Hint)
	case slices.Contains(devValues, v):
		return fmt.Errorf("%s holds the development value %q, which anyone can read in the source; %s", name, v, Hint)
	case len(v) < MinLen:
		return fmt.Errorf("%s: a secret shorter than %d characters is guessable; %s", name, MinLen, Hint)
	}
	return nil
}

// Random returns a fresh secret: 32 random bytes in hex.
func Random() string {
	b := make([]byte, 32)
	rand.Read(b) //nolint:errcheck // never fails
	return hex.EncodeToString(b)
}

// PerGateway holds secrets per gateway id, newest first: the first is the
// one to use (call or sign with), any is accepted (verify).
type PerGateway map[string][]string

// ParseList reads "gateway=secret,gateway=secret,..." from variable name.
// A gateway may appear several times (rotation); the order is kept.
func ParseList(name, v string) (PerGateway, error) {
	out := PerGateway{}
	for item := range strings.SplitSeq(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		id, secret, ok := strings.Cut(item, "=")
		id, secret = strings.TrimSpace(id), strings.TrimSpace(secret)
		if !ok || id == "" {
			return nil, fmt.Errorf("%s: want gateway=secret,gateway=secret,... (got an item without gateway=)", name)
		}
		if err := Check(name+" ("+id+")", secret); err != nil {
			return nil, err
		}
		out[id] = append(out[id], secret)
	}
	return out, nil
}

// String formats p as ParseList reads it, gateways in sorted order.
func (p PerGateway) String() string {
	var items []string
	for _, id := range p.IDs() {
		for _, s := range p[id] {
			items = append(items, id+"="+s)
		}
	}
	return strings.Join(items, ",")
}

// IDs are the gateways of p, sorted.
func (p PerGateway) IDs() []string {
	ids := make([]string, 0, len(p))
	for id := range p {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}
