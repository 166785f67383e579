package payment

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"tatkal/booking"
	"tatkal/booking/funnel"
	"tatkal/booking/payment/pspapi"
)

// Methods a passenger may pay with.
const (
	Wallet     = "WALLET"
	UPI        = "UPI"
	Card       = "CARD"
	NetBanking = "NB"
)

// Payment states.
const (
	Initiated     = "INITIATED"
	AwaitingUser  = "AWAITING_USER"
	PendingAtBank = "PENDING_AT_BANK"
	Success       = "SUCCESS"
	Failed        = "FAILED"
	Unknown       = "UNKNOWN"
	Refunded      = "REFUNDED"
)

// What a payment is for (payments.purpose).
const (
	PurposeHold  = "HOLD"  // a hold's seats
	PurposeTopUp = "TOPUP" // money into the payer's wallet
)

// currency is the only currency we charge in.
const currency = "INR"

func resolved(state string) bool { return state == Success || state == Failed || state == Refunded }

// gatewayMethod maps our method names to the gateway's.
func gatewayMethod(m string) string {
	if m == NetBanking {
		return pspapi.NetBanking
	}
	return m
}

// Config wires the orchestrator.
type Config struct {
	Pool    *pgxpool.Pool
	Redis   redis.UniversalClient
	Prefix  string // Redis key prefix of the deployment
	Booking *booking.Service
	Jobs    booking.JobInserter
	// Gateways by id.
	Gateways []GatewayConfig
	// CallbackURL is where gateways send webhooks; ReturnURL where the
	// customer's browser comes back to.
	CallbackURL string
	ReturnURL   string
	// HoldWindows: how long seats stay held, from the hold's creation, once
	// a payment by that method starts (wallet short, slower methods longer).
	HoldWindows map[string]time.Duration
	// Extension is granted once, when the bank acknowledges (PENDING_AT_BANK).
	Extension time.Duration
	// ResolutionDeadline: by then every payment is a ticket or a refund, and
	// the passenger is told that time.
	ResolutionDeadline time.Duration
	// LateGrace: a success arriving this long after the seats were released
	// still gets the seats back if they are free.
	LateGrace     time.Duration
	CreateTimeout time.Duration
	// NotCreatedAfter: a payment the gateway still has no record of this
	// long after we asked to create it never will be: it failed, nothing
	// was charged. Our create request never reached the gateway.
	NotCreatedAfter time.Duration
	// InquiryAfter: how long after a gateway payment starts the safety-net
	// inquiry asks its status, if no webhook has settled it by then.
	InquiryAfter time.Duration
	HTTPClient   *http.Client
	Log          *slog.Logger
	Funnel       *funnel.Recorder
	// Levers are the operator's kill switches and hold windows
	// (console/levers.Reader); nil: none.
	Levers Levers
	// Throttle paces payment initiations by the shard_throttle lever, the
	// booking service's own (booking.NewThrottle); nil paces nothing.
	Throttle *booking.Throttle
	// Pause is a test hook between the steps of a path; nil in production.
	Pause booking.PauseFunc
	// LeadApprovalPaise: a person's money move on a payment review above
	// it (a wallet credit, closing the alarm) is approved by a finance
	// lead (default ₹10,000).
	LeadApprovalPaise int64
	// ConfirmWriters: confirmation groups written at once, each on one
	// connection (group.go); 0: no grouping, each confirmation its own
	// transaction.
	ConfirmWriters int
}

// Levers are the operator switches the payment path obeys.
type Levers interface {
	MethodEnabled(method string) bool
	HoldWindow(method string) (time.Duration, bool)
}

// DefaultHoldWindows are the hold windows per method.
func DefaultHoldWindows() map[string]time.Duration {
	return map[string]time.Duration{Wallet: 3 * time.Minute, UPI: 5 * time.Minute, Card: 6 * time.Minute, NetBanking: 6 * time.Minute}
}

// Service is the orchestrator.
type Service struct {
	cfg      Config
	pool     *pgxpool.Pool
	booking  *booking.Service
	jobs     booking.JobInserter
	gateways map[string]*gatewayClient
	routes   *router
	log      *slog.Logger
	funnel   *funnel.Recorder
	seen     *seenEvents
	// group gathers confirmations into shared transactions; nil: each runs
	// alone.
	group *confirmGroup
	// lateSlots bounds the late-success resolutions at once: each holds a
	// pool connection for its lock while its steps take others, so as many
	// as the pool has connections would wait on each other for ever.
	lateSlots chan struct{}
}

