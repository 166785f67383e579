package booking

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"tatkal/booking/db"
	"tatkal/booking/funnel"
	"tatkal/booking/inventory"
	"tatkal/booking/metrics"
)

// The hold verb (Holds): a hold taken for a passenger list, its replay and
// the window it must fall in; a hold ends in holdops.go.

// Hold decides one attempt to take seats. HELD and WAITLIST_OFFERED are
// answered only once the hold is durable in PostgreSQL.
func (s Holds) Hold(ctx context.Context, c Caller, req HoldRequest) (HoldResult, error) {
	start := time.Now()
	s.pause.At(ctx, "hold.begin")
	res, shardID, err := s.hold(ctx, c, req)
	if IsThrottled(err) {
		// Turned away at the door: origin traffic, not core load, so it is
		// neither a hold attempt nor a refusal (whose rate and latency the
		// adaptive admission rate follows), but shed on its shard.
		s.funnel.Add(shardID, funnel.Shed, 1)
		s.noteRefusal(c.UserID, shardID, ReasonThrottled, ErrorMessage(err))
		metrics.Hold.WithLabelValues("throttled").Observe(time.Since(start).Seconds())
		return res, err
	}
	s.funnel.Add(shardID, funnel.HoldAttempt, 1)
	outcome := "other"
	switch {
	case err != nil:
		s.funnel.Add(shardID, funnel.HoldRefused, 1)
		s.noteRefusal(c.UserID, shardID, cmp.Or(ErrorReason(err), string(ErrorCode(err))), ErrorMessage(err))
		outcome = "refused"
	case res.Replayed:
		outcome = "replayed"
	case res.Status == "HELD":
		s.funnel.Add(shardID, funnel.Held, 1)
		outcome = "held"
	case res.Status == "WAITLIST_OFFERED":
		s.funnel.Add(shardID, funnel.Waitlisted, 1)
		outcome = "waitlisted"
	case res.Status == "SOLD_OUT":
		s.funnel.Add(shardID, funnel.SoldOut, 1)
		s.noteRefusal(c.UserID, shardID, "SOLD_OUT", "No berths left for the journey asked.")
		outcome = "sold_out"
	}
	took := time.Since(start)
	s.funnel.Observe(funnel.HoldAttempt, took)
	metrics.Hold.WithLabelValues(outcome).Observe(took.Seconds())
	return res, err
}

