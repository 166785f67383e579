package admission

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"tatkal/booking"
	"tatkal/booking/admission/token"
	"tatkal/booking/audit"
	"tatkal/booking/db"
	"tatkal/booking/fraud"
	"tatkal/booking/i18n"
	"tatkal/booking/instrument"
)

// One-time codes for identity verification.
const (
	otpTTL      = 5 * time.Minute
	otpGap      = 30 * time.Second // between two requests
	otpPerHour  = 5
	otpAttempts = 5 // wrong answers before a code is dead
)

func (s *Service) otpMAC(userID int64, code string) string {
	m := hmac.New(sha256.New, s.otpKey)
	m.Write([]byte(strconv.FormatInt(userID, 10) + "|" + code))
	return hex.EncodeToString(m.Sum(nil))
}

// OTPSent says where a code went.
type OTPSent struct {
	ExpiresInS int      `json:"expires_in_s"`
	Channels   []string `json:"channels"`
}

// RequestOTP sends the account a one-time code through the notification
// outbox (SMS and email), at most one per 30 s and five an hour.
func (s *Service) RequestOTP(ctx context.Context, userID int64) (OTPSent, error) {
	return s.RequestOTPTo(ctx, userID, "")
}

// RequestOTPTo is RequestOTP naming the mobile number to verify: the code
// goes by SMS to that number only, and the right code records the number's
// keyed hash as the account's identity (users.phone_hash), which the
// per-person cap counts across accounts. Empty phone: RequestOTP.
func (s *Service) RequestOTPTo(ctx context.Context, userID int64, phone string) (OTPSent, error) {
	return s.requestCode(ctx, userID, phone, "msg.otp")
}

// RequestChallengeOTP sends a one-time code that stands in for the
// booking-time proof of work (UseOTP), for a passenger whose browser
// cannot run it. It is the identity code's path and shares its limits (one
// per 30 s, five an hour per account, each to the account's own phone and
// email): a script gets far fewer holds from it than from puzzles.
func (s *Service) RequestChallengeOTP(ctx context.Context, userID int64) (OTPSent, error) {
	return s.requestCode(ctx, userID, "", "msg.otpcheck")
}

// RequestVerification is what a passenger asks for to verify their
// account: the mobile number is required, unless the account already has
// a verified one (a code to it again), so every verified account carries
// the phone identity the per-person cap counts.
func (s *Service) RequestVerification(ctx context.Context, userID int64, phone string) (OTPSent, error) {
	if phone == "" {
		var has bool
		if err := s.pool.QueryRow(ctx, `SELECT phone_hash IS NOT NULL FROM users WHERE id = $1`, userID).Scan(&has); err != nil {
			return OTPSent{}, fmt.Errorf("read the account's phone: %w", err)
		}
		if !has {
			return OTPSent{}, booking.Errorf(booking.EINVALID, "PHONE_REQUIRED", "Give your 10-digit mobile number: the code is sent to it, and it verifies the account.")
		}
	}
	return s.RequestOTPTo(ctx, userID, phone)
}

