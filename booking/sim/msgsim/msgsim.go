// Package msgsim simulates the messaging gateway (`tatkal msg`): SMS and
// e-mail taken over the protocol of booking/notify, kept in a PostgreSQL
// schema of its own, delivered after a while (the receipt turns DELIVERED,
// or UNDELIVERED for some), with the latency and failures set on its admin
// API. A message is taken once per idempotency key; every request is
// logged, so a test can count what the gateway was asked and what it sent.
package msgsim

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"tatkal/booking/db"
	"tatkal/booking/notify"
	"tatkal/booking/sim/simhttp"
)

// Config configures the simulator.
type Config struct {
	Pool       *pgxpool.Pool
	APIKey     string // required: callers of /v1
	AdminToken string // callers of /admin; off when empty
	Log        *slog.Logger
	Seed       int64          // the fault dice; 0: from the clock
	Faults     *notify.Faults // initial faults; nil: realistic defaults
}

// DefaultFaults are an ordinary day: 20-80 ms to answer, receipts after
// half a second, nothing failing.
var DefaultFaults = notify.Faults{LatencyMs: 20, JitterMs: 60, DeliverAfterMs: 500}

// Server is the messaging gateway simulator.
type Server struct {
	pool    *pgxpool.Pool
	key     []byte
	admin   []byte
	log     *slog.Logger
	dialect simhttp.Dialect

	mu     sync.Mutex
	faults notify.Faults
	rng    *mrand.Rand
}

// maxBody bounds a request: a message with a PDF in base64.
const maxBody = 4 << 20

