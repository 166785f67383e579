// Package signup opens passenger accounts: a mobile number proven by a
// one-time code sent by SMS, an e-mail address, a password; then the
// account's identity checked by the identity verifier (booking/kyc), which
// makes it identity-verified, as Tatkal requires (DOMAIN.md). It also
// resets a forgotten password by a code sent to the account's number.
//
// One-time codes (signup_codes): six digits, kept as keyed hashes only
// (so are the number and the requesting network), alive 5 minutes, dead
// after 5 wrong answers or when a newer one is sent; at most one per
// number per 30 s and 5 per number per hour, and 30 per network (an IPv4
// address or IPv6 /64) per hour. Nothing tells whether a number has an
// account: asking for a sign-up code for a number that has one, or a reset
// code for a number that has none, gets the same answer and counts against
// the same limits; the owner of a registered number is told by SMS that
// someone tried to open an account with it, and a number with no account
// gets nothing on a reset. A wrong code, an expired one and the absence of
// a code answer alike whatever the number.
//
// Identity: the verifier is asked with the person's consent; the product
// keeps a keyed hash of the identity number (one account per identity),
// the verifier's reference and when, never the number. A verifier that is
// down or slow changes nothing: the account stays as it was and the
// passenger is told to try again.
package signup

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net/mail"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"tatkal/booking"
	"tatkal/booking/audit"
	"tatkal/booking/auth"
	"tatkal/booking/db"
	"tatkal/booking/fraud"
	"tatkal/booking/i18n"
	"tatkal/booking/kyc"
)

// Purposes of a code.
const (
	PurposeSignup = "SIGNUP"
	PurposeReset  = "RESET"
)

// Limits of the codes.
const (
	CodeTTL         = 5 * time.Minute
	CodeGap         = 30 * time.Second // between two requests for one number
	CodesPerHour    = 5                // per number
	CodesPerNet     = 30               // per network per hour: a carrier NAT's honest sign-ups fit
	AttemptsPerCode = 5
	MinAge          = 18 // years: an account holder is an adult
)

// Config wires the service.
type Config struct {
	Pool *pgxpool.Pool
	// Secret keys the hashes of codes, numbers and networks (the session
	// key; a derived key is used). IdentityKey keys users.phone_hash (the
	// fraud key, as the phone verification's) and the identity hash.
	Secret, IdentityKey []byte
	// Verifier checks identities; nil: identity verification answers
	// KYC_NOT_CONFIGURED.
	Verifier kyc.Verifier
	// Password is the argon2id cost of new passwords (zero: auth.DefaultParams).
	Password   auth.Argon2Params
	SessionTTL time.Duration // of the tokens a reset revokes (zero: 12 h)
	Now        func() time.Time
	Log        *slog.Logger
}

// Service opens accounts.
type Service struct {
	cfg Config
	key []byte
}

// New returns the service.
func New(cfg Config) (*Service, error) {
	if cfg.Pool == nil || len(cfg.Secret) < 16 || len(cfg.IdentityKey) < 16 {
		return nil, errors.New("signup: Pool, Secret and IdentityKey (16+ bytes) are required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Password == (auth.Argon2Params{}) {
		cfg.Password = auth.DefaultParams
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = 12 * time.Hour
	}
	m := hmac.New(sha256.New, cfg.Secret)
	m.Write([]byte("tatkal-signup-codes"))
	return &Service{cfg: cfg, key: m.Sum(nil)}, nil
}

func (s *Service) mac(parts ...string) string {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(strings.Join(parts, "|")))
	return hex.EncodeToString(m.Sum(nil))
}

// Sent is the answer to a code request: the same whether a code went.
type Sent struct {
	ExpiresInS int      `json:"expires_in_s"`
	Channels   []string `json:"channels"`
	Message    string   `json:"message"`
}

