package payment

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/riverqueue/river"

	"tatkal/booking"
	"tatkal/booking/db"
	"tatkal/booking/funnel"
	"tatkal/booking/india"
	"tatkal/booking/metrics"
	"tatkal/booking/payment/pspapi"
)

// InitiateRequest starts paying for a hold.
type InitiateRequest struct {
	HoldID         uuid.UUID
	Method         string
	VPA            string // UPI
	Bank           string // net banking
	IdempotencyKey string
	// Guard, if set, runs once the hold is known to be the caller's and
	// payable, just before the payment is recorded; an error refuses the
	// payment and changes nothing. The API counts a payment instrument
	// against the accounts using it here, so a request for someone else's
	// hold (or none) never counts.
	Guard func(ctx context.Context) error
}

// TopUpRequest adds money to the caller's wallet through a gateway.
type TopUpRequest struct {
	AmountPaise    int64
	Method         string // UPI, CARD or NB
	VPA            string
	Bank           string
	IdempotencyKey string
	Guard          func(ctx context.Context) error // as InitiateRequest.Guard
}

// Top-up bounds: at least ₹1, at most UPI's per-payment limit of ₹1 lakh.
const (
	MinTopUpPaise = 100
	MaxTopUpPaise = 1_00_000_00
)

// Top-ups an account may start in one IST day: at most MaxOpenTopUps still
// waiting for the customer or the bank (neither captured nor failed), and
// MaxTopUpsPerDay in all. Each one sends a collect request to the address
// it names, which need not be the account's: without a cap an account
// could flood a stranger's UPI app with them.
const (
	MaxOpenTopUps   = 3
	MaxTopUpsPerDay = 10
)

var (
	vpaRE       = regexp.MustCompile(`^[a-zA-Z0-9._-]{2,256}@[a-zA-Z]{2,64}$`)
	keyRE       = regexp.MustCompile(`^[A-Za-z0-9:._-]{8,128}$`)
	banks       = map[string]bool{"SBI": true, "HDFC": true, "ICICI": true, "AXIS": true, "KOTAK": true, "PNB": true, "BOB": true, "CANARA": true}
	methodNames = map[string]string{Wallet: "wallet", UPI: "UPI", Card: "card", NetBanking: "net banking"}
)

// order is one request to take money, for a hold or a top-up: what
// Initiate and TopUp share.
type order struct {
	purpose string
	holdID  uuid.UUID // PurposeHold
	amount  int64     // PurposeTopUp; a hold's is its fare
	method  string
	vpa     string
	bank    string
	key     string
	guard   func(ctx context.Context) error
}

// hash binds an idempotency key to its request: the same key with another
// request is refused, as Stripe does, instead of answering with the
// earlier payment.
func (o order) hash() string {
	h := sha256.Sum256([]byte(strings.Join([]string{o.purpose, o.holdID.String(), strconv.FormatInt(o.amount, 10),
		o.method, o.vpa, o.bank}, "\x00")))
	return hex.EncodeToString(h[:])
}

// Initiate starts a payment for the caller's live hold. The wallet pays and
// confirms in one local transaction; other methods go to a gateway chosen
// by weight and health. The same idempotency key with the same request
// returns the same payment (with another request it is refused); a second
// payment while one is unresolved is refused.
func (s *Service) Initiate(ctx context.Context, c booking.Caller, req InitiateRequest) (View, error) {
	defer observe("initiate", time.Now())
	return s.start(ctx, c, order{purpose: PurposeHold, holdID: req.HoldID, method: req.Method, vpa: req.VPA, bank: req.Bank,
		key: req.IdempotencyKey, guard: req.Guard})
}

// observe records how long a payment step took in this process's metrics.
func observe(step string, start time.Time) {
	metrics.Payment.WithLabelValues(step).Observe(time.Since(start).Seconds())
}