func (s *Service) requestCode(ctx context.Context, userID int64, phone, msgKey string) (OTPSent, error) {
	now := s.now()
	var sent OTPSent
	var phoneHash *string
	if phone != "" {
		if len(s.cfg.IdentityKey) < 16 {
			return OTPSent{}, booking.Errorf(booking.EUNAVAIL, "NO_PHONE_VERIFICATION", "Phone verification is not available on this server.")
		}
		h := fraud.Recorder{Key: s.cfg.IdentityKey}.PhoneHash(phone)
		if h == "" {
			return OTPSent{}, booking.Errorf(booking.EINVALID, "BAD_PHONE", "Give a 10-digit Indian mobile number.")
		}
		phoneHash = &h
	}
	err := db.Transact(ctx, s.pool, func(tx pgx.Tx) error {
		// One request at a time per account.
		if _, err := tx.Exec(ctx, `SELECT 1 FROM users WHERE id = $1 FOR UPDATE`, userID); err != nil {
			return err
		}
		var lastHour int
		var last *time.Time
		if err := tx.QueryRow(ctx, `SELECT count(*), max(created_at) FROM otp_codes WHERE user_id = $1 AND created_at > $2`,
			userID, now.Add(-time.Hour)).Scan(&lastHour, &last); err != nil {
			return err
		}
		switch {
		case last != nil && now.Sub(*last) < otpGap:
			return booking.Errorf(booking.ELIMIT, "OTP_TOO_SOON", "A code was sent less than %d seconds ago; wait for it, or ask again in a moment.", int(otpGap.Seconds()))
		case lastHour >= otpPerHour:
			return booking.Errorf(booking.ELIMIT, "OTP_TOO_MANY", "Too many codes asked for in the last hour; try again later.")
		}
		n, err := rand.Int(rand.Reader, big.NewInt(1_000_000))
		if err != nil {
			return err
		}
		code := fmt.Sprintf("%06d", n.Int64())
		var id int64
		if err := tx.QueryRow(ctx, `INSERT INTO otp_codes (user_id, code_mac, created_at, expires_at, phone_hash) VALUES ($1, $2, $3, $4, $5) RETURNING id`,
			userID, s.otpMAC(userID, code), now, now.Add(otpTTL), phoneHash).Scan(&id); err != nil {
			return err
		}
		// Older codes die when a new one is sent.
		if _, err := tx.Exec(ctx, `UPDATE otp_codes SET consumed_at = $3 WHERE user_id = $1 AND id <> $2 AND consumed_at IS NULL`, userID, id, now); err != nil {
			return err
		}
		// Written in the passenger's language, from the site's catalogue.
		if phoneHash != nil {
			lang, err := booking.LanguageTx(ctx, tx, userID)
			if err != nil {
				return err
			}
			subject, body := i18n.Text(lang, msgKey+".subject"), i18n.Format(lang, msgKey+".body", code, int(otpTTL.Minutes()))
			// The code proves the phone: it goes to that phone alone.
			if _, err := tx.Exec(ctx, `INSERT INTO notifications (user_id, channel, kind, ref, subject, body, address)
				VALUES ($1, 'SMS', 'OTP', $2, $3, $4, $5)`,
				userID, strconv.FormatInt(id, 10), subject, body, fraud.NormalisePhone(phone)); err != nil {
				return err
			}
			sent = OTPSent{ExpiresInS: int(otpTTL.Seconds()), Channels: []string{"SMS"}}
			return nil
		}
		if err := booking.NotifyT(ctx, tx, userID, "OTP", strconv.FormatInt(id, 10), msgKey, code, int(otpTTL.Minutes())); err != nil {
			return err
		}
		sent = OTPSent{ExpiresInS: int(otpTTL.Seconds()), Channels: []string{"SMS", "EMAIL"}}
		return nil
	})
	if err != nil && booking.ErrorCode(err) == booking.EINTERNAL {
		return OTPSent{}, fmt.Errorf("request otp for %d: %w", userID, err)
	}
	return sent, err
}

// Account is what a fresh session needs to say about an account.
type Account struct {
	UserID    int64
	Verified  bool
	Agent     bool
	CreatedAt time.Time
}

var errWrongCode = booking.Errorf(booking.EINVALID, "OTP_WRONG", "That code is not right. Check the latest message and try again.")

// VerifyOTP checks a code; the right one marks the account identity-verified.
func (s *Service) VerifyOTP(ctx context.Context, userID int64, code string) (Account, error) {
	var acct Account
	err := s.useCode(ctx, userID, code, "verify otp", func(tx pgx.Tx, now time.Time, phoneHash *string) error {
		var userType string
		var kyc bool
		// A code sent to a named phone binds that phone (keyed hash) as the
		// account's identity; a later one to another phone replaces it. An
		// account opened by sign-up (booking/signup) is verified by the
		// identity service only: a phone code alone does not verify it, and
		// the code stays unused (the transaction rolls back).
		if err := tx.QueryRow(ctx, `SELECT kyc_required FROM users WHERE id = $1`, userID).Scan(&kyc); err != nil {
			return err
		}
		if kyc {
			return booking.Errorf(booking.EFORBIDDEN, "KYC_REQUIRED", "This account verifies its identity with its Aadhaar number: open Verify identity (/identity, or POST /v1/account/identity).")
		}
		if err := tx.QueryRow(ctx, `UPDATE users SET id_verification_status = 'VERIFIED', verified_at = coalesce(verified_at, $2),
				phone_hash = coalesce($3, phone_hash)
			WHERE id = $1 RETURNING user_type, created_at`, userID, now, phoneHash).Scan(&userType, &acct.CreatedAt); err != nil {
			return err
		}
		acct.UserID, acct.Verified, acct.Agent = userID, true, userType == "AGENT"
		who := "user:" + strconv.FormatInt(userID, 10)
		return audit.Write(ctx, tx, who, "IDENTITY_VERIFIED", who, map[string]any{"phone": phoneHash != nil})
	})
	if err != nil {
		return Account{}, err
	}
	return acct, nil
}

