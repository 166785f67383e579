// Package kycsim simulates the identity verifier (booking/kyc's protocol):
// an Aadhaar-style demographic check of a 12-digit number, a name and a
// year of birth, with the latency and failures set on its admin API
// (simhttp's shared settings, as the gateways' and the core's simulators).
//
// Its register of people is first come: a number it has never seen, with
// a valid check digit, is taken as belonging to the name and year first
// asked about; later questions about that number are VERIFIED only with
// the same name (letters and spaces, any case) and year, MISMATCH
// otherwise. A number whose check digit is wrong is INVALID_NUMBER. An
// Idempotency-Key answers its first decision again. It keeps numbers as
// hashes only, in a PostgreSQL schema of its own.
package kycsim

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
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"tatkal/booking/db"
	"tatkal/booking/kyc"
	"tatkal/booking/sim/simhttp"
)

// Config configures the simulator.
type Config struct {
	Pool       *pgxpool.Pool
	APIKey     string // required: callers of /v1
	AdminToken string // callers of /admin; off when empty
	Log        *slog.Logger
	Seed       int64       // the fault dice; 0: from the clock
	Faults     *kyc.Faults // initial faults; nil: DefaultFaults
}

// DefaultFaults are an ordinary day: a real verifier answers in a few
// hundred milliseconds, nothing failing.
var DefaultFaults = kyc.Faults{LatencyMs: 150, JitterMs: 250}

// Server is the identity verifier simulator.
type Server struct {
	pool    *pgxpool.Pool
	key     []byte
	admin   []byte
	log     *slog.Logger
	dialect simhttp.Dialect

	mu     sync.Mutex
	faults kyc.Faults
	rng    *mrand.Rand
}

const maxBody = 1 << 14

// New creates the simulator's schema if needed.
func New(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Pool == nil || cfg.APIKey == "" {
		return nil, errors.New("kycsim: Config.Pool and Config.APIKey are required")
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
		return nil, fmt.Errorf("kycsim: %w", err)
	}
	s := &Server{pool: cfg.Pool, key: []byte(cfg.APIKey), admin: []byte(cfg.AdminToken), log: cfg.Log.With("component", "kyc"),
		faults: f, rng: mrand.New(mrand.NewPCG(uint64(cfg.Seed), 0x6b7963))}
	s.dialect = simhttp.Dialect{Log: s.log, Internal: kyc.ErrorBody{Code: "INTERNAL", Message: "internal error"},
		BadRequest: func(msg string) any { return kyc.ErrorBody{Code: "BAD_REQUEST", Message: msg} }}
	if err := s.migrate(ctx); err != nil {
		return nil, fmt.Errorf("kycsim: %w", err)
	}
	return s, nil
}

