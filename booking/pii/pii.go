// Package pii seals passengers' photo ID numbers at rest: AES-256-GCM
// under a key ring read from the environment (TATKAL_ID_KEYS), newest key
// first. Every sealed value names the key that sealed it, so keys rotate:
// new values use the newest key, old ones stay readable while their key
// is listed, and `tatkal ids reseal` moves them to the newest. What is
// shown to people is a mask of the last four characters (Mask), kept
// beside the sealed value so that showing it needs no key.
//
// Equality lookups never read the number: they use a keyed hash of it
// (the fraud signals' ID hash, keyed by TATKAL_FRAUD_KEY), so the key
// that decrypts is needed only where the number itself is: the hold and
// the reservation core.
package pii

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// EnvKeys is the variable the key ring comes from: id=hex,... newest first.
const EnvKeys = "TATKAL_ID_KEYS"

// aad binds a sealed value to its purpose: a value sealed for something
// else under the same key does not open as an ID number.
var aad = []byte("tatkal passenger id v1")

// Keyring is the keys ID numbers are sealed and opened with.
type Keyring struct {
	newest string
	keys   map[string]cipher.AEAD
}

// Parse reads a key ring: "id=hex,id=hex", newest first; each id 1-16
// letters, digits, '-' or '_', each key 32 bytes in hex (openssl rand -hex 32).
func Parse(spec string) (*Keyring, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return nil, fmt.Errorf("%s is not set (id=hex32bytes,...: the keys passengers' ID numbers are encrypted with, newest first); make a key with: openssl rand -hex 32", EnvKeys)
	}
	k := &Keyring{keys: map[string]cipher.AEAD{}}
	for i, part := range strings.Split(spec, ",") {
		id, hx, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || !validID(id) {
			return nil, fmt.Errorf("%s: entry %d: want id=hex with an id of 1-16 letters, digits, - or _", EnvKeys, i+1)
		}
		raw, err := hex.DecodeString(hx)
		if err != nil || len(raw) != 32 {
			return nil, fmt.Errorf("%s: key %q: want 32 bytes in hex (openssl rand -hex 32)", EnvKeys, id)
		}
		if _, dup := k.keys[id]; dup {
			return nil, fmt.Errorf("%s: key id %q listed twice", EnvKeys, id)
		}
		block, err := aes.NewCipher(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: key %q: %w", EnvKeys, id, err)
		}
		gcm, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("%s: key %q: %w", EnvKeys, id, err)
		}
		k.keys[id] = gcm
		if i == 0 {
			k.newest = id
		}
	}
	return k, nil
}

func validID(id string) bool {
	if id == "" || len(id) > 16 {
		return false
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// NewSpec makes a fresh one-key ring's specification, for tatkal dev and
// the test stacks: id "dev1".
func NewSpec(id string) string {
	b := make([]byte, 32)
	rand.Read(b) //nolint:errcheck // never fails
	return id + "=" + hex.EncodeToString(b)
}

// Newest is the id of the key new values are sealed with.
func (k *Keyring) Newest() string { return k.newest }

// Seal encrypts an ID number: "keyid:" and the nonce and ciphertext in
// unpadded base64url. "" stays "".
func (k *Keyring) Seal(ref string) (string, error) {
	if ref == "" {
		return "", nil
	}
	if k == nil || k.newest == "" {
		return "", errors.New("seal id: no key ring")
	}
	gcm := k.keys[k.newest]
	nonce := make([]byte, gcm.NonceSize(), gcm.NonceSize()+len(ref)+gcm.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("seal id: %w", err)
	}
	box := gcm.Seal(nonce, nonce, []byte(ref), aad)
	return k.newest + ":" + base64.RawURLEncoding.EncodeToString(box), nil
}

// Open decrypts a value Seal made under any key of the ring.
func (k *Keyring) Open(sealed string) (string, error) {
	if sealed == "" {
		return "", nil
	}
	id, b64, ok := strings.Cut(sealed, ":")
	if !ok {
		return "", errors.New("open id: not a sealed value")
	}
	if k == nil {
		return "", errors.New("open id: no key ring")
	}
	gcm, ok := k.keys[id]
	if !ok {
		return "", fmt.Errorf("open id: key %q is not in %s", id, EnvKeys)
	}
	box, err := base64.RawURLEncoding.DecodeString(b64)
	if err != nil || len(box) < gcm.NonceSize()+gcm.Overhead() {
		return "", fmt.Errorf("open id: sealed under %q: malformed", id)
	}
	plain, err := gcm.Open(nil, box[:gcm.NonceSize()], box[gcm.NonceSize():], aad)
	if err != nil {
		return "", fmt.Errorf("open id: sealed under %q: %w", id, err)
	}
	return string(plain), nil
}

// KeyOf is the id of the key a sealed value was sealed with.
func KeyOf(sealed string) string {
	id, _, _ := strings.Cut(sealed, ":")
	return id
}

// Hint is what is kept in clear of an ID number to show it masked: its
// last four characters (all of a shorter one is never kept: "").
func Hint(ref string) string {
	n := utf8.RuneCountInString(ref)
	if n <= 4 {
		return ""
	}
	r := []rune(ref)
	return string(r[n-4:])
}

// Mask is how an ID number is shown to anyone but the reservation core
// and the e-ticket: "••••1234"; "" when there is none.
func Mask(hint string) string {
	if hint == "" {
		return ""
	}
	return "••••" + hint
}
