// Package token signs and checks the waiting room's bearer artefacts with
// HMAC-SHA256: admission tokens, device bindings, queue tickets and
// booking-time challenges. It imports nothing of tatkal, so the hold path
// (package booking) can check an admission token by signature alone, with
// no backend call.
package token

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"time"
)

// Errors of Verify. The API answers them all alike (see booking/api/queue.go).
var (
	ErrMalformed   = errors.New("malformed token")
	ErrForged      = errors.New("token signature does not verify")
	ErrExpired     = errors.New("token expired")
	ErrWrongUser   = errors.New("token belongs to another account")
	ErrWrongSess   = errors.New("token bound to another session")
	ErrWrongDevice = errors.New("token bound to another device")
	ErrWrongIntent = errors.New("token is for another train, date or class")
	ErrNoDevice    = errors.New("no valid device binding")
	ErrWork        = errors.New("challenge answer is wrong")
)

// Key is one HMAC key of a Keyring, named by a short id that travels in
// every token it signs.
type Key struct {
	ID     string
	Secret []byte
}

// Keyring signs with its first key and accepts any of its keys, so keys
// rotate without a flag day: add the new key first, keep the old one for
// one token lifetime, then drop it.
type Keyring struct {
	keys []Key
	byID map[string][]byte
}

// NewKeyring returns a keyring; keys[0] signs. Every secret must be at
// least 32 bytes and ids unique, short and free of '.'.
func NewKeyring(keys ...Key) (*Keyring, error) {
	if len(keys) == 0 {
		return nil, errors.New("keyring: no keys")
	}
	k := &Keyring{keys: keys, byID: map[string][]byte{}}
	for _, key := range keys {
		if len(key.Secret) < 32 {
			return nil, fmt.Errorf("keyring: key %q shorter than 32 bytes", key.ID)
		}
		if key.ID == "" || len(key.ID) > 8 || strings.ContainsAny(key.ID, "._") {
			return nil, fmt.Errorf("keyring: bad key id %q", key.ID)
		}
		if _, dup := k.byID[key.ID]; dup {
			return nil, fmt.Errorf("keyring: duplicate key id %q", key.ID)
		}
		k.byID[key.ID] = key.Secret
	}
	return k, nil
}

// Derive returns a 32-byte key for purpose from a master secret, so one
// configured secret yields independent keys for independent uses.
func Derive(master []byte, purpose string) []byte {
	m := hmac.New(sha256.New, master)
	m.Write([]byte("tatkal/admission/" + purpose))
	return m.Sum(nil)
}

func mac(key []byte, parts ...string) []byte {
	m := hmac.New(sha256.New, key)
	for _, p := range parts {
		m.Write([]byte(p))
		m.Write([]byte{0})
	}
	return m.Sum(nil)
}

var b64 = base64.RawURLEncoding

// sign returns prefix + kid + "." + payload + "." + mac.
func (k *Keyring) sign(prefix, payload string) string {
	key := k.keys[0]
	p := b64.EncodeToString([]byte(payload))
	return prefix + key.ID + "." + p + "." + b64.EncodeToString(mac(key.Secret, prefix, key.ID, p)[:20])
}

// open checks a signed string and returns its payload fields.
func (k *Keyring) open(prefix, tok string, nfields int) ([]string, error) {
	body, ok := strings.CutPrefix(tok, prefix)
	if !ok || len(tok) > 512 {
		return nil, ErrMalformed
	}
	f := strings.Split(body, ".")
	if len(f) != 3 {
		return nil, ErrMalformed
	}
	secret, ok := k.byID[f[0]]
	if !ok {
		return nil, ErrForged
	}
	got, err := b64.DecodeString(f[2])
	if err != nil || !hmac.Equal(got, mac(secret, prefix, f[0], f[1])[:20]) {
		return nil, ErrForged
	}
	raw, err := b64.DecodeString(f[1])
	if err != nil {
		return nil, ErrMalformed
	}
	fields := strings.Split(string(raw), "|")
	if len(fields) != nfields {
		return nil, ErrMalformed
	}
	return fields, nil
}

// SessionHash names a session by its bearer token, without keeping it.
func SessionHash(sessionToken string) string {
	h := sha256.Sum256([]byte(sessionToken))
	return b64.EncodeToString(h[:12])
}

// TokenID is the id of the one admission a user gets in one queue: every
// token minted for that admission carries it, so single use covers them all.
func TokenID(shardID, userID int64, round int64) string {
	h := sha256.Sum256([]byte(fmt.Sprintf("adm|%d|%d|%d", shardID, userID, round)))
	return hex.EncodeToString(h[:12])
}

// Claims are what an admission token says.
type Claims struct {
	TokenID   string
	UserID    int64
	ShardID   int64
	Session   string // SessionHash of the bearer token it was minted for
	Device    string // device id of the device binding it was minted for
	ExpiresAt time.Time
	KeyID     string
}

const admPrefix = "adm_"

