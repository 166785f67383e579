package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"tatkal/booking/app"
	"tatkal/booking/lab/testenv"
	"tatkal/booking/lab/teststack"
	"tatkal/jobs/backoffice"
)

// testPool caps each test process's pool: the suite runs many at once
// against one PostgreSQL (booking/lab/testenv: the connection budget).
const testPool = 10

func testConfig(t *testing.T) (app.Config, *testenv.Env) {
	t.Helper()
	env := testenv.New(t)
	cfg, err := app.FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	cfg.DatabaseURL, cfg.RedisURL, cfg.RedisPrefix, cfg.Addr = env.DatabaseURL, env.RedisURL, env.KeyPrefix, "127.0.0.1:0"
	cfg.MetricsAddr, cfg.DBPool = "127.0.0.1:0", testPool
	cfg.PSPURL, cfg.PRSURL, cfg.MsgURL, cfg.PublicURL = "http://127.0.0.1:0", "http://127.0.0.1:0", "http://127.0.0.1:0", ""
	cfg = cfg.WithDevSecrets()
	cfg.SessionKey = bytes.Repeat([]byte{7}, 32)
	return cfg, env
}

func runCmd(t *testing.T, cfg app.Config, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := commands[args[0]](context.Background(), cfg, args[1:], &out)
	return out.String(), err
}

// startApp builds the process as tatkal serve does and runs it until the
// test ends.
func startApp(t *testing.T, cfg app.Config, opts app.Options) *app.App {
	t.Helper()
	a, err := app.New(context.Background(), cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
		a.Close()
	})
	select {
	case <-a.Ready():
	case err := <-done:
		t.Fatalf("run: %v", err)
	}
	return a
}