func (s *Server) migrate(ctx context.Context) error {
	return db.Transact(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('tatkal.kyc.schema'))`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `
CREATE SCHEMA IF NOT EXISTS kyc;
-- The people the verifier knows: first come, by the number's hash.
CREATE TABLE IF NOT EXISTS kyc.people (
    number_hash text PRIMARY KEY,
    name        text NOT NULL,
    birth_year  int NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
-- Every decision, once per idempotency key.
CREATE TABLE IF NOT EXISTS kyc.decisions (
    ref             text PRIMARY KEY,
    idempotency_key text NOT NULL UNIQUE,
    digest          text NOT NULL,
    status          text NOT NULL,
    masked          text NOT NULL,
    client_ref      text NOT NULL,
    decided_at      timestamptz NOT NULL DEFAULT now()
);
-- Every call, whatever became of it, so a test can count them.
CREATE TABLE IF NOT EXISTS kyc.requests (
    id              bigserial PRIMARY KEY,
    idempotency_key text NOT NULL,
    outcome         text NOT NULL,
    at              timestamptz NOT NULL DEFAULT now()
);`)
		return err
	})
}

// Faults returns the current faults.
func (s *Server) Faults() kyc.Faults {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.faults
}

// SetFaults replaces the faults.
func (s *Server) SetFaults(f kyc.Faults) error {
	if err := f.Validate(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = f
	return nil
}

// Handler serves the protocol of booking/kyc.
func (s *Server) Handler() http.Handler {
	r := chi.NewRouter()
	r.NotFound(func(w http.ResponseWriter, _ *http.Request) {
		simhttp.Error(w, http.StatusNotFound, kyc.ErrorBody{Code: "NO_SUCH_ENDPOINT", Message: "no such endpoint"})
	})
	r.Get("/healthz", simhttp.Health)
	faults := simhttp.Setting[kyc.Faults]{Name: "faults", Limit: maxBody, Log: s.log, Fail: s.dialect.Fail,
		Load: func(*http.Request) (kyc.Faults, error) { return s.Faults(), nil },
		Save: func(_ *http.Request, f kyc.Faults) error { return s.SetFaults(f) }}
	r.Route("/admin", func(r chi.Router) {
		r.Use(simhttp.RequireBearer("kyc-admin", s.admin, kyc.ErrorBody{Code: "UNAUTHORIZED", Message: "missing or wrong bearer token"}))
		r.Get("/faults", faults.Get)
		r.Put("/faults", faults.Put)
	})
	r.Route("/v1", func(r chi.Router) {
		r.Use(simhttp.RequireBearer("kyc", s.key, kyc.ErrorBody{Code: "UNAUTHORIZED", Message: "missing or wrong bearer token"}))
		r.Post("/verifications", s.verify)
	})
	return r
}

type plan struct {
	delay      time.Duration
	fail, lost bool
}

func (s *Server) plan() plan {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.faults
	p := plan{delay: time.Duration(f.LatencyMs) * time.Millisecond}
	if f.JitterMs > 0 {
		p.delay += time.Duration(s.rng.IntN(f.JitterMs+1)) * time.Millisecond
	}
	roll := s.rng.Float64()
	p.fail = roll < f.FailRate
	p.lost = !p.fail && roll < f.FailRate+f.LostReplyRate
	return p
}

func (s *Server) verify(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Idempotency-Key")
	var req kyc.Request
	if err := simhttp.Decode(w, r, &req, maxBody); err != nil {
		s.dialect.Fail(w, r, err)
		return
	}
	switch {
	case key == "" || len(key) > 100:
		s.dialect.Fail(w, r, &simhttp.BadRequest{Err: errors.New("Idempotency-Key: want 1-100 characters")})
		return
	case !req.Consent:
		s.dialect.Fail(w, r, &simhttp.BadRequest{Err: errors.New("consent: the person's consent is required")})
		return
	case len(req.Number) != 12 || strings.Trim(req.Number, "0123456789") != "":
		s.dialect.Fail(w, r, &simhttp.BadRequest{Err: errors.New("number: want 12 digits")})
		return
	case normName(req.Name) == "" || len(req.Name) > 100:
		s.dialect.Fail(w, r, &simhttp.BadRequest{Err: errors.New("name: want 1-100 letters")})
		return
	case req.YearOfBirth < 1900 || req.YearOfBirth > time.Now().Year():
		s.dialect.Fail(w, r, &simhttp.BadRequest{Err: errors.New("year_of_birth: want a year from 1900 to this one")})
		return
	}
	p := s.plan()
	if !simhttp.Sleep(r.Context(), p.delay) {
		s.logRequest(key, "CLIENT_GONE")
		return
	}
	if p.fail {
		s.logRequest(key, "FAILED")
		simhttp.Error(w, http.StatusServiceUnavailable, kyc.ErrorBody{Code: "UNAVAILABLE", Message: "the verifier is busy; retry"})
		return
	}
	res, err := s.decide(context.WithoutCancel(r.Context()), key, req)
	switch {
	case errors.Is(err, errKeyReused):
		s.logRequest(key, "KEY_CONFLICT")
		simhttp.Error(w, http.StatusConflict, kyc.ErrorBody{Code: "IDEMPOTENCY_CONFLICT", Message: "this Idempotency-Key was used for another request"})
		return
	case err != nil:
		s.logRequest(key, "ERROR")
		s.dialect.Fail(w, r, fmt.Errorf("decide: %w", err))
		return
	}
	if p.lost {
		s.logRequest(key, res.Status+"_REPLY_LOST")
		simhttp.Error(w, http.StatusBadGateway, kyc.ErrorBody{Code: "UPSTREAM", Message: "the register did not answer in time"})
		return
	}
	s.logRequest(key, res.Status)
	simhttp.JSON(w, http.StatusOK, res)
}

var errKeyReused = errors.New("idempotency key reused for another request")

// normName is a name as compared: letters and single spaces, lower case.
func normName(s string) string {
	return strings.Join(strings.Fields(strings.ToLower(strings.Map(func(c rune) rune {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == ' ' {
			return c
		}
		return ' '
	}, s))), " ")
}

func hashOf(s string) string {
	h := sha256.Sum256([]byte("kycsim|" + s))
	return hex.EncodeToString(h[:])
}

// decide answers req once per key: the register is read and, for a new
// number, written in the same transaction as the decision.
func (s *Server) decide(ctx context.Context, key string, req kyc.Request) (kyc.Result, error) {
	b, _ := json.Marshal(req)
	digest := hashOf(string(b))
	var res kyc.Result
	err := db.Transact(ctx, s.pool, func(tx pgx.Tx) error {
		var prior string
		err := tx.QueryRow(ctx, `SELECT ref, status, masked, decided_at, digest FROM kyc.decisions WHERE idempotency_key = $1`, key).
			Scan(&res.Ref, &res.Status, &res.Masked, &res.DecidedAt, &prior)
		if err == nil {
			if prior != digest {
				return errKeyReused
			}
			return nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		res = kyc.Result{Ref: "kyc_" + strings.ToLower(rand.Text()[:16]), Masked: "XXXX XXXX " + req.Number[8:], Status: kyc.InvalidNumber}
		if kyc.ValidNumber(req.Number) {
			h := hashOf(req.Number)
			if _, err := tx.Exec(ctx, `INSERT INTO kyc.people (number_hash, name, birth_year) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`,
				h, normName(req.Name), req.YearOfBirth); err != nil {
				return err
			}
			var name string
			var year int
			if err := tx.QueryRow(ctx, `SELECT name, birth_year FROM kyc.people WHERE number_hash = $1`, h).Scan(&name, &year); err != nil {
				return err
			}
			res.Status = kyc.Mismatch
			if name == normName(req.Name) && year == req.YearOfBirth {
				res.Status = kyc.Verified
			}
		}
		return tx.QueryRow(ctx, `INSERT INTO kyc.decisions (ref, idempotency_key, digest, status, masked, client_ref)
			VALUES ($1, $2, $3, $4, $5, $6) RETURNING decided_at`, res.Ref, key, digest, res.Status, res.Masked, req.ClientRef).Scan(&res.DecidedAt)
	})
	return res, err
}

// Calls counts the calls made with key, by outcome (tests).
func (s *Server) Calls(ctx context.Context, key string) (map[string]int, error) {
	rows, err := s.pool.Query(ctx, `SELECT outcome, count(*) FROM kyc.requests WHERE idempotency_key = $1 GROUP BY outcome`, key)
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for rows.Next() {
		var o string
		var n int
		if err := rows.Scan(&o, &n); err != nil {
			return nil, err
		}
		out[o] = n
	}
	return out, rows.Err()
}

// logRequest records one call; it outlives the caller's request.
func (s *Server) logRequest(key, outcome string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := s.pool.Exec(ctx, `INSERT INTO kyc.requests (idempotency_key, outcome) VALUES ($1, $2)`, key, outcome); err != nil {
		s.log.Warn("kyc: log request", "err", err)
	}
}
