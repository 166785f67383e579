// Package prssim simulates the reservation core (`tatkal prs`): it serves
// the protocol of booking/prs from its own PostgreSQL schema and injects
// the faults set on its admin API, so the sync channel and the
// reconciliation of the core leg are tested against a real HTTP server.
package prssim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"tatkal/booking/prs"
	"tatkal/booking/sim/simhttp"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ServerConfig configures the simulator.
type ServerConfig struct {
	Pool       *pgxpool.Pool
	Schema     string // the core's own schema; "prs" when empty
	APIKey     string // required: callers of /v1
	AdminToken string // callers of /admin; the admin API is off when empty
	Log        *slog.Logger
	Seed       int64 // for the fault dice; 0 picks one from the clock
}

// Server is the reservation-core simulator.
type Server struct {
	store   *store
	faults  *faultBox
	apiKey  []byte
	admin   []byte
	log     *slog.Logger
	dialect simhttp.Dialect
}

// maxBody bounds a request body: six passengers fit in a few KiB.
const maxBody = 64 << 10

// NewServer creates the core's schema if needed and returns a server that
// knows every booking stored there before.
func NewServer(ctx context.Context, cfg ServerConfig) (*Server, error) {
	if cfg.Pool == nil {
		return nil, errors.New("prs: ServerConfig.Pool is required")
	}
	if cfg.APIKey == "" {
		return nil, errors.New("prs: ServerConfig.APIKey is required")
	}
	if cfg.Schema == "" {
		cfg.Schema = "prs"
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	s := &Server{
		store:  newStore(cfg.Pool, cfg.Schema),
		faults: newFaultBox(cfg.Seed),
		apiKey: []byte(cfg.APIKey),
		admin:  []byte(cfg.AdminToken),
		log:    cfg.Log.With("component", "prs"),
	}
	s.dialect = simhttp.Dialect{Log: s.log, Internal: prs.ErrorBody{Code: prs.CodeInternal, Message: "internal error"},
		BadRequest: func(msg string) any { return prs.ErrorBody{Code: prs.CodeBadRequest, Message: msg} }}
	if err := s.store.migrate(ctx); err != nil {
		return nil, fmt.Errorf("prs: %w", err)
	}
	return s, nil
}

// Handler serves the protocol described in the package comment.
func (s *Server) Handler() http.Handler {
	r := chi.NewRouter()
	r.NotFound(func(w http.ResponseWriter, _ *http.Request) {
		simhttp.Error(w, http.StatusNotFound, prs.ErrorBody{Code: "NO_SUCH_ENDPOINT", Message: "no such endpoint"})
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, _ *http.Request) {
		simhttp.Error(w, http.StatusMethodNotAllowed, prs.ErrorBody{Code: prs.CodeBadRequest, Message: "method not allowed"})
	})
	r.Get("/healthz", simhttp.Health)
	faults := simhttp.Setting[prs.Faults]{Name: "faults", Limit: maxBody, Log: s.log, Fail: s.dialect.Fail,
		Load: func(*http.Request) (prs.Faults, error) { return s.faults.get(), nil },
		Save: func(_ *http.Request, f prs.Faults) error { s.faults.set(f); return nil }}
	exportFaults := simhttp.Setting[prs.ExportFaults]{Name: "export faults", Limit: maxBody, Log: s.log, Fail: s.dialect.Fail,
		Load: func(r *http.Request) (prs.ExportFaults, error) { return s.store.exportFaults(r.Context()) },
		Save: func(r *http.Request, f prs.ExportFaults) error { return s.store.setExportFaults(r.Context(), f) }}
	r.Route("/admin", func(r chi.Router) {
		r.Use(auth(s.admin))
		r.Get("/faults", faults.Get)
		r.Put("/faults", faults.Put)
		r.Get("/export-faults", exportFaults.Get)
		r.Put("/export-faults", exportFaults.Put)
	})
	r.Route("/v1", func(r chi.Router) {
		r.Use(auth(s.apiKey), s.inject)
		r.Put("/bookings/{pnr}", s.putBooking)
		r.Post("/bookings/{pnr}/cancel", s.cancelBooking)
		r.Get("/bookings/{pnr}", s.getBooking)
		r.Get("/exports/{date}", s.export)
		r.Put("/charts/{train}/{date}/{class}/{quota}", s.putChart)
		r.Get("/charts/{train}/{date}/{class}/{quota}", s.getChart)
	})
	return r
}

// auth admits requests bearing the secret; an empty secret admits nobody.
func auth(secret []byte) func(http.Handler) http.Handler {
	return simhttp.RequireBearer("prs", secret, prs.ErrorBody{Code: prs.CodeUnauthorized, Message: "missing or wrong bearer token"})
}

func (s *Server) putBooking(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	pnr := chi.URLParam(r, "pnr")
	var b prs.Booking
	if err := simhttp.Decode(w, r, &b, maxBody); err != nil {
		s.dialect.Fail(w, r, err)
		return
	}
	if b.PNR != pnr {
		simhttp.Error(w, http.StatusBadRequest, prs.ErrorBody{Code: prs.CodeBadRequest, Message: fmt.Sprintf("body pnr %q differs from path pnr %q", b.PNR, pnr)})
		return
	}
	if err := b.Validate(); err != nil {
		simhttp.Error(w, http.StatusBadRequest, prs.ErrorBody{Code: prs.CodeBadRequest, Message: err.Error()})
		return
	}
	// The injected refusal only hits bookings the core has not accepted
	// yet: an accepted PNR is never refused on replay.
	if _, _, err := s.store.ack(ctx, pnr); errors.Is(err, errNotFound) {
		if s.faults.roll(s.faults.get().RejectRate) {
			s.log.Info("prs booking rejected", "pnr", pnr, "reason", prs.ReasonCoreRejected, "fault", true)
			simhttp.Error(w, http.StatusUnprocessableEntity, prs.ErrorBody{Code: prs.CodeRejected, Reason: prs.ReasonCoreRejected, Message: "the reservation core refused the booking"})
			return
		}
	} else if err != nil {
		s.dialect.Fail(w, r, err)
		return
	}
	ack, created, err := s.store.put(ctx, b)
	var rej *rejection
	switch {
	case errors.As(err, &rej):
		s.log.Warn("prs booking rejected", "pnr", pnr, "train", b.Train, "date", b.JourneyDate, "reason", rej.reason, "detail", rej.detail)
		simhttp.Error(w, http.StatusUnprocessableEntity, prs.ErrorBody{Code: prs.CodeRejected, Reason: rej.reason, Message: rej.detail})
	case errors.Is(err, errPNRConflict):
		s.log.Warn("prs booking conflicts with the stored one", "pnr", pnr)
		simhttp.Error(w, http.StatusConflict, prs.ErrorBody{Code: prs.CodeConflict, Message: "PNR " + pnr + " was synced before with a different body"})
	case err != nil:
		s.dialect.Fail(w, r, err)
	case created:
		s.log.Info("prs booking accepted", "pnr", pnr, "core_ref", ack.CoreRef, "train", b.Train, "date", b.JourneyDate,
			"status", b.Status, "passengers", len(b.Passengers))
		simhttp.JSON(w, http.StatusCreated, ack)
	default:
		s.log.Debug("prs booking replayed", "pnr", pnr, "core_ref", ack.CoreRef)
		simhttp.JSON(w, http.StatusOK, ack)
	}
}

func (s *Server) cancelBooking(w http.ResponseWriter, r *http.Request) {
	pnr := chi.URLParam(r, "pnr")
	if !prs.ValidPNR(pnr) {
		simhttp.Error(w, http.StatusBadRequest, prs.ErrorBody{Code: prs.CodeBadRequest, Message: fmt.Sprintf("%q is not a 10-digit PNR", pnr)})
		return
	}
	b, err := s.store.cancel(r.Context(), pnr)
	switch {
	case errors.Is(err, errNotFound):
		simhttp.Error(w, http.StatusNotFound, prs.ErrorBody{Code: prs.CodeNotFound, Message: "no PNR " + pnr})
	case err != nil:
		s.dialect.Fail(w, r, err)
	default:
		s.log.Info("prs booking cancelled", "pnr", pnr, "core_ref", b.CoreRef)
		simhttp.JSON(w, http.StatusOK, b)
	}
}

func (s *Server) getBooking(w http.ResponseWriter, r *http.Request) {
	pnr := chi.URLParam(r, "pnr")
	if !prs.ValidPNR(pnr) {
		simhttp.Error(w, http.StatusBadRequest, prs.ErrorBody{Code: prs.CodeBadRequest, Message: fmt.Sprintf("%q is not a 10-digit PNR", pnr)})
		return
	}
	b, err := s.store.get(r.Context(), pnr)
	switch {
	case errors.Is(err, errNotFound):
		simhttp.Error(w, http.StatusNotFound, prs.ErrorBody{Code: prs.CodeNotFound, Message: "no PNR " + pnr})
	case err != nil:
		s.dialect.Fail(w, r, err)
	default:
		simhttp.JSON(w, http.StatusOK, b)
	}
}

// export streams a journey date's bookings, so a day of any size costs
// the core one row at a time.
func (s *Server) export(w http.ResponseWriter, r *http.Request) {
	date, err := time.Parse(prs.DateLayout, chi.URLParam(r, "date"))
	if err != nil {
		simhttp.Error(w, http.StatusBadRequest, prs.ErrorBody{Code: prs.CodeBadRequest, Message: "date must be YYYY-MM-DD"})
		return
	}
	var enc exportEncoder
	switch f := r.URL.Query().Get("format"); f {
	case "", "json":
		enc = newJSONExport(w)
	case "csv":
		enc = newCSVExport(w)
	default:
		simhttp.Error(w, http.StatusBadRequest, prs.ErrorBody{Code: prs.CodeBadRequest, Message: fmt.Sprintf("format %q is neither json nor csv", f)})
		return
	}
	if enc, err = s.withExportFaults(r.Context(), date, enc); err != nil {
		s.dialect.Fail(w, r, err)
		return
	}
	n := 0
	err = s.store.byDate(r.Context(), date, func(b prs.Booking) error {
		n++
		return enc.write(b)
	})
	if err == nil {
		err = enc.close()
	}
	if err != nil {
		if !enc.started() {
			s.dialect.Fail(w, r, err)
			return
		}
		// Half an export must not pass for a whole one: break the
		// connection so the reader sees a transport error.
		s.log.Error("prs export failed mid-stream", "date", date.Format(prs.DateLayout), "err", err)
		panic(http.ErrAbortHandler)
	}
	s.log.Debug("prs export", "date", date.Format(prs.DateLayout), "bookings", n)
}
