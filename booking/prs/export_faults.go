package prs

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ExportFaults are the mistakes the core's export makes, set at
// PUT /admin/export-faults, so the reconciliation of the core leg can be
// tested. Each pick hits the PNRs it names and, with probability Rate,
// any other: a hash of Seed and the PNR decides, so an export is the same
// every time it is fetched.
type ExportFaults struct {
	Seed       int64      `json:"seed"`
	Drop       ExportPick `json:"drop"`        // the booking is missing
	ChangeFare ExportPick `json:"change_fare"` // Paise added to the fare (default 100)
	// UnknownPNRs adds that many bookings we never made to every export.
	UnknownPNRs int `json:"unknown_pnrs"`
}

// ExportPick chooses the bookings one export fault hits.
type ExportPick struct {
	Rate  float64  `json:"rate,omitempty"`
	PNRs  []string `json:"pnrs,omitempty"`
	Paise int64    `json:"paise,omitempty"`
}

// Validate says what is wrong with an export fault setting, or nil.
func (f ExportFaults) Validate() error {
	for name, p := range map[string]ExportPick{"drop": f.Drop, "change_fare": f.ChangeFare} {
		if !(p.Rate >= 0 && p.Rate <= 1) || len(p.PNRs) > 10000 || p.Paise < -1_000_000_00 || p.Paise > 1_000_000_00 {
			return fmt.Errorf("%s: rate in [0,1], at most 10000 PNRs, paise within ±10,00,000 rupees", name)
		}
	}
	if f.UnknownPNRs < 0 || f.UnknownPNRs > 1000 {
		return errors.New("unknown_pnrs must be 0..1000")
	}
	return nil
}

// hits says whether pick p (named name) hits pnr.
func (f ExportFaults) hits(p ExportPick, name, pnr string) bool {
	if slices.Contains(p.PNRs, pnr) {
		return true
	}
	if p.Rate <= 0 {
		return false
	}
	return f.draw(name, pnr) < p.Rate
}

func (f ExportFaults) draw(parts ...string) float64 {
	h := sha256.New()
	fmt.Fprintf(h, "%d", f.Seed)
	for _, p := range parts {
		h.Write([]byte{0})
		h.Write([]byte(p))
	}
	return float64(binary.BigEndian.Uint64(h.Sum(nil)[:8])>>11) / (1 << 53)
}

// faultyExport applies export faults on the way to the real encoder.
type faultyExport struct {
	exportEncoder
	f    ExportFaults
	date time.Time
}

func (e *faultyExport) write(b Booking) error {
	if e.f.hits(e.f.Drop, "drop", b.PNR) {
		return nil
	}
	if e.f.hits(e.f.ChangeFare, "change_fare", b.PNR) {
		d := e.f.ChangeFare.Paise
		if d == 0 {
			d = 100
		}
		b.FarePaise += d
	}
	return e.exportEncoder.write(b)
}

// close adds the bookings nobody made, after every real one.
func (e *faultyExport) close() error {
	day := e.date.Format(DateLayout)
	for i := range e.f.UnknownPNRs {
		n := int64(e.f.draw("unknown", day, fmt.Sprint(i)) * 1e9)
		b := Booking{
			PNR: fmt.Sprintf("9%09d", n), CoreRef: fmt.Sprintf("XX%08d", n%1e8), Train: "12951", JourneyDate: day,
			Class: "3A", Quota: "TQ", From: "MMCT", To: "NDLS", FromSeq: 0, ToSeq: 1, Status: StatusConfirmed, State: StatusConfirmed,
			FarePaise: 150000 + n%100000, AcceptedAt: e.date.UTC(),
			Passengers: []Passenger{{Seq: 1, Name: "UNKNOWN TRAVELLER", Age: 40, Gender: "M", Coach: "B1", BerthNo: 1, BerthType: "LB"}},
		}
		if err := e.exportEncoder.write(b); err != nil {
			return err
		}
	}
	return e.exportEncoder.close()
}

// withExportFaults wraps enc with the configured faults, if any.
func (s *Server) withExportFaults(ctx context.Context, date time.Time, enc exportEncoder) (exportEncoder, error) {
	f, err := s.store.exportFaults(ctx)
	if err != nil {
		return nil, err
	}
	if f.Drop.Rate == 0 && len(f.Drop.PNRs) == 0 && f.ChangeFare.Rate == 0 && len(f.ChangeFare.PNRs) == 0 && f.UnknownPNRs == 0 {
		return enc, nil
	}
	return &faultyExport{exportEncoder: enc, f: f, date: date}, nil
}

// exportFaultsDDL keeps the setting in the core's schema, so it survives a
// restart; created on first use.
const exportFaultsDDL = `CREATE TABLE IF NOT EXISTS {s}.export_faults (
	id         int PRIMARY KEY CHECK (id = 1),
	config     jsonb NOT NULL,
	updated_at timestamptz NOT NULL DEFAULT now()
)`

func (s *store) exportFaults(ctx context.Context) (ExportFaults, error) {
	var f ExportFaults
	var raw []byte
	err := s.pool.QueryRow(ctx, s.q(`SELECT config FROM {s}.export_faults WHERE id = 1`)).Scan(&raw)
	var pgErr *pgconn.PgError
	switch {
	case errors.Is(err, pgx.ErrNoRows), errors.As(err, &pgErr) && pgErr.Code == "42P01": // never set
		return f, nil
	case err != nil:
		return f, fmt.Errorf("read export faults: %w", err)
	}
	return f, json.Unmarshal(raw, &f)
}

func (s *store) setExportFaults(ctx context.Context, f ExportFaults) error {
	raw, _ := json.Marshal(f) //nolint:errchkjson // plain struct
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('tatkal.prs.export_faults'))`); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, s.q(exportFaultsDDL)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, s.q(`INSERT INTO {s}.export_faults (id, config) VALUES (1, $1)
			ON CONFLICT (id) DO UPDATE SET config = excluded.config, updated_at = now()`), raw)
		return err
	})
}

func (s *Server) getExportFaults(w http.ResponseWriter, r *http.Request) {
	f, err := s.store.exportFaults(r.Context())
	if err != nil {
		s.internal(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, f)
}

func (s *Server) putExportFaults(w http.ResponseWriter, r *http.Request) {
	var f ExportFaults
	if err := decode(r, &f); err != nil {
		writeError(w, http.StatusBadRequest, errorBody{Code: CodeBadRequest, Message: err.Error()})
		return
	}
	if err := f.Validate(); err != nil {
		writeError(w, http.StatusBadRequest, errorBody{Code: CodeBadRequest, Message: err.Error()})
		return
	}
	if err := s.store.setExportFaults(r.Context(), f); err != nil {
		s.internal(w, r, err)
		return
	}
	s.log.Warn("prs export faults set", "drop", f.Drop, "change_fare", f.ChangeFare, "unknown_pnrs", f.UnknownPNRs)
	writeJSON(w, http.StatusOK, f)
}