// Issue signs an admission token.
func (k *Keyring) Issue(c Claims) string {
	return k.sign(admPrefix, strings.Join([]string{"1", c.TokenID, strconv.FormatInt(c.UserID, 10),
		strconv.FormatInt(c.ShardID, 10), c.Session, c.Device, strconv.FormatInt(c.ExpiresAt.UnixMilli(), 10)}, "|"))
}

// SessionInfo is the caller of the hold, as the hold request shows it.
type SessionInfo struct {
	UserID       int64
	SessionToken string // the raw bearer token of the request
	DeviceToken  string // the raw X-Device-Token header (a device binding)
}

// Intent is what the hold is for: the shard of train, date, class, quota.
type Intent struct {
	ShardID int64
}

// Verifier checks admission tokens by signature only.
type Verifier struct {
	keys    *Keyring
	devices *Keyring
}

// NewVerifier returns a verifier over the admission keyring and the device
// binding keyring.
func NewVerifier(keys, devices *Keyring) *Verifier { return &Verifier{keys: keys, devices: devices} }

// Verify checks an admission token for this caller, device and intent at
// now: signature (any key of the ring), expiry, and every binding. It makes
// no backend call; single use is the caller's to enforce, by marking
// UsedKey(claims) inside the hold's atomic step.
func (v *Verifier) Verify(tok string, sess SessionInfo, intent Intent, now time.Time) (Claims, error) {
	f, err := v.keys.open(admPrefix, tok, 7)
	if err != nil {
		return Claims{}, err
	}
	if f[0] != "1" {
		return Claims{}, ErrMalformed
	}
	var c Claims
	c.TokenID, c.Session, c.Device = f[1], f[4], f[5]
	c.KeyID = tok[len(admPrefix):strings.IndexByte(tok, '.')]
	var e1, e2, e3 error
	c.UserID, e1 = strconv.ParseInt(f[2], 10, 64)
	c.ShardID, e2 = strconv.ParseInt(f[3], 10, 64)
	exp, e3 := strconv.ParseInt(f[6], 10, 64)
	if e1 != nil || e2 != nil || e3 != nil || c.TokenID == "" {
		return Claims{}, ErrMalformed
	}
	c.ExpiresAt = time.UnixMilli(exp).UTC()
	switch {
	case !now.Before(c.ExpiresAt):
		return c, ErrExpired
	case c.UserID != sess.UserID:
		return c, ErrWrongUser
	case c.Session != SessionHash(sess.SessionToken):
		return c, ErrWrongSess
	case c.ShardID != intent.ShardID:
		return c, ErrWrongIntent
	}
	dev, err := v.Device(sess.DeviceToken, sess.UserID)
	if err != nil || dev != c.Device {
		return c, ErrWrongDevice
	}
	return c, nil
}

// UsedKey is the Redis key whose SET NX marks the token used. It carries
// the seat shard's hash tag ({s<id>}), so the HOLD script can set it in its
// own atomic step on Redis Cluster too.
func UsedKey(prefix string, c Claims) string {
	return prefix + ":{s" + strconv.FormatInt(c.ShardID, 10) + "}:tok:" + c.TokenID
}

// UsedTTL is how long the used mark must live: past the token's expiry.
func UsedTTL(c Claims, now time.Time) time.Duration {
	return max(c.ExpiresAt.Sub(now), 0) + time.Minute
}

const devPrefix = "dv_"

// BindDevice signs a device binding: this account uses this device.
func (k *Keyring) BindDevice(userID int64, deviceID string, expires time.Time) string {
	return k.sign(devPrefix, strings.Join([]string{strconv.FormatInt(userID, 10), deviceID, strconv.FormatInt(expires.Unix(), 10)}, "|"))
}

// Device returns the device id a binding names, if the binding is genuine
// and belongs to userID. Expiry is not checked on the hot path beyond the
// signature: bindings live as long as sessions.
func (v *Verifier) Device(binding string, userID int64) (string, error) {
	return DeviceOf(v.devices, binding, userID)
}

// DeviceOf checks a device binding with keys.
func DeviceOf(keys *Keyring, binding string, userID int64) (string, error) {
	if binding == "" {
		return "", ErrNoDevice
	}
	f, err := keys.open(devPrefix, binding, 3)
	if err != nil {
		return "", ErrNoDevice
	}
	if f[0] != strconv.FormatInt(userID, 10) || f[1] == "" {
		return "", ErrNoDevice
	}
	return f[1], nil
}

// DeviceID names a client-chosen device token without keeping it.
func DeviceID(clientToken string) string {
	h := sha256.Sum256([]byte("device|" + clientToken))
	return hex.EncodeToString(h[:10])
}

// Ticket is the opaque queue ticket of userID in shard's queue: the same
// account always gets the same ticket, and no one can derive the account
// from it or forge one for another account.
func Ticket(key []byte, shardID, userID int64) string {
	m := mac(key, "ticket", strconv.FormatInt(shardID, 10), strconv.FormatInt(userID, 10))
	return "qt_" + strconv.FormatInt(shardID, 10) + "_" + b64.EncodeToString(m[:15])
}

