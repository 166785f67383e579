package rehearse_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"tatkal/booking/app"
	"tatkal/booking/lab/rehearse"
	"tatkal/booking/lab/teststack"
)

// BenchmarkServeRSS measures the memory of tatkal serve (no in-process
// workers) under a rush: the built binary runs as its own process beside
// a worker (River and the waiting room's controller) on a test
// stack's database, Redis and simulators, and the rehearsal's travellers
// (TATKAL_BENCH_USERS, default 10,000) sign in, enter the queue, poll it,
// hold and pay through its HTTP API. The process's own peak RSS (VmHWM in
// /proc) is the metric; the goal is 300 MB.
//
//	go test -run '^$' -bench ServeRSS -benchtime 1x -timeout 10m ./booking/lab/rehearse/
func BenchmarkServeRSS(b *testing.B) {
	users := envInt(b, "TATKAL_BENCH_USERS", 10000)
	window := time.Duration(envInt(b, "TATKAL_BENCH_SECONDS", 30)) * time.Second
	st := teststack.New(b, teststack.Options{})
	bin := buildTatkal(b)
	env := append(st.WorkerEnviron(), "TATKAL_METRICS_ADDR=off", "TATKAL_ADDR=127.0.0.1:0",
		// The rehearsal plays the load balancer: its travellers' addresses
		// come in X-Forwarded-For, so per-address limits see 10,000 people.
		"TATKAL_TRUSTED_PROXIES=127.0.0.0/8",
		// Each traveller's proof of work is their phone's, not serve's; at
		// the default 20 bits (unattested) the 10,000 travellers' solving,
		// on the same two cores, starved the stack so that nobody got past
		// the queue (three quarters of the driver's CPU in a profile).
		// TATKAL_BENCH_CHALLENGE_BITS sets it (8: 14 bits unattested).
		"TATKAL_CHALLENGE_BITS="+strconv.Itoa(envInt(b, "TATKAL_BENCH_CHALLENGE_BITS", 8)))
	// The worker (River, the controller, the sweeper that loads the
	// rehearsal's shard) is this test binary, its sweeper every second: a
	// deployment's sweeps every 30 s, and the rehearsal waits for it.
	st.StartProcess(b, false, teststack.SweepIntervalEnv+"=1s")
	metricsAddr := freeAddr(b)
	serve, url := startBinary(b, bin, append(env, "TATKAL_DB_POOL=20", "TATKAL_METRICS_ADDR="+metricsAddr),
		"tatkal serving on ", "serve", "--workers=false")
	idle := procStatus(b, serve.Process.Pid, "VmRSS")

	cfg := app.Config{DatabaseURL: st.DatabaseURL, RedisURL: st.RedisURL, RedisPrefix: st.KeyPrefix, PSPURL: st.PSP.URL, PRSURL: st.Core.URL}
	o := rehearse.Defaults()
	o.Progress = os.Stderr
	o.URL, o.Mode, o.Travellers, o.Berths, o.Duration, o.Drain = url, rehearse.Queue, users, max(users*3/10, 1), window, 10*time.Second
	// Where the memory is at the sampled peak: the Go heap, the
	// goroutines' stacks and how many goroutines (one per connection).
	var peakRSS, samples int64
	var atPeak map[string]float64
	// TATKAL_BENCH_HEAP names a file for serve's heap profile near the
	// peak (go tool pprof -sample_index=inuse_space FILE).
	heapFile := os.Getenv("TATKAL_BENCH_HEAP")
	var mu sync.Mutex
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			rss := procStatus(b, serve.Process.Pid, "VmRSS")
			mu.Lock()
			if rss > peakRSS {
				if heapFile != "" && rss > peakRSS*11/10 {
					saveHeap(b, "http://"+metricsAddr+"/debug/pprof/heap", heapFile)
				}
				peakRSS = rss
				atPeak = goMetrics("http://" + metricsAddr + "/metrics")
			}
			samples++
			mu.Unlock()
		}
	}()
	b.ResetTimer()
	started := time.Now()
	rep, err := rehearse.Run(context.Background(), cfg, o, nil)
	b.StopTimer()
	close(stop)
	<-sampled
	if err != nil {
		b.Fatal(err)
	}
	hwm := procStatus(b, serve.Process.Pid, "VmHWM")
	after := procStatus(b, serve.Process.Pid, "VmRSS")
	run := rep.Runs[0]
	b.Logf("%d travellers over %s: serve RSS idle %d MB, peak %d MB (VmHWM; sampled peak %d MB in %d samples), after %d MB",
		users, time.Since(started).Round(time.Second), idle>>10, hwm>>10, peakRSS>>10, samples, after>>10)
	b.Logf("at the sampled peak: heap in use %.0f MB, goroutine stacks %.0f MB, %.0f goroutines, runtime total %.0f MB",
		atPeak["go_memstats_heap_inuse_bytes"]/1e6, atPeak["go_memstats_stack_inuse_bytes"]/1e6, atPeak["go_goroutines"],
		atPeak["go_memstats_sys_bytes"]/1e6)
	b.Logf("the run: %s, %d booked, %d still waiting, %d sold out, %d errors %v, refusals %v", run.Status, run.Booked,
		run.StillWaiting, run.SoldOut, run.Errors, run.ErrorKinds, run.RejectionKinds)
	b.ReportMetric(float64(hwm)/1024, "peak-RSS-MB")
	b.ReportMetric(float64(idle)/1024, "idle-RSS-MB")
	b.ReportMetric(float64(users), "users")
}

