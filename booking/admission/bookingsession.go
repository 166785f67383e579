package admission

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"tatkal/booking"
	"tatkal/booking/admission/token"
)

// One booking session per account (issue 39: 16). Every hold, on a direct
// shard as through the waiting room, carries a proof that a person is
// booking now: a solved challenge or the code sent by SMS in its place.
// Asking for either makes the asking session the account's booking
// session, and a hold from any other session of the account is refused
// (SESSION_SUPERSEDED) until it asks again.
//
// The newest session wins rather than the first one keeping the account:
// a passenger whose phone died or whose browser crashed at 10:00 must go
// on from another device at once, not wait out a lock; and a second
// session gains a tout nothing, since the account's limits (one live
// hold, the daily cap) are the account's whichever session asks. What it
// stops is one account driven by many clients at once, each racing its
// own challenge: only the last to ask can hold.

// BookingSessionTTL is how long the claim is remembered after the last
// ask: longer than a challenge and a hold's payment together.
const BookingSessionTTL = 30 * time.Minute

// BookingSessionKey is the key holding the account's booking session.
func BookingSessionKey(prefix string, userID int64) string {
	return prefix + ":bsess:{u" + strconv.FormatInt(userID, 10) + "}"
}

var errSuperseded = booking.Errorf(booking.EFORBIDDEN, "SESSION_SUPERSEDED",
	"Your account started booking in another session (another device, app or browser), which ended this one. Go on there, or reload this page to book from here.")

// claimBookingSession makes c's session the account's booking session.
func (s *Service) claimBookingSession(ctx context.Context, c Caller) error {
	if err := s.rdb.Set(ctx, BookingSessionKey(s.cfg.Prefix, c.UserID), token.SessionHash(c.SessionToken), BookingSessionTTL).Err(); err != nil {
		return booking.Errorf(booking.EUNAVAIL, "LIMITS_UNREACHABLE", "Please retry in a moment.")
	}
	return nil
}

// checkBookingSession says whether c's session is the account's booking
// session. A claim lost with Redis counts as another session's: the
// passenger asks again (a new challenge), which claims it.
func (s *Service) checkBookingSession(ctx context.Context, c Caller) error {
	v, err := s.rdb.Get(ctx, BookingSessionKey(s.cfg.Prefix, c.UserID)).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return errSuperseded
	case err != nil:
		return booking.Errorf(booking.EUNAVAIL, "LIMITS_UNREACHABLE", "Please retry in a moment.")
	case v != token.SessionHash(c.SessionToken):
		return errSuperseded
	}
	return nil
}

// RequestChallengeOTPFor is RequestChallengeOTP for the caller's session,
// which becomes the account's booking session.
func (s *Service) RequestChallengeOTPFor(ctx context.Context, c Caller) (OTPSent, error) {
	if err := s.claimBookingSession(ctx, c); err != nil {
		return OTPSent{}, err
	}
	return s.RequestChallengeOTP(ctx, c.UserID)
}

// Proof is what a hold carries to show a person is booking now: a solved
// challenge (Challenge, Nonce), or with Type "OTP" the code sent by SMS in
// its place (Code).
type Proof struct {
	Type      string
	Challenge string
	Nonce     string
	Code      string
}

// ProofOTP is the Type of a proof by SMS code.
const ProofOTP = "OTP"

// CheckHold checks the proof a hold attempt (its Idempotency-Key)
// carries, on any shard: the caller's session must be the account's
// booking session, then the proof is used up. A missing proof is
// CHALLENGE_REQUIRED; a bad challenge the uniform high-demand answer, a
// bad code the code's own refusal.
func (s *Service) CheckHold(ctx context.Context, c Caller, p Proof, attempt string) error {
	otp := strings.EqualFold(p.Type, ProofOTP)
	if (otp && p.Code == "") || (!otp && (p.Challenge == "" || p.Nonce == "")) {
		return booking.Errorf(booking.EINVALID, "CHALLENGE_REQUIRED",
			"Every Tatkal hold carries a booking check: solve a challenge (POST /v1/challenge with this Idempotency-Key as attempt) and send it as challenge with the hold, or ask for a code by SMS (POST /v1/challenge/otp) and send it as {\"type\":\"OTP\",\"code\":...}.")
	}
	if err := s.checkBookingSession(ctx, c); err != nil {
		return err
	}
	if otp {
		return s.UseOTP(ctx, c.UserID, strings.TrimSpace(p.Code))
	}
	return s.CheckChallenge(ctx, c, p.Challenge, p.Nonce, attempt)
}
