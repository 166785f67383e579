package bench

import (
	"fmt"
	"strings"
	"time"
)

// Goals are issue 38's goals, each a ratio within one run, so that the
// machine's load, which moves every absolute figure, weighs on both sides.
type Goals struct {
	// WalletOverCallbacks is wallet confirmations a second over signed
	// callback confirmations a second (aim: at least 0.7).
	WalletOverCallbacks float64
	// PGPerWallet is PostgreSQL CPU per wallet confirmation over a service
	// durable hold's plus a callback confirmation's (aim: at most 1.2),
	// from the server's processes (-1 when unknown).
	PGPerWallet float64
	// StatementsPerWallet is the same ratio in statement time (execution
	// and planning, pg_stat_statements), and CallsPerWallet in statements
	// sent, which no load changes (-1 when unknown).
	StatementsPerWallet, CallsPerWallet float64
	// ServiceOverWide is service durable holds a second over the wide
	// phase's (aim: at least 0.8), ServiceP99 the service phase's p99
	// (aim: at most 20 ms); -1 without a wide phase.
	ServiceOverWide float64
	ServiceP99      time.Duration
}

// Aims of issue 38.
const (
	aimWalletOverCallbacks = 0.7
	aimPGPerWallet         = 1.2
	aimServiceOverWide     = 0.8
	aimServiceP99          = 20 * time.Millisecond
)

// Goals computes the goals' ratios.
func (r Report) Goals() Goals {
	g := Goals{WalletOverCallbacks: -1, PGPerWallet: -1, StatementsPerWallet: -1, CallsPerWallet: -1, ServiceOverWide: -1,
		ServiceP99: r.Service.P99}
	if r.Payments && r.Callbacks.DurableRate() > 0 {
		g.WalletOverCallbacks = r.Wallet.DurableRate() / r.Callbacks.DurableRate()
	}
	g.PGPerWallet = unitRatio(r.Wallet.PerUnit(r.Wallet.CPU.PG), r.Service.PerUnit(r.Service.CPU.PG), r.Callbacks.PerUnit(r.Callbacks.CPU.PG))
	per := func(p Phase, v float64) float64 {
		if !p.Statements.Available() || p.Units() <= 0 {
			return -1
		}
		return v / float64(p.Units())
	}
	g.StatementsPerWallet = unitRatio(per(r.Wallet, r.Wallet.Statements.MS()), per(r.Service, r.Service.Statements.MS()),
		per(r.Callbacks, r.Callbacks.Statements.MS()))
	g.CallsPerWallet = unitRatio(per(r.Wallet, float64(r.Wallet.Statements.Calls)), per(r.Service, float64(r.Service.Statements.Calls)),
		per(r.Callbacks, float64(r.Callbacks.Statements.Calls)))
	if r.WideConcurrency > 0 && r.Wide.DurableRate() > 0 {
		g.ServiceOverWide = r.Service.DurableRate() / r.Wide.DurableRate()
	}
	return g
}

// unitRatio is wallet / (hold + callback), -1 if any is unknown.
func unitRatio(wallet, hold, callback float64) float64 {
	if wallet < 0 || hold < 0 || callback < 0 || hold+callback <= 0 {
		return -1
	}
	return wallet / (hold + callback)
}

// perUnit prints ms of one core per unit.
func perUnit(ms float64) string {
	if ms < 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.3f", ms)
}

func goalRatio(v float64) string {
	if v < 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", v)
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}

