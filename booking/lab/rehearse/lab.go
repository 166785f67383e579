package rehearse

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"tatkal/booking"
	"tatkal/booking/app"
	"tatkal/views"
)

// Lab runs the console's rehearsals in this process: one at a time, each
// on a scratch stack of its own (never a real window), recorded in the
// rehearsals table with its report.
type Lab struct {
	a      *app.App
	log    *slog.Logger
	mu     sync.Mutex
	live   map[int64]*labRun
	active bool
	wg     sync.WaitGroup
	ctx    context.Context
	cancel context.CancelFunc
}

type labRun struct {
	run    views.LabRun
	points []views.LabPoint
}

// NewLab is the lab of process a (app.Options.Lab).
func NewLab(a *app.App) *Lab {
	ctx, cancel := context.WithCancel(context.Background())
	return &Lab{a: a, log: a.Log, live: map[int64]*labRun{}, ctx: ctx, cancel: cancel}
}

// Close stops a running rehearsal and waits for it.
func (l *Lab) Close() {
	l.cancel()
	l.wg.Wait()
}

// Faults names the faults.
func (l *Lab) Faults() []string {
	var out []string
	for _, f := range FaultNames {
		out = append(out, f+"@10s-20s")
	}
	return out
}

// Running says whether a rehearsal runs here.
func (l *Lab) Running() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.active
}

// Start checks req and starts it.
func (l *Lab) Start(ctx context.Context, by string, req views.LabRequest) (int64, error) {
	o := Defaults()
	o.Travellers, o.Berths, o.Aggressive, o.Duration, o.Seed = req.Travellers, req.Berths, req.Aggressive, time.Duration(req.DurationS)*time.Second, req.Seed
	o.Mode, o.Drain = req.Mode, 30*time.Second
	if o.Mode == "" {
		o.Mode = Both
	}
	if req.Fault != "" {
		f, err := ParseFault(req.Fault)
		if err != nil {
			return 0, booking.Errorf(booking.EINVALID, "BAD_REHEARSAL", "%s", err.Error())
		}
		o.Faults = []Fault{f}
	}
	if err := o.Check(); err != nil {
		return 0, booking.Errorf(booking.EINVALID, "BAD_REHEARSAL", "%s", err.Error())
	}
	if o.Travellers > 5000 || o.Duration > 10*time.Minute {
		return 0, booking.Errorf(booking.EINVALID, "BAD_REHEARSAL", "The console runs rehearsals of up to 5,000 travellers and 10 minutes; use tatkal rehearse for more.")
	}
	l.mu.Lock()
	if l.active {
		l.mu.Unlock()
		return 0, booking.Errorf(booking.ECONFLICT, "REHEARSAL_RUNNING", "A rehearsal is running; start another when it ends.")
	}
	l.active = true
	l.mu.Unlock()
	opts, _ := json.Marshal(o)
	var id int64
	if err := l.a.Pool.QueryRow(ctx, `INSERT INTO rehearsals (started_by, options, state) VALUES ($1, $2, 'RUNNING') RETURNING id`, by, opts).Scan(&id); err != nil {
		l.mu.Lock()
		l.active = false
		l.mu.Unlock()
		return 0, fmt.Errorf("record the rehearsal: %w", err)
	}
	lr := &labRun{run: views.LabRun{ID: id, State: "RUNNING", StartedBy: by, StartedAt: time.Now().In(booking.IST).Format("02 Jan 15:04:05"), Options: describe(o)}}
	l.mu.Lock()
	l.live[id] = lr
	l.mu.Unlock()
	o.OnTick = func(t Tick) {
		l.mu.Lock()
		lr.points = append(lr.points, labPoint(t.Mode, t.Second))
		l.mu.Unlock()
	}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		rep, err := Run(l.ctx, l.a.Config, o, l.log)
		state, msg := "DONE", ""
		if err != nil {
			state, msg = "FAILED", err.Error()
			l.log.Error("rehearsal failed", "rehearsal", id, "err", err)
		}
		var js []byte
		if rep != nil {
			js, _ = json.Marshal(rep)
		}
		if _, err := l.a.Pool.Exec(context.WithoutCancel(l.ctx), `UPDATE rehearsals SET state = $2, finished_at = now(), error = nullif($3, ''), report = $4 WHERE id = $1`,
			id, state, msg, js); err != nil {
			l.log.Error("record the rehearsal", "id", id, "err", err)
		}
		l.mu.Lock()
		delete(l.live, id)
		l.active = false
		l.mu.Unlock()
	}()
	return id, nil
}