// The whole process on port 0: migrate twice, seed, serve, book, check.
func TestMainEndToEnd(t *testing.T) {
	t.Parallel()
	cfg, _ := testConfig(t)
	for i := 0; i < 2; i++ {
		if out, err := runCmd(t, cfg, "migrate"); err != nil || !strings.Contains(out, "current") {
			t.Fatalf("migrate run %d: %q %v", i+1, out, err)
		}
	}
	date := time.Now().In(time.UTC).AddDate(0, 0, 2).Format(time.DateOnly)
	if out, err := runCmd(t, cfg, "seed", "demo", "--date", date, "--opens-in", "-1m"); err != nil || !strings.Contains(out, "12259 SL") {
		t.Fatalf("seed demo: %q %v", out, err)
	}
	if out, err := runCmd(t, cfg, "seed", "users", "--count", "3", "--prefix", "main", "--password", "secret-pw"); err != nil || !strings.Contains(out, "created 3 users") {
		t.Fatalf("seed users: %q %v", out, err)
	}
	if _, err := runCmd(t, cfg, "seed", "users", "--count", "3", "--prefix", "main", "--password", "secret-pw"); err == nil {
		t.Fatal("seeding the same logins twice succeeded")
	}
	if _, err := runCmd(t, cfg, "seed", "shard", "--date", "not-a-date"); err == nil {
		t.Fatal("seed shard accepted a bad date")
	}

	ctx := context.Background()
	m := startApp(t, cfg, app.Options{Work: true, Serve: true, BackOffice: backoffice.New()})
	get := func(path string) (int, string) {
		resp, err := http.Get(m.URL() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/healthz"); code != 200 || body != "ok\n" {
		t.Fatalf("healthz: %d %q", code, body)
	}
	if code, body := get("/readyz"); code != 200 || !strings.Contains(body, `"redis":"ok"`) {
		t.Fatalf("readyz: %d %q", code, body)
	}
	var device string // the device binding, once bound
	post := func(path, token, key, body string) (int, map[string]any) {
		r := testenv.Call(t, testenv.Request{Method: "POST", URL: m.URL() + path, Token: token, Body: body,
			Header: map[string]string{"Idempotency-Key": key, "X-Device-Token": device}})
		return r.Status, r.JSON
	}
	code, login := post("/v1/auth/login", "", "", `{"login":"main00001","password":"secret-pw"}`)
	if code != 200 {
		t.Fatalf("login: %d %v", code, login)
	}
	token := login["token"].(string)
	code, bound := post("/v1/devices/bind", token, "", `{"device_token":"main-test-device-0001"}`)
	if code != 200 {
		t.Fatalf("bind device: %d %v", code, bound)
	}
	device = bound["device_binding"].(string)
	// The sweeper loads every open shard into Redis on start; until then a
	// hold may be refused with a retryable answer.
	var hold map[string]any
	testenv.Eventually(t, 15*time.Second, "a hold not refused as retryable", func() error {
		// Every hold carries a solved booking check, asked for its attempt.
		code, hold = post("/v1/bookings/hold", token, "main-hold-0001", teststack.WithChallenge(t, m.URL(), token, "main-hold-0001", `{"train_no":"12301","journey_date":"`+date+`","class":"2A",
			"from":"ASN","to":"CNB","passengers":[{"name":"Kavya Nair","age":50,"gender":"F","id_type":"AADHAAR","id_ref":"234567890123"}]}`, nil))
		return testenv.Want(code != 503, "%d %v", code, hold)
	})
	if code != 201 || hold["status"] != "HELD" {
		t.Fatalf("hold: %d %v", code, hold)
	}
	if _, err := m.Booking.Sweep(ctx); err != nil { // loads every open shard into Redis
		t.Fatal(err)
	}
	if out, err := runCmd(t, cfg, "check"); err != nil || !strings.Contains(out, "all 10 shard(s) hold their invariants") {
		t.Fatalf("check: %v\n%s", err, out)
	}
	// A shard broken behind the service's back is reported, non-zero.
	if _, err := m.Pool.Exec(ctx, `UPDATE holds SET berths = '{0}', from_seq = 0, to_seq = 1 WHERE id = $1`, hold["hold_id"]); err != nil {
		t.Fatal(err)
	}
	if out, err := runCmd(t, cfg, "check"); err == nil || !strings.Contains(out, "VIOLATION") {
		t.Fatalf("check after tampering: %v\n%s", err, out)
	}
}

// A service that cannot be reached is named, with how to start it.
func TestUnreachableServicesAreNamed(t *testing.T) {
	t.Parallel()
	cfg, _ := testConfig(t)
	bad := cfg
	bad.RedisURL = "redis://127.0.0.1:1/0"
	_, err := app.New(context.Background(), bad, app.Options{})
	if err == nil || !strings.Contains(err.Error(), "Redis") || !strings.Contains(err.Error(), "redis-server") {
		t.Fatalf("unreachable Redis: %v", err)
	}
	bad = cfg
	bad.DatabaseURL = "postgres://127.0.0.1:1/tatkal?sslmode=disable&connect_timeout=2"
	_, err = app.New(context.Background(), bad, app.Options{})
	if err == nil || !strings.Contains(err.Error(), "PostgreSQL") || !strings.Contains(err.Error(), "pg_ctlcluster") {
		t.Fatalf("unreachable PostgreSQL: %v", err)
	}
}

func TestCommandLine(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"--help"}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "Commands:") {
		t.Fatalf("--help: %d %q", code, out.String())
	}
	for _, cmd := range []string{"dev", "serve", "worker", "migrate", "check", "bench", "chaos"} {
		out.Reset()
		errOut.Reset()
		if code := run(context.Background(), []string{cmd, "--help"}, &out, &errOut); code != 0 {
			t.Errorf("%s --help exited %d: %s", cmd, code, errOut.String())
		}
		if !strings.Contains(errOut.String()+out.String(), "Usage: tatkal "+cmd) {
			t.Errorf("%s --help printed %q", cmd, errOut.String()+out.String())
		}
	}
	if code := run(context.Background(), []string{"frobnicate"}, &out, &errOut); code != 2 {
		t.Errorf("unknown command exited %d, want 2", code)
	}
	if code := run(context.Background(), []string{"serve", "--no-such-flag"}, &out, &errOut); code != 2 {
		t.Errorf("bad flag exited %d, want 2", code)
	}
	// tatkal chaos refuses a fault it does not know and a rush too small
	// to test anything before it connects to anything.
	for _, args := range [][]string{{"chaos", "--fault", "meteor"}, {"chaos", "--users", "1"}, {"chaos", "--serves", "1"}} {
		errOut.Reset()
		if code := run(context.Background(), args, &out, &errOut); code != 2 {
			t.Errorf("%v exited %d, want 2: %s", args, code, errOut.String())
		}
	}
}

