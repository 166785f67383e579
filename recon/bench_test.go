package recon

import (
	"bufio"
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"golang.org/x/sync/errgroup"

	"tatkal/booking"
	"tatkal/booking/lab/seed"
	"tatkal/booking/lab/testenv"
	"tatkal/booking/payment/pspapi"
	"tatkal/booking/prs"
)

// BenchmarkReconcileDay reconciles one gateway's day of
// TATKAL_RECON_BENCH_PAYMENTS payments (default 20,000): our payments,
// bookings and their passengers (generated set-wise in SQL); the gateway's
// settlement file (swiftpay format, 5% of lines dropped and 5% with a
// changed amount, so that a day of a million has the 100,000 exceptions
// the workbook's target names), the bank's statement and the core's
// export. Each phase is timed apart with the Go CPU it used, its peak Go
// heap and the load average; ingestion is reported beside a raw ceiling
// measured in the same run (PostgreSQL COPY of the same files into tables
// of text columns, nothing parsed, checked or indexed), and day-s is the
// issue's "reconcile a day": the files ingested, then the run. Not part of
// the normal test run; run it once:
//
//	TATKAL_RECON_BENCH_PAYMENTS=1000000 go test -run '^$' -bench ReconcileDay -benchtime 1x -timeout 60m ./recon/
//
// TATKAL_RECON_BENCH_STEPS=1 logs each run statement's time,
// TATKAL_RECON_BENCH_EXPLAIN=1 its plan (EXPLAIN (ANALYZE, BUFFERS)).
func BenchmarkReconcileDay(b *testing.B) {
	n := 20000
	if v := os.Getenv("TATKAL_RECON_BENCH_PAYMENTS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 100 {
			b.Fatalf("TATKAL_RECON_BENCH_PAYMENTS=%q: want a number of at least 100", v)
		}
	}
	ctx := context.Background()
	env := testenv.New(b)
	level := slog.LevelInfo
	if os.Getenv("TATKAL_RECON_BENCH_STEPS") != "" {
		level = slog.LevelDebug
	}
	svc := New(Config{Pool: env.Pool, Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))})
	svc.explain = os.Getenv("TATKAL_RECON_BENCH_EXPLAIN") != ""
	if os.Getenv("TATKAL_RECON_BENCH_STEPS") != "" {
		svc.stepCPU = processCPU
	}
	day := day0
	demo, err := seed.Demo(ctx, env.Pool, seed.DemoOptions{JourneyDate: day.AddDate(0, 0, 1)})
	if err != nil {
		b.Fatal(err)
	}
	sh := demo.Shards[0]
	users, err := seed.Users(ctx, env.Pool, seed.UsersSpec{Count: 1, Prefix: "bench", PasswordHash: "x"})
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	ourDay(b, env, sh.ID, users[0], day, n)
	b.Logf("our side: %d payments, bookings and passengers in %v", n, time.Since(start).Round(time.Millisecond))
	dir := b.TempDir()
	settle, bank, core := filepath.Join(dir, "settle.csv"), filepath.Join(dir, "bank.csv"), filepath.Join(dir, "core.csv")
	writeFiles(b, env, settle, bank, core, day)

	pgCPU := &backendCPU{db: env.Pool.Config().ConnConfig.Database}
	for b.Loop() {
		var peak peakHeap
		cpu := map[string]time.Duration{} // Go's and PostgreSQL's, per phase
		phase := func(name string, fn func() error) time.Duration {
			stop := peak.watch()
			stopPG := pgCPU.watch()
			load := loadAvg()
			if dir := os.Getenv("TATKAL_RECON_BENCH_PROFILE"); dir != "" {
				pf, err := os.Create(filepath.Join(dir, name+".pprof"))
				if err != nil {
					b.Fatal(err)
				}
				if err := pprof.StartCPUProfile(pf); err != nil {
					b.Fatal(err)
				}
				defer func() { pprof.StopCPUProfile(); pf.Close() }()
			}
			cpu0 := cpuTime()
			t0 := time.Now()
			if err := fn(); err != nil {
				b.Fatalf("%s: %v", name, err)
			}
			d := time.Since(t0)
			goCPU := cpuTime() - cpu0
			mb := stop()
			pg := stopPG()
			// The Go side's CPU and PostgreSQL's (this database's backends)
			// beside the wall time: on a shared machine the rest is waiting
			// for a core, and their sum is what the phase needs of one.
			// Printed, not logged: a benchmark's log is cut after ten lines.
			fmt.Fprintf(os.Stderr, "recon bench: %-10s %8v  Go CPU %7v  PostgreSQL CPU %7v  peak heap %4d MB  load %s\n", name, d.Round(time.Millisecond),
				goCPU.Round(time.Millisecond), pg.Round(time.Millisecond), mb, load)
			cpu[name] = goCPU + pg
			b.ReportMetric((goCPU + pg).Seconds(), name+"-cpu-s")
			b.ReportMetric(float64(mb), name+"-peak-MB")
			return d
		}
		ingest := func(path string, meta FileMeta) func() error {
			return func() error {
				f, err := os.Open(path)
				if err != nil {
					return err
				}
				defer f.Close()
				_, err = svc.Ingest(ctx, meta, bufio.NewReaderSize(f, 1<<20))
				return err
			}
		}
		lines := n - n/20 // settlement lines; the core's export has n
		// The files go in side by side, as the daily fetch job ingests
		// them; the ceiling copies the same two files side by side.
		tFiles := phase("files", func() error {
			var g errgroup.Group
			g.Go(ingest(settle, FileMeta{Source: SourceSettlement, Gateway: "swiftpay", BusinessDate: day, By: "bench"}))
			g.Go(func() error {
				if err := ingest(bank, FileMeta{Source: SourceBank, BusinessDate: day.AddDate(0, 0, 1), By: "bench"})(); err != nil {
					return err
				}
				return ingest(core, FileMeta{Source: SourceCore, BusinessDate: day.AddDate(0, 0, 1), By: "bench"})()
			})
			return g.Wait()
		})
		tCopy := phase("copy", func() error {
			var g errgroup.Group
			g.Go(func() error { return copyCeiling(ctx, env, settle, len(pspapi.SwiftpayColumns)) })
			g.Go(func() error { return copyCeiling(ctx, env, core, len(prs.CSVHeader())) })
			return g.Wait()
		})
		var sum RunSummary
		tRun := phase("run", func() error {
			var err error
			sum, err = svc.Run(ctx, RunRequest{Gateway: "swiftpay", Date: day, AsOf: day.AddDate(0, 0, 5), By: "bench"})
			return err
		})
		tXLSX := phase("xlsx", func() error { return svc.WriteXLSX(ctx, sum.ID, io.Discard) })
		fmt.Fprintf(os.Stderr, "recon bench: run: %d our items, %d lines, %d matched, %d exceptions\n", sum.OurItems, sum.Lines, sum.Matched, sum.Exceptions)
		fileLines := float64(lines + n + 1)
		b.ReportMetric(fileLines/tFiles.Seconds(), "ingest-lines/s")
		b.ReportMetric(fileLines/tCopy.Seconds(), "copy-lines/s")
		// The "reconcile a day": its files ingested, then the run.
		b.ReportMetric((tFiles + tRun).Seconds(), "day-s")
		b.ReportMetric((cpu["files"] + cpu["run"]).Seconds(), "day-cpu-s")
		b.ReportMetric(float64(n+lines)/tRun.Seconds(), "run-items/s")
		b.ReportMetric(tRun.Seconds(), "run-s")
		b.ReportMetric(tXLSX.Seconds(), "xlsx-s")
		b.ReportMetric(float64(sum.Exceptions), "exceptions")
		fmt.Fprintf(os.Stderr, "recon bench: %d payments: day %.1f s (files %.1f s + run %.1f s); "+
			"ingest %.0f lines/s against COPY %.0f lines/s; workbook of %d exceptions %.1f s; load now %s\n",
			n, (tFiles + tRun).Seconds(), tFiles.Seconds(), tRun.Seconds(),
			fileLines/tFiles.Seconds(), fileLines/tCopy.Seconds(), sum.Exceptions, tXLSX.Seconds(), loadAvg())
		fmt.Fprintf(os.Stderr, "recon bench: CPU (Go + PostgreSQL): day %.1f s (files %.1f s + run %.1f s); COPY %.1f s; workbook %.1f s\n",
			(cpu["files"] + cpu["run"]).Seconds(), cpu["files"].Seconds(), cpu["run"].Seconds(), cpu["copy"].Seconds(), cpu["xlsx"].Seconds())
	}
}

