package prssim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/jackc/pgx/v5"

	"tatkal/booking/db"
	"tatkal/booking/prs"
	"tatkal/booking/sim/simhttp"
)

// maxChartBody bounds a chart request: MaxChartEntries PNRs of a few
// passengers each.
const maxChartBody = 16 << 20

var errChartConflict = errors.New("another chart was stored for this train, date, class and quota")

// migrateCharts creates the charts table (called from migrate).
func (s *store) migrateCharts(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, s.q(`
CREATE SEQUENCE IF NOT EXISTS {s}.chart_seq;
CREATE TABLE IF NOT EXISTS {s}.charts (
    train         text NOT NULL,
    journey_date  date NOT NULL,
    class         text NOT NULL,
    quota         text NOT NULL,
    ref           text NOT NULL,
    core_chart_id text NOT NULL UNIQUE,
    digest        text NOT NULL,
    body          jsonb NOT NULL,
    passengers    int NOT NULL,
    cancelled     int NOT NULL,
    accepted_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (train, journey_date, class, quota)
);
ALTER TABLE {s}.bookings ADD COLUMN IF NOT EXISTS charted_at timestamptz;`))
	return err
}

// putChart stores a validated chart once per train, date, class and quota,
// after checking every confirmed entry against the core's own bookings;
// the chart's cancelled PNRs are cancelled here and every PNR on it is
// marked charted. created is false on a replay of the same chart.
func (s *store) putChart(ctx context.Context, c prs.Chart) (ack prs.ChartAck, created bool, err error) {
	c = c.Request()
	digest := c.Digest()
	body, err := json.Marshal(c)
	if err != nil {
		return prs.ChartAck{}, false, fmt.Errorf("marshal chart: %w", err)
	}
	passengers := 0
	for _, e := range c.Confirmed {
		passengers += len(e.Passengers)
	}
	err = db.Transact(ctx, s.pool, func(tx pgx.Tx) error {
		created = false
		ack = prs.ChartAck{Ref: c.Ref, Passengers: passengers, Cancelled: len(c.Cancelled)}
		// One chart per key: racing senders queue on this lock.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext($1))`,
			"tatkal.prs.chart|"+c.Train+"|"+c.JourneyDate+"|"+c.Class+"|"+c.Quota); err != nil {
			return err
		}
		var stored string
		err := tx.QueryRow(ctx, s.q(`SELECT digest, core_chart_id, accepted_at FROM {s}.charts
			WHERE train = $1 AND journey_date = $2::date AND class = $3 AND quota = $4`), c.Train, c.JourneyDate, c.Class, c.Quota).
			Scan(&stored, &ack.CoreChartID, &ack.AcceptedAt)
		switch {
		case err == nil && stored == digest:
			return nil
		case err == nil:
			return errChartConflict
		case !errors.Is(err, pgx.ErrNoRows):
			return err
		}
		if bad, err := s.chartMismatches(ctx, tx, c); err != nil {
			return err
		} else if len(bad) > 0 {
			return &rejection{reason: prs.ReasonChartMismatch, detail: "the core does not hold " + strings.Join(bad, "; ")}
		}
		if len(c.Cancelled) > 0 {
			if _, err := tx.Exec(ctx, s.q(`UPDATE {s}.bookings SET cancelled_at = coalesce(cancelled_at, now())
				WHERE pnr = ANY($1)`), c.Cancelled); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, s.q(`UPDATE {s}.passengers SET active = false WHERE pnr = ANY($1) AND active`), c.Cancelled); err != nil {
				return err
			}
		}
		pnrs := append(make([]string, 0, len(c.Confirmed)+len(c.Cancelled)), c.Cancelled...)
		for _, e := range c.Confirmed {
			pnrs = append(pnrs, e.PNR)
		}
		if _, err := tx.Exec(ctx, s.q(`UPDATE {s}.bookings SET charted_at = now() WHERE pnr = ANY($1)`), pnrs); err != nil {
			return err
		}
		created = true
		return tx.QueryRow(ctx, s.q(`INSERT INTO {s}.charts (train, journey_date, class, quota, ref, core_chart_id, digest, body,
				passengers, cancelled)
			VALUES ($1, $2::date, $3, $4, $5, 'CC' || lpad(nextval('{s}.chart_seq')::text, 8, '0'), $6, $7, $8, $9)
			RETURNING core_chart_id, accepted_at`), c.Train, c.JourneyDate, c.Class, c.Quota, c.Ref, digest, body,
			passengers, len(c.Cancelled)).Scan(&ack.CoreChartID, &ack.AcceptedAt)
	})
	if err != nil {
		return prs.ChartAck{}, false, err
	}
	ack.AcceptedAt = ack.AcceptedAt.UTC()
	return ack, created, nil
}

