package payment

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"tatkal/booking"
	"tatkal/booking/db"
	"tatkal/booking/funnel"
	"tatkal/booking/payment/pspapi"
)

// InitiateRequest starts paying for a hold.
type InitiateRequest struct {
	HoldID         uuid.UUID
	Method         string
	VPA            string // UPI
	Bank           string // net banking
	IdempotencyKey string
}

var (
	vpaRE       = regexp.MustCompile(`^[a-zA-Z0-9._-]{2,256}@[a-zA-Z]{2,64}$`)
	keyRE       = regexp.MustCompile(`^[A-Za-z0-9:._-]{8,128}$`)
	banks       = map[string]bool{"SBI": true, "HDFC": true, "ICICI": true, "AXIS": true, "KOTAK": true, "PNB": true, "BOB": true, "CANARA": true}
	methodNames = map[string]string{Wallet: "wallet", UPI: "UPI", Card: "card", NetBanking: "net banking"}
)

// Initiate starts a payment for the caller's live hold. The wallet pays and
// confirms in one local transaction; other methods go to a gateway chosen
// by weight and health. The same idempotency key returns the same payment;
// a second payment while one is unresolved is refused.
func (s *Service) Initiate(ctx context.Context, c booking.Caller, req InitiateRequest) (View, error) {
	if err := validate(req); err != nil {
		return View{}, err
	}
	if v, err := s.byKey(ctx, c.UserID, req.IdempotencyKey); err == nil {
		v.Replayed = true
		return v, nil
	} else if booking.ErrorCode(err) != booking.ENOTFOUND {
		return View{}, err
	}
	gateway := ""
	if s.cfg.Levers != nil && !s.cfg.Levers.MethodEnabled(req.Method) {
		return View{}, booking.Errorf(booking.EUNAVAIL, "METHOD_UNAVAILABLE",
			"Payments by %s are switched off right now. Your seats are still held; please pay another way.", methodNames[req.Method])
	}
	if req.Method != Wallet {
		var err error
		gateway, err = s.routes.pick(ctx, req.Method, func(id string) bool { return s.gateways[id] != nil })
		if err != nil {
			return View{}, fmt.Errorf("initiate: %w", err)
		}
		if gateway == "" {
			return View{}, booking.Errorf(booking.EUNAVAIL, "METHOD_UNAVAILABLE",
				"Payments by %s are unavailable right now. Your seats are still held; please choose another way to pay.", methodNames[req.Method])
		}
	}
	id, err := uuid.NewV7()
	if err != nil {
		return View{}, err
	}
	now := time.Now()
	var confirmed booking.ConfirmResult
	var shardID, amount int64
	err = db.Transact(ctx, s.pool, func(tx pgx.Tx) error {
		h, err := booking.LockHoldTx(ctx, tx, req.HoldID)
		if err != nil {
			return err
		}
		if h.UserID != c.UserID {
			return booking.Errorf(booking.ENOTFOUND, "NO_SUCH_HOLD", "No hold %s.", req.HoldID)
		}
		if err := s.checkPayable(ctx, tx, h, now); err != nil {
			return err
		}
		shardID, amount = h.ShardID, h.FarePaise
		state, deadline := Initiated, now.Add(s.cfg.ResolutionDeadline)
		if req.Method == Wallet {
			state, deadline = Success, now
			if _, err := walletPost(ctx, tx, c.UserID, "DEBIT", id.String(), -h.FarePaise); err != nil {
				return err
			}
		}
		_, err = tx.Exec(ctx, `INSERT INTO payments (id, hold_id, user_id, psp, route, method, amount_paise, state, idempotency_key,
			deadline, vpa, bank, resolved_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
			id, h.ID, c.UserID, gateway, gatewayMethod(req.Method), req.Method, h.FarePaise, state, req.IdempotencyKey,
			deadline, req.VPA, req.Bank, resolvedAt(state, now))
		if db.IsUniqueViolation(err) {
			return booking.Errorf(booking.ECONFLICT, "PAYMENT_IN_PROGRESS", "A payment for this hold is already in progress; wait for it to finish.")
		}
		if err != nil {
			return fmt.Errorf("insert payment: %w", err)
		}
		if err := event(ctx, tx, id, "", state, "initiated", map[string]any{"method": req.Method, "gateway": gateway}); err != nil {
			return err
		}
		if req.Method == Wallet {
			confirmed, err = s.booking.ConfirmTx(ctx, tx, h.ID)
			return err
		}
		// The window for slower methods is longer; it counts from the hold.
		if _, err := booking.ExtendHoldTx(ctx, tx, h.ID, h.CreatedAt.Add(s.holdWindow(req.Method)), false); err != nil {
			return err
		}
		// The safety net: if no webhook comes, the inquiry job finds out.
		_, err = s.jobs.InsertTx(ctx, tx, InquiryArgs{PaymentID: id}, &river.InsertOpts{ScheduledAt: now.Add(15 * time.Second)})
		return err
	})
	if err != nil {
		if booking.ErrorCode(err) == booking.EINTERNAL {
			return View{}, fmt.Errorf("initiate payment for hold %s: %w", req.HoldID, err)
		}
		return View{}, err
	}
	s.funnel.Add(shardID, funnel.PayInitiated, 1)
	if req.Method == Wallet {
		s.funnel.Add(shardID, funnel.PaySucceeded, 1)
		s.booking.AfterConfirm(ctx, confirmed)
		return s.Get(ctx, c.UserID, id)
	}
	start := time.Now()
	s.sendToGateway(ctx, id, gateway, req, shardID, amount)
	s.funnel.Observe(funnel.PayInitiated, time.Since(start))
	return s.Get(ctx, c.UserID, id)
}

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

func validate(req InitiateRequest) error {
	switch req.Method {
	case Wallet, Card:
	case UPI:
		if !vpaRE.MatchString(req.VPA) {
			return booking.Errorf(booking.EINVALID, "BAD_VPA", "Give a UPI address like name@bank.")
		}
	case NetBanking:
		if !banks[req.Bank] {
			return booking.Errorf(booking.EINVALID, "BAD_BANK", "Choose a bank for net banking (SBI, HDFC, ICICI, AXIS, KOTAK, PNB, BOB, CANARA).")
		}
	default:
		return booking.Errorf(booking.EINVALID, "BAD_METHOD", "Pay with WALLET, UPI, CARD or NB.")
	}
	if !keyRE.MatchString(req.IdempotencyKey) {
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

// checkPayable refuses to take money for a hold that cannot become a ticket
// now, or that is already being paid for.
func (s *Service) checkPayable(ctx context.Context, tx pgx.Tx, h booking.HoldInfo, now time.Time) error {
	if h.State != booking.HoldHeld {
		return booking.Errorf(booking.ECONFLICT, "HOLD_"+h.State, "This hold is %s; hold seats again to pay.", h.State)
	}
	if !now.Before(h.ExpiresAt) {
		return booking.Errorf(booking.ECONFLICT, "HOLD_EXPIRED", "This hold ran out at %s IST; hold seats again to pay.",
			h.ExpiresAt.In(booking.IST).Format("15:04:05"))
	}
	var open, method string
	var started time.Time
	err := tx.QueryRow(ctx, `SELECT state, method, initiated_at FROM payments WHERE hold_id = $1
		AND state NOT IN ('FAILED') ORDER BY initiated_at DESC LIMIT 1`, h.ID).Scan(&open, &method, &started)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("payments of hold %s: %w", h.ID, err)
	}
	if open == Success || open == Refunded {
		return booking.Errorf(booking.ECONFLICT, "ALREADY_PAID", "This hold is already paid for.")
	}
	return booking.Errorf(booking.ECONFLICT, "PAYMENT_IN_PROGRESS",
		"A %s payment started at %s IST for this hold is still in progress. Wait for it: you get a ticket or your money back automatically.",
		methodNames[method], started.In(booking.IST).Format("15:04:05"))
}

// sendToGateway creates the payment at its gateway and records the answer.
// A timeout or an unreadable answer leaves it UNKNOWN for the inquiry job.
func (s *Service) sendToGateway(ctx context.Context, id uuid.UUID, gateway string, req InitiateRequest, shardID, amount int64) {
	g := s.gateways[gateway]
	ctx, cancel := context.WithTimeout(ctx, s.cfg.CreateTimeout)
	defer cancel()
	var p pspapi.Payment
	took, err := timed(func() error {
		var err error
		p, err = g.create(ctx, id.String(), pspapi.CreatePayment{
			MerchantRef: id.String(), AmountPaise: amount, Currency: "INR", Method: gatewayMethod(req.Method),
			VPA: req.VPA, Bank: req.Bank, CallbackURL: s.cfg.CallbackURL, ReturnURL: s.cfg.ReturnURL + "?payment_id=" + id.String(),
		})
		return err
	})
	var ce *callError
	s.routes.observe(context.WithoutCancel(ctx), gateway, req.Method, err == nil || (errors.As(err, &ce) && ce.Definitive), took)
	bg := context.WithoutCancel(ctx)
	switch {
	case err == nil:
		if err := s.apply(bg, id, p, "create answer"); err != nil {
			s.log.Error("apply create answer", "payment", id, "err", err)
		}
	case errors.As(err, &ce) && ce.Definitive && ce.Status != 409:
		// The gateway refused to create it: nothing can have been charged.
		if err := s.apply(bg, id, pspapi.Payment{MerchantRef: id.String(), Status: pspapi.StatusFailed,
			FailureReason: "refused by gateway: " + ce.Err.Error()}, "create refused"); err != nil {
			s.log.Error("apply create refusal", "payment", id, "err", err)
		}
	default:
		if err := s.markUnknown(bg, id, err); err != nil {
			s.log.Error("mark payment unknown", "payment", id, "err", err)
		}
		s.funnel.Add(shardID, funnel.PayUnknown, 1)
	}
}

// markUnknown records that we do not know the outcome of a create.
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
		return event(ctx, tx, id, state, Unknown, "create timed out or failed", map[string]any{"error": cause.Error()})
	})
}