func (s Holds) hold(ctx context.Context, c Caller, req HoldRequest) (HoldResult, int64, error) {
	var shardID int64
	if !validIdemKey(req.IdempotencyKey) {
		return HoldResult{}, 0, Errorf(EINVALID, "BAD_IDEMPOTENCY_KEY", "The Idempotency-Key header must be 8-128 characters of letters, digits and :._-")
	}
	if req.Quota == "" {
		req.Quota = "TQ"
	}
	shard, err := s.catalog.Find(ctx, req.Train, req.Date, req.Class, req.Quota)
	if err != nil {
		return HoldResult{}, 0, err
	}
	shardID = shard.ID
	from, okFrom := shard.StopSeq(req.From)
	to, okTo := shard.StopSeq(req.To)
	switch {
	case !okFrom:
		return HoldResult{}, shardID, Errorf(EINVALID, "BAD_STATION", "Train %s does not stop at %q.", shard.Train, req.From)
	case !okTo:
		return HoldResult{}, shardID, Errorf(EINVALID, "BAD_STATION", "Train %s does not stop at %q.", shard.Train, req.To)
	case from >= to:
		return HoldResult{}, shardID, Errorf(EINVALID, "BAD_JOURNEY", "%s comes before %s on train %s; check the direction of travel.", req.To, req.From, shard.Train)
	}
	now := s.now()
	rules := s.Rules() // one view of the rules for the whole attempt
	if err := s.checkWindow(shard, c, now, rules); err != nil {
		return HoldResult{}, shardID, err
	}
	if c.Device == "" {
		return HoldResult{}, shardID, ErrDeviceNotBound()
	}
	var use AdmissionUse
	mode := shard.Mode
	if s.levers != nil {
		if m, ok := s.levers.ShardMode(shard.ID); ok {
			mode = m // the operator's switch, ahead of the catalog's cache
		}
	}
	if mode == "queue" {
		if s.admission == nil || req.AdmissionToken == "" {
			return HoldResult{}, shardID, Errorf(EFORBIDDEN, "ADMISSION_REQUIRED", "Tatkal booking for this train goes through the waiting room; join the queue first.")
		}
		// The signature alone decides here (no backend call); single use is
		// marked inside the HOLD script's atomic step.
		use, err = s.admission.AdmitHold(AdmissionCheck{Token: req.AdmissionToken, UserID: c.UserID, SessionToken: req.SessionToken,
			DeviceToken: req.DeviceToken, ShardID: shard.ID, Now: now})
		switch {
		case errors.Is(err, ErrAdmissionExpired):
			return HoldResult{}, shardID, Errorf(EFORBIDDEN, "ADMISSION_EXPIRED", "Your turn to book has lapsed; check your place in the queue.")
		case err != nil:
			// A bad token looks exactly like a capacity refusal.
			return HoldResult{}, shardID, HighDemand()
		}
	}
	prefs, idOK, err := ValidatePassengers(shard.Class, req.Passengers, rules)
	if err != nil {
		return HoldResult{}, shardID, err
	}
	if req.Check != nil {
		if err := req.Check(ctx); err != nil {
			return HoldResult{}, shardID, err
		}
	}
	// The passengers as the hold row keeps them, ID numbers sealed: here,
	// on the request's goroutine, not in the committer's one writer.
	stored, err := s.storedPassengers(req.Passengers)
	if err != nil {
		return HoldResult{}, shardID, err
	}
	// The operator's pace for this shard, before any seat work (the
	// sold-out answer included, as that too is the core's); the checks
	// above cost no backend call, so a malformed request spends no slot,
	// nor does the repeat of an attempt already decided.
	if err := s.throttle.AdmitHold(ctx, shard.ID, c.UserID, req.IdempotencyKey); err != nil {
		return HoldResult{}, shardID, err
	}
	ireq := inventory.HoldRequest{
		ShardID: shard.ID, UserID: c.UserID, IdemKey: req.IdempotencyKey,
		From: from, To: to, DailyCap: rules.DailyCap, Prefs: prefs, IDOK: idOK,
		TokenKey: use.Key, TokenTTL: use.TTL,
		AllowWaitlist: rules.Waitlist && shard.WaitlistCap > 0 && (s.levers == nil || s.levers.WaitlistEnabled()), IdemTTL: rules.IdemTTL, MaxPassengers: rules.MaxPassengers,
	}
	// A sold-out shard answers from memory what the script would; every
	// check above ran as for any attempt (see inventory.SoldOutCache).
	if s.store.SoldOut().SoldOut(ctx, ireq) {
		return HoldResult{Status: string(inventory.SoldOut)}, shardID, nil
	}
	fare := ComputeFare(shard.Fare, shard.Superfast, shard.Stops[to].Km-shard.Stops[from].Km, len(req.Passengers))
	holdID, err := uuid.NewV7()
	if err != nil {
		return HoldResult{}, shardID, fmt.Errorf("hold id: %w", err)
	}
	expires := now.Add(rules.HoldWindow).Truncate(time.Millisecond)
	reqHash := holdRequestHash(shard, from, to, s.hashablePassengers(req.Passengers))
	ireq.HoldID, ireq.RequestHash, ireq.ExpiresAt = holdID.String(), reqHash, expires
	hold := func() (inventory.HoldResult, error) { return s.store.Hold(ctx, ireq) }
	res, err := hold()
	if err == nil && res.Replayed && res.Outcome != inventory.SoldOut {
		// A key whose attempt was lost (never durable, its seats freed by
		// the sweeper) is forgotten by replay: this request is then the
		// fresh attempt the retry meant.
		var out HoldResult
		if out, err = s.replay(ctx, c.UserID, shard, res, req.IdempotencyKey, use.Key); !errors.Is(err, errAttemptLost) {
			return out, shardID, err
		}
		s.log.Warn("hold: a retry's earlier attempt was lost before its commit; holding afresh", "shard", shard.Key(), "lost", res.HoldID)
		res, err = hold()
	}
	if err != nil {
		s.log.Error("hold script failed", "shard", shard.Key(), "err", err)
		return HoldResult{}, shardID, Errorf(EUNAVAIL, ReasonSeatsUnreachable, "The seat service is not reachable right now. Nothing was held; please retry.")
	}
	switch res.Outcome {
	case inventory.NotReady:
		s.TriggerRebuild(shard.ID)
		return HoldResult{}, shardID, Errorf(EUNAVAIL, "SHARD_REBUILDING", "Seats for this train are being recounted. Nothing was held; please retry in a moment.")
	case inventory.TokenUsed:
		return HoldResult{}, shardID, HighDemand()
	case inventory.KeyReused:
		return HoldResult{}, shardID, errHoldKeyReused()
	case inventory.HoldExists: // a fresh UUIDv7 never collides; refuse rather than guess
		return HoldResult{}, shardID, Errorf(EUNAVAIL, "NOT_SAVED", "Your hold could not be saved. Nothing was held; please retry.")
	case inventory.LiveHold:
		return HoldResult{}, shardID, Errorf(ELIMIT, "LIVE_HOLD_EXISTS", "You already have seats held (hold %s). Pay for them or cancel them before holding more.", res.HoldID)
	case inventory.DailyCap:
		return HoldResult{}, shardID, Errorf(ELIMIT, "DAILY_CAP", "You have reached today's limit of %d Tatkal tickets.", rules.DailyCap)
	case inventory.BadPassengers, inventory.NoID, inventory.BadJourney:
		return HoldResult{}, shardID, Errorf(EINVALID, string(res.Outcome), "The request breaks a booking rule (%s).", res.Outcome)
	}
	if res.Replayed {
		out, err := s.replay(ctx, c.UserID, shard, res, req.IdempotencyKey, use.Key)
		if errors.Is(err, errAttemptLost) {
			err = Errorf(EUNAVAIL, "IN_PROGRESS", "An earlier request with this Idempotency-Key is still being processed; retry shortly.")
		}
		return out, shardID, err
	}
	if res.Outcome == inventory.SoldOut {
		s.store.SoldOut().Prime(ctx, shard.ID)
		return HoldResult{Status: string(inventory.SoldOut)}, shardID, nil
	}

	kind := KindSeat
	if res.Outcome == inventory.WaitlistOffered {
		kind = KindWaitlist
	}
	row := holdRow{
		ID: holdID, ShardID: shard.ID, UserID: c.UserID, IdemKey: req.IdempotencyKey, RequestHash: reqHash, Kind: kind,
		From: from, To: to, Berths: res.Berths, WaitlistNo: res.WaitlistNo, Passengers: req.Passengers,
		Fare: fare, Epoch: res.Epoch, OpeningDay: openingDay(shard), ExpiresAt: expires, TokenID: use.TokenID,
		HeldAt: now, Client: req.Client, Stored: stored,
	}
	cr := s.committer.Submit(ctx, row)
	undo := func(ctx context.Context) {
		// Not durable: take the seats back as if the attempt never happened.
		if _, err := s.store.Release(ctx, shard.ID, holdID.String(), inventory.ReleaseUndo, c.UserID, req.IdempotencyKey); err != nil {
			s.log.Error("undo hold failed; the sweeper will free it at expiry", "hold", holdID, "err", err)
		}
		if use.Key != "" {
			// Nothing was held, so the admission token may be used again.
			if err := s.admission.UndoUse(ctx, use); err != nil {
				s.log.Error("admission token stays used after a hold that was not saved", "hold", holdID, "err", err)
			}
		}
	}
	switch {
	case (cr.err != nil && !cr.unknown) || (cr.err == nil && cr.verdict != committed):
		undo(context.WithoutCancel(ctx))
	case cr.err != nil:
		s.settleUnknown(holdID, cr.tx, expires, undo)
	}
	switch {
	case cr.err != nil:
		s.log.Error("hold not durable", "hold", holdID, "err", cr.err)
		return HoldResult{}, shardID, Errorf(EUNAVAIL, "NOT_SAVED", "Your hold could not be saved. Nothing was held; please retry.")
	case cr.verdict == rejectedChanged:
		// The account's holds kept changing under every try (Submit's).
		s.log.Warn("hold not saved: the account's holds changed under each try", "hold", holdID)
		return HoldResult{}, shardID, Errorf(EUNAVAIL, "NOT_SAVED", "Your hold could not be saved. Nothing was held; please retry.")
	case cr.verdict == rejectedKeyReused:
		return HoldResult{}, shardID, errHoldKeyReused()
	case cr.verdict == rejectedDuplicate:
		out, err := s.answerFromRecord(ctx, c.UserID, cr.existing)
		return out, shardID, err
	case cr.verdict == rejectedLiveHold:
		return HoldResult{}, shardID, Errorf(ELIMIT, "LIVE_HOLD_EXISTS", "You already have seats held (hold %s). Pay for them or cancel them before holding more.", cr.existing)
	case cr.verdict == rejectedDailyCap:
		return HoldResult{}, shardID, Errorf(ELIMIT, "DAILY_CAP", "You have reached today's limit of %d Tatkal tickets.", rules.DailyCap)
	case cr.verdict == rejectedMonthlyCap:
		return HoldResult{}, shardID, Errorf(ELIMIT, "MONTHLY_CAP", "You have reached this month's limit of Tatkal tickets (%d, or %d for an identity-verified account).",
			rules.MonthlyCap, rules.MonthlyCapVerified)
	case cr.verdict == rejectedBanned:
		return HoldResult{}, shardID, Errorf(EFORBIDDEN, "ACCOUNT_SUSPENDED", "This account may not book Tatkal tickets after a review of its bookings. You can appeal (POST /v1/fraud/appeals).")
	case cr.verdict == rejectedPassenger:
		// A suspected resale looks exactly like a capacity refusal.
		return HoldResult{}, shardID, HighDemand()
	case cr.verdict == rejectedCharted:
		return HoldResult{}, shardID, Errorf(ECONFLICT, "WINDOW_CLOSED", "Tatkal booking for train %s on %s is closed: its chart is prepared.",
			shard.Train, shard.Date.Format(time.DateOnly))
	case cr.verdict == rejectedStaleEpoch:
		// Redis answered under an epoch PostgreSQL has left: a rebuild is
		// loading, or one failed after its epoch bump and every hold will be
		// refused until another succeeds.
		s.TriggerRebuild(shard.ID)
		return HoldResult{}, shardID, Errorf(EUNAVAIL, "SHARD_REBUILDING", "Seats for this train were just recounted. Nothing was held; please retry.")
	}
	out := HoldResult{HoldID: holdID, Status: string(res.Outcome), ExpiresAt: expires, WaitlistNo: res.WaitlistNo, Fare: fare}
	for _, b := range res.Berths {
		out.Berths = append(out.Berths, berthInfo(shard, b))
	}
	return out, shardID, nil
}