// TopUp starts a payment that adds money to the caller's wallet: UPI, card
// or net banking through a gateway, exactly like a ticket's payment. The
// wallet is credited when, and only when, the gateway confirms the capture
// to us (a create answer or a status inquiry; a callback prompts an
// inquiry). Poll it with Get.
func (s *Service) TopUp(ctx context.Context, c booking.Caller, req TopUpRequest) (View, error) {
	if req.Method == Wallet {
		return View{}, booking.Errorf(booking.EINVALID, "BAD_METHOD", "Top up with UPI, CARD or NB.")
	}
	if req.AmountPaise < MinTopUpPaise || req.AmountPaise > MaxTopUpPaise {
		return View{}, booking.Errorf(booking.EINVALID, "BAD_AMOUNT", "A top-up must be between ₹%s and ₹%s.",
			india.Decimal(MinTopUpPaise), india.Decimal(MaxTopUpPaise))
	}
	return s.start(ctx, c, order{purpose: PurposeTopUp, amount: req.AmountPaise, method: req.Method, vpa: req.VPA, bank: req.Bank,
		key: req.IdempotencyKey, guard: req.Guard})
}

// errKeyRace: another request with the same idempotency key was recorded
// between our look-up and our insert.
var errKeyRace = errors.New("idempotency key taken concurrently")