// TicketShard reads the shard of a ticket; CheckTicket proves it is the
// caller's.
func TicketShard(ticket string) (int64, bool) {
	body, ok := strings.CutPrefix(ticket, "qt_")
	if !ok {
		return 0, false
	}
	s, _, ok := strings.Cut(body, "_")
	if !ok {
		return 0, false
	}
	id, err := strconv.ParseInt(s, 10, 64)
	return id, err == nil && id > 0
}

// CheckTicket reports whether ticket is userID's ticket.
func CheckTicket(key []byte, ticket string, userID int64) (int64, bool) {
	shard, ok := TicketShard(ticket)
	if !ok {
		return 0, false
	}
	return shard, hmac.Equal([]byte(ticket), []byte(Ticket(key, shard, userID)))
}

// Challenge is a booking-time proof of work: find a nonce such that
// SHA-256(challenge token "|" nonce) starts with Bits zero bits.
type Challenge struct {
	ID        string
	UserID    int64
	Session   string // SessionHash
	Attempt   string // the hold's Idempotency-Key
	Bits      int
	ExpiresAt time.Time
}

const chPrefix = "ch_"

// IssueChallenge signs a challenge.
func (k *Keyring) IssueChallenge(c Challenge) string {
	return k.sign(chPrefix, strings.Join([]string{c.ID, strconv.FormatInt(c.UserID, 10), c.Session, c.Attempt,
		strconv.Itoa(c.Bits), strconv.FormatInt(c.ExpiresAt.UnixMilli(), 10)}, "|"))
}

// VerifyChallenge checks a solved challenge for this session and attempt:
// signature, expiry, binding and the work itself. Single use is the
// caller's: mark ChallengeUsedKey with SET NX.
func VerifyChallenge(keys *Keyring, tok, nonce string, userID int64, sessionToken, attempt string, now time.Time) (Challenge, error) {
	f, err := keys.open(chPrefix, tok, 6)
	if err != nil {
		return Challenge{}, err
	}
	var c Challenge
	c.ID, c.Session, c.Attempt = f[0], f[2], f[3]
	var e1, e2, e3 error
	c.UserID, e1 = strconv.ParseInt(f[1], 10, 64)
	c.Bits, e2 = strconv.Atoi(f[4])
	exp, e3 := strconv.ParseInt(f[5], 10, 64)
	if e1 != nil || e2 != nil || e3 != nil {
		return Challenge{}, ErrMalformed
	}
	c.ExpiresAt = time.UnixMilli(exp).UTC()
	switch {
	case !now.Before(c.ExpiresAt):
		return c, ErrExpired
	case c.UserID != userID:
		return c, ErrWrongUser
	case c.Session != SessionHash(sessionToken):
		return c, ErrWrongSess
	case c.Attempt != attempt:
		return c, ErrWrongIntent
	case len(nonce) == 0 || len(nonce) > 32 || LeadingZeroBits(tok, nonce) < c.Bits:
		return c, ErrWork
	}
	return c, nil
}

// LeadingZeroBits counts the leading zero bits of SHA-256(tok "|" nonce).
func LeadingZeroBits(tok, nonce string) int {
	return zeroBits(sha256.Sum256([]byte(tok + "|" + nonce)))
}

// zeroBits counts a hash's leading zero bits.
func zeroBits(h [sha256.Size]byte) int {
	n := 0
	for i := 0; i < len(h); i += 8 {
		w := binary.BigEndian.Uint64(h[i:])
		n += bits.LeadingZeros64(w)
		if w != 0 {
			break
		}
	}
	return n
}

// Solve finds a nonce for a challenge (what a client does; tests and the
// rehearsal's travellers use it). It hashes in one reused buffer: built
// anew for each try, the string cost as much as the hash, and a
// rehearsal's thousands of travellers solve 20-bit challenges on the same
// cores as the stack they measure.
func Solve(tok string, nbits int) string {
	buf := make([]byte, 0, len(tok)+24)
	buf = append(buf, tok...)
	buf = append(buf, '|')
	prefix := len(buf)
	for i := int64(0); ; i++ {
		buf = strconv.AppendInt(buf[:prefix], i, 10)
		if zeroBits(sha256.Sum256(buf)) >= nbits {
			return string(buf[prefix:])
		}
	}
}

const attPrefix = "at_"

// Attest signs a device attestation: the platform's integrity evidence for
// this account's device was verified at device binding, valid until
// expires. Clients send it as X-Client-Attestation.
func (k *Keyring) Attest(userID int64, deviceID string, expires time.Time) string {
	return k.sign(attPrefix, strings.Join([]string{strconv.FormatInt(userID, 10), deviceID, strconv.FormatInt(expires.Unix(), 10)}, "|"))
}

// Attested reports whether att is a genuine, unexpired attestation of
// userID's device deviceID. Anything else, however it looks, is no
// attestation at all.
func Attested(keys *Keyring, att string, userID int64, deviceID string, now time.Time) bool {
	if att == "" || deviceID == "" {
		return false
	}
	f, err := keys.open(attPrefix, att, 3)
	if err != nil {
		return false
	}
	exp, err := strconv.ParseInt(f[2], 10, 64)
	return err == nil && f[0] == strconv.FormatInt(userID, 10) && f[1] == deviceID && now.Before(time.Unix(exp, 0))
}
