package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"tatkal/booking/audit"
	"tatkal/booking/db"
	"tatkal/booking/lab/testenv"
	"tatkal/jobs/schedule"
)

// An operator deploys on an empty database, not with tatkal dev: the real
// binary's migrate, users add for the first admin (the password on
// standard input), then serve without workers and a worker beside it, with
// every secret from the environment, each a process of its own; the admin
// signs in to the console over HTTP and sees every schedule, the worker's
// periodic jobs queued or run. No demo console user exists on the way.
func TestOperatorDeploysOnAnEmptyDatabase(t *testing.T) {
	t.Parallel()
	env := testenv.New(t) // this test's Redis prefix, wiped after
	ctx := context.Background()
	name := "tatkal_t_op_" + randomHex(t, 5)
	dbURL := db.WithDatabase(testenv.BaseURL(), name)
	t.Cleanup(func() { db.DropDatabase(testenv.BaseURL(), name) }) // after the processes end (cleanups run in reverse)

	environ := append(os.Environ(), runAsTatkalEnv+"=1",
		"DATABASE_URL="+dbURL, "REDIS_URL="+env.RedisURL, "TATKAL_REDIS_PREFIX="+env.KeyPrefix,
		"TATKAL_ADDR=127.0.0.1:0", "TATKAL_METRICS_ADDR=off", "TATKAL_DB_POOL=8",
		// Nobody listens there: nothing here calls the outside parties.
		"TATKAL_PSP_URL=http://127.0.0.1:1", "TATKAL_PRS_URL=http://127.0.0.1:1", "TATKAL_MSG_URL=http://127.0.0.1:1",
		// Secrets made as SECURITY.md says (openssl rand -hex 32).
		"TATKAL_SESSION_KEY="+randomHex(t, 32), "TATKAL_FRAUD_KEY="+randomHex(t, 32), "TATKAL_MSG_KEY="+randomHex(t, 32), "TATKAL_ID_KEYS=k1="+randomHex(t, 32),
		"TATKAL_PRS_KEY="+randomHex(t, 32),
		"TATKAL_WEBHOOK_SECRETS=swiftpay="+randomHex(t, 32)+",bharatpg="+randomHex(t, 32),
		"TATKAL_PSP_API_KEYS=swiftpay="+randomHex(t, 32)+",bharatpg="+randomHex(t, 32),
		"TATKAL_SIM_ADMIN_TOKEN=", "TATKAL_ADMIN_TOKEN=")
	tatkal := func(stdin string, args ...string) (string, error) {
		t.Helper()
		cmd := exec.Command(os.Args[0], args...)
		cmd.Env, cmd.Stdin = environ, strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	// Before migrate, the command says what to do.
	if out, err := tatkal("", "users", "list"); err == nil || !strings.Contains(out, "run: tatkal migrate") {
		t.Fatalf("users list before migrate: %v\n%s", err, out)
	}
	if out, err := tatkal("", "migrate"); err != nil || !strings.Contains(out, "current") {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	pool, err := db.Open(ctx, dbURL, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	consoleUsers := func() (n int) {
		t.Helper()
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM console_users`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := consoleUsers(); n != 0 {
		t.Fatalf("migrate created %d console users; a deployment outside dev starts with none", n)
	}
	// No password, a weak one: refused, nothing made.
	for _, stdin := range []string{"", "short\n"} {
		if out, err := tatkal(stdin, "users", "add", "--login", "asha", "--role", "admin"); err == nil || !strings.Contains(out, "nothing changed") {
			t.Fatalf("users add with %q on standard input: %v\n%s", stdin, err, out)
		}
	}
	if n := consoleUsers(); n != 0 {
		t.Fatalf("refused adds made %d console users", n)
	}
	const pw = "first admin's own password"
	if out, err := tatkal(pw+"\n", "users", "add", "--login", "asha", "--role", "admin", "--name", "Asha Rao"); err != nil ||
		!strings.Contains(out, "console user asha added: admin") {
		t.Fatalf("users add: %v\n%s", err, out)
	}

	// serve and a worker, as deployed: processes of their own, secrets from
	// the environment.
	base, stop := startServe(t, environ, "--workers=false")
	startProcess(t, environ, "tatkal worker running", "worker")
	if _, code := consoleSignIn(t, base, "admin1", "console-demo"); code != http.StatusUnauthorized {
		t.Fatalf("the demo admin signs in outside dev: %d, want 401", code)
	}
	c, code := consoleSignIn(t, base, "asha", pw)
	if code != http.StatusSeeOther {
		t.Fatalf("the first admin signs in: %d, want 303", code)
	}
	resp, err := c.Get(base + "/console/users")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), `data-testid="user-asha"`) {
		t.Fatalf("the users page for the first admin: %d\n%.1000s", resp.StatusCode, page)
	}
	var actor string
	if err := pool.QueryRow(ctx, `SELECT actor FROM audit_log WHERE action = 'console_user.add' AND subject = 'console_user:asha'`).Scan(&actor); err != nil ||
		actor != audit.CLIActor() {
		t.Fatalf("the first admin's creation audited by %q (%v), want %q", actor, err, audit.CLIActor())
	}
	// Every schedule is listed; the worker (River's leader, the only
	// process with workers) inserts the periodic ones at once, so each
	// interval's job is queued or has run.
	testenv.Eventually(t, 60*time.Second, "the worker's periodic jobs on the schedules page", func() error {
		resp, err := c.Get(base + "/console/schedules")
		if err != nil {
			return err
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			return fmt.Errorf("schedules page: %d %v", resp.StatusCode, err)
		}
		for _, e := range schedule.List(schedule.Config{}) {
			_, row, ok := strings.Cut(string(body), `data-testid="schedule-`+e.Kind+`"`)
			row, _, _ = strings.Cut(row, "</tr>")
			switch {
			case !ok:
				return fmt.Errorf("schedule %s (%s) not listed", e.Kind, e.Name)
			case e.When.Periodic() && !e.When.IsDaily() && strings.Contains(row, "leader next inserts it"):
				return fmt.Errorf("schedule %s (%s): neither queued nor run by the worker", e.Kind, e.Name)
			}
		}
		return nil
	})
	if n := consoleUsers(); n != 1 {
		t.Fatalf("%d console users after serve started; want only the first admin", n)
	}
	if out := stop(); !strings.Contains(out, "shutting down") {
		t.Fatalf("serve did not shut down cleanly:\n%s", out)
	}
}

// startServe runs tatkal serve from this test binary with environ and
// waits until its console answers. stop ends it with SIGTERM, as an
// operator's service manager would, and returns what it wrote.
func startServe(t *testing.T, environ []string, args ...string) (base string, stop func() string) {
	t.Helper()
	addr, stop := startProcess(t, environ, "tatkal serving on ", append([]string{"serve"}, args...)...)
	base = strings.Fields(addr)[0]
	// It prints its address before it serves: wait for the console.
	testenv.Eventually(t, 30*time.Second, "the console of serve", func() error {
		resp, err := http.Get(base + "/console/login")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET /console/login: %d", resp.StatusCode)
		}
		return nil
	})
	return base, stop
}

// startProcess runs tatkal args from this test binary with environ until
// it prints a line starting with ready, and returns the rest of that line.
// stop ends it with SIGTERM, as an operator's service manager would, and
// returns what it wrote; the test's cleanup stops it too.
func startProcess(t *testing.T, environ []string, ready string, args ...string) (rest string, stop func() string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = environ
	var mu sync.Mutex
	var log bytes.Buffer
	cmd.Stderr = &lockedWriter{mu: &mu, w: &log}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	up := make(chan string, 1)
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			mu.Lock()
			log.WriteString(line + "\n")
			mu.Unlock()
			if rest, ok := strings.CutPrefix(line, ready); ok {
				select {
				case up <- rest:
				default:
				}
			}
		}
	}()
	exited := make(chan error, 1)
	go func() {
		<-read // Wait closes the pipe: read it to the end first
		exited <- cmd.Wait()
	}()
	text := func() string { mu.Lock(); defer mu.Unlock(); return log.String() }
	var once sync.Once
	var said string
	stop = func() string {
		once.Do(func() {
			cmd.Process.Signal(syscall.SIGTERM) //nolint:errcheck // it may have ended already
			select {
			case err := <-exited:
				if err != nil {
					t.Errorf("%s exited with %v", args[0], err)
				}
			case <-time.After(30 * time.Second):
				cmd.Process.Kill() //nolint:errcheck
				<-exited
				t.Errorf("%s did not stop within 30s of SIGTERM", args[0])
			}
			said = text()
		})
		return said
	}
	t.Cleanup(func() { stop() })
	select {
	case rest = <-up:
		return rest, stop
	case err := <-exited:
		t.Fatalf("%s ended before it was ready: %v\n%s", args[0], err, text())
	case <-time.After(60 * time.Second):
		t.Fatalf("%s was not ready within 60s\n%s", args[0], text())
	}
	return "", stop
}

// lockedWriter writes to w under mu (the child's standard error, beside
// the reader of its standard output).
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