// checkWindow applies the window and account rules of DOMAIN.md.
func (s Holds) checkWindow(shard *Shard, c Caller, now time.Time, rules Rules) error {
	closes := shard.ClosesAt
	if s.levers != nil {
		if t, ok := s.levers.WindowClosesAt(shard.ID); ok {
			closes = t
		}
	}
	switch {
	case now.Before(shard.OpensAt):
		return Errorf(ECONFLICT, "WINDOW_NOT_OPEN", "Tatkal booking for train %s on %s opens at %s IST.",
			shard.Train, shard.Date.Format(time.DateOnly), shard.OpensAt.In(IST).Format("15:04 on 2 Jan"))
	case !now.Before(closes):
		return Errorf(ECONFLICT, "WINDOW_CLOSED", "Tatkal booking for train %s on %s closed at %s IST.",
			shard.Train, shard.Date.Format(time.DateOnly), closes.In(IST).Format("15:04 on 2 Jan"))
	case !c.Verified:
		return Errorf(EFORBIDDEN, "NOT_VERIFIED", "Only identity-verified accounts can book Tatkal tickets online. Verify your account first.")
	case c.Agent && now.Before(shard.OpensAt.Add(rules.AgentBar)):
		return Errorf(EFORBIDDEN, "AGENT_BARRED", "Agents may book Tatkal tickets from %s IST.", shard.OpensAt.Add(rules.AgentBar).In(IST).Format("15:04"))
	}
	return CheckAccountAge(c.CreatedAt, now, rules)
}

