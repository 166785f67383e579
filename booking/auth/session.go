package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Session is what a signed token says about its bearer.
type Session struct {
	UserID    int64
	Verified  bool // identity-verified account
	Agent     bool
	CreatedAt time.Time // account creation, for the account-age rule
	ExpiresAt time.Time
	// Generation is the account's session generation when the token was
	// issued; "log out everywhere" raises the account's, killing older tokens.
	Generation int64
	// ID names this session, so logging out can revoke it alone (NewSessionID).
	ID string
}

// NewSessionID returns a fresh random session id.
func NewSessionID() string {
	b := make([]byte, 12)
	rand.Read(b) //nolint:errcheck // crypto/rand never fails on Linux
	return base64.RawURLEncoding.EncodeToString(b)
}

// Signer signs and checks session tokens with an HMAC key.
type Signer struct{ key []byte }

// NewSigner returns a Signer; key must be at least 32 bytes.
func NewSigner(key []byte) (*Signer, error) {
	if len(key) < 32 {
		return nil, errors.New("session key shorter than 32 bytes")
	}
	return &Signer{key: key}, nil
}

// ErrBadToken is any token that is malformed, forged or expired.
var ErrBadToken = errors.New("invalid or expired session")

// Sign encodes s as "st_<payload>.<mac>".
func (g *Signer) Sign(s Session) string {
	payload := fmt.Sprintf("%d|%t|%t|%d|%d|%d|%s", s.UserID, s.Verified, s.Agent, s.CreatedAt.Unix(), s.ExpiresAt.Unix(),
		s.Generation, s.ID)
	p := base64.RawURLEncoding.EncodeToString([]byte(payload))
	return "st_" + p + "." + g.mac(p)
}

func (g *Signer) mac(p string) string {
	m := hmac.New(sha256.New, g.key)
	m.Write([]byte(p))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// Verify checks the signature and expiry of token at time now.
func (g *Signer) Verify(token string, now time.Time) (Session, error) {
	body, ok := strings.CutPrefix(token, "st_")
	if !ok {
		return Session{}, ErrBadToken
	}
	p, mac, ok := strings.Cut(body, ".")
	if !ok || !hmac.Equal([]byte(mac), []byte(g.mac(p))) {
		return Session{}, ErrBadToken
	}
	raw, err := base64.RawURLEncoding.DecodeString(p)
	if err != nil {
		return Session{}, ErrBadToken
	}
	f := strings.Split(string(raw), "|")
	// Five fields: a token from before revocation existed (generation 0,
	// no id); it dies with the first "log out everywhere" or at expiry.
	if len(f) != 5 && len(f) != 7 {
		return Session{}, ErrBadToken
	}
	var s Session
	var created, expires int64
	if s.UserID, err = strconv.ParseInt(f[0], 10, 64); err != nil {
		return Session{}, ErrBadToken
	}
	s.Verified, s.Agent = f[1] == "true", f[2] == "true"
	if created, err = strconv.ParseInt(f[3], 10, 64); err != nil {
		return Session{}, ErrBadToken
	}
	if expires, err = strconv.ParseInt(f[4], 10, 64); err != nil {
		return Session{}, ErrBadToken
	}
	s.CreatedAt, s.ExpiresAt = time.Unix(created, 0).UTC(), time.Unix(expires, 0).UTC()
	if len(f) == 7 {
		if s.Generation, err = strconv.ParseInt(f[5], 10, 64); err != nil || s.Generation < 0 || len(f[6]) > 32 {
			return Session{}, ErrBadToken
		}
		s.ID = f[6]
	}
	if !now.Before(s.ExpiresAt) {
		return Session{}, ErrBadToken
	}
	return s, nil
}
