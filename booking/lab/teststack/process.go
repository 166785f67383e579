package teststack

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"tatkal/booking"
	"tatkal/booking/app"
	"tatkal/booking/lab/testenv"
)

// PauseEnv (point@n) stops a serve process for good the nth time it
// reaches a pause point (booking/pause.go), saying "paused at point" on
// its standard output: a test kills it there, between two steps.
const PauseEnv = "TATKAL_TEST_PAUSE"

// ServeEnv names the environment that makes a test binary run as a serve
// process of a stack (see RunProcessFromEnv).
const ServeEnv = "TATKAL_TEST_SERVE"

// RunProcessFromEnv runs the process the environment asks for (a worker,
// see WorkerEnviron, or a serve process, see StartProcess) until it is
// killed, and reports whether it was asked for one: a test binary's
// TestMain calls it first, so tests can run real processes and kill them.
func RunProcessFromEnv() (bool, error) {
	switch {
	case os.Getenv(WorkerEnv) == "1":
		return true, RunWorkerFromEnv()
	case os.Getenv(ServeEnv) == "1":
		return true, runServeFromEnv()
	}
	return false, nil
}

// runServeFromEnv runs what tatkal serve runs (the API, the committer, no
// workers) on a loopback port, and prints its address once it is ready.
func runServeFromEnv() error {
	ctx := context.Background()
	cfg, err := app.FromEnv()
	if err != nil {
		return err
	}
	cfg.Addr, cfg.MetricsAddr = "127.0.0.1:0", "off"
	if os.Getenv("TATKAL_PUBLIC_URL") == "" {
		// Its own listener (app.New fills it in): the default :8080 would
		// send the gateway's callbacks to nobody.
		cfg.PublicURL = ""
	}
	pause, err := pauseFromEnv()
	if err != nil {
		return err
	}
	pay, err := paymentTuningFromEnv()
	if err != nil {
		return err
	}
	return runUntilKilled(ctx, cfg, app.Options{Serve: true, Pause: pause, Payment: pay}, func(a *app.App) string { return "serve ready " + a.URL() })
}

// runUntilKilled runs the process opts describe, logging warnings to
// standard error, prints ready(app) on standard output once it is ready
// (what StartProcess waits for), and returns when it stops.
func runUntilKilled(ctx context.Context, cfg app.Config, opts app.Options, ready func(*app.App) string) error {
	opts.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	a, err := app.New(ctx, cfg, opts)
	if err != nil {
		return err
	}
	defer a.Close()
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	select {
	case <-a.Ready():
	case err := <-done:
		return err
	}
	fmt.Println(ready(a))
	return <-done
}

// pauseFromEnv reads PauseEnv: nil when it is not set.
func pauseFromEnv() (booking.PauseFunc, error) {
	v := os.Getenv(PauseEnv)
	if v == "" {
		return nil, nil
	}
	point, nth, ok := strings.Cut(v, "@")
	n, err := strconv.Atoi(nth)
	if !ok || err != nil || n < 1 {
		return nil, fmt.Errorf("%s=%q: want point@n", PauseEnv, v)
	}
	var hits atomic.Int64
	return func(ctx context.Context, at string) {
		if at != point || hits.Add(1) != int64(n) {
			return
		}
		fmt.Println("paused at " + point)
		<-ctx.Done()
	}, nil
}

// Process is one process of the stack run from this test binary.
type Process struct {
	Cmd   *exec.Cmd
	URL   string      // a serve process's API; "" for a worker
	lines chan string // its standard output after it was ready
}

// WaitFor waits until the process prints a line starting with prefix.
func (p *Process) WaitFor(prefix string, timeout time.Duration) error {
	deadline := time.After(timeout)
	for {
		select {
		case line := <-p.lines:
			if strings.HasPrefix(line, prefix) {
				return nil
			}
		case <-deadline:
			return fmt.Errorf("the process did not say %q within %s", prefix, timeout)
		}
	}
}

// Alive reports whether the process is still running (not ended, nor a
// zombie waiting to be reaped).
func (p *Process) Alive() bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.Cmd.Process.Pid))
	if err != nil {
		return false
	}
	// The state follows the command name, which is in parentheses.
	_, rest, _ := strings.Cut(string(b), ") ")
	return rest != "" && rest[0] != 'Z' && rest[0] != 'X'
}

// Kill ends the process with SIGKILL, as a crash would, and waits for it.
func (p *Process) Kill() {
	p.Cmd.Process.Kill() //nolint:errcheck // it may have ended already
	p.Cmd.Wait()         //nolint:errcheck // killed: its exit status says so
}

// StartProcess runs this test binary as a worker (serve false) or a serve
// process of the stack, on the stack's database, Redis, simulators and
// secrets, and waits until it is ready. It is killed when the test ends.
// The binary's TestMain must call RunProcessFromEnv.
// extraEnv (NAME=value) is added to the environment, after the stack's.
func (s *Stack) StartProcess(t testing.TB, serve bool, extraEnv ...string) *Process {
	t.Helper()
	env, ready := s.WorkerEnviron(), "worker ready"
	if serve {
		env = append(env, WorkerEnv+"=0", ServeEnv+"=1", "TATKAL_DB_POOL=5") // the committer, the API, spares
		ready = "serve ready "
	}
	env = append(env, extraEnv...)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = env
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &Process{Cmd: cmd, lines: make(chan string, 64)}
	t.Cleanup(p.Kill)
	up := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		started := false
		for sc.Scan() {
			line := sc.Text()
			if rest, ok := strings.CutPrefix(line, ready); ok && !started {
				started = true
				up <- rest
				continue
			}
			select {
			case p.lines <- line:
			default: // nobody waits for it
			}
		}
	}()
	select {
	case p.URL = <-up:
	case <-time.After(30 * time.Second):
		t.Fatal("the process did not start")
	}
	if !serve {
		p.URL = ""
	}
	return p
}

// Main is the TestMain of a package whose tests start processes of the
// stack: the binary runs the process the environment asks for, else the
// tests, checked for leaked goroutines.
func Main(m *testing.M) {
	if ok, err := RunProcessFromEnv(); ok {
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	goleak.VerifyTestMain(m, testenv.LeakOptions()...)
}