// ourDay writes n paid, booked payments of swiftpay on day, set-wise.
func ourDay(b *testing.B, env *testenv.Env, shard, user int64, day time.Time, n int) {
	ctx := context.Background()
	t0 := day.Add(6 * time.Hour)
	conn, err := env.Pool.Acquire(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Release()
	// Generated rows are consistent by construction: skip the per-row
	// foreign-key triggers, which cost more than the rows themselves.
	if _, err := conn.Exec(ctx, `SET session_replication_role = replica`); err != nil {
		b.Fatal(err)
	}
	defer conn.Exec(ctx, `RESET session_replication_role`) //nolint:errcheck
	for _, q := range []string{
		`INSERT INTO holds (id, shard_id, user_id, idempotency_key, kind, from_seq, to_seq, seat_count, berths, passengers,
			fare_paise, fare_breakup, state, epoch, opening_day, created_at, expires_at)
		 SELECT gen_random_uuid(), $1, $2, 'b' || i, 'SEAT', 0, 1, 1, ARRAY[i], '[]', 100000 + (i % 5000) * 7, '{}', 'CONFIRMED', 1,
			$4::date, $5, $5 FROM generate_series(1, $3::int) i`,
		`INSERT INTO payments (id, hold_id, user_id, psp, route, method, amount_paise, state, idempotency_key, deadline, initiated_at,
			resolved_at, psp_ref)
		 SELECT gen_random_uuid(), h.id, h.user_id, 'swiftpay', m, m, h.fare_paise, 'SUCCESS', 'p' || h.idempotency_key, t, t, t,
			'pay_B' || substr(h.idempotency_key, 2)
		 FROM holds h CROSS JOIN LATERAL (SELECT (ARRAY['UPI', 'CARD', 'NB'])[1 + substr(h.idempotency_key, 2)::int % 3] AS m,
			$5::timestamptz + substr(h.idempotency_key, 2)::int * interval '40 ms' AS t) x`,
		`INSERT INTO bookings (pnr, hold_id, user_id, shard_id, from_seq, to_seq, status, fare_paise, booked_at, prs_state)
		 SELECT '8' || lpad(substr(idempotency_key, 2), 9, '0'), id, user_id, shard_id, 0, 1, 'CONFIRMED', fare_paise, $5, 'SYNCED'
		 FROM holds`,
		`INSERT INTO booking_passengers (booking_id, seq, shard_id, name, age, gender, berth_idx, coach, berth_no, berth_type,
			from_seq, to_seq, status)
		 SELECT b.id, 1, b.shard_id, 'P', 30, 'M', b.id, 'B1', 1 + b.id % 72, 'LB', 0, 1, 'CONFIRMED' FROM bookings b`,
		`ANALYZE holds, payments, bookings, booking_passengers`,
	} {
		sql, args := bind(q, []any{shard, user, n, pgDate(day), t0})
		t := time.Now()
		if _, err := conn.Exec(ctx, sql, args...); err != nil {
			b.Fatalf("our side: %v\n%s", err, q)
		}
		b.Logf("our side: %v %.60s", time.Since(t).Round(time.Millisecond), strings.Join(strings.Fields(q), " "))
	}
}

// writeFiles writes the gateway's settlement file (5% of lines dropped,
// 5% with a changed amount), the bank's statement and the core's export,
// from our side, in their published formats.
func writeFiles(b *testing.B, env *testenv.Env, settle, bank, core string, day time.Time) {
	ctx := context.Background()
	f, err := os.Create(settle)
	if err != nil {
		b.Fatal(err)
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	cw := csv.NewWriter(bw)
	cw.Write(pspapi.SwiftpayColumns) //nolint:errcheck
	rows, err := env.Pool.Query(ctx, `SELECT id, psp_ref, method, amount_paise, initiated_at FROM payments ORDER BY initiated_at`)
	if err != nil {
		b.Fatal(err)
	}
	contract := DefaultContracts()["swiftpay"]
	payout := "SWP" + day.Format("20060102")
	settleOn := day.AddDate(0, 0, 1).Format("02/01/2006")
	var net int64
	i := 0
	for rows.Next() {
		var id uuid.UUID
		var ref, method string
		var amount int64
		var at time.Time
		if err := rows.Scan(&id, &ref, &method, &amount, &at); err != nil {
			b.Fatal(err)
		}
		i++
		if i%20 == 0 {
			continue // dropped: MISSING_IN_SETTLEMENT
		}
		if i%20 == 10 {
			amount += 100 // AMOUNT_MISMATCH
		}
		fee := bps(amount, contract[method])
		gst := bps(fee, 1800)
		net += amount - fee - gst
		mode := map[string]string{"NB": "NETBANKING"}[method]
		if mode == "" {
			mode = method
		}
		cw.Write([]string{"CAPTURE", ref, id.String(), "", "", mode, rupeeText(amount), rupeeText(fee), rupeeText(gst), //nolint:errcheck
			rupeeText(amount - fee - gst), at.In(booking.IST).Format("02/01/2006 15:04:05"), settleOn, payout})
	}
	if rows.Err() != nil {
		b.Fatal(rows.Err())
	}
	cw.Flush()
	if err := bw.Flush(); err != nil {
		b.Fatal(err)
	}
	f.Close()
	d := day.AddDate(0, 0, 1).Format("02-Jan-2006")
	if err := os.WriteFile(bank, fmt.Appendf(nil, "Txn Date,Value Date,Description,Ref No,Debit,Credit\n%s,%s,NEFT CR-SWIFTPAY SETTLEMENT-%s,HDFCN1,,%s\n",
		d, d, payout, rupeeText(net)), 0o600); err != nil {
		b.Fatal(err)
	}
	f, err = os.Create(core)
	if err != nil {
		b.Fatal(err)
	}
	bw = bufio.NewWriterSize(f, 1<<20)
	cw = csv.NewWriter(bw)
	cw.Write(prs.CSVHeader()) //nolint:errcheck
	rows, err = env.Pool.Query(ctx, `SELECT pnr, fare_paise, 1 + id % 72 FROM bookings ORDER BY pnr`)
	if err != nil {
		b.Fatal(err)
	}
	journey := day.AddDate(0, 0, 1).Format(time.DateOnly)
	accepted := day.Add(7 * time.Hour).UTC().Format(time.RFC3339Nano)
	for rows.Next() {
		var pnr string
		var fare, berth int64
		if err := rows.Scan(&pnr, &fare, &berth); err != nil {
			b.Fatal(err)
		}
		cw.Write([]string{pnr, "C" + pnr, "CONFIRMED", "12951", journey, "3A", "TQ", "MMCT", "BVI", "0", "1", "CONFIRMED", "0", //nolint:errcheck
			strconv.FormatInt(fare, 10), accepted, "", "1", "P", "30", "M", "B1", strconv.FormatInt(berth, 10), "LB"})
	}
	cw.Flush()
	if err := bw.Flush(); err != nil {
		b.Fatal(err)
	}
	f.Close()
}

// copyCeiling is the raw ceiling: PostgreSQL COPY of the same settlement
// file into a table of text columns, nothing parsed, checked or indexed.
func copyCeiling(ctx context.Context, env *testenv.Env, path string, columns int) error {
	cols := ""
	for i := range columns {
		if i > 0 {
			cols += ", "
		}
		cols += fmt.Sprintf("c%d text", i)
	}
	table := "bench_copy_" + strings.TrimSuffix(filepath.Base(path), ".csv")
	if _, err := env.Pool.Exec(ctx, `DROP TABLE IF EXISTS `+table+`; CREATE TABLE `+table+` (`+cols+`)`); err != nil {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	conn, err := env.Pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	_, err = conn.Conn().PgConn().CopyFrom(ctx, bufio.NewReaderSize(f, 1<<20), `COPY `+table+` FROM STDIN (FORMAT csv, HEADER true)`)
	return err
}

// loadAvg is the machine's load average, to print beside a figure.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// cpuTime is the CPU time this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// backendCPU measures the CPU time PostgreSQL's backends of one database
// use while a phase runs: each backend's utime and stime from /proc
// (found by the database in its process title), sampled every 250 ms so a
// backend that ends within the phase (a run's own connection) still counts
// up to its last sample. Linux only, like the load average; 0 elsewhere.
type backendCPU struct {
	db   string
	ours map[int]bool // each process seen: one of this database's backends or not
}

func (c *backendCPU) sample(seen map[int][2]time.Duration) {
	if c.ours == nil {
		c.ours = map[int]bool{}
	}
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		ours, known := c.ours[pid]
		if !known {
			// A process's title is read once: the sampler must not cost
			// the machine what it measures.
			cmd, _ := os.ReadFile("/proc/" + d.Name() + "/cmdline")
			ours = strings.HasPrefix(string(cmd), "postgres: ") && strings.Contains(string(cmd), " "+c.db+" ")
			c.ours[pid] = ours
		}
		if !ours {
			continue
		}
		t := processCPU(pid)
		if t < 0 {
			continue
		}
		v, ok := seen[pid]
		if !ok {
			v[0] = t
		}
		v[1] = t
		seen[pid] = v
	}
}

func (c *backendCPU) watch() func() time.Duration {
	seen := map[int][2]time.Duration{}
	c.sample(seen)
	// A backend first seen after the start counts from zero.
	known := map[int]bool{}
	for pid := range seen {
		known[pid] = true
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				c.sample(seen)
				for pid, v := range seen {
					if !known[pid] {
						known[pid] = true
						seen[pid] = [2]time.Duration{0, v[1]}
					}
				}
			}
		}
	})
	return func() time.Duration {
		close(done)
		wg.Wait()
		c.sample(seen)
		var sum time.Duration
		for _, v := range seen {
			sum += v[1] - v[0]
		}
		return sum
	}
}

// peakHeap samples the Go heap while a phase runs.
type peakHeap struct{}

func (peakHeap) watch() func() int64 {
	runtime.GC()
	var peak atomic.Uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			if m.HeapInuse > peak.Load() {
				peak.Store(m.HeapInuse)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	})
	return func() int64 {
		close(done)
		wg.Wait()
		return int64(peak.Load() >> 20)
	}
}

// processCPU is a process's user and system CPU time from /proc (-1 if it
// cannot be read).
func processCPU(pid int) time.Duration {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return -1
	}
	// Fields after the command's closing parenthesis: utime and stime are the 12th and 13th.
	i := strings.LastIndexByte(string(stat), ')')
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 13 {
		return -1
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond // USER_HZ is 100 on Linux
}