// serve, worker, psp and prs refuse to start without their secrets, or
// with a value once compiled into the source, and say which variable to
// set and how to make one. Nothing is opened before the refusal.
func TestSecretsRequiredOutsideDev(t *testing.T) {
	good := map[string]string{
		"TATKAL_WEBHOOK_SECRETS": "swiftpay=" + strings.Repeat("a", 64) + ",bharatpg=" + strings.Repeat("b", 64),
		"TATKAL_PSP_API_KEYS":    "swiftpay=" + strings.Repeat("c", 64) + ",bharatpg=" + strings.Repeat("d", 64),
		"TATKAL_PRS_KEY":         strings.Repeat("e", 64),
		"TATKAL_SESSION_KEY":     strings.Repeat("f", 64),
		"TATKAL_FRAUD_KEY":       strings.Repeat("9", 64),
		"TATKAL_MSG_KEY":         strings.Repeat("8", 64),
		"TATKAL_ID_KEYS":         "k1=" + strings.Repeat("7", 64),
		// A database nobody can reach: a command that got past the
		// secrets check would fail on it instead, saying so.
		"DATABASE_URL": "postgres://127.0.0.1:1/none?connect_timeout=1",
	}
	cases := []struct {
		cmd, unset, set, value, want string
	}{
		{"serve", "TATKAL_WEBHOOK_SECRETS", "", "", "TATKAL_WEBHOOK_SECRETS is not set"},
		{"serve", "TATKAL_FRAUD_KEY", "", "", "TATKAL_FRAUD_KEY is not set"},
		{"worker", "TATKAL_ID_KEYS", "", "", "TATKAL_ID_KEYS is not set"},
		{"serve", "", "TATKAL_ID_KEYS", "k1=short", "want 32 bytes in hex"},
		{"serve", "TATKAL_MSG_KEY", "", "", "TATKAL_MSG_KEY is not set"},
		{"worker", "TATKAL_MSG_KEY", "", "", "TATKAL_MSG_KEY is not set"},
		{"serve", "", "TATKAL_MSG_KEY", "short", "guessable"},
		{"serve", "TATKAL_PSP_API_KEYS", "", "", "TATKAL_PSP_API_KEYS is not set"},
		{"serve", "TATKAL_PRS_KEY", "", "", "TATKAL_PRS_KEY is not set"},
		{"serve", "TATKAL_SESSION_KEY", "", "", "TATKAL_SESSION_KEY is not set"},
		{"serve", "", "TATKAL_WEBHOOK_SECRETS", "swiftpay=whsec_dev_swiftpay,bharatpg=" + strings.Repeat("b", 64), "development value"},
		{"serve", "", "TATKAL_PSP_API_KEYS", "swiftpay=sk_dev_swiftpay,bharatpg=" + strings.Repeat("d", 64), "development value"},
		{"serve", "", "TATKAL_PRS_KEY", "prs-dev-key", "development value"},
		{"serve", "", "TATKAL_PSP_API_KEYS", "swiftpay=" + strings.Repeat("c", 64), "each gateway needs both"},
		{"serve", "", "TATKAL_PRS_KEY", "short", "guessable"},
		{"serve", "", "TATKAL_ADMIN_TOKEN", "dev-admin", "TATKAL_SIM_ADMIN_TOKEN"},
		{"worker", "TATKAL_WEBHOOK_SECRETS", "", "", "TATKAL_WEBHOOK_SECRETS is not set"},
		{"worker", "TATKAL_SESSION_KEY", "", "", "TATKAL_SESSION_KEY is not set"},
		{"psp", "TATKAL_PSP_API_KEYS", "", "", "TATKAL_PSP_API_KEYS is not set"},
		{"psp", "", "TATKAL_SIM_ADMIN_TOKEN", "dev-admin", "development value"},
		{"prs", "TATKAL_PRS_KEY", "", "", "TATKAL_PRS_KEY is not set"},
		{"msg", "TATKAL_MSG_KEY", "", "", "TATKAL_MSG_KEY is not set"},
	}
	for _, tc := range cases {
		for k, v := range good {
			t.Setenv(k, v)
		}
		if tc.unset != "" {
			t.Setenv(tc.unset, "")
		}
		if tc.set != "" {
			t.Setenv(tc.set, tc.value)
		}
		var out, errOut bytes.Buffer
		code := run(context.Background(), []string{tc.cmd}, &out, &errOut)
		msg := errOut.String()
		if code == 0 || !strings.Contains(msg, tc.want) || (tc.value == "" && !strings.Contains(msg, "openssl rand -hex 32")) {
			t.Errorf("%s with %s%s unset/changed: exit %d, %q; want a refusal saying %q and how to make one", tc.cmd, tc.unset, tc.set, code, msg, tc.want)
		}
		if strings.Contains(msg, "PostgreSQL") {
			t.Errorf("%s got past the secrets check: %q", tc.cmd, msg)
		}
		t.Setenv("TATKAL_ADMIN_TOKEN", "")
		t.Setenv("TATKAL_SIM_ADMIN_TOKEN", "")
	}
	// With every secret set, serve gets as far as the database.
	for k, v := range good {
		t.Setenv(k, v)
	}
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"serve"}, &out, &errOut); code == 0 || !strings.Contains(errOut.String(), "PostgreSQL") {
		t.Errorf("serve with every secret: exit %d, %q; want it to reach for the database", code, errOut.String())
	}
}