// DefaultNotCreatedAfter is how long a payment the gateway has no record
// of waits before it is called failed: a real network may still deliver
// the create late.
const DefaultNotCreatedAfter = 2 * time.Minute

// DefaultInquiryAfter is how long a gateway payment waits for its webhook
// before the inquiry job asks the gateway.
const DefaultInquiryAfter = 15 * time.Second

// New returns the orchestrator.
func New(cfg Config) *Service {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.HoldWindows == nil {
		cfg.HoldWindows = DefaultHoldWindows()
	}
	if cfg.Extension == 0 {
		cfg.Extension = 75 * time.Second
	}
	if cfg.ResolutionDeadline == 0 {
		cfg.ResolutionDeadline = 15 * time.Minute
	}
	if cfg.LateGrace == 0 {
		cfg.LateGrace = 30 * time.Minute
	}
	if cfg.CreateTimeout == 0 {
		cfg.CreateTimeout = 5 * time.Second
	}
	if cfg.NotCreatedAfter == 0 {
		cfg.NotCreatedAfter = DefaultNotCreatedAfter
	}
	if cfg.InquiryAfter == 0 {
		cfg.InquiryAfter = DefaultInquiryAfter
	}
	if cfg.LeadApprovalPaise == 0 {
		cfg.LeadApprovalPaise = 10_000_00
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, IdleConnTimeout: time.Minute}}
	}
	s := &Service{cfg: cfg, pool: cfg.Pool, seen: newSeenEvents(1 << 17), booking: cfg.Booking, jobs: cfg.Jobs, gateways: map[string]*gatewayClient{},
		routes: &router{pool: cfg.Pool, rdb: cfg.Redis, prefix: cfg.Prefix}, log: cfg.Log, funnel: cfg.Funnel}
	slots := int32(1)
	if cfg.Pool != nil {
		slots = max(1, cfg.Pool.Config().MaxConns/3)
	}
	s.lateSlots = make(chan struct{}, slots)
	if cfg.Pool != nil && cfg.ConfirmWriters > 0 {
		s.group = newConfirmGroup(cfg.Pool, cfg.Booking, cfg.ConfirmWriters, cfg.Pause, cfg.Log)
	}
	for _, g := range cfg.Gateways {
		s.gateways[g.ID] = &gatewayClient{cfg: g, http: cfg.HTTPClient}
	}
	return s
}

// View is a payment as the passenger and the console see it.
type View struct {
	ID            uuid.UUID          `json:"payment_id"`
	Purpose       string             `json:"purpose"`
	HoldID        uuid.UUID          `json:"hold_id,omitzero"` // none for a top-up
	Method        string             `json:"method"`
	Gateway       string             `json:"gateway,omitempty"`
	State         string             `json:"state"`
	AmountPaise   int64              `json:"amount_paise"`
	FailureReason string             `json:"failure_reason,omitempty"`
	NextAction    *pspapi.NextAction `json:"next_action,omitempty"`
	Deadline      time.Time          `json:"deadline"`
	InitiatedAt   time.Time          `json:"initiated_at"`
	ResolvedAt    *time.Time         `json:"resolved_at,omitempty"`
	Refund        *RefundView        `json:"refund,omitempty"`
	// InReview: the gateway contradicted itself or us about this payment's
	// money and a person is looking at it (payment_reviews).
	InReview bool `json:"in_review"`
	Replayed bool `json:"-"`
}

// RefundView is a refund as the passenger sees it.
type RefundView struct {
	ID          uuid.UUID  `json:"refund_id"`
	Reason      string     `json:"reason"`
	AmountPaise int64      `json:"amount_paise"`
	State       string     `json:"state"`
	GatewayRef  string     `json:"reference,omitempty"`
	ExpectedAt  *time.Time `json:"expected_at,omitempty"`
}

const viewSQL = `
	SELECT p.id, p.purpose, coalesce(p.hold_id, '00000000-0000-0000-0000-000000000000'), p.method, p.psp, p.state, p.amount_paise,
	       p.failure_reason, p.next_action, p.deadline, p.initiated_at, p.resolved_at,
	       r.id, r.reason, r.amount_paise, r.state, r.gateway_ref, r.expected_at,
	       EXISTS (SELECT 1 FROM payment_reviews v WHERE v.payment_id = p.id AND v.resolved_at IS NULL)
	FROM payments p LEFT JOIN refunds r ON r.payment_id = p.id `

