package auth

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/crypto/argon2"
)

// Argon2Params sets the cost of argon2id. Production uses DefaultParams;
// tests pass cheaper ones so thousands of accounts can log in quickly.
type Argon2Params struct {
	MemoryKiB uint32
	Time      uint32
	Threads   uint8
}

// DefaultParams follows the OWASP minimum for argon2id (19 MiB, 2 passes).
var DefaultParams = Argon2Params{MemoryKiB: 19 * 1024, Time: 2, Threads: 1}

// HashPassword returns an encoded argon2id hash with its own random salt.
func HashPassword(password string, p Argon2Params) (string, error) {
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("hash password: %w", err)
	}
	key := argon2.IDKey([]byte(password), salt, p.Time, p.MemoryKiB, p.Threads, 32)
	return fmt.Sprintf("$argon2id$v=19$m=%d,t=%d,p=%d$%s$%s", p.MemoryKiB, p.Time, p.Threads,
		base64.RawStdEncoding.EncodeToString(salt), base64.RawStdEncoding.EncodeToString(key)), nil
}

// ErrBadHash means a stored hash could not be parsed.
var ErrBadHash = errors.New("unrecognised password hash")

// CheckPassword reports whether password matches the encoded hash, in
// constant time. The cost is read from the hash itself.
func CheckPassword(encoded, password string) (bool, error) {
	f := strings.Split(encoded, "$")
	if len(f) != 6 || f[1] != "argon2id" {
		return false, ErrBadHash
	}
	var p Argon2Params
	if _, err := fmt.Sscanf(f[3], "m=%d,t=%d,p=%d", &p.MemoryKiB, &p.Time, &p.Threads); err != nil {
		return false, ErrBadHash
	}
	salt, err := base64.RawStdEncoding.DecodeString(f[4])
	if err != nil {
		return false, ErrBadHash
	}
	want, err := base64.RawStdEncoding.DecodeString(f[5])
	if err != nil {
		return false, ErrBadHash
	}
	got := argon2.IDKey([]byte(password), salt, p.Time, p.MemoryKiB, p.Threads, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1, nil
}

// The rules of a password a person sets (console users: tatkal users and
// the console's user page). MaxPasswordBytes is what every sign-in form
// takes, so a password set here can always be typed there.
const (
	MinPasswordRunes = 12
	MaxPasswordBytes = 256
)

// CheckNewPassword says what is wrong with password as the new password of
// login, or nil. The message is for the person choosing it.
func CheckNewPassword(login, password string) error {
	switch {
	case password == "":
		return errors.New("the password is empty")
	case !utf8.ValidString(password) || strings.IndexFunc(password, unicode.IsControl) >= 0:
		// Sign-in forms refuse such text, so it could never be typed.
		return errors.New("the password has control characters or is not valid UTF-8")
	case utf8.RuneCountInString(password) < MinPasswordRunes:
		return fmt.Errorf("the password is shorter than %d characters", MinPasswordRunes)
	case len(password) > MaxPasswordBytes:
		return fmt.Errorf("the password is longer than %d bytes (what a sign-in form takes)", MaxPasswordBytes)
	case login != "" && strings.Contains(strings.ToLower(password), strings.ToLower(login)):
		return errors.New("the password contains the login")
	}
	return nil
}