func (s *Service) start(ctx context.Context, c booking.Caller, o order) (View, error) {
	if err := validate(o); err != nil {
		return View{}, err
	}
	hash := o.hash()
	if v, err := s.replay(ctx, c.UserID, o.key, hash); err == nil {
		return v, nil
	} else if booking.ErrorCode(err) != booking.ENOTFOUND {
		return View{}, err
	}
	gateway := ""
	if s.cfg.Levers != nil && !s.cfg.Levers.MethodEnabled(o.method) {
		return View{}, booking.Errorf(booking.EUNAVAIL, "METHOD_UNAVAILABLE",
			"Payments by %s are switched off right now.%s", methodNames[o.method], o.stillHeld())
	}
	if err := s.pace(ctx, c.UserID, o); err != nil {
		return View{}, err
	}
	if o.method != Wallet {
		var err error
		gateway, err = s.routes.pick(ctx, o.method, func(id string) bool { return s.gateways[id] != nil })
		if err != nil {
			return View{}, fmt.Errorf("initiate: %w", err)
		}
		if gateway == "" {
			return View{}, booking.Errorf(booking.EUNAVAIL, "METHOD_UNAVAILABLE",
				"Payments by %s are unavailable right now.%s", methodNames[o.method], o.stillHeld())
		}
	}
	id, err := uuid.NewV7()
	if err != nil {
		return View{}, err
	}
	now := time.Now()
	var confirmed *booking.ConfirmResult
	var shardID int64
	var initiatedAt time.Time
	amount := o.amount
	// A wallet payment confirms at once: grouped with other confirmations by
	// the hold, which its body locks first. The others run alone.
	var group *confirmGroup
	if o.method == Wallet {
		group = s.group
	}
	// The payment row commits, or not, whatever the caller does meanwhile:
	// a hang-up while the COMMIT is in flight would otherwise leave a
	// committed payment that the gateway is never asked to create (below).
	txCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), initiateTimeout)
	defer cancel()
	err = group.run(txCtx, s.pool, s.booking, o.holdID, func(ctx context.Context, tx pgx.Tx, confirms *confirmations) error {
		var holdID *uuid.UUID
		var h booking.HoldInfo
		if o.purpose == PurposeHold {
			// The hold's lock and its payments so far, in one round trip:
			// the payments are read under the lock.
			b := &pgx.Batch{}
			booking.QueueLockHold(b, o.holdID, &h)
			var paid paidSoFar
			queuePaidSoFar(b, o.holdID, &paid)
			if err := tx.SendBatch(ctx, b).Close(); err != nil {
				return err
			}
			if h.UserID != c.UserID {
				return booking.Errorf(booking.ENOTFOUND, "NO_SUCH_HOLD", "No hold %s.", o.holdID)
			}
			if err := confirms.Check(h.ID); err != nil {
				return err
			}
			if err := payable(h, paid, now); err != nil {
				return err
			}
			holdID, shardID, amount = &h.ID, h.ShardID, h.FarePaise
		} else if err := topUpRoom(ctx, tx, c.UserID, now); err != nil {
			return err
		}
		if o.guard != nil {
			if err := o.guard(ctx); err != nil {
				return err
			}
		}
		// The debit, the payment and its first event in one round trip.
		b := &pgx.Batch{}
		state, deadline := Initiated, now.Add(s.cfg.ResolutionDeadline)
		posted := true
		if o.method == Wallet {
			state, deadline = Success, now
			queueWalletPost(b, c.UserID, "DEBIT", id.String(), -amount, &posted)
		}
		b.Queue(`INSERT INTO payments (id, purpose, hold_id, user_id, psp, route, method, amount_paise, state, idempotency_key,
			request_hash, deadline, vpa, bank, resolved_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)
			RETURNING initiated_at`,
			id, o.purpose, holdID, c.UserID, gateway, gatewayMethod(o.method), o.method, amount, state, o.key,
			hash, deadline, o.vpa, o.bank, resolvedAt(state, now)).QueryRow(func(row pgx.Row) error { return row.Scan(&initiatedAt) })
		queueEvent(b, id, "", state, "initiated", map[string]any{"method": o.method, "gateway": gateway, "purpose": o.purpose})
		err := tx.SendBatch(ctx, b).Close()
		if err == nil && !posted {
			// The debit's ref is this payment's fresh id: seen already, it
			// is not this payment's money, and SUCCESS must not commit.
			err = fmt.Errorf("wallet debit %s was already applied", id)
		}
		if db.IsUniqueViolation(err) {
			if constraintOf(err) == "payments_user_key" {
				return errKeyRace
			}
			return booking.Errorf(booking.ECONFLICT, "PAYMENT_IN_PROGRESS", "A payment for this hold is already in progress; wait for it to finish.")
		}
		if err != nil {
			if booking.ErrorCode(err) != booking.EINTERNAL {
				return err // INSUFFICIENT_BALANCE
			}
			return fmt.Errorf("insert payment: %w", err)
		}
		if o.method == Wallet {
			confirmed, err = confirms.Confirm(ctx, tx, h.ID)
			return err
		}
		if o.purpose == PurposeHold {
			// The window for slower methods is longer; it counts from the hold.
			if _, err := booking.ExtendHoldTx(ctx, tx, h.ID, h.CreatedAt.Add(s.holdWindow(o.method)), false); err != nil {
				return err
			}
		}
		// The safety net: if no webhook comes, the inquiry job finds out.
		_, err = s.jobs.InsertTx(ctx, tx, InquiryArgs{PaymentID: id}, &river.InsertOpts{ScheduledAt: now.Add(s.cfg.InquiryAfter)})
		return err
	})
	if errors.Is(err, errKeyRace) {
		return s.replay(ctx, c.UserID, o.key, hash)
	}
	if err != nil {
		if booking.ErrorCode(err) == booking.EINTERNAL {
			return View{}, fmt.Errorf("initiate %s payment: %w", o.purpose, err)
		}
		return View{}, err
	}
	if o.purpose == PurposeHold {
		s.funnel.Add(shardID, funnel.PayInitiated, 1)
	}
	if o.method == Wallet {
		s.funnel.Add(shardID, funnel.PaySucceeded, 1)
		s.booking.AfterConfirm(ctx, *confirmed)
		// Its row, as just committed: reading it back was a statement and
		// a round trip per confirmation (issue 38).
		return walletView(id, o.holdID, amount, now, initiatedAt), nil
	}
	// The payment is ours now: its create goes to the gateway even if the
	// caller hangs up (a phone losing signal at the bank's button), or the
	// gateway would never hear of it and the payment would wait minutes
	// for "no such payment" before it could fail, the seats held for it.
	ctx = context.WithoutCancel(ctx)
	s.cfg.Pause.At(ctx, "pay.before-gateway")
	start := time.Now()
	s.sendToGateway(ctx, id, gateway, o, shardID, amount)
	if o.purpose == PurposeHold {
		s.funnel.Observe(funnel.PayInitiated, time.Since(start))
	}
	return s.Get(ctx, c.UserID, id)
}

