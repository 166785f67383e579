package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
)

// CPU time of the servers' own processes, read from /proc: the machine's
// busy time less this process and Redis counts whatever else runs on the
// machine too (other benches, builds, test suites), while a process's own
// CPU time barely depends on what else runs. Read only when the server's
// process is on this machine, found by the pid the server gives.

// clockTicks is USER_HZ, the unit of /proc's CPU times (100 on Linux).
const clockTicks = 100

// procStat reads /proc/<pid>/stat: the command name, the parent, and the
// CPU seconds of the process (user and system) and of its reaped children.
func procStat(pid int) (comm string, ppid int, self, children float64, ok bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return "", 0, 0, 0, false
	}
	s := string(b)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return "", 0, 0, 0, false
	}
	comm = s[open+1 : end]
	// After the name: state, ppid, ... utime (14th field of the line), stime,
	// cutime, cstime.
	f := strings.Fields(s[end+1:])
	if len(f) < 15 {
		return "", 0, 0, 0, false
	}
	n := make([]float64, 4)
	for i := range n {
		if n[i], err = strconv.ParseFloat(f[11+i], 64); err != nil {
			return "", 0, 0, 0, false
		}
	}
	ppid, _ = strconv.Atoi(f[1])
	return comm, ppid, (n[0] + n[1]) / clockTicks, (n[2] + n[3]) / clockTicks, true
}

// redisProcCPU is the CPU seconds of the redis-server process pid (from
// INFO server's process_id), or -1 when it is not on this machine.
func redisProcCPU(pid int) float64 {
	if pid <= 0 {
		return -1
	}
	comm, _, self, _, ok := procStat(pid)
	if !ok || !strings.HasPrefix(comm, "redis") {
		return -1
	}
	return self
}

// redisPID reads process_id from an INFO server answer (0 if absent).
func redisPID(info string) int {
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			pid, _ := strconv.Atoi(v)
			return pid
		}
	}
	return 0
}

// pgServerCPU is the CPU seconds of the PostgreSQL server that runs the
// backend backendPID: its postmaster (the backend's parent), every live
// child (backends, WAL writer, checkpointer, ...) and the children it has
// reaped. -1 when that server is not on this machine. Every database of
// the server counts.
func pgServerCPU(backendPID int) float64 {
	comm, pm, _, _, ok := procStat(backendPID)
	if !ok || comm != "postgres" || pm <= 1 {
		return -1
	}
	comm, _, total, reaped, ok := procStat(pm)
	if !ok || comm != "postgres" {
		return -1
	}
	total += reaped
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return -1
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if _, parent, self, _, ok := procStat(pid); ok && parent == pm {
			total += self
		}
	}
	return total
}

// Statement is one statement's share of a phase, from pg_stat_statements.
type Statement struct {
	Query string
	// TopLevel: sent by a client; otherwise run inside another statement
	// (a foreign key's check, a function's query), whose time includes it.
	TopLevel           bool
	Calls, Plans, Rows int64
	ExecMS, PlanMS     float64
	Blocks             int64 // shared blocks hit or read
}

// Statements is what the database's statements did in a phase.
type Statements struct {
	// Why is set when they were not read (no pg_stat_statements).
	Why string
	// Top-level statements only: a nested one's time is in its parent's.
	Calls, Plans, Rows, Blocks int64
	ExecMS, PlanMS             float64
	// Top are the statements with the most time (exec + plan), nested
	// ones included, at most topStatements.
	Top []Statement
}

// topStatements is how many statements a phase keeps.
const topStatements = 12

// Available says whether the phase's statements were read.
func (s Statements) Available() bool { return s.Why == "" }

// MS is the statements' time, execution and planning.
func (s Statements) MS() float64 { return s.ExecMS + s.PlanMS }

// stmtSnapshot is pg_stat_statements for this database at one moment,
// by query id and level.
type stmtSnapshot map[string]Statement

// statementsReady makes pg_stat_statements readable in this database if
// the server loads it (creating the extension, which needs the right to),
// and says why not otherwise.
func statementsReady(ctx context.Context, pool *pgxpool.Pool) string {
	if _, err := readStatements(ctx, pool); err == nil {
		return ""
	}
	var libs string
	if err := pool.QueryRow(ctx, `SELECT current_setting('shared_preload_libraries')`).Scan(&libs); err != nil {
		return fmt.Sprintf("could not read shared_preload_libraries: %v", err)
	}
	if !strings.Contains(libs, "pg_stat_statements") {
		return "the server does not load pg_stat_statements (shared_preload_libraries)"
	}
	if _, err := pool.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`); err != nil {
		return fmt.Sprintf("could not create the pg_stat_statements extension: %v", err)
	}
	if _, err := readStatements(ctx, pool); err != nil {
		return fmt.Sprintf("pg_stat_statements: %v", err)
	}
	return ""
}

func readStatements(ctx context.Context, pool *pgxpool.Pool) (stmtSnapshot, error) {
	rows, err := pool.Query(ctx, `
		SELECT queryid::text, toplevel, query, calls, plans, rows, total_exec_time, total_plan_time,
		       shared_blks_hit + shared_blks_read
		FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
		  AND query NOT LIKE '%pg_stat_statements%'`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	snap := stmtSnapshot{}
	for rows.Next() {
		var id string
		var s Statement
		if err := rows.Scan(&id, &s.TopLevel, &s.Query, &s.Calls, &s.Plans, &s.Rows, &s.ExecMS, &s.PlanMS, &s.Blocks); err != nil {
			return nil, err
		}
		snap[id+strconv.FormatBool(s.TopLevel)] = s
	}
	return snap, rows.Err()
}

// since is what the statements did between before and s.
func (s stmtSnapshot) since(before stmtSnapshot) Statements {
	var out Statements
	var all []Statement
	for k, a := range s {
		b := before[k]
		d := Statement{Query: a.Query, TopLevel: a.TopLevel, Calls: a.Calls - b.Calls, Plans: a.Plans - b.Plans, Rows: a.Rows - b.Rows,
			ExecMS: a.ExecMS - b.ExecMS, PlanMS: a.PlanMS - b.PlanMS, Blocks: a.Blocks - b.Blocks}
		if d.Calls <= 0 && d.Plans <= 0 {
			continue
		}
		all = append(all, d)
		if d.TopLevel {
			out.Calls, out.Plans, out.Rows, out.Blocks = out.Calls+d.Calls, out.Plans+d.Plans, out.Rows+d.Rows, out.Blocks+d.Blocks
			out.ExecMS, out.PlanMS = out.ExecMS+d.ExecMS, out.PlanMS+d.PlanMS
		}
	}
	slices.SortFunc(all, func(x, y Statement) int {
		if c := compareFloat(y.ExecMS+y.PlanMS, x.ExecMS+x.PlanMS); c != 0 {
			return c
		}
		return strings.Compare(x.Query, y.Query)
	})
	out.Top = all[:min(len(all), topStatements)]
	return out
}

func compareFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// oneLine is a statement's text on one line, cut to n characters.
func oneLine(q string, n int) string {
	q = strings.Join(strings.Fields(q), " ")
	if len(q) > n {
		q = q[:n-1] + "…"
	}
	return q
}
