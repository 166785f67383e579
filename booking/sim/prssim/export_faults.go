package prssim

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"tatkal/booking/db"
	"tatkal/booking/prs"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// hits says whether pick p (named name) hits pnr.
func hits(f prs.ExportFaults, p prs.ExportPick, name, pnr string) bool {
	if slices.Contains(p.PNRs, pnr) {
		return true
	}
	if p.Rate <= 0 {
		return false
	}
	return draw(f, name, pnr) < p.Rate
}

func draw(f prs.ExportFaults, parts ...string) float64 {
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
	f    prs.ExportFaults
	date time.Time
}

func (e *faultyExport) write(b prs.Booking) error {
	if hits(e.f, e.f.Drop, "drop", b.PNR) {
		return nil
	}
	if hits(e.f, e.f.ChangeFare, "change_fare", b.PNR) {
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
	day := e.date.Format(prs.DateLayout)
	for i := range e.f.UnknownPNRs {
		n := int64(draw(e.f, "unknown", day, fmt.Sprint(i)) * 1e9)
		b := prs.Booking{
			PNR: fmt.Sprintf("9%09d", n), CoreRef: fmt.Sprintf("XX%08d", n%1e8), Train: "12951", JourneyDate: day,
			Class: "3A", Quota: "TQ", From: "MMCT", To: "NDLS", FromSeq: 0, ToSeq: 1, Status: prs.StatusConfirmed, State: prs.StatusConfirmed,
			FarePaise: 150000 + n%100000, AcceptedAt: e.date.UTC(),
			Passengers: []prs.Passenger{{Seq: 1, Name: "UNKNOWN TRAVELLER", Age: 40, Gender: "M", Coach: "B1", BerthNo: 1, BerthType: "LB"}},
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

func (s *store) exportFaults(ctx context.Context) (prs.ExportFaults, error) {
	var f prs.ExportFaults
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

func (s *store) setExportFaults(ctx context.Context, f prs.ExportFaults) error {
	raw, _ := json.Marshal(f) //nolint:errchkjson // plain struct
	return db.Transact(ctx, s.pool, func(tx pgx.Tx) error {
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