// walletView is a wallet payment for a hold as its transaction committed
// it, as Get reads it: SUCCESS at once, no gateway, nothing refunded or in
// review. Times are as PostgreSQL keeps them (microseconds; pgx encodes by
// truncating).
func walletView(id, holdID uuid.UUID, amount int64, now, initiatedAt time.Time) View {
	at := now.Truncate(time.Microsecond)
	return View{ID: id, Purpose: PurposeHold, HoldID: holdID, Method: Wallet, State: Success, AmountPaise: amount,
		Deadline: at, InitiatedAt: initiatedAt, ResolvedAt: &at}
}

// topUpRoom refuses a top-up past the account's limits for the IST day
// (MaxOpenTopUps, MaxTopUpsPerDay), in tx, before anything is recorded or
// sent to a gateway. The account's top-ups are counted under a lock of its
// own, so concurrent requests cannot all squeeze under the cap.
func topUpRoom(ctx context.Context, tx pgx.Tx, userID int64, now time.Time) error {
	ist := now.In(booking.IST)
	day := time.Date(ist.Year(), ist.Month(), ist.Day(), 0, 0, 0, 0, booking.IST)
	var open, started int
	b := &pgx.Batch{}
	b.Queue(`SELECT pg_advisory_xact_lock(hashtextextended('payment.topup|' || $1::bigint, 0))`, userID).Exec(func(pgconn.CommandTag) error { return nil })
	b.Queue(`SELECT count(*) FILTER (WHERE state NOT IN ('SUCCESS', 'REFUNDED', 'FAILED')), count(*)
		FROM payments WHERE user_id = $1 AND purpose = 'TOPUP' AND initiated_at >= $2`, userID, day).QueryRow(func(row pgx.Row) error {
		return row.Scan(&open, &started)
	})
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("top-ups of %d today: %w", userID, err)
	}
	switch {
	case started >= MaxTopUpsPerDay:
		return booking.Errorf(booking.ECONFLICT, ReasonTopUpLimit,
			"You have started %d wallet top-ups today, the most allowed in a day. Try again tomorrow.", started)
	case open >= MaxOpenTopUps:
		return booking.Errorf(booking.ECONFLICT, ReasonTopUpLimit,
			"You have %d wallet top-ups still waiting for approval. Approve or decline them in your UPI app or on the bank's page first.", open)
	}
	return nil
}

// ReasonTopUpLimit refuses a top-up past the account's daily limits.
const ReasonTopUpLimit = "TOPUP_LIMIT"

// initiateTimeout bounds the transaction that records a payment (its
// caller's cancellation does not reach it).
const initiateTimeout = 15 * time.Second

// pace spends a slot of the hold's shard's throttle on a new payment for
// a hold (an idempotent replay has been answered already, so a retry of a
// payment made never waits for a slot), before any money moves or any
// gateway is called. Only while some throttle is in force does it look
// the hold's shard up; a hold that is not the caller's spends nothing (the
// transaction refuses it).
func (s *Service) pace(ctx context.Context, userID int64, o order) error {
	if o.purpose != PurposeHold || !s.cfg.Throttle.Active() {
		return nil
	}
	shardID, ok, err := booking.HoldShard(ctx, s.pool, o.holdID, userID)
	if err != nil || !ok {
		return err
	}
	err = s.cfg.Throttle.Admit(ctx, shardID, booking.PacePayment)
	if booking.IsThrottled(err) {
		s.funnel.Add(shardID, funnel.Shed, 1) // turned away at the door, as a shed hold
	}
	return err
}

// stillHeld reassures a passenger refused a method that the seats wait.
func (o order) stillHeld() string {
	if o.purpose == PurposeHold {
		return " Your seats are still held; please pay another way."
	}
	return " Please choose another way to pay."
}

// replay answers a request whose idempotency key was used before: the
// earlier payment if the request is the same, a refusal if it is not.
// ENOTFOUND: the key is new.
func (s *Service) replay(ctx context.Context, userID int64, key, hash string) (View, error) {
	var stored string
	err := s.pool.QueryRow(ctx, `SELECT request_hash FROM payments WHERE user_id = $1 AND idempotency_key = $2`, userID, key).Scan(&stored)
	if errors.Is(err, pgx.ErrNoRows) {
		return View{}, booking.Errorf(booking.ENOTFOUND, "NO_SUCH_PAYMENT", "No payment with that key.")
	}
	if err != nil {
		return View{}, fmt.Errorf("payment by key: %w", err)
	}
	// Rows from before request hashes were kept (empty) cannot be compared.
	if stored != "" && stored != hash {
		return View{}, booking.Errorf(booking.ECONFLICT, ReasonKeyReused,
			"This Idempotency-Key was already used for a different payment request. Send a new key for a new payment.")
	}
	v, err := s.byKey(ctx, userID, key)
	v.Replayed = err == nil
	return v, err
}