func describe(o Options) string {
	s := fmt.Sprintf("%d travellers, %d berths, %.0f%% aggressive (×%g), %v, %s, seed %d", o.Travellers, o.Berths, 100*o.Aggressive, o.RetryMultiplier,
		o.Duration, o.Mode, o.Seed)
	for _, f := range o.Faults {
		s += fmt.Sprintf(", %s +%gs..+%gs", f.Name, f.FromS, f.ToS)
	}
	return s
}

// Run is one rehearsal: live from memory while it runs, else from its
// stored report.
func (l *Lab) Run(ctx context.Context, id int64) (views.LabRun, bool, error) {
	l.mu.Lock()
	if lr, ok := l.live[id]; ok {
		r := lr.run
		r.Points = append([]views.LabPoint(nil), lr.points...)
		l.mu.Unlock()
		return r, true, nil
	}
	l.mu.Unlock()
	runs, err := l.query(ctx, `WHERE id = $1`, id)
	if err != nil || len(runs) == 0 {
		return views.LabRun{}, false, err
	}
	return runs[0], true, nil
}

// Runs lists the latest rehearsals.
func (l *Lab) Runs(ctx context.Context, limit int) ([]views.LabRun, error) {
	return l.query(ctx, `ORDER BY id DESC LIMIT $1`, limit)
}

func (l *Lab) query(ctx context.Context, tail string, arg any) ([]views.LabRun, error) {
	rows, err := l.a.Pool.Query(ctx, `SELECT id, state, started_by, started_at, options, coalesce(error, ''), report FROM rehearsals `+tail, arg)
	if err != nil {
		return nil, fmt.Errorf("rehearsals: %w", err)
	}
	var out []views.LabRun
	var r views.LabRun
	var at time.Time
	var opts, report []byte
	_, err = pgx.ForEachRow(rows, []any{&r.ID, &r.State, &r.StartedBy, &at, &opts, &r.Error, &report}, func() error {
		run := r
		run.StartedAt = at.In(booking.IST).Format("02 Jan 15:04:05")
		var o Options
		if json.Unmarshal(opts, &o) == nil {
			o.Duration = time.Duration(o.DurationS * float64(time.Second))
			run.Options = describe(o)
		}
		if len(report) > 0 {
			var rep Report
			if err := json.Unmarshal(report, &rep); err != nil {
				return errors.New("rehearsal report unreadable")
			}
			fill(&run, &rep)
		}
		out = append(out, run)
		return nil
	})
	return out, err
}

// labPoint is one second of a mode on the Lab's charts.
func labPoint(mode string, s second) views.LabPoint {
	return views.LabPoint{Mode: mode, T: s.T, Backend: s.Backend, Rejected: s.Rejected, Booked: s.Booked, QueueDepth: s.QueueDepth, Capacity: s.Capacity,
		Admitted: s.Admitted, Holds: s.Holds, Payments: s.Payments}
}

// fill puts a finished report on the page: the chart's points, the table
// (first seed) and the followed traveller.
func fill(run *views.LabRun, rep *Report) {
	var cols [][][2]string
	for _, rr := range rep.Runs {
		if rr.Seed != rep.Options.Seed {
			continue
		}
		for _, s := range rr.Seconds {
			run.Points = append(run.Points, labPoint(rr.Mode, s))
		}
		run.Modes = append(run.Modes, title(rr.Mode))
		cols = append(cols, Rows(rr))
		f := views.LabFollow{Mode: title(rr.Mode) + " (" + rr.Follow.Outcome + ")"}
		for _, st := range rr.Follow.Steps {
			f.Steps = append(f.Steps, fmt.Sprintf("+%.3fs %s", st.AtS, st.What))
		}
		run.Follow = append(run.Follow, f)
	}
	if len(cols) > 0 {
		for i := range cols[0] {
			row := []string{cols[0][i][0]}
			for _, c := range cols {
				row = append(row, c[i][1])
			}
			run.Rows = append(run.Rows, row)
		}
	}
	run.Markdown = rep.Markdown()
}