// writeGoals prints issue 38's goals as ratios of this run.
func (r Report) writeGoals(b *strings.Builder) {
	g := r.Goals()
	fmt.Fprintln(b, "\ngoals (issue 38), each a ratio within this run:")
	if r.Payments {
		fmt.Fprintf(b, "  wallet / callback confirmations a second: %s (aim >= %.1f, %s)\n", goalRatio(g.WalletOverCallbacks),
			aimWalletOverCallbacks, verdict(g.WalletOverCallbacks >= aimWalletOverCallbacks))
		fmt.Fprintf(b, "  PostgreSQL CPU per wallet confirmation / (service durable hold + callback confirmation): %s (aim <= %.1f, %s)\n",
			goalRatio(g.PGPerWallet), aimPGPerWallet, verdict(g.PGPerWallet >= 0 && g.PGPerWallet <= aimPGPerWallet))
		fmt.Fprintf(b, "    the same in statement time: %s; in statements sent: %s\n", goalRatio(g.StatementsPerWallet), goalRatio(g.CallsPerWallet))
	}
	if r.WideConcurrency > 0 {
		fmt.Fprintf(b, "  service durable holds, %d clients / %d clients: %s (aim >= %.1f, %s); p99 at %d clients %s (aim <= %s, %s)\n",
			r.Concurrency, r.WideConcurrency, goalRatio(g.ServiceOverWide), aimServiceOverWide, verdict(g.ServiceOverWide >= aimServiceOverWide),
			r.Concurrency, ms(g.ServiceP99), aimServiceP99, verdict(g.ServiceP99 > 0 && g.ServiceP99 <= aimServiceP99))
	}
}

// writeStatements prints each phase's statements per unit, and the wallet
// phase's statements one by one.
func (r Report) writeStatements(b *strings.Builder) {
	if r.StatementsWhy != "" {
		fmt.Fprintf(b, "\nPostgreSQL statements: not read (%s)\n", r.StatementsWhy)
		return
	}
	fmt.Fprintln(b, "\nPostgreSQL statements per unit (pg_stat_statements, this database, statements sent by clients; times are")
	fmt.Fprintln(b, "wall time inside the server and grow with the machine's load, calls, plans and blocks do not):")
	fmt.Fprintf(b, "  %-16s %9s %9s %9s %9s %10s %10s\n", "phase", "calls", "plans", "exec ms", "plan ms", "plan share", "blocks")
	for _, p := range r.named(true) {
		st, u := p.ph.Statements, float64(p.ph.Units())
		if !st.Available() || u <= 0 {
			continue
		}
		share := 0.0
		if st.MS() > 0 {
			share = st.PlanMS / st.MS()
		}
		fmt.Fprintf(b, "  %-16s %9.2f %9.2f %9.3f %9.3f %9.0f%% %10.1f\n", p.name, float64(st.Calls)/u, float64(st.Plans)/u,
			st.ExecMS/u, st.PlanMS/u, 100*share, float64(st.Blocks)/u)
	}
	if !r.Payments || r.Wallet.Units() <= 0 {
		return
	}
	st, u := r.Wallet.Statements, float64(r.Wallet.Units())
	fmt.Fprintf(b, "wallet phase, its statements by time (%d confirmations; nested: run inside another statement, e.g. a\n", r.Wallet.Units())
	fmt.Fprintln(b, "foreign key's check, whose time is in its parent's):")
	fmt.Fprintf(b, "  %6s %9s %9s %10s %10s %9s %9s  %s\n", "share", "calls/op", "plans/op", "µs exec/c", "µs plan/c", "rows/c", "blocks/c", "statement")
	for _, s := range st.Top {
		share := 0.0
		if st.MS() > 0 {
			share = (s.ExecMS + s.PlanMS) / st.MS()
		}
		calls := float64(max(s.Calls, 1))
		plan := "-"
		if s.Plans > 0 {
			plan = fmt.Sprintf("%.0f", 1000*s.PlanMS/float64(s.Plans))
		}
		q := oneLine(s.Query, 90)
		if !s.TopLevel {
			q = "(nested) " + q
		}
		fmt.Fprintf(b, "  %5.1f%% %9.2f %9.2f %10.0f %10s %9.1f %9.1f  %s\n", 100*share, float64(s.Calls)/u, float64(s.Plans)/u,
			1000*s.ExecMS/calls, plan, float64(s.Rows)/calls, float64(s.Blocks)/calls, q)
	}
}
