package pspsim

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"

	"tatkal/booking/db"
	"tatkal/booking/payment/pspapi"
	"tatkal/booking/sim/simhttp"
)

// refund is a row of refunds.
type refund struct {
	RefundRef   string     `db:"refund_ref"`
	Gateway     string     `db:"gateway"`
	PSPRef      string     `db:"psp_ref"`
	MerchantRef string     `db:"merchant_ref"`
	IdemKey     string     `db:"idempotency_key"`
	RequestHash string     `db:"request_hash"`
	AmountPaise int64      `db:"amount_paise"`
	Reason      string     `db:"reason"`
	Status      string     `db:"status"`
	ProcessAt   time.Time  `db:"process_at"`
	ProcessedAt *time.Time `db:"processed_at"`
	ExpectedAt  time.Time  `db:"expected_at"`
	CreatedAt   time.Time  `db:"created_at"`
}

const refundCols = `refund_ref, gateway, psp_ref, merchant_ref, idempotency_key, request_hash, amount_paise,
	reason, status, process_at, processed_at, expected_at, created_at`

func (r *refund) view() pspapi.Refund {
	out := pspapi.Refund{
		RefundRef: r.RefundRef, PSPRef: r.PSPRef, MerchantRef: r.MerchantRef, AmountPaise: r.AmountPaise,
		Status: r.Status, CreatedAt: r.CreatedAt, ExpectedAt: r.ExpectedAt,
	}
	if r.ProcessedAt != nil {
		out.ProcessedAt = *r.ProcessedAt
	}
	return out
}

func (s *Server) refundWhere(ctx context.Context, q db.Querier, cond string, args ...any) (*refund, error) {
	rows, err := q.Query(ctx, s.q("SELECT "+refundCols+" FROM {s}.refunds WHERE "+cond), args...)
	if err != nil {
		return nil, fmt.Errorf("read refund: %w", err)
	}
	r, err := pgx.CollectExactlyOneRow(rows, pgx.RowToAddrOfStructByName[refund])
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, errNoRow
	}
	if err != nil {
		return nil, fmt.Errorf("read refund: %w", err)
	}
	return r, nil
}

// handleCreateRefund is POST /gw/{gw}/v1/refunds. Several partial refunds
// are allowed; their total never exceeds the captured amount, which the
// conditional UPDATE of refunded_paise enforces atomically.
func (s *Server) handleCreateRefund(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	gw := chiParam(r, "gw")
	var req pspapi.CreateRefund
	if err := simhttp.Decode(w, r, &req, maxBody); err != nil {
		return err
	}
	if err := validateRefund(req); err != nil {
		return err
	}
	key, err := idemKey(r)
	if err != nil {
		return err
	}
	p, err := s.paymentByRef(ctx, s.pool, gw, req.PSPRef)
	if errors.Is(err, errNoRow) {
		return notFound("no payment %q at %s to refund", req.PSPRef, gw)
	}
	if err != nil {
		return err
	}
	rc, _, err := s.route(ctx, s.pool, gw, p.Method)
	if err != nil {
		return err
	}
	if rc.Outage {
		return unavailable(gw, p.Method)
	}
	hash := requestHash(req)
	if prior, err := s.priorRefund(ctx, gw, key, hash, req.MerchantRef); err != nil || prior != nil {
		if err != nil {
			return err
		}
		return s.answerRefund(ctx, w, rc, prior, http.StatusOK, true)
	}

	now := s.now()
	rf := &refund{
		RefundRef: newRef("rfnd_"), Gateway: gw, PSPRef: p.PSPRef, MerchantRef: req.MerchantRef, IdemKey: key,
		RequestHash: hash, AmountPaise: req.AmountPaise, Reason: req.Reason, Status: pspapi.RefundPending,
		ProcessAt: now.Add(s.cfg.RefundDelay), ExpectedAt: addBusinessDays(now, 3), CreatedAt: now,
	}
	// The customer's bank refuses it: recorded FAILED, nothing counted
	// against the capture, nothing paid out.
	refused := s.chance(rc.RefundFailRate, gw, req.MerchantRef, "refund-fail")
	if refused {
		rf.Status = pspapi.RefundFailed
	}
	errLostRace := errors.New("refund key or merchant_ref taken concurrently")
	// Once accepted, the refund is recorded even if the caller hangs up.
	wctx := context.WithoutCancel(ctx)
	err = s.transact(wctx, func(tx pgx.Tx) error {
		var refunded int64
		if refused {
			var status string
			if err := tx.QueryRow(wctx, s.q(`SELECT status FROM {s}.payments WHERE psp_ref = $1`), p.PSPRef).Scan(&status); err != nil {
				return fmt.Errorf("read payment %s: %w", p.PSPRef, err)
			}
			if status != pspapi.StatusSuccess {
				return s.refundRefusal(wctx, tx, p.PSPRef, req.AmountPaise)
			}
		} else {
			err := tx.QueryRow(wctx, s.q(`UPDATE {s}.payments SET refunded_paise = refunded_paise + $2, updated_at = $3
			WHERE psp_ref = $1 AND status = 'SUCCESS' AND refunded_paise + $2 <= amount_paise
			RETURNING refunded_paise`), p.PSPRef, req.AmountPaise, now).Scan(&refunded)
			if errors.Is(err, pgx.ErrNoRows) {
				return s.refundRefusal(wctx, tx, p.PSPRef, req.AmountPaise)
			}
			if err != nil {
				return fmt.Errorf("count refund against %s: %w", p.PSPRef, err)
			}
		}
		tag, err := tx.Exec(wctx, s.q(`INSERT INTO {s}.refunds (`+refundCols+`)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) ON CONFLICT DO NOTHING`),
			rf.RefundRef, rf.Gateway, rf.PSPRef, rf.MerchantRef, rf.IdemKey, rf.RequestHash, rf.AmountPaise,
			rf.Reason, rf.Status, rf.ProcessAt, rf.ProcessedAt, rf.ExpectedAt, rf.CreatedAt)
		if err != nil {
			return fmt.Errorf("insert refund: %w", err)
		}
		if tag.RowsAffected() == 0 {
			return errLostRace // roll back the count too
		}
		return nil
	})
	if errors.Is(err, errLostRace) {
		prior, err := s.priorRefund(ctx, gw, key, hash, req.MerchantRef)
		if err != nil {
			return err
		}
		if prior == nil {
			return fmt.Errorf("refund %s: conflict on insert but no refund found", req.MerchantRef)
		}
		return s.answerRefund(ctx, w, rc, prior, http.StatusOK, true)
	}
	if err != nil {
		return err
	}
	s.log.DebugContext(ctx, "refund accepted", "gateway", gw, "psp_ref", p.PSPRef, "refund_ref", rf.RefundRef,
		"amount_paise", rf.AmountPaise)
	return s.answerRefund(ctx, w, rc, rf, http.StatusCreated, false)
}