// New creates the simulator's schema if needed.
func New(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Pool == nil || cfg.APIKey == "" {
		return nil, errors.New("msgsim: Config.Pool and Config.APIKey are required")
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Seed == 0 {
		cfg.Seed = time.Now().UnixNano()
	}
	f := DefaultFaults
	if cfg.Faults != nil {
		f = *cfg.Faults
	}
	if err := f.Validate(); err != nil {
		return nil, fmt.Errorf("msgsim: %w", err)
	}
	s := &Server{pool: cfg.Pool, key: []byte(cfg.APIKey), admin: []byte(cfg.AdminToken), log: cfg.Log.With("component", "msg"),
		faults: f, rng: mrand.New(mrand.NewPCG(uint64(cfg.Seed), 0x6d7367))}
	s.dialect = simhttp.Dialect{Log: s.log, Internal: notify.ErrorBody{Code: "INTERNAL", Message: "internal error"},
		BadRequest: func(msg string) any { return notify.ErrorBody{Code: "BAD_REQUEST", Message: msg} }}
	if err := s.migrate(ctx); err != nil {
		return nil, fmt.Errorf("msgsim: %w", err)
	}
	return s, nil
}

func (s *Server) migrate(ctx context.Context) error {
	return db.Transact(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('tatkal.msg.schema'))`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `
CREATE SCHEMA IF NOT EXISTS msg;
CREATE TABLE IF NOT EXISTS msg.messages (
    id              text PRIMARY KEY,
    idempotency_key text NOT NULL UNIQUE,
    digest          text NOT NULL,
    channel         text NOT NULL,
    recipient       text NOT NULL,
    subject         text NOT NULL,
    body            text NOT NULL,
    client_ref      text NOT NULL,
    attachment_name text NOT NULL DEFAULT '',
    attachment      bytea,
    outcome         text NOT NULL CHECK (outcome IN ('DELIVERED', 'UNDELIVERED')),
    accepted_at     timestamptz NOT NULL DEFAULT now(),
    final_at        timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS messages_client_ref ON msg.messages (client_ref);
-- Every call to POST /v1/messages, whatever became of it.
CREATE TABLE IF NOT EXISTS msg.requests (
    id              bigserial PRIMARY KEY,
    idempotency_key text NOT NULL,
    client_ref      text NOT NULL,
    outcome         text NOT NULL,
    at              timestamptz NOT NULL DEFAULT now()
);`)
		return err
	})
}

// Faults returns the current faults.
func (s *Server) Faults() notify.Faults {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.faults
}

// SetFaults replaces the faults.
func (s *Server) SetFaults(f notify.Faults) error {
	if err := f.Validate(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = f
	return nil
}

// Handler serves the protocol of booking/notify.
func (s *Server) Handler() http.Handler {
	r := chi.NewRouter()
	r.NotFound(func(w http.ResponseWriter, _ *http.Request) {
		simhttp.Error(w, http.StatusNotFound, notify.ErrorBody{Code: "NO_SUCH_ENDPOINT", Message: "no such endpoint"})
	})
	r.Get("/healthz", simhttp.Health)
	faults := simhttp.Setting[notify.Faults]{Name: "faults", Limit: maxBody, Log: s.log, Fail: s.dialect.Fail,
		Load: func(*http.Request) (notify.Faults, error) { return s.Faults(), nil },
		Save: func(_ *http.Request, f notify.Faults) error { return s.SetFaults(f) }}
	r.Route("/admin", func(r chi.Router) {
		r.Use(auth(s.admin))
		r.Get("/faults", faults.Get)
		r.Put("/faults", faults.Put)
	})
	r.Route("/v1", func(r chi.Router) {
		r.Use(auth(s.key))
		r.Post("/messages", s.send)
		r.Get("/messages/{id}", s.status)
	})
	return r
}

// auth admits callers bearing want; an empty want admits nobody.
func auth(want []byte) func(http.Handler) http.Handler {
	return simhttp.RequireBearer("msg", want, notify.ErrorBody{Code: "UNAUTHORIZED", Message: "missing or wrong bearer token"})
}

// plan rolls the dice for one request.
type plan struct {
	delay         time.Duration
	fail, lost    bool
	undeliverable bool
	replyDelay    time.Duration
	deliverAfter  time.Duration
}

func (s *Server) plan() plan {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.faults
	p := plan{delay: time.Duration(f.LatencyMs) * time.Millisecond, replyDelay: time.Duration(f.ReplyDelayMs) * time.Millisecond,
		deliverAfter: time.Duration(f.DeliverAfterMs) * time.Millisecond}
	if f.JitterMs > 0 {
		p.delay += time.Duration(s.rng.IntN(f.JitterMs+1)) * time.Millisecond
	}
	roll := s.rng.Float64()
	p.fail = roll < f.FailRate
	p.lost = !p.fail && roll < f.FailRate+f.LostReplyRate
	p.undeliverable = s.rng.Float64() < f.UndeliverableRate
	return p
}

// send takes a message once per idempotency key.
func (s *Server) send(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	key := r.Header.Get("Idempotency-Key")
	var m notify.Message
	if err := simhttp.Decode(w, r, &m, maxBody); err != nil {
		s.dialect.Fail(w, r, err)
		return
	}
	if key == "" || len(key) > 100 {
		s.dialect.Fail(w, r, &simhttp.BadRequest{Err: errors.New("Idempotency-Key: want 1-100 characters")})
		return
	}
	if err := m.Validate(); err != nil {
		s.dialect.Fail(w, r, &simhttp.BadRequest{Err: err})
		return
	}
	p := s.plan()
	if !simhttp.Sleep(ctx, p.delay) {
		s.logRequest(key, m.ClientRef, "CLIENT_GONE")
		return
	}
	if p.fail {
		s.logRequest(key, m.ClientRef, "FAILED")
		simhttp.Error(w, http.StatusServiceUnavailable, notify.ErrorBody{Code: "UNAVAILABLE", Message: "the gateway is busy; retry"})
		return
	}
	rec, status, err := s.take(ctx, key, m, p)
	switch {
	case errors.Is(err, errKeyReused):
		s.logRequest(key, m.ClientRef, "KEY_CONFLICT")
		simhttp.Error(w, http.StatusConflict, notify.ErrorBody{Code: "IDEMPOTENCY_CONFLICT", Message: "this Idempotency-Key was used for another message"})
		return
	case err != nil:
		s.logRequest(key, m.ClientRef, "ERROR")
		s.dialect.Fail(w, r, fmt.Errorf("take message: %w", err))
		return
	}
	outcome := "TAKEN"
	if rec.Duplicate {
		outcome = "DUPLICATE"
	}
	if p.lost {
		s.logRequest(key, m.ClientRef, outcome+"_REPLY_LOST")
		simhttp.Error(w, http.StatusBadGateway, notify.ErrorBody{Code: "UPSTREAM", Message: "upstream carrier did not answer"})
		return
	}
	s.logRequest(key, m.ClientRef, outcome)
	if !simhttp.Sleep(ctx, p.replyDelay) {
		return // the caller left: the message is taken all the same
	}
	simhttp.JSON(w, status, rec)
}

var errKeyReused = errors.New("idempotency key reused for another message")

// take stores m under key, or finds what key stored before.
func (s *Server) take(ctx context.Context, key string, m notify.Message, p plan) (notify.Receipt, int, error) {
	sum := sha256.New()
	json.NewEncoder(sum).Encode(m) //nolint:errcheck
	digest := hex.EncodeToString(sum.Sum(nil))
	var attName string
	var att []byte
	if len(m.Attachments) > 0 {
		attName, att = m.Attachments[0].Name, m.Attachments[0].Data
	}
	outcome := notify.Delivered
	if p.undeliverable {
		outcome = notify.Undelivered
	}
	id := "msg_" + rand.Text()[:20]
	// A message is taken even if its caller leaves mid-request.
	ctx = context.WithoutCancel(ctx)
	var inserted bool
	err := s.pool.QueryRow(ctx, `INSERT INTO msg.messages (id, idempotency_key, digest, channel, recipient, subject, body, client_ref,
		attachment_name, attachment, outcome, final_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, now() + $12::interval)
		ON CONFLICT (idempotency_key) DO NOTHING RETURNING true`,
		id, key, digest, m.Channel, m.To, m.Subject, m.Body, m.ClientRef, attName, att, outcome, p.deliverAfter.String()).Scan(&inserted)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return notify.Receipt{}, 0, err
	}
	var prior string
	if err := s.pool.QueryRow(ctx, `SELECT id, digest FROM msg.messages WHERE idempotency_key = $1`, key).Scan(&id, &prior); err != nil {
		return notify.Receipt{}, 0, err
	}
	if prior != digest {
		return notify.Receipt{}, 0, errKeyReused
	}
	rec, err := s.receipt(ctx, id)
	if err != nil {
		return rec, 0, err
	}
	if !inserted {
		rec.Duplicate = true
		return rec, http.StatusOK, nil
	}
	return rec, http.StatusAccepted, nil
}

func (s *Server) receipt(ctx context.Context, id string) (notify.Receipt, error) {
	r := notify.Receipt{ID: id}
	var outcome string
	var final time.Time
	err := s.pool.QueryRow(ctx, `SELECT outcome, accepted_at, final_at FROM msg.messages WHERE id = $1`, id).Scan(&outcome, &r.AcceptedAt, &final)
	if err != nil {
		return r, err
	}
	r.Status = notify.Accepted
	if !time.Now().Before(final) {
		r.Status = outcome
		if outcome == notify.Delivered {
			r.DeliveredAt = &final
		} else {
			r.Error = "the recipient's handset or mailbox did not take it"
		}
	}
	return r, nil
}

func (s *Server) status(w http.ResponseWriter, r *http.Request) {
	p := s.plan()
	if !simhttp.Sleep(r.Context(), p.delay) {
		return
	}
	if p.fail {
		simhttp.Error(w, http.StatusServiceUnavailable, notify.ErrorBody{Code: "UNAVAILABLE", Message: "the gateway is busy; retry"})
		return
	}
	rec, err := s.receipt(r.Context(), chi.URLParam(r, "id"))
	if errors.Is(err, pgx.ErrNoRows) {
		simhttp.Error(w, http.StatusNotFound, notify.ErrorBody{Code: "NO_SUCH_MESSAGE", Message: "no such message"})
		return
	}
	if err != nil {
		s.dialect.Fail(w, r, fmt.Errorf("read receipt: %w", err))
		return
	}
	simhttp.JSON(w, http.StatusOK, rec)
}

// logRequest records one call; it outlives the caller's request.
func (s *Server) logRequest(key, ref, outcome string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := s.pool.Exec(ctx, `INSERT INTO msg.requests (idempotency_key, client_ref, outcome) VALUES ($1, $2, $3)`,
		key, ref, outcome); err != nil {
		s.log.Warn("msg: log request", "err", err)
	}
}