// UseOTP checks and uses up the account's latest code (RequestChallengeOTP)
// in place of a solved booking-time challenge; the account is unchanged.
// A code works once, and five wrong answers kill it.
func (s *Service) UseOTP(ctx context.Context, userID int64, code string) error {
	return s.useCode(ctx, userID, code, "use otp", func(pgx.Tx, time.Time, *string) error { return nil })
}

// useCode checks code against the account's latest live code and, when
// right, consumes it and runs then in the same transaction, with the
// phone the code was sent to (its keyed hash; nil: the account's own).
func (s *Service) useCode(ctx context.Context, userID int64, code, what string, then func(tx pgx.Tx, now time.Time, phoneHash *string) error) error {
	now := s.now()
	if len(code) != 6 {
		return booking.Errorf(booking.EINVALID, "OTP_FORMAT", "The code has 6 digits.")
	}
	wrong := false
	err := db.Transact(ctx, s.pool, func(tx pgx.Tx) error {
		wrong = false // a retried attempt starts afresh
		var id int64
		var mac string
		var attempts int
		var expires time.Time
		var phoneHash *string
		err := tx.QueryRow(ctx, `SELECT id, code_mac, attempts, expires_at, phone_hash FROM otp_codes
			WHERE user_id = $1 AND consumed_at IS NULL ORDER BY created_at DESC LIMIT 1 FOR UPDATE`, userID).Scan(&id, &mac, &attempts, &expires, &phoneHash)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return booking.Errorf(booking.EINVALID, "OTP_NONE", "There is no code waiting; ask for a new one.")
		case err != nil:
			return err
		case !now.Before(expires):
			return booking.Errorf(booking.EINVALID, "OTP_EXPIRED", "That code has expired; ask for a new one.")
		case attempts >= otpAttempts:
			return booking.Errorf(booking.ELIMIT, "OTP_LOCKED", "Too many wrong codes; ask for a new one.")
		}
		if !hmac.Equal([]byte(mac), []byte(s.otpMAC(userID, code))) {
			wrong = true
			_, err := tx.Exec(ctx, `UPDATE otp_codes SET attempts = attempts + 1 WHERE id = $1`, id)
			return err // commit the attempt, then answer wrong
		}
		if _, err := tx.Exec(ctx, `UPDATE otp_codes SET consumed_at = $2 WHERE id = $1`, id, now); err != nil {
			return err
		}
		return then(tx, now, phoneHash)
	})
	if err != nil {
		if booking.ErrorCode(err) == booking.EINTERNAL {
			return fmt.Errorf("%s for %d: %w", what, userID, err)
		}
		return err
	}
	if wrong {
		return errWrongCode
	}
	return nil
}

// DeviceBinding is a signed statement that an account uses a device; the
// client sends it as X-Device-Token on waiting-room and hold calls. When
// the platform's integrity evidence was verified, Attestation is a signed
// statement of that, to send as X-Client-Attestation.
type DeviceBinding struct {
	DeviceToken          string     `json:"device_binding"`
	ExpiresAt            time.Time  `json:"expires_at"`
	Attestation          string     `json:"client_attestation,omitempty"`
	AttestationExpiresAt *time.Time `json:"attestation_expires_at,omitempty"`
}

// AttestationTTL is how long a device attestation lasts; the app binds
// again with fresh evidence to renew it.
const AttestationTTL = 24 * time.Hour