func constraintOf(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.ConstraintName
	}
	return ""
}

// ReasonKeyReused is the refusal of an idempotency key sent again with
// another request (HTTP 422).
const ReasonKeyReused = booking.ReasonKeyReused

// holdWindow is the method's hold window: the operator's if set, else the configured one.
func (s *Service) holdWindow(method string) time.Duration {
	if s.cfg.Levers != nil {
		if d, ok := s.cfg.Levers.HoldWindow(method); ok {
			return d
		}
	}
	return s.cfg.HoldWindows[method]
}

func resolvedAt(state string, now time.Time) *time.Time {
	if resolved(state) {
		return &now
	}
	return nil
}

func validate(req order) error {
	switch req.method {
	case Wallet, Card:
	case UPI:
		if !vpaRE.MatchString(req.vpa) {
			return booking.Errorf(booking.EINVALID, "BAD_VPA", "Give a UPI address like name@bank.")
		}
	case NetBanking:
		if !banks[req.bank] {
			return booking.Errorf(booking.EINVALID, "BAD_BANK", "Choose a bank for net banking (SBI, HDFC, ICICI, AXIS, KOTAK, PNB, BOB, CANARA).")
		}
	default:
		return booking.Errorf(booking.EINVALID, "BAD_METHOD", "Pay with WALLET, UPI, CARD or NB.")
	}
	if !keyRE.MatchString(req.key) {
		return booking.Errorf(booking.EINVALID, "BAD_IDEMPOTENCY_KEY", "Send an idempotency key of 8-128 letters, digits and :._- so a retry never pays twice.")
	}
	return nil
}

func (s *Service) byKey(ctx context.Context, userID int64, key string) (View, error) {
	v, err := scanView(s.pool.QueryRow(ctx, viewSQL+`WHERE p.user_id = $1 AND p.idempotency_key = $2`, userID, key))
	if errors.Is(err, pgx.ErrNoRows) {
		return View{}, booking.Errorf(booking.ENOTFOUND, "NO_SUCH_PAYMENT", "No payment with that key.")
	}
	if err != nil {
		return View{}, fmt.Errorf("payment by key: %w", err)
	}
	return v, nil
}

// paidSoFar is the latest payment of a hold that did not fail, if any.
type paidSoFar struct {
	found         bool
	state, method string
	started       time.Time
}

// queuePaidSoFar reads a hold's latest payment that did not fail, as one
// statement of the caller's batch (after the hold's lock).
func queuePaidSoFar(b *pgx.Batch, holdID uuid.UUID, p *paidSoFar) {
	b.Queue(`SELECT state, method, initiated_at FROM payments WHERE hold_id = $1
		AND state NOT IN ('FAILED') ORDER BY initiated_at DESC LIMIT 1`, holdID).QueryRow(func(row pgx.Row) error {
		err := row.Scan(&p.state, &p.method, &p.started)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("payments of hold %s: %w", holdID, err)
		}
		p.found = true
		return nil
	})
}

