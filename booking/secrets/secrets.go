// Package secrets reads the shared secrets a deployment is configured
// with: the gateways' API keys and webhook secrets (several per gateway
// during a rotation), the reservation core's key, the session key. None
// has a default: a value compiled into the source is public, so a process
// that would use one refuses to start (see SECURITY.md).
package secrets

import (
	"crypto/rand"
	"crypto/sha256"
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

// devDigests are the SHA-256 digests of values compiled into earlier
// versions, known to anyone who read those: refused, and only their
// digests kept here, so no development secret is in the source.
var devDigests = []string{
	"00bea892273c4dba41821681865f872e47a5144f1c3d24348db5c58d26653f09",
	"1656efbb3f23f7f9dcfe68357b5e172a9922ad882def56b9b48783496fbd8060",
	"b3b13b4a8b571624c08b1104af14021f449624a22ac428fc6508a72e1458c6c1",
	"dd84c828e8757d25d4aac7a83f30f98101eba8b95132ee768e2942c77d0b7632",
	"2a4ffe3eb3277b921827baa628ae79a041e32c8f759be7c907b606f0506cabdb",
	"de72d648e29b247c1875138a7140256dbe5df3e6c9f37d592b07d9de509d2878",
	"c198dba44dc479d00b5597405eef82f3c6db92f1970e4ac94023aa3e234c52b2",
	"db09d473d4b6461b91bfa47e4fed3ef55e0234df4132ca7a827b0a69e8927cac",
}

func knownDevValue(v string) bool {
	d := sha256.Sum256([]byte(v))
	return slices.Contains(devDigests, hex.EncodeToString(d[:]))
}

// Check says what is wrong with secret value v of variable name: missing,
// too short or a known development value. nil means usable.
func Check(name, v string) error {
	switch {
	case v == "":
		return fmt.Errorf("%s is not set; %s", name, Hint)
	case knownDevValue(v):
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