// buildTatkal builds the binary from the module's root into a temporary
// directory.
func buildTatkal(b *testing.B) string {
	b.Helper()
	root, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		b.Fatalf("find the module: %v", err)
	}
	bin := filepath.Join(b.TempDir(), "tatkal")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = strings.TrimSpace(string(root))
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// startBinary runs bin with args and env until the benchmark ends, waits
// for its line starting with ready, and returns the process and the rest
// of that line's first word (serve's URL).
func startBinary(b *testing.B, bin string, env []string, ready string, args ...string) (*exec.Cmd, string) {
	b.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env, cmd.Stderr = env, os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		cmd.Process.Kill() //nolint:errcheck // it may have ended
		cmd.Wait()         //nolint:errcheck // killed
	})
	up := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), ready); ok {
				f := strings.Fields(rest)
				up <- strings.Join(append(f, "")[:1], "")
			}
		}
	}()
	select {
	case rest := <-up:
		return cmd, rest
	case <-time.After(60 * time.Second):
		b.Fatalf("tatkal %s did not start", strings.Join(args, " "))
	}
	return nil, ""
}

// freeAddr is a free loopback port's address.
func freeAddr(b *testing.B) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// goMetrics reads the Go runtime's gauges from a /metrics page (nil when
// it cannot be read: the figure is a diagnosis, not the measure).
func goMetrics(url string) map[string]float64 {
	resp, err := http.Get(url)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, v, ok := strings.Cut(sc.Text(), " ")
		if ok && strings.HasPrefix(name, "go_") && !strings.Contains(name, "{") {
			out[name], _ = strconv.ParseFloat(v, 64)
		}
	}
	return out
}

// saveHeap writes the heap profile at url to file.
func saveHeap(b *testing.B, url, file string) {
	resp, err := http.Get(url)
	if err != nil {
		b.Logf("heap profile: %v", err)
		return
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err == nil {
		err = os.WriteFile(file, raw, 0o644)
	}
	if err != nil {
		b.Logf("heap profile: %v", err)
	}
}

// procStatus reads a kB field of /proc/PID/status.
func procStatus(b *testing.B, pid int, field string) int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Errorf("read the process's status: %v", err)
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

func envInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: want a positive number", name, v)
	}
	return n
}