// replay answers an idempotency key seen before. A HELD answer is repeated
// only once its hold is durable, so a replay racing the first attempt
// waits for that attempt's commit. An attempt that never committed and
// whose seat record is gone (its process died before the commit, and the
// sweeper freed the orphan) will never commit: its key is forgotten and
// the answer is errAttemptLost.
func (s Holds) replay(ctx context.Context, userID int64, shard *Shard, res inventory.HoldResult, idemKey, tokenKey string) (HoldResult, error) {
	if res.Outcome == inventory.SoldOut {
		return HoldResult{Status: string(inventory.SoldOut), Replayed: true}, nil
	}
	id, err := uuid.Parse(res.HoldID)
	if err != nil {
		return HoldResult{}, fmt.Errorf("replay: bad hold id %q: %w", res.HoldID, err)
	}
	deadline := time.Now().Add(3 * time.Second)
	for wait := 2 * time.Millisecond; ; wait = min(wait*2, 100*time.Millisecond) {
		out, err := s.answerFromRecord(ctx, userID, id)
		if ErrorCode(err) != ENOTFOUND {
			return out, err
		}
		// A record still in Redis may yet commit: wait for it. One gone
		// with no row never will (first look, and again at the deadline).
		if first, late := wait == 2*time.Millisecond, time.Now().After(deadline); first || late {
			if lost, err := s.store.Forget(ctx, shard.ID, userID, idemKey, res.HoldID, tokenKey); err == nil && lost == inventory.Forgotten {
				return HoldResult{}, errAttemptLost
			}
			if late {
				return HoldResult{}, Errorf(EUNAVAIL, "IN_PROGRESS", "An earlier request with this Idempotency-Key is still being processed; retry shortly.")
			}
		}
		select {
		case <-ctx.Done():
			return HoldResult{}, ctx.Err()
		case <-time.After(wait):
		}
	}
}