var (
	errBadPhone    = booking.Errorf(booking.EINVALID, "BAD_PHONE", "Give a 10-digit Indian mobile number.")
	errWrongCode   = booking.Errorf(booking.EINVALID, "OTP_WRONG", "That code is not right. Check the latest message and try again.")
	errNoCode      = booking.Errorf(booking.EINVALID, "OTP_NONE", "There is no code waiting for this number; ask for a new one.")
	errExpiredCode = booking.Errorf(booking.EINVALID, "OTP_EXPIRED", "That code has expired; ask for a new one.")
	errLockedCode  = booking.Errorf(booking.ELIMIT, "OTP_LOCKED", "Too many wrong codes; ask for a new one.")
)

// RequestCode sends a one-time code for purpose (PurposeSignup or
// PurposeReset) to phone, asked from address ip, with messages in lang.
// The answer and the limits are the same whether the number has an
// account (see the package doc).
func (s *Service) RequestCode(ctx context.Context, purpose, phone, ip, lang string) (Sent, error) {
	if purpose != PurposeSignup && purpose != PurposeReset {
		return Sent{}, fmt.Errorf("request code: unknown purpose %q", purpose)
	}
	num := fraud.NormalisePhone(phone)
	if num == "" {
		return Sent{}, errBadPhone
	}
	lang = i18n.Norm(lang)
	now := s.cfg.Now()
	phoneMAC, netMAC := s.mac("phone", num), s.mac("net", auth.ClientNet(ip))
	err := db.Transact(ctx, s.cfg.Pool, func(tx pgx.Tx) error {
		// One request at a time per number, so the limits count exactly.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('signup:' || $1))`, phoneMAC); err != nil {
			return err
		}
		var lastHour, netHour int
		var last *time.Time
		if err := tx.QueryRow(ctx, `SELECT count(*), max(created_at) FROM signup_codes WHERE phone_mac = $1 AND created_at > $2`,
			phoneMAC, now.Add(-time.Hour)).Scan(&lastHour, &last); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM signup_codes WHERE net_mac = $1 AND created_at > $2`,
			netMAC, now.Add(-time.Hour)).Scan(&netHour); err != nil {
			return err
		}
		switch {
		case last != nil && now.Sub(*last) < CodeGap:
			return booking.Errorf(booking.ELIMIT, "OTP_TOO_SOON", "A code was sent less than %d seconds ago; wait for it, or ask again in a moment.", int(CodeGap.Seconds()))
		case lastHour >= CodesPerHour:
			return booking.Errorf(booking.ELIMIT, "OTP_TOO_MANY", "Too many codes asked for this number in the last hour; try again later.")
		case netHour >= CodesPerNet:
			return booking.Errorf(booking.ELIMIT, "OTP_TOO_MANY_HERE", "Too many codes asked for from this network in the last hour; try again later.")
		}
		var userID int64
		var userLang string
		err := tx.QueryRow(ctx, `SELECT id, lang FROM users WHERE phone = $1`, num).Scan(&userID, &userLang)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		exists := err == nil
		// A code goes out only where it can open something: a new number
		// for a sign-up, an account's number for a reset.
		send := exists == (purpose == PurposeReset)
		var code, codeMAC *string
		if send {
			n, err := rand.Int(rand.Reader, big.NewInt(1_000_000))
			if err != nil {
				return err
			}
			c := fmt.Sprintf("%06d", n.Int64())
			m := s.mac("code", purpose, num, c)
			code, codeMAC = &c, &m
		}
		// Older codes for this number and purpose die when a new one is asked for.
		if _, err := tx.Exec(ctx, `UPDATE signup_codes SET consumed_at = $3 WHERE phone_mac = $1 AND purpose = $2 AND consumed_at IS NULL`,
			phoneMAC, purpose, now); err != nil {
			return err
		}
		var id int64
		if err := tx.QueryRow(ctx, `INSERT INTO signup_codes (purpose, phone_mac, net_mac, code_mac, created_at, expires_at)
			VALUES ($1, $2, $3, $4, $5, $6) RETURNING id`, purpose, phoneMAC, netMAC, codeMAC, now, now.Add(CodeTTL)).Scan(&id); err != nil {
			return err
		}
		ref := strings.ToLower(purpose) + "-" + strconv.FormatInt(id, 10)
		switch {
		case send && purpose == PurposeSignup:
			return sms(ctx, tx, nil, num, "SIGNUP_OTP", ref, lang, "msg.signup.otp", *code, int(CodeTTL.Minutes()))
		case send: // a reset code, in the account's language
			return sms(ctx, tx, &userID, num, "RESET_OTP", ref, userLang, "msg.reset.otp", *code, int(CodeTTL.Minutes()))
		case purpose == PurposeSignup: // the number has an account: its owner is told, nobody else
			return sms(ctx, tx, &userID, num, "SIGNUP_EXISTS", ref, userLang, "msg.signup.exists")
		}
		return nil // a reset for a number with no account: nothing to send
	})
	if err != nil {
		if booking.ErrorCode(err) == booking.EINTERNAL {
			return Sent{}, fmt.Errorf("request %s code: %w", purpose, err)
		}
		return Sent{}, err
	}
	return Sent{ExpiresInS: int(CodeTTL.Seconds()), Channels: []string{"SMS"},
		Message: i18n.Format(lang, "signup.code.sent", num[len(num)-4:], int(CodeTTL.Minutes()))}, nil
}

// sms puts one SMS to number num in the outbox, written in lang from the
// catalogue (key.subject, key.body); userID nil: no account yet.
func sms(ctx context.Context, tx pgx.Tx, userID *int64, num, kind, ref, lang, key string, args ...any) error {
	_, err := tx.Exec(ctx, `INSERT INTO notifications (user_id, channel, kind, ref, subject, body, address)
		VALUES ($1, 'SMS', $2, $3, $4, $5, $6) ON CONFLICT (kind, ref, channel) DO NOTHING`,
		userID, kind, ref, i18n.Format(lang, key+".subject", args...), i18n.Format(lang, key+".body", args...), num)
	if err != nil {
		return fmt.Errorf("sms %s %s: %w", kind, ref, err)
	}
	return nil
}

// useCode checks code against the latest live code of purpose for num
// and, when right, uses it up and runs then in the same transaction. A
// wrong code counts an attempt (committed); the answers are the same
// whether a code was ever sent.
func (s *Service) useCode(ctx context.Context, purpose, num, code string, then func(tx pgx.Tx, now time.Time) error) error {
	if len(code) != 6 || strings.Trim(code, "0123456789") != "" {
		return booking.Errorf(booking.EINVALID, "OTP_FORMAT", "The code has 6 digits.")
	}
	now := s.cfg.Now()
	phoneMAC := s.mac("phone", num)
	wrong := false
	err := db.Transact(ctx, s.cfg.Pool, func(tx pgx.Tx) error {
		wrong = false
		var id int64
		var mac *string
		var attempts int
		var expires time.Time
		err := tx.QueryRow(ctx, `SELECT id, code_mac, attempts, expires_at FROM signup_codes
			WHERE phone_mac = $1 AND purpose = $2 AND consumed_at IS NULL ORDER BY created_at DESC LIMIT 1 FOR UPDATE`,
			phoneMAC, purpose).Scan(&id, &mac, &attempts, &expires)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return errNoCode
		case err != nil:
			return err
		case !now.Before(expires):
			return errExpiredCode
		case attempts >= AttemptsPerCode:
			return errLockedCode
		}
		if mac == nil || !hmac.Equal([]byte(*mac), []byte(s.mac("code", purpose, num, code))) {
			wrong = true
			_, err := tx.Exec(ctx, `UPDATE signup_codes SET attempts = attempts + 1 WHERE id = $1`, id)
			return err // commit the attempt, then answer wrong
		}
		if _, err := tx.Exec(ctx, `UPDATE signup_codes SET consumed_at = $2 WHERE id = $1`, id, now); err != nil {
			return err
		}
		return then(tx, now)
	})
	if err != nil {
		return err
	}
	if wrong {
		return errWrongCode
	}
	return nil
}

// Registration is what a passenger gives to open an account.
type Registration struct {
	Phone, Code, Email, Password, Lang string
}

// Account is a fresh session's view of an account.
type Account struct {
	UserID    int64
	Login     string
	Verified  bool
	CreatedAt time.Time
}

// CheckEmail is the address as kept (trimmed, the domain in lower case),
// or a clear error.
func CheckEmail(email string) (string, error) {
	email = strings.TrimSpace(email)
	a, err := mail.ParseAddress(email)
	at := strings.LastIndexByte(email, '@')
	if err != nil || a.Address != email || at < 1 || !strings.Contains(email[at:], ".") || len(email) > 254 {
		return "", booking.Errorf(booking.EINVALID, "BAD_EMAIL", "Give an e-mail address like name@example.com.")
	}
	return email[:at] + strings.ToLower(email[at:]), nil
}

func checkPassword(login, password string) error {
	if err := auth.CheckNewPassword(login, password); err != nil {
		return booking.Errorf(booking.EINVALID, "BAD_PASSWORD", "Choose another password: %s (at least %d characters, not containing your mobile number).", err, auth.MinPasswordRunes)
	}
	return nil
}

// Register opens the account of reg.Phone once its code is right: the
// number is its login and where its SMS go, reg.Email where its e-mails
// go. Every field is checked before the code is, so a mistake costs no
// attempt; nothing is written unless the account is.
func (s *Service) Register(ctx context.Context, reg Registration) (Account, error) {
	num := fraud.NormalisePhone(reg.Phone)
	if num == "" {
		return Account{}, errBadPhone
	}
	email, err := CheckEmail(reg.Email)
	if err != nil {
		return Account{}, err
	}
	if err := checkPassword(num, reg.Password); err != nil {
		return Account{}, err
	}
	hash, err := auth.HashPassword(reg.Password, s.cfg.Password)
	if err != nil {
		return Account{}, err
	}
	phoneHash := fraud.Recorder{Key: s.cfg.IdentityKey}.PhoneHash(num)
	acct := Account{Login: num}
	err = s.useCode(ctx, PurposeSignup, num, strings.TrimSpace(reg.Code), func(tx pgx.Tx, now time.Time) error {
		err := tx.QueryRow(ctx, `INSERT INTO users (login, password_hash, phone, phone_hash, email, lang, kyc_required, created_at)
			VALUES ($1, $2, $1, $3, $4, $5, true, $6) RETURNING id, created_at`, num, hash, phoneHash, email, i18n.Norm(reg.Lang), now).
			Scan(&acct.UserID, &acct.CreatedAt)
		if isUnique(err) {
			return booking.Errorf(booking.ECONFLICT, "PHONE_TAKEN", "This mobile number already has an account. Sign in, or reset your password.")
		}
		if err != nil {
			return err
		}
		who := "user:" + strconv.FormatInt(acct.UserID, 10)
		if err := audit.Write(ctx, tx, who, "ACCOUNT_OPENED", who, map[string]any{"via": "signup"}); err != nil {
			return err
		}
		return booking.NotifyT(ctx, tx, acct.UserID, "WELCOME", strconv.FormatInt(acct.UserID, 10), "msg.welcome")
	})
	if err != nil {
		if booking.ErrorCode(err) == booking.EINTERNAL {
			return Account{}, fmt.Errorf("register %s: %w", num[len(num)-4:], err)
		}
		return Account{}, err
	}
	return acct, nil
}

func isUnique(err error) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && pg.Code == "23505"
}

// Reset sets a new password for the account of phone once its reset code
// is right, and ends every session of the account (in the same
// transaction: no old session outlives the old password).
func (s *Service) Reset(ctx context.Context, phone, code, password string) error {
	num := fraud.NormalisePhone(phone)
	if num == "" {
		return errBadPhone
	}
	if err := checkPassword(num, password); err != nil {
		return err
	}
	hash, err := auth.HashPassword(password, s.cfg.Password)
	if err != nil {
		return err
	}
	err = s.useCode(ctx, PurposeReset, num, strings.TrimSpace(code), func(tx pgx.Tx, now time.Time) error {
		var id int64
		err := tx.QueryRow(ctx, `UPDATE users SET password_hash = $2 WHERE phone = $1 RETURNING id`, num, hash).Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) {
			return errWrongCode // the account went since the code was sent
		}
		if err != nil {
			return err
		}
		if err := auth.RevokeAllTx(ctx, tx, id, now, s.cfg.SessionTTL); err != nil {
			return err
		}
		who := "user:" + strconv.FormatInt(id, 10)
		if err := audit.Write(ctx, tx, who, "PASSWORD_RESET", who, map[string]any{"via": "sms_code"}); err != nil {
			return err
		}
		return booking.NotifyT(ctx, tx, id, "PASSWORD_RESET", strconv.FormatInt(id, 10)+"-"+strconv.FormatInt(now.UnixMilli(), 10), "msg.reset.done")
	})
	if err != nil && booking.ErrorCode(err) == booking.EINTERNAL {
		return fmt.Errorf("reset password of %s: %w", num[len(num)-4:], err)
	}
	return err
}

// IdentityAttemptsPerDay bounds the identity checks an account asks of
// the verifier a day (a passenger who mistypes has several; a script
// testing numbers does not get far).
const IdentityAttemptsPerDay = 5

// Identity is what a passenger gives the verifier, with their consent.
type Identity struct {
	Number      string
	Name        string
	YearOfBirth int
	Consent     bool
}

// VerifyIdentity asks the verifier about id for the account and, on its
// VERIFIED, marks the account identity-verified with the verifier's
// reference and a keyed hash of the number. Anything else changes nothing:
// a mismatch or a bad number is the passenger's to correct, a verifier
// that does not answer is KYC_UNAVAILABLE.
func (s *Service) VerifyIdentity(ctx context.Context, userID int64, id Identity) (Account, error) {
	num := kyc.NormaliseNumber(id.Number)
	name := strings.Join(strings.Fields(id.Name), " ")
	year := s.cfg.Now().Year()
	switch {
	case !id.Consent:
		return Account{}, booking.Errorf(booking.EINVALID, "CONSENT_REQUIRED", "Tick the box to agree that your Aadhaar details are checked with the identity service.")
	case !kyc.ValidNumber(num):
		return Account{}, booking.Errorf(booking.EINVALID, "BAD_ID_NUMBER", "Give the 12-digit Aadhaar number exactly as on the card.")
	case name == "" || len(name) > 100 || strings.IndexFunc(name, func(r rune) bool { return !unicode.IsLetter(r) && r != ' ' && r != '.' && r != '\'' && r != '-' }) >= 0:
		return Account{}, booking.Errorf(booking.EINVALID, "BAD_NAME", "Give your name as on the Aadhaar card (letters only, up to 100).")
	case id.YearOfBirth < 1900 || id.YearOfBirth > year-MinAge:
		return Account{}, booking.Errorf(booking.EINVALID, "BAD_BIRTH_YEAR", "Give your year of birth (4 digits); an account holder must be %d or older.", MinAge)
	case s.cfg.Verifier == nil:
		return Account{}, booking.Errorf(booking.EUNAVAIL, "KYC_NOT_CONFIGURED", "Identity verification is not available on this server.")
	}
	idHash := s.identityHash(num)
	acct := Account{UserID: userID}
	var status string
	var attempts int
	// Each question to the verifier is counted against the account's day
	// first, in one statement under the row's lock, so concurrent asks
	// cannot pass the bound together. Whether a number is in use here is
	// told only after the verifier has said the person is its holder.
	if err := s.cfg.Pool.QueryRow(ctx, `UPDATE users SET
			kyc_attempts = CASE WHEN id_verification_status = 'VERIFIED' THEN kyc_attempts
				WHEN kyc_attempt_day = current_date THEN kyc_attempts + 1 ELSE 1 END,
			kyc_attempt_day = current_date
		WHERE id = $1 RETURNING login, id_verification_status, created_at, kyc_attempts`, userID).Scan(&acct.Login, &status, &acct.CreatedAt, &attempts); err != nil {
		return Account{}, fmt.Errorf("verify identity of %d: read account: %w", userID, err)
	}
	if status == "VERIFIED" {
		acct.Verified = true
		return acct, nil
	}
	if attempts > IdentityAttemptsPerDay {
		return Account{}, booking.Errorf(booking.ELIMIT, "KYC_TOO_MANY", "You have asked for an identity check %d times today; try again tomorrow or visit a reservation counter.", IdentityAttemptsPerDay)
	}
	// The same question asks with the same key, so a retry after a lost
	// answer gets the verifier's first decision.
	key := "kyc-" + s.mac("kyc-key", strconv.FormatInt(userID, 10), num, strings.ToLower(name), strconv.Itoa(id.YearOfBirth))[:40]
	res, err := s.cfg.Verifier.Verify(ctx, key, kyc.Request{Number: num, Name: name, YearOfBirth: id.YearOfBirth, Consent: true,
		ClientRef: "user-" + strconv.FormatInt(userID, 10)})
	if err != nil {
		s.cfg.Log.Warn("identity verifier did not decide", "user", userID, "err", err)
		return Account{}, booking.Errorf(booking.EUNAVAIL, "KYC_UNAVAILABLE", "The identity service is not answering right now. Nothing was changed; try again in a few minutes.")
	}
	if res.Status == kyc.Mismatch || res.Status == kyc.InvalidNumber {
		who := "user:" + strconv.FormatInt(userID, 10)
		if err := audit.Write(ctx, s.cfg.Pool, who, "IDENTITY_REFUSED", who, map[string]any{"status": res.Status, "attempt": attempts}); err != nil {
			s.cfg.Log.Warn("audit identity refusal", "user", userID, "err", err)
		}
	}
	switch res.Status {
	case kyc.Mismatch:
		return Account{}, booking.Errorf(booking.EINVALID, "KYC_MISMATCH", "The name or year of birth does not match this Aadhaar number. Check them against the card.")
	case kyc.InvalidNumber:
		return Account{}, booking.Errorf(booking.EINVALID, "BAD_ID_NUMBER", "Give the 12-digit Aadhaar number exactly as on the card.")
	}
	err = db.Transact(ctx, s.cfg.Pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE users SET id_verification_status = 'VERIFIED', verified_at = coalesce(verified_at, $2),
			kyc_hash = $3, kyc_ref = $4, kyc_at = $2 WHERE id = $1`, userID, s.cfg.Now(), idHash, res.Ref)
		if isUnique(err) {
			return errIDInUse
		}
		if err != nil {
			return err
		}
		if tag.RowsAffected() != 1 {
			return fmt.Errorf("no account %d", userID)
		}
		who := "user:" + strconv.FormatInt(userID, 10)
		return audit.Write(ctx, tx, who, "IDENTITY_VERIFIED", who, map[string]any{"via": "kyc", "ref": res.Ref, "masked": res.Masked})
	})
	if err != nil {
		if booking.ErrorCode(err) == booking.EINTERNAL {
			return Account{}, fmt.Errorf("verify identity of %d: %w", userID, err)
		}
		return Account{}, err
	}
	acct.Verified = true
	return acct, nil
}

// identityHash is users.kyc_hash: the identity number keyed with the
// identity key, so the number itself is never kept.
func (s *Service) identityHash(num string) string {
	m := hmac.New(sha256.New, s.cfg.IdentityKey)
	m.Write([]byte("kyc|" + num))
	return hex.EncodeToString(m.Sum(nil))
}

var errIDInUse = booking.Errorf(booking.ECONFLICT, "ID_IN_USE", "This Aadhaar number already verifies another account; one person may verify one account.")

// KYCRequired says whether the account must verify through the identity
// verifier (opened here) rather than by a phone code alone.
func (s *Service) KYCRequired(ctx context.Context, userID int64) (bool, error) {
	var req bool
	if err := s.cfg.Pool.QueryRow(ctx, `SELECT kyc_required FROM users WHERE id = $1`, userID).Scan(&req); err != nil {
		return false, fmt.Errorf("kyc required of %d: %w", userID, err)
	}
	return req, nil
}