// chartMismatches lists the confirmed entries the core does not hold as
// charted: unknown PNR, cancelled, another journey, or other berths.
func (s *store) chartMismatches(ctx context.Context, tx pgx.Tx, c prs.Chart) ([]string, error) {
	var bad []string
	for _, e := range c.Confirmed {
		rows, err := tx.Query(ctx, s.q(`SELECT b.train, b.journey_date::text, b.class, b.from_seq, b.to_seq,
				b.cancelled_at IS NOT NULL, p.seq, coalesce(p.coach, ''), coalesce(p.berth_no, 0), p.active
			FROM {s}.bookings b JOIN {s}.passengers p USING (pnr) WHERE b.pnr = $1 ORDER BY p.seq`), e.PNR)
		if err != nil {
			return nil, err
		}
		type row struct {
			train, date, class string
			from, to           int
			cancelled          bool
			seq                int
			coach              string
			berth              int
			active             bool
		}
		var got []row
		var g row
		if _, err := pgx.ForEachRow(rows, []any{&g.train, &g.date, &g.class, &g.from, &g.to, &g.cancelled, &g.seq, &g.coach,
			&g.berth, &g.active}, func() error {
			got = append(got, g)
			return nil
		}); err != nil {
			return nil, err
		}
		why := ""
		switch {
		case len(got) == 0:
			why = "unknown PNR"
		case got[0].cancelled:
			why = "cancelled at the core"
		case got[0].train != c.Train || got[0].date != c.JourneyDate || got[0].class != c.Class ||
			got[0].from != e.FromSeq || got[0].to != e.ToSeq:
			why = "another journey"
		case len(got) != len(e.Passengers):
			why = fmt.Sprintf("%d passengers at the core, %d on the chart", len(got), len(e.Passengers))
		default:
			for i, p := range e.Passengers {
				g := got[i]
				if g.seq != p.Seq || !g.active || g.coach != p.Coach || g.berth != p.BerthNo {
					why = fmt.Sprintf("passenger %d at %s/%d, not %s/%d", p.Seq, g.coach, g.berth, p.Coach, p.BerthNo)
					break
				}
			}
		}
		if why != "" {
			bad = append(bad, e.PNR+" ("+why+")")
		}
	}
	return bad, nil
}

// getChart reads a stored chart with its acknowledgement.
func (s *store) getChart(ctx context.Context, train, date, class, quota string) (prs.Chart, prs.ChartAck, error) {
	var c prs.Chart
	var ack prs.ChartAck
	var body []byte
	err := s.pool.QueryRow(ctx, s.q(`SELECT body, ref, core_chart_id, passengers, cancelled, accepted_at FROM {s}.charts
		WHERE train = $1 AND journey_date = $2::date AND class = $3 AND quota = $4`), train, date, class, quota).
		Scan(&body, &ack.Ref, &ack.CoreChartID, &ack.Passengers, &ack.Cancelled, &ack.AcceptedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return c, ack, errNotFound
	}
	if err != nil {
		return c, ack, fmt.Errorf("read chart: %w", err)
	}
	ack.AcceptedAt = ack.AcceptedAt.UTC()
	if err := json.Unmarshal(body, &c); err != nil {
		return c, ack, fmt.Errorf("read chart: %w", err)
	}
	return c, ack, nil
}

func (s *Server) putChart(w http.ResponseWriter, r *http.Request) {
	var c prs.Chart
	if err := simhttp.Decode(w, r, &c, maxChartBody); err != nil {
		s.dialect.Fail(w, r, err)
		return
	}
	if c.Train != chi.URLParam(r, "train") || c.JourneyDate != chi.URLParam(r, "date") || c.Class != chi.URLParam(r, "class") ||
		c.Quota != chi.URLParam(r, "quota") {
		simhttp.Error(w, http.StatusBadRequest, prs.ErrorBody{Code: prs.CodeBadRequest, Message: "the chart's train, date, class and quota differ from the path"})
		return
	}
	if err := c.Validate(); err != nil {
		simhttp.Error(w, http.StatusBadRequest, prs.ErrorBody{Code: prs.CodeBadRequest, Message: err.Error()})
		return
	}
	ack, created, err := s.store.putChart(r.Context(), c)
	var rej *rejection
	switch {
	case errors.As(err, &rej):
		s.log.Warn("prs chart rejected", "ref", c.Ref, "train", c.Train, "date", c.JourneyDate, "reason", rej.reason, "detail", rej.detail)
		simhttp.Error(w, http.StatusUnprocessableEntity, prs.ErrorBody{Code: prs.CodeRejected, Reason: rej.reason, Message: rej.detail})
	case errors.Is(err, errChartConflict):
		simhttp.Error(w, http.StatusConflict, prs.ErrorBody{Code: prs.CodeConflict, Message: err.Error()})
	case err != nil:
		s.dialect.Fail(w, r, err)
	case created:
		s.log.Info("prs chart accepted", "ref", c.Ref, "core_chart_id", ack.CoreChartID, "train", c.Train, "date", c.JourneyDate,
			"class", c.Class, "passengers", ack.Passengers, "cancelled", ack.Cancelled)
		simhttp.JSON(w, http.StatusCreated, ack)
	default:
		simhttp.JSON(w, http.StatusOK, ack)
	}
}

func (s *Server) getChart(w http.ResponseWriter, r *http.Request) {
	date := chi.URLParam(r, "date")
	if _, err := time.Parse(prs.DateLayout, date); err != nil {
		simhttp.Error(w, http.StatusBadRequest, prs.ErrorBody{Code: prs.CodeBadRequest, Message: "date must be YYYY-MM-DD"})
		return
	}
	c, ack, err := s.store.getChart(r.Context(), chi.URLParam(r, "train"), date, chi.URLParam(r, "class"), chi.URLParam(r, "quota"))
	switch {
	case errors.Is(err, errNotFound):
		simhttp.Error(w, http.StatusNotFound, prs.ErrorBody{Code: prs.CodeNotFound, Message: "no chart"})
	case err != nil:
		s.dialect.Fail(w, r, err)
	default:
		simhttp.JSON(w, http.StatusOK, map[string]any{"chart": c, "ack": ack})
	}
}