func validateRefund(req pspapi.CreateRefund) error {
	switch {
	case req.PSPRef == "":
		return invalid("psp_ref is required")
	case req.AmountPaise <= 0 || req.AmountPaise > maxAmountPaise:
		return invalid("amount_paise must be a positive number of paise")
	case req.MerchantRef == "" || len(req.MerchantRef) > 100:
		return invalid("merchant_ref (your refund id) is required, at most 100 characters")
	case len(req.Reason) > 500:
		return invalid("reason is at most 500 characters")
	}
	return nil
}

// refundRefusal explains why a refund of amount cannot be counted.
func (s *Server) refundRefusal(ctx context.Context, tx pgx.Tx, pspRef string, amount int64) error {
	var status string
	var total, refunded int64
	if err := tx.QueryRow(ctx, s.q(`SELECT status, amount_paise, refunded_paise FROM {s}.payments WHERE psp_ref = $1`),
		pspRef).Scan(&status, &total, &refunded); err != nil {
		return fmt.Errorf("read payment %s: %w", pspRef, err)
	}
	if status != pspapi.StatusSuccess {
		return conflict(pspapi.CodeNotCaptured, "payment %s is %s; only a SUCCESS payment can be refunded", pspRef, status)
	}
	return unprocessable(pspapi.CodeRefundExceeds,
		"refund of %d paise exceeds what is left to refund: captured %d, refunded %d, left %d", amount, total, refunded, total-refunded)
}

// priorRefund is priorCreate for refunds.
func (s *Server) priorRefund(ctx context.Context, gw, key, hash, merchantRef string) (*refund, error) {
	rf, err := s.refundWhere(ctx, s.pool, "gateway = $1 AND idempotency_key = $2", gw, key)
	if errors.Is(err, errNoRow) {
		rf, err = s.refundWhere(ctx, s.pool, "gateway = $1 AND merchant_ref = $2", gw, merchantRef)
		if errors.Is(err, errNoRow) {
			return nil, nil
		}
		if err == nil && rf.IdemKey != key {
			return nil, conflict(pspapi.CodeDuplicateRef,
				"merchant_ref %q already has a refund created with another Idempotency-Key", merchantRef)
		}
	}
	if err != nil {
		return nil, err
	}
	if rf.RequestHash != hash {
		return nil, unprocessable(pspapi.CodeIdempotencyMismatch,
			"Idempotency-Key %q was used for a different refund (%s)", key, rf.RefundRef)
	}
	return rf, nil
}

func (s *Server) answerRefund(ctx context.Context, w http.ResponseWriter, rc pspapi.RouteConfig, rf *refund, status int, replay bool) error {
	if err := s.sleep(ctx, s.latency(rc)); err != nil {
		return err
	}
	if replay {
		w.Header().Set(pspapi.HeaderIdempotentReplay, "true")
	}
	simhttp.JSON(w, status, rf.view())
	return nil
}

// handleGetRefund is GET /gw/{gw}/v1/refunds/{ref}.
func (s *Server) handleGetRefund(w http.ResponseWriter, r *http.Request) error {
	gw, ref := chiParam(r, "gw"), chiParam(r, "ref")
	rf, err := s.refundWhere(r.Context(), s.pool, "gateway = $1 AND refund_ref = $2", gw, ref)
	if errors.Is(err, errNoRow) {
		return notFound("no refund %q at %s", ref, gw)
	}
	if err != nil {
		return err
	}
	simhttp.JSON(w, http.StatusOK, rf.view())
	return nil
}

// processRefunds pays out refunds whose delay has passed.
func (s *Server) processRefunds(ctx context.Context) error {
	now := s.now()
	tag, err := s.pool.Exec(ctx, s.q(`UPDATE {s}.refunds SET status = 'PROCESSED', processed_at = $1
		WHERE status = 'PENDING' AND process_at <= $1`), now)
	if err != nil {
		return fmt.Errorf("process refunds: %w", err)
	}
	if n := tag.RowsAffected(); n > 0 {
		s.log.DebugContext(ctx, "refunds processed", "count", n)
	}
	return nil
}