func scanView(row pgx.Row) (View, error) {
	var v View
	var next []byte
	var rid *uuid.UUID
	var rreason, rstate, rref *string
	var ramount *int64
	var rexp *time.Time
	err := row.Scan(&v.ID, &v.Purpose, &v.HoldID, &v.Method, &v.Gateway, &v.State, &v.AmountPaise, &v.FailureReason, &next, &v.Deadline,
		&v.InitiatedAt, &v.ResolvedAt, &rid, &rreason, &ramount, &rstate, &rref, &rexp, &v.InReview)
	if err != nil {
		return v, err
	}
	if len(next) > 0 && string(next) != "null" {
		v.NextAction = &pspapi.NextAction{}
		json.Unmarshal(next, v.NextAction) //nolint:errcheck
	}
	if rid != nil {
		v.Refund = &RefundView{ID: *rid, Reason: *rreason, AmountPaise: *ramount, State: *rstate, GatewayRef: *rref, ExpectedAt: rexp}
	}
	return v, nil
}

// Get returns a payment of the user's.
func (s *Service) Get(ctx context.Context, userID int64, id uuid.UUID) (View, error) {
	v, err := scanView(s.pool.QueryRow(ctx, viewSQL+`WHERE p.id = $1 AND p.user_id = $2`, id, userID))
	if errors.Is(err, pgx.ErrNoRows) {
		return View{}, booking.Errorf(booking.ENOTFOUND, "NO_SUCH_PAYMENT", "No payment %s.", id)
	}
	if err != nil {
		return View{}, fmt.Errorf("read payment %s: %w", id, err)
	}
	return v, nil
}

// Lookup returns any payment with the PNR of its hold's booking, for the
// page the gateway sends the customer back to.
func (s *Service) Lookup(ctx context.Context, id uuid.UUID) (View, string, error) {
	v, err := scanView(s.pool.QueryRow(ctx, viewSQL+`WHERE p.id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return View{}, "", booking.Errorf(booking.ENOTFOUND, "NO_SUCH_PAYMENT", "No payment %s.", id)
	}
	if err != nil {
		return View{}, "", fmt.Errorf("read payment %s: %w", id, err)
	}
	var pnr string
	err = s.pool.QueryRow(ctx, `SELECT pnr FROM bookings WHERE hold_id = $1 AND status <> 'CANCELLED'`, v.HoldID).Scan(&pnr)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return View{}, "", fmt.Errorf("read payment %s booking: %w", id, err)
	}
	return v, pnr, nil
}

// ForHold returns the payments of a hold, newest first.
func (s *Service) ForHold(ctx context.Context, holdID uuid.UUID) ([]View, error) {
	rows, err := s.pool.Query(ctx, viewSQL+`WHERE p.hold_id = $1 ORDER BY p.initiated_at DESC`, holdID)
	if err != nil {
		return nil, fmt.Errorf("payments of hold %s: %w", holdID, err)
	}
	defer rows.Close()
	var out []View
	for rows.Next() {
		v, err := scanView(rows)
		if err != nil {
			return nil, fmt.Errorf("payments of hold %s: %w", holdID, err)
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// Healths reports every route's live health.
func (s *Service) Healths(ctx context.Context) ([]Health, error) { return s.routes.Healths(ctx) }

// SetRouteWeight changes a route's weight at runtime.
func (s *Service) SetRouteWeight(ctx context.Context, gw, method string, weight int, enabled bool) error {
	return s.routes.SetWeight(ctx, gw, method, weight, enabled)
}

// event records a state change with its cause, in tx.
func event(ctx context.Context, tx pgx.Tx, id uuid.UUID, from, to, cause string, detail map[string]any) error {
	if _, err := tx.Exec(ctx, eventSQL, id, from, to, cause, eventDetail(detail)); err != nil {
		return fmt.Errorf("payment %s event: %w", id, err)
	}
	return nil
}

// queueEvent is event as one statement of the caller's batch.
func queueEvent(b *pgx.Batch, id uuid.UUID, from, to, cause string, detail map[string]any) {
	b.Queue(eventSQL, id, from, to, cause, eventDetail(detail)).Exec(func(pgconn.CommandTag) error { return nil })
}

const eventSQL = `INSERT INTO payment_events (payment_id, from_state, to_state, cause, detail) VALUES ($1, $2, $3, $4, $5)`

func eventDetail(detail map[string]any) []byte {
	if detail == nil {
		return []byte("{}")
	}
	d, _ := json.Marshal(detail)
	return d
}
