package console

import (
	"fmt"
	"net/http"
	"time"

	"tatkal/jobs/schedule"
	"tatkal/views"
)

// schedulesPage lists the process's schedule (jobs/schedule, every
// periodic job and what it sets off) with each kind's next and last run,
// read from River's table: the earliest job of the kind still to run, the
// newest finished one and its outcome.
func (c *Console) schedulesPage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	now := time.Now()
	kinds := make([]string, len(c.cfg.Schedule))
	for i, e := range c.cfg.Schedule {
		kinds[i] = e.Kind
	}
	// One row per kind, in the schedule's order. errors[...] is the last
	// failed attempt's error.
	rows, err := c.pool.Query(ctx, `SELECT k.kind, nx.scheduled_at, nx.attempt, coalesce(nx.err, ''),
		(SELECT count(*) FROM river_job j WHERE j.kind = k.kind AND j.state = 'running'),
		(SELECT max(j.created_at) FROM river_job j WHERE j.kind = k.kind),
		ls.finalized_at, ls.attempted_at, coalesce(ls.state, ''), coalesce(ls.err, '')
		FROM unnest($1::text[]) WITH ORDINALITY AS k(kind, n)
		LEFT JOIN LATERAL (SELECT j.scheduled_at, j.attempt, j.errors[array_upper(j.errors, 1)]->>'error' AS err FROM river_job j
		      WHERE j.kind = k.kind AND j.state IN ('available', 'scheduled', 'retryable', 'pending')
		      ORDER BY j.scheduled_at LIMIT 1) nx ON true
		LEFT JOIN LATERAL (SELECT j.finalized_at, j.attempted_at, j.state::text AS state, j.errors[array_upper(j.errors, 1)]->>'error' AS err
		      FROM river_job j WHERE j.kind = k.kind AND j.finalized_at IS NOT NULL ORDER BY j.finalized_at DESC LIMIT 1) ls ON true
		ORDER BY k.n`, kinds)
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	defer rows.Close()
	p := views.SchedulesPage{Now: ist(now)}
	for i := 0; rows.Next(); i++ {
		e := c.cfg.Schedule[i]
		var (
			kind, nextErr, lastState, lastErr  string
			nextAt, created, lastAt, lastStart *time.Time
			attempt                            *int
			running                            int
		)
		if err := rows.Scan(&kind, &nextAt, &attempt, &nextErr, &running, &created, &lastAt, &lastStart, &lastState, &lastErr); err != nil {
			c.serverError(w, r, err)
			return
		}
		row := views.ScheduleRow{Kind: kind, Name: e.Name, What: e.What, When: e.When.String(), Daily: e.When.IsDaily(),
			Triggered: !e.When.Periodic(), Office: e.Office, Running: running, LastOutcome: lastState, LastError: lastErr}
		row.Next, row.NextNote = nextRun(e, now, nextAt, created)
		if nextAt != nil && nextErr != "" && attempt != nil {
			row.Retrying = fmt.Sprintf("retrying (attempt %d failed): %s", *attempt, nextErr)
		}
		if lastAt != nil {
			row.LastAt = ist(*lastAt)
			if lastStart != nil {
				row.LastTook = lastAt.Sub(*lastStart).Round(time.Millisecond).String()
			}
		}
		p.Rows = append(p.Rows, row)
	}
	if err := rows.Err(); err != nil {
		c.serverError(w, r, err)
		return
	}
	c.render(w, r, "Schedules", views.ConsoleSchedules(p))
}

// nextRun is when e runs next, and why: a job of its kind already waiting
// runs at its time; otherwise a daily job at its next time of day, an
// interval's after the last insert, a triggered one when its work comes.
func nextRun(e schedule.Entry, now time.Time, pending, created *time.Time) (string, string) {
	switch {
	case pending != nil && !e.When.IsDaily():
		if pending.After(now) {
			return ist(*pending), "queued"
		}
		return ist(*pending), "due now"
	case e.When.IsDaily():
		return ist(e.When.Next(now)), ""
	case e.When.Periodic() && created != nil && e.When.Next(*created).After(now):
		return ist(e.When.Next(*created)), ""
	case e.When.Periodic():
		return "", "when River's leader next inserts it"
	}
	return "", "none queued"
}