// payable refuses to take money for a hold that cannot become a ticket
// now, or that is already being paid for.
func payable(h booking.HoldInfo, paid paidSoFar, now time.Time) error {
	if h.State != booking.HoldHeld {
		return booking.Errorf(booking.ECONFLICT, "HOLD_"+h.State, "This hold is %s; hold seats again to pay.", h.State)
	}
	if why := h.Unconfirmable(); why != "" {
		return booking.Errorf(booking.ECONFLICT, "HOLD_UNCONFIRMABLE", "This hold can no longer become a ticket: %s. Nothing was charged.", why)
	}
	if !now.Before(h.ExpiresAt) {
		return booking.Errorf(booking.ECONFLICT, "HOLD_EXPIRED", "This hold ran out at %s IST; hold seats again to pay.",
			h.ExpiresAt.In(booking.IST).Format("15:04:05"))
	}
	if !paid.found {
		return nil
	}
	if paid.state == Success || paid.state == Refunded {
		return booking.Errorf(booking.ECONFLICT, "ALREADY_PAID", "This hold is already paid for.")
	}
	return booking.Errorf(booking.ECONFLICT, "PAYMENT_IN_PROGRESS",
		"A %s payment started at %s IST for this hold is still in progress. Wait for it: you get a ticket or your money back automatically.",
		methodNames[paid.method], paid.started.In(booking.IST).Format("15:04:05"))
}

// sendToGateway creates the payment at its gateway and records the answer.
// A timeout or an unreadable answer leaves it UNKNOWN for the inquiry job.
func (s *Service) sendToGateway(ctx context.Context, id uuid.UUID, gateway string, req order, shardID, amount int64) {
	g := s.gateways[gateway]
	ctx, cancel := context.WithTimeout(ctx, s.cfg.CreateTimeout)
	defer cancel()
	var p pspapi.Payment
	took, err := timed(func() error {
		var err error
		p, err = g.create(ctx, id.String(), pspapi.CreatePayment{
			MerchantRef: id.String(), AmountPaise: amount, Currency: currency, Method: gatewayMethod(req.method),
			VPA: req.vpa, Bank: req.bank, CallbackURL: s.cfg.CallbackURL, ReturnURL: s.cfg.ReturnURL + "?payment_id=" + id.String(),
		})
		return err
	})
	var ce *callError
	s.observeCall(context.WithoutCancel(ctx), gateway, req.method, err, took)
	bg := context.WithoutCancel(ctx)
	switch {
	case err == nil:
		if err := s.apply(bg, id, p, "create answer", true); errors.Is(err, errAmountUnknown) {
			s.log.Warn("create answer proves nothing; inquiry will ask", "payment", id, "err", err)
		} else if err != nil {
			s.log.Error("apply create answer", "payment", id, "err", err)
		}
	case errors.As(err, &ce) && ce.Definitive && ce.Status != 409:
		// The gateway refused to create it: nothing can have been charged.
		if err := s.apply(bg, id, pspapi.Payment{MerchantRef: id.String(), Status: pspapi.StatusFailed,
			FailureReason: "refused by gateway: " + ce.Err.Error()}, "create refused", true); err != nil {
			s.log.Error("apply create refusal", "payment", id, "err", err)
		}
	default:
		if err := s.markUnknown(bg, id, err); err != nil {
			s.log.Error("mark payment unknown", "payment", id, "err", err)
		}
		if req.purpose == PurposeHold {
			s.funnel.Add(shardID, funnel.PayUnknown, 1)
		}
	}
}

// promptInquiryAfter is how soon a create whose answer was lost is asked
// about: long enough for the gateway to finish what it was doing.
const promptInquiryAfter = 2 * time.Second

// markUnknown records that we do not know the outcome of a create, and
// asks the gateway about it soon.
func (s *Service) markUnknown(ctx context.Context, id uuid.UUID, cause error) error {
	return db.Transact(ctx, s.pool, func(tx pgx.Tx) error {
		var state string
		if err := tx.QueryRow(ctx, `SELECT state FROM payments WHERE id = $1 FOR UPDATE`, id).Scan(&state); err != nil {
			return err
		}
		if state != Initiated {
			return nil // a webhook got here first
		}
		if _, err := tx.Exec(ctx, `UPDATE payments SET state = 'UNKNOWN', updated_at = now() WHERE id = $1`, id); err != nil {
			return err
		}
		if _, err := s.jobs.InsertTx(ctx, tx, InquiryArgs{PaymentID: id, Prompt: true},
			&river.InsertOpts{ScheduledAt: time.Now().Add(promptInquiryAfter)}); err != nil {
			return err
		}
		return event(ctx, tx, id, state, Unknown, "create timed out or failed", map[string]any{"error": cause.Error()})
	})
}
