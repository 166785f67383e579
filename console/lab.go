package console

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"tatkal/console/levers"
	"tatkal/views"
)

// Lab runs rehearsals for the Lab page; booking/lab/rehearse implements it
// (the console cannot import it: a rehearsal builds a whole process).
type Lab interface {
	// Start starts a rehearsal on a scratch stack of its own, recorded as
	// by's; one at a time.
	Start(ctx context.Context, by string, req views.LabRequest) (int64, error)
	// Run is one rehearsal, running or finished.
	Run(ctx context.Context, id int64) (views.LabRun, bool, error)
	// Runs are the latest rehearsals, newest first.
	Runs(ctx context.Context, limit int) ([]views.LabRun, error)
	// Running says whether a rehearsal is running in this process.
	Running() bool
	// Faults names the faults a rehearsal can pull.
	Faults() []string
}

// SetLab gives the console its rehearsal lab (nil: the page says there
// is none in this process).
func (c *Console) SetLab(l Lab) { c.lab = l }

func (c *Console) labPage(w http.ResponseWriter, r *http.Request) {
	c.renderLab(w, r, views.LabPage{}, http.StatusOK)
}

func (c *Console) renderLab(w http.ResponseWriter, r *http.Request, p views.LabPage, status int) {
	u, _ := userFrom(r.Context())
	if c.lab == nil {
		p.Error = "This process runs no rehearsal lab."
	} else {
		runs, err := c.lab.Runs(r.Context(), 20)
		if err != nil {
			c.serverError(w, r, err)
			return
		}
		p.Runs, p.Faults, p.Running = runs, c.lab.Faults(), c.lab.Running()
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	c.render(w, r, "Lab", views.ConsoleLab(p, u.CSRF))
}

// labStart starts a rehearsal from the form. Audited as the operator's.
func (c *Console) labStart(w http.ResponseWriter, r *http.Request) {
	u, _ := userFrom(r.Context())
	if c.lab == nil {
		c.renderLab(w, r, views.LabPage{}, http.StatusNotFound)
		return
	}
	num := func(name string, def float64) float64 {
		v, err := strconv.ParseFloat(strings.TrimSpace(r.PostFormValue(name)), 64)
		if err != nil {
			return def
		}
		return v
	}
	req := views.LabRequest{Travellers: int(num("travellers", 300)), Berths: int(num("berths", 40)), Aggressive: num("aggressive", 0.1),
		DurationS: int(num("duration", 30)), Mode: r.PostFormValue("mode"), Seed: uint64(num("seed", 42)), Fault: r.PostFormValue("fault")}
	id, err := c.lab.Start(r.Context(), u.Login, req)
	if err != nil {
		c.renderLab(w, r, views.LabPage{Error: userError(err)}, http.StatusUnprocessableEntity)
		return
	}
	if err := levers.Audit(r.Context(), c.pool, u.Login, "rehearsal.start", fmt.Sprint(id), map[string]any{"travellers": req.Travellers,
		"berths": req.Berths, "mode": req.Mode, "seconds": req.DurationS, "fault": req.Fault, "seed": req.Seed}); err != nil {
		c.serverError(w, r, err)
		return
	}
	http.Redirect(w, r, fmt.Sprintf("/console/lab/%d", id), http.StatusSeeOther)
}

// labRun shows one rehearsal: while it runs the page reloads itself every
// two seconds with the live chart; when it ends, the table.
func (c *Console) labRun(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
	if err != nil || c.lab == nil {
		http.NotFound(w, r)
		return
	}
	run, ok, err := c.lab.Run(r.Context(), id)
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	if !ok {
		http.NotFound(w, r)
		return
	}
	if run.State == "RUNNING" {
		w.Header().Set("Refresh", "2")
	}
	c.render(w, r, fmt.Sprintf("Rehearsal %d", id), views.ConsoleLabRun(run, labCharts(run.Points)))
}

// labCharts draws seeds/001's chart (backend requests per second, direct
// against queue-controlled), refusals, bookings and the queue's depth,
// with the funnel's chart component. Each mode's line runs to its own
// last second on the x axis of the longest.
func labCharts(points []views.LabPoint) []views.Chart {
	last := 0
	for _, p := range points {
		last = max(last, p.T)
	}
	modeClass := map[string]string{"direct": views.LineClass(1), "queue": views.LineClass(0)} // red and blue, as seeds/001
	// A run of one mode charts that mode only; before its first second, both.
	ran := map[string]bool{}
	for _, p := range points {
		ran[p.Mode] = true
	}
	var out []views.Chart
	// The backend's capacity, second by second (a quarter while the core
	// is slowed), the same for both modes: seeds/001's capacity line.
	var capacity []int64
	for _, p := range points {
		if p.T < 0 || p.Capacity <= 0 {
			continue
		}
		for len(capacity) <= p.T {
			capacity = append(capacity, 0)
		}
		capacity[p.T] = max(capacity[p.T], int64(math.Round(p.Capacity)))
	}
	chart := func(key, title, unit string, val func(views.LabPoint) int64, withCapacity bool, modes ...string) {
		modes = slices.DeleteFunc(modes, func(m string) bool { return len(ran) > 0 && !ran[m] })
		if len(modes) == 0 {
			return
		}
		c := views.Chart{Key: key, Title: title, Describe: "one line per mode", Start: "0 s", End: fmt.Sprintf("%d s", last), Legend: true}
		var top int64
		for _, p := range points {
			top = max(top, val(p))
		}
		withCapacity = withCapacity && len(capacity) > 0
		if withCapacity {
			top = max(top, slices.Max(capacity))
			c.Describe = "one line per mode, and the backend's capacity"
		}
		c.Peak = fmt.Sprintf("%d%s", top, unit)
		for _, m := range modes {
			var series []int64
			for _, p := range points {
				if p.Mode != m || p.T < 0 {
					continue
				}
				for len(series) <= p.T {
					series = append(series, 0)
				}
				series[p.T] = val(p)
			}
			c.Lines = append(c.Lines, views.NewLine(m, m, modeClass[m], series, top, last+1))
		}
		if withCapacity {
			c.Lines = append(c.Lines, views.NewLine("capacity", "backend capacity", "cap", capacity, top, last+1))
		}
		out = append(out, c)
	}
	chart("lab-backend", "Backend (hold + payment) requests reaching the core per second", "/s", func(p views.LabPoint) int64 { return p.Backend - p.Rejected }, true, "direct", "queue")
	chart("lab-refused", "Retryable refusals per second", "/s", func(p views.LabPoint) int64 { return p.Rejected }, false, "direct", "queue")
	chart("lab-booked", "Bookings per second", "/s", func(p views.LabPoint) int64 { return p.Booked }, false, "direct", "queue")
	chart("lab-depth", "Queue depth", " waiting", func(p views.LabPoint) int64 { return p.QueueDepth }, false, "queue")
	chart("lab-holds", "Holds taken per second", "/s", func(p views.LabPoint) int64 { return p.Holds }, false, "direct", "queue")
	chart("lab-payments", "Payments started per second", "/s", func(p views.LabPoint) int64 { return p.Payments }, false, "direct", "queue")
	chart("lab-admitted", "Admissions per second", "/s", func(p views.LabPoint) int64 { return p.Admitted }, false, "queue")
	return out
}