// Help never touches anything: every command and subcommand prints its
// flags, defaults and an example with PostgreSQL and Redis pointed at a
// listener that counts the connections it gets, and exits 0.
func TestHelpConnectsToNothing(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var dials atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			dials.Add(1)
			c.Close()
		}
	}()
	defer ln.Close()
	t.Setenv("DATABASE_URL", "postgres://"+ln.Addr().String()+"/none?connect_timeout=1")
	t.Setenv("REDIS_URL", "redis://"+ln.Addr().String()+"/0")
	cases := [][]string{{"--help"}, {"help"}, {"seed", "--help"}, {"recon", "--help"}}
	for name := range commands {
		cases = append(cases, []string{name, "--help"}, []string{name, "-h"})
	}
	for _, sub := range []string{"demo", "shard", "users"} {
		cases = append(cases, []string{"seed", sub, "--help"})
	}
	for _, sub := range []string{"ingest", "run", "export"} {
		cases = append(cases, []string{"recon", sub, "--help"})
	}
	for _, sub := range []string{"add", "disable", "enable", "reset-password", "list"} {
		cases = append(cases, []string{"users", sub, "--help"})
	}
	for _, args := range cases {
		var out, errOut bytes.Buffer
		code := run(context.Background(), args, &out, &errOut)
		text := out.String() + errOut.String()
		if code != 0 {
			t.Errorf("%v: exit %d: %s", args, code, text)
		}
		want := "Example"
		if len(args) == 1 {
			want = "Commands:"
		}
		if !strings.Contains(text, want) || !strings.Contains(text, "tatkal "+strings.Join(args[:len(args)-1], " ")) {
			t.Errorf("%v printed %q; want the command's usage with %q", args, text, want)
		}
		if (len(args) == 2 && args[0] != "seed" && args[0] != "recon" || len(args) == 3) && !strings.Contains(text, "Usage: tatkal") {
			t.Errorf("%v printed no usage line: %q", args, text)
		}
	}
	if n := dials.Load(); n != 0 {
		t.Errorf("help opened %d connection(s)", n)
	}
	// A mistake in a subcommand's flags is a usage error (exit 2), before
	// any connection too.
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"seed", "shard", "--date", "tomorrow"}, &out, &errOut); code != 2 {
		t.Errorf("seed shard --date tomorrow: exit %d, want 2: %s", code, errOut.String())
	}
	for _, args := range [][]string{{"users", "add", "--login", "asha", "--role", "boss"}, {"users", "add", "--login", "asha", "--role", "admin", "--password", "x"},
		{"users", "disable"}, {"users"}} {
		if code := run(context.Background(), args, &out, &errOut); code != 2 {
			t.Errorf("%v: exit %d, want 2: %s", args, code, errOut.String())
		}
	}
	if n := dials.Load(); n != 0 {
		t.Errorf("a usage error opened %d connection(s)", n)
	}
}