// BindDevice binds the client's device token to the account, refusing a
// device already used by AccountsPerDevice other accounts. Platform
// evidence (client_attestation) that Config.VerifyPlatform accepts earns
// a signed attestation; unverifiable evidence is ignored.
func (s *Service) BindDevice(ctx context.Context, userID int64, clientToken, evidence string) (DeviceBinding, error) {
	if len(clientToken) < 16 || len(clientToken) > 256 {
		return DeviceBinding{}, booking.Errorf(booking.EINVALID, "BAD_DEVICE_TOKEN", "device_token must be 16-256 characters the app keeps for this device.")
	}
	if len(evidence) > 8192 {
		return DeviceBinding{}, booking.Errorf(booking.EINVALID, "BAD_ATTESTATION", "client_attestation is at most 8192 characters.")
	}
	dev := token.DeviceID(clientToken)
	attested := false
	if evidence != "" && s.cfg.VerifyPlatform != nil {
		ok, err := s.cfg.VerifyPlatform(ctx, userID, dev, evidence)
		if err != nil {
			// Not a reason to refuse the binding: the device just is not attested.
			s.log.Warn("verify platform attestation", "user", userID, "err", err)
		}
		attested = ok && err == nil
	}
	now := s.now()
	err := db.Transact(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('device:' || $1))`, dev); err != nil {
			return err
		}
		var mine bool
		var others int
		if err := tx.QueryRow(ctx, `SELECT coalesce(bool_or(user_id = $2), false), count(*) FILTER (WHERE user_id <> $2)
			FROM devices WHERE device_id = $1`, dev, userID).Scan(&mine, &others); err != nil {
			return err
		}
		if mine {
			if attested {
				_, err := tx.Exec(ctx, `UPDATE devices SET attested = true WHERE device_id = $1 AND user_id = $2`, dev, userID)
				return err
			}
			return nil
		}
		if others >= s.cfg.AccountsPerDevice {
			return booking.Errorf(booking.ELIMIT, "DEVICE_LIMIT", "This device is already used by %d other accounts, the most allowed. Use your own device.", others)
		}
		_, err := tx.Exec(ctx, `INSERT INTO devices (device_id, user_id, bound_at, attested) VALUES ($1, $2, $3, $4)`, dev, userID, now, attested)
		return err
	})
	if err != nil {
		if booking.ErrorCode(err) == booking.EINTERNAL {
			return DeviceBinding{}, fmt.Errorf("bind device for %d: %w", userID, err)
		}
		return DeviceBinding{}, err
	}
	exp := now.Add(30 * 24 * time.Hour)
	b := DeviceBinding{DeviceToken: s.devices.BindDevice(userID, dev, exp), ExpiresAt: exp}
	if attested {
		aexp := now.Add(AttestationTTL)
		b.Attestation, b.AttestationExpiresAt = s.attest.Attest(userID, dev, aexp), &aexp
	}
	return b, nil
}

// BoundDevice is the device of binding when this server signed it for
// userID (BindDevice) and it has not expired; "" otherwise.
func (s *Service) BoundDevice(userID int64, binding string) string {
	dev, err := token.DeviceOf(s.devices, binding, userID)
	if err != nil {
		return ""
	}
	return dev
}

// attested reports whether the caller sent an attestation this server
// issued, for this account and the device of its binding, still valid.
func (s *Service) attested(c Caller) bool {
	dev, err := token.DeviceOf(s.devices, c.DeviceToken, c.UserID)
	return err == nil && token.Attested(s.attest, c.Attestation, c.UserID, dev, s.now())
}

// CheckInstrument refuses a payment with an instrument (instrument.UPI)
// whose captures already counted maxAccounts other accounts in the last 30
// days (answered like overload); an account already counted keeps using
// it. It counts nothing: only a captured payment does (package
// instrument), so naming a stranger's address in requests never paid
// blocks nobody.
func (s *Service) CheckInstrument(ctx context.Context, name string, userID int64, maxAccounts int) error {
	ok, err := instrument.Allowed(ctx, s.rdb, s.cfg.Prefix, name, userID, maxAccounts)
	if err != nil {
		return booking.Errorf(booking.EUNAVAIL, "LIMITS_UNREACHABLE", "Please retry in a moment.")
	}
	if !ok {
		return highDemand()
	}
	return nil
}

// ChallengeView is a booking-time challenge to solve before the hold.
type ChallengeView struct {
	Challenge  string `json:"challenge"`
	Type       string `json:"type"`
	Bits       int    `json:"difficulty_bits"`
	ExpiresInS int    `json:"expires_in_s"`
	How        string `json:"how"`
}

// ChallengeTTL is how long a challenge may be answered.
const ChallengeTTL = 60 * time.Second

// Challenge issues a proof-of-work challenge for one hold attempt (its
// Idempotency-Key), harder for clients without a verified attestation.
// An account a fraud decision flagged (users.risk_score >= 1) gets
// FlaggedExtraBits more: the graduated response, applied from the decision's
// enforcement on.
func (s *Service) Challenge(ctx context.Context, c Caller, attempt string) (ChallengeView, error) {
	if len(attempt) < 8 || len(attempt) > 128 {
		return ChallengeView{}, booking.Errorf(booking.EINVALID, "BAD_ATTEMPT", "attempt is the Idempotency-Key you will send with the hold (8-128 characters).")
	}
	bitsNeeded := s.cfg.ChallengeBits
	if !s.attested(c) {
		bitsNeeded += s.cfg.RiskyExtraBits
	}
	if s.flagged(ctx, c.UserID) {
		bitsNeeded += s.cfg.FlaggedExtraBits
	}
	// The session asking is the account's booking session from now on
	// (bookingsession.go).
	if err := s.claimBookingSession(ctx, c); err != nil {
		return ChallengeView{}, err
	}
	id := make([]byte, 9)
	rand.Read(id) //nolint:errcheck
	tok := s.chKeys.IssueChallenge(token.Challenge{ID: hex.EncodeToString(id), UserID: c.UserID, Session: token.SessionHash(c.SessionToken),
		Attempt: attempt, Bits: bitsNeeded, ExpiresAt: s.now().Add(ChallengeTTL)})
	return ChallengeView{Challenge: tok, Type: "POW_SHA256", Bits: bitsNeeded, ExpiresInS: int(ChallengeTTL.Seconds()),
		How: "Find a nonce (up to 32 characters) such that SHA-256(challenge + \"|\" + nonce) starts with difficulty_bits zero bits; send challenge and nonce with the hold."}, nil
}

// flagged reports whether a fraud decision made the account's challenges
// harder: EXTRA_CHALLENGE (users.risk_score), or a WATCH not yet lapsed
// (fraud_watch). A failed read does not make an honest rush harder: it
// counts as not flagged, and is logged.
func (s *Service) flagged(ctx context.Context, userID int64) bool {
	var risky bool
	err := s.pool.QueryRow(ctx, `SELECT risk_score >= 1 OR EXISTS (SELECT 1 FROM fraud_watch w WHERE w.user_id = u.id AND w.until > $2)
		FROM users u WHERE id = $1`, userID, s.now()).Scan(&risky)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		s.log.Warn("challenge: read risk score", "user", userID, "err", err)
	}
	return risky
}

// CheckChallenge verifies a solved challenge and uses it up. Every failure
// is the uniform high-demand answer.
func (s *Service) CheckChallenge(ctx context.Context, c Caller, challenge, nonce, attempt string) error {
	ch, err := token.VerifyChallenge(s.chKeys, challenge, nonce, c.UserID, c.SessionToken, attempt, s.now())
	if err != nil {
		return highDemand()
	}
	ok, err := s.rdb.SetNX(ctx, ChallengeUsedKey(s.cfg.Prefix, ch.ID), "1", 2*ChallengeTTL).Result()
	if err != nil || !ok {
		return highDemand()
	}
	return nil
}

// ChallengeUsedKey is the key whose SET NX uses a challenge up.
func ChallengeUsedKey(prefix, id string) string { return prefix + ":ch:" + id }

// MaxAccountsPerInstrument is how many accounts may pay with one UPI
// address within 30 days.
const MaxAccountsPerInstrument = instrument.MaxAccounts

// InstrumentGuard is the check a UPI payment of user runs once its hold is
// the caller's and payable, or its top-up is within the account's limits:
// one address paying for many accounts is a tout's signature, so an
// address whose captures counted MaxAccountsPerInstrument other accounts
// is refused, looking like overload. nil when there is nothing to check.
// It counts nothing; the payment path counts the account once a payment
// with the address is captured.
func (s *Service) InstrumentGuard(method, vpa string, user int64) func(context.Context) error {
	if s == nil || method != "UPI" || vpa == "" {
		return nil
	}
	return func(ctx context.Context) error {
		return s.CheckInstrument(ctx, instrument.UPI(vpa), user, MaxAccountsPerInstrument)
	}
}

// ClientSignals says what a hold request tells about its sender, for the
// fraud signals: the bound device, whether its attestation holds, and how
// long the solved challenge took from its issue (-1 without one). It
// decides nothing.
func (s *Service) ClientSignals(c Caller, challenge, nonce, attempt string) (deviceID string, attested bool, solveMS int) {
	solveMS = -1
	if dev, err := token.DeviceOf(s.devices, c.DeviceToken, c.UserID); err == nil {
		deviceID = dev
	}
	attested = s.attested(c)
	if challenge != "" {
		now := s.now()
		if ch, err := token.VerifyChallenge(s.chKeys, challenge, nonce, c.UserID, c.SessionToken, attempt, now); err == nil {
			solveMS = int(max(0, now.Sub(ch.ExpiresAt.Add(-ChallengeTTL)).Milliseconds()))
		}
	}
	return deviceID, attested, solveMS
}