// answerFromRecord rebuilds the answer to a hold attempt from its row in
// PostgreSQL, as it stands now: HELD (or WAITLIST_OFFERED) only while the
// hold is live, else what became of it (the booking's status with its PNR,
// or EXPIRED, RELEASED, CANCELLED), so a retry never reads a lapsed or
// paid hold as seats still waiting for payment.
func (s Holds) answerFromRecord(ctx context.Context, userID int64, id uuid.UUID) (HoldResult, error) {
	v, err := s.Status(ctx, userID, id)
	if err != nil {
		return HoldResult{}, err
	}
	var status string
	switch {
	case v.BookingStat != "":
		status = v.BookingStat // CONFIRMED, WAITLISTED or CANCELLED
	case v.State == HoldHeld && !s.now().Before(v.ExpiresAt):
		status = HoldExpired // lapsed; its expiry job has not run yet
	case v.State == HoldHeld && v.Kind == KindWaitlist:
		status = "WAITLIST_OFFERED"
	default:
		status = v.State // HELD, EXPIRED, RELEASED, CANCELLED
	}
	return HoldResult{HoldID: v.ID, Status: status, ExpiresAt: v.ExpiresAt, Berths: v.Berths,
		WaitlistNo: v.WaitlistNo, Fare: v.Fare, PNR: v.PNR, Replayed: true}, nil
}

// settleUnknown finishes a hold whose group commit's outcome could not be
// learnt (PostgreSQL went away mid-commit and stayed away). Redis keeps its
// seats meanwhile: freeing them under a row that did commit would sell them
// twice. Once PostgreSQL answers, a hold that did not commit is undone, so
// the passenger's retry holds afresh at once instead of being told
// IN_PROGRESS until the hold would have lapsed. The answer is final when it
// comes (Committer.committed answers only for a transaction that has ended,
// and ends one left open). If this process ends first, the sweeper frees
// the seats at expiry, as before.
func (s Holds) settleUnknown(holdID uuid.UUID, tx db.ServerTx, expires time.Time, undo func(context.Context)) {
	if s.background.Err() != nil {
		return // closed
	}
	s.working.Go(func() {
		ctx, cancel := context.WithDeadline(s.background, expires)
		defer cancel()
		for wait := 500 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			durable, err := s.committer.committed(ctx, tx)
			if err != nil {
				continue
			}
			if !durable {
				s.log.Warn("hold whose commit was in doubt did not commit; undone", "hold", holdID)
				undo(ctx)
			}
			return
		}
	})
}
