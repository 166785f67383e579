package rehearse

import (
	"fmt"
	"math"
	"strings"
	"time"

	"tatkal/booking/admission"
)

// Report is a rehearsal's result: every run, and per mode the mean and
// spread of every figure over the seeds.
type Report struct {
	Options    Options              `json:"options"`
	OwnStack   bool                 `json:"own_stack"`
	StartedAt  time.Time            `json:"started_at"`
	FinishedAt time.Time            `json:"finished_at"`
	Runs       []RunReport          `json:"runs"`
	Summary    map[string][]Summary `json:"summary"` // by mode, row by row
}

// Summary is one figure of one mode over the seeds.
type Summary struct {
	Figure string  `json:"figure"`
	Mean   float64 `json:"mean"`
	SD     float64 `json:"sd"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

// figures are the numeric rows that are summarised over seeds.
var figures = []struct {
	name string
	get  func(RunReport) float64
}{
	{"elapsed_s", func(r RunReport) float64 { return r.ElapsedS }},
	{"booked", func(r RunReport) float64 { return float64(r.Booked) }},
	{"bookings_per_min", func(r RunReport) float64 { return r.BookingsPerMin }},
	{"backend_per_booking", func(r RunReport) float64 { return r.BackendPerBooking }},
	{"backend_reached_per_booking", func(r RunReport) float64 { return r.BackendReachedPerBooking }},
	{"edge_requests", func(r RunReport) float64 { return float64(r.EdgeRequests) }},
	{"retryable_rejections", func(r RunReport) float64 { return float64(r.RetryableRejections) }},
	{"p95_backend_s", func(r RunReport) float64 { return r.P95BackendS }},
	{"p95_terminal_s", func(r RunReport) float64 { return r.P95TerminalS }},
	{"ordinary_success", func(r RunReport) float64 { return r.OrdinarySuccess }},
	{"aggressive_success", func(r RunReport) float64 { return r.AggressiveSuccess }},
	{"aggressive_over_ordinary", func(r RunReport) float64 { return r.SuccessRatio }},
	{"still_waiting", func(r RunReport) float64 { return float64(r.StillWaiting) }},
	{"peak_backend_per_s", func(r RunReport) float64 { return float64(r.PeakBackendPerS) }},
	{"peak_load_over_capacity", func(r RunReport) float64 { return r.PeakLoad.Ratio }},
	{"fault_peak_load_over_capacity", func(r RunReport) float64 {
		if r.FaultPeakLoad == nil {
			return 0
		}
		return r.FaultPeakLoad.Ratio
	}},
	{"oversold_berth_legs", func(r RunReport) float64 { return float64(r.OversoldBerthLegs) }},
	{"unresolved_payments", func(r RunReport) float64 { return float64(r.UnresolvedPayments) }},
	{"declined", func(r RunReport) float64 { return float64(r.Declined) }},
	{"expired", func(r RunReport) float64 { return float64(r.Expired) }},
	{"sold_out", func(r RunReport) float64 { return float64(r.SoldOut) }},
	{"refund_due", func(r RunReport) float64 { return float64(r.RefundDue) }},
	{"errors", func(r RunReport) float64 { return float64(r.Errors) }},
	{"transport_errors", func(r RunReport) float64 { return float64(r.TransportErrors) }},
	{"backend_requests", func(r RunReport) float64 { return float64(r.BackendRequests) }},
	{"admission_violations", func(r RunReport) float64 {
		if r.AdmissionViolations == nil {
			return 0
		}
		return float64(*r.AdmissionViolations)
	}},
	{"invariant_violations", func(r RunReport) float64 { return float64(len(r.InvariantViolations)) }},
	{"money_difference_paise", func(r RunReport) float64 { return float64(r.Money.DifferencePaise) }},
	{"berth_legs_unsold", func(r RunReport) float64 { return float64(r.BerthLegsUnsold) }},
	{"spearman_rho", func(r RunReport) float64 {
		if r.Fairness == nil || r.Fairness.SpearmanRho == nil {
			return 0
		}
		return *r.Fairness.SpearmanRho
	}},
	{"cpu_rehearse_s", func(r RunReport) float64 { return r.CPU["rehearse (app, workers, simulators, travellers)"] }},
	{"cpu_postgresql_s", func(r RunReport) float64 { return r.CPU["postgresql (every backend on the machine)"] }},
	{"cpu_redis_s", func(r RunReport) float64 { return r.CPU["redis-server"] }},
}

func (r *Report) summarise() {
	r.Summary = map[string][]Summary{}
	for _, mode := range r.Options.modes() {
		var runs []RunReport
		for _, rr := range r.Runs {
			if rr.Mode == mode {
				runs = append(runs, rr)
			}
		}
		if len(runs) == 0 {
			continue
		}
		for _, f := range figures {
			s := Summary{Figure: f.name, Min: math.Inf(1), Max: math.Inf(-1)}
			for _, rr := range runs {
				v := f.get(rr)
				s.Mean += v / float64(len(runs))
				s.Min, s.Max = math.Min(s.Min, v), math.Max(s.Max, v)
			}
			for _, rr := range runs {
				d := f.get(rr) - s.Mean
				s.SD += d * d
			}
			if len(runs) > 1 {
				s.SD = math.Sqrt(s.SD / float64(len(runs)-1))
			}
			s.Mean, s.SD = round3(s.Mean), round3(s.SD)
			r.Summary[mode] = append(r.Summary[mode], s)
		}
	}
}

// OK says whether every run kept the promises the model cannot show: no
// berth-leg oversold, no payment unresolved, money balanced, no seat or
// admission invariant broken.
func (r *Report) OK() bool {
	for _, rr := range r.Runs {
		if rr.OversoldBerthLegs != 0 || rr.UnresolvedPayments != 0 || !rr.Money.Balanced || len(rr.InvariantViolations) > 0 ||
			(rr.AdmissionViolations != nil && *rr.AdmissionViolations != 0) {
			return false
		}
	}
	return true
}

// Run returns the run of mode and seed, if any.
func (r *Report) Run(mode string, seed uint64) (RunReport, bool) {
	for _, rr := range r.Runs {
		if rr.Mode == mode && rr.Seed == seed {
			return rr, true
		}
	}
	return RunReport{}, false
}

// unresolved is the unresolved payments' count and, if any, their stories.
func unresolved(rr RunReport) string {
	s := fmt.Sprintf("%d (drained in %.0fs)", rr.UnresolvedPayments, rr.DrainS)
	if len(rr.Unresolved) > 0 {
		s += ": " + strings.Join(rr.Unresolved, "; ")
	}
	return s
}

func pct(x float64) string { return fmt.Sprintf("%.1f%%", 100*x) }

func chancePtr(p *float64) string {
	if p == nil {
		return "not measured"
	}
	return chance(*p)
}

// chance writes an admission.ByChance figure: "not above" at 1, and
// "not luck" under 1 %.
func chance(p float64) string {
	switch {
	case p >= 1:
		return "not above"
	case p < 0.01:
		return admission.ChancePercent(p) + " (not luck)"
	}
	return admission.ChancePercent(p)
}

func secs(x float64) string {
	if x == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2fs", x)
}

// Rows are seeds/001's comparison table for one run, then what the model
// cannot show, as (label, value) pairs.
func Rows(rr RunReport) [][2]string {
	adm := "Not applicable"
	if rr.AdmissionViolations != nil {
		adm = fmt.Sprint(*rr.AdmissionViolations)
	}
	perBooking, sentPerBooking := "—", "—"
	if rr.Booked > 0 {
		perBooking = fmt.Sprintf("%.2f", rr.BackendReachedPerBooking)
		sentPerBooking = fmt.Sprintf("%.2f (%d refused retryably before the core)", rr.BackendPerBooking, rr.BackendRefused)
	}
	cpu := []string{}
	for _, k := range []string{"rehearse (app, workers, simulators, travellers)", "postgresql (every backend on the machine)", "redis-server"} {
		if v, ok := rr.CPU[k]; ok {
			cpu = append(cpu, fmt.Sprintf("%s %.1fs", strings.Fields(k)[0], v))
		}
	}
	money := fmt.Sprintf("in ₹%s = tickets ₹%s + refunds ₹%s", rupees(rr.Money.InPaise), rupees(rr.Money.TicketsPaise), rupees(rr.Money.RefundsPaise))
	if !rr.Money.Balanced {
		money = fmt.Sprintf("OFF BY %d paise: in %d, tickets %d, refunds %d", rr.Money.DifferencePaise, rr.Money.InPaise, rr.Money.TicketsPaise, rr.Money.RefundsPaise)
	}
	faultLoad := "no fault"
	if rr.FaultPeakLoad != nil {
		faultLoad = rr.FaultPeakLoad.String()
	}
	return [][2]string{
		{"Run status", rr.Status},
		{"Elapsed time after opening", fmt.Sprintf("%.1fs", rr.ElapsedS)},
		{"Successful bookings", fmt.Sprint(rr.Booked)},
		{"Bookings / min · elapsed average", fmt.Sprintf("%.1f", rr.BookingsPerMin)},
		{"Backend (hold + payment) requests / successful booking", perBooking},
		{"… counting the calls refused at the origin too", sentPerBooking},
		{"Total edge requests", fmt.Sprint(rr.EdgeRequests)},
		{"Origin rejections · retryable", fmt.Sprint(rr.RetryableRejections)},
		{"p95 completed backend call latency", secs(rr.P95BackendS)},
		{"p95 opening → terminal result", secs(rr.P95TerminalS)},
		{"Ordinary traveller booking success", pct(rr.OrdinarySuccess)},
		{"Aggressive traveller booking success", pct(rr.AggressiveSuccess)},
		{"… that far above ordinary by chance alone", chancePtr(rr.AggressiveByChance)},
		{"Still waiting or in progress", fmt.Sprint(rr.StillWaiting)},
		{"Declined / expired / sold out / refund due", fmt.Sprintf("%d / %d / %d / %d", rr.Declined, rr.Expired, rr.SoldOut, rr.RefundDue)},
		{"Observed admission invariant violations", adm},
		{"Oversold berth-legs", fmt.Sprint(rr.OversoldBerthLegs)},
		{"Berth-legs left unsold after the drain", fmt.Sprintf("%d of %d", rr.BerthLegsUnsold, rr.BerthLegs)},
		{"Seat invariant violations (tatkal check)", fmt.Sprint(len(rr.InvariantViolations))},
		{"Payments unresolved after drain", unresolved(rr)},
		{"Money in and out", money},
		{"Peak backend requests / s", fmt.Sprint(rr.PeakBackendPerS)},
		{"Peak backend load / capacity", rr.PeakLoad.String()},
		{"… in the fault window", faultLoad},
		{"Errors (unexpected answers)", fmt.Sprint(rr.Errors)},
		{"CPU used", strings.Join(cpu, ", ")},
		{"Spearman ρ arrival time vs queue rank (randomised window)", rho(rr)},
	}
}

func rho(rr RunReport) string {
	if rr.Fairness == nil || rr.Fairness.SpearmanRho == nil {
		return "Not applicable"
	}
	return fmt.Sprintf("%.3f over %d entrants (window verifies: %t)", *rr.Fairness.SpearmanRho, rr.Fairness.WithArrival, rr.Fairness.Verified)
}

func rupees(p int64) string { return fmt.Sprintf("%d.%02d", p/100, p%100) }

// Markdown renders the report: per seed, the modes side by side; with
// several seeds, the mean ± spread; then the followed traveller.
func (r *Report) Markdown() string {
	var b strings.Builder
	o := r.Options
	fmt.Fprintf(&b, "# Rehearsal: %d travellers, %d berths, %.0f%% aggressive (×%g), %s\n\n", o.Travellers, o.Berths, 100*o.Aggressive,
		o.RetryMultiplier, time.Duration(o.DurationS*float64(time.Second)))
	fmt.Fprintf(&b, "Backend capacity: %g hold and payment calls / s, a quarter while core-slow is pulled.\n", o.Capacity)
	for _, f := range o.Faults {
		fmt.Fprintf(&b, "Fault: %s from +%gs to +%gs.\n", f.Name, f.FromS, f.ToS)
	}
	b.WriteString("\n")
	modes := o.modes()
	for s := 0; s < o.Seeds; s++ {
		sd := o.Seed + uint64(s)
		fmt.Fprintf(&b, "## Seed %d\n\n| Metric |", sd)
		var cols [][][2]string
		for _, m := range modes {
			rr, ok := r.Run(m, sd)
			if !ok {
				continue
			}
			fmt.Fprintf(&b, " %s |", title(m))
			cols = append(cols, Rows(rr))
		}
		b.WriteString("\n|---|" + strings.Repeat("---|", len(cols)) + "\n")
		if len(cols) == 0 {
			continue
		}
		for i := range cols[0] {
			fmt.Fprintf(&b, "| %s |", cols[0][i][0])
			for _, c := range cols {
				fmt.Fprintf(&b, " %s |", c[i][1])
			}
			b.WriteString("\n")
		}
		b.WriteString("\n")
	}
	if o.Seeds > 1 {
		fmt.Fprintf(&b, "## Over %d seeds (mean ± sd, min–max)\n\n| Figure |", o.Seeds)
		for _, m := range modes {
			fmt.Fprintf(&b, " %s |", title(m))
		}
		b.WriteString("\n|---|" + strings.Repeat("---|", len(modes)) + "\n")
		for i, f := range figures {
			fmt.Fprintf(&b, "| %s |", f.name)
			for _, m := range modes {
				if ss := r.Summary[m]; i < len(ss) {
					fmt.Fprintf(&b, " %g ± %g (%g–%g) |", ss[i].Mean, ss[i].SD, ss[i].Min, ss[i].Max)
				}
			}
			b.WriteString("\n")
		}
		b.WriteString("\n")
		for _, m := range modes {
			var aggOK, aggN, ordOK, ordN int
			for _, rr := range r.Runs {
				if rr.Mode == m {
					aggOK, aggN, ordOK, ordN = aggOK+rr.aggressiveOK, aggN+rr.aggressiveN, ordOK+rr.ordinaryOK, ordN+rr.ordinaryN
				}
			}
			if aggN > 0 && ordN > 0 && ordOK > 0 {
				fmt.Fprintf(&b, "%s, all seeds' travellers pooled: aggressive %d of %d booked, ordinary %d of %d: %.2f×, that far above by chance alone: %s.\n",
					title(m), aggOK, aggN, ordOK, ordN, float64(aggOK)/float64(aggN)/(float64(ordOK)/float64(ordN)), chance(aggressiveByChance(aggOK, aggN, ordOK, ordN)))
			}
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "## Follow a traveller: traveller %d, seed %d\n\n", o.Follow+1, o.Seed)
	for _, m := range modes {
		rr, ok := r.Run(m, o.Seed)
		if !ok {
			continue
		}
		fmt.Fprintf(&b, "**%s** (%s):\n\n", title(m), rr.Follow.Outcome)
		for _, st := range rr.Follow.Steps {
			fmt.Fprintf(&b, "- +%.3fs %s\n", st.AtS, st.What)
		}
		b.WriteString("\n")
	}
	b.WriteString("Success rates use all configured travellers; p95 results include terminal outcomes only. CPU figures are " +
		"process totals on a shared machine. A single seed is not statistical proof of fairness.\n")
	return b.String()
}

func title(mode string) string {
	if mode == Direct {
		return "Direct booking"
	}
	return "Queue-controlled"
}
