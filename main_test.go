package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"tatkal/booking/testenv"
)

func testConfig(t *testing.T) (Config, *testenv.Env) {
	t.Helper()
	env := testenv.New(t)
	cfg, err := configFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	cfg.DatabaseURL, cfg.RedisURL, cfg.RedisPrefix, cfg.Addr = env.DatabaseURL, env.RedisURL, env.KeyPrefix, "127.0.0.1:0"
	return cfg, env
}

func runCmd(t *testing.T, cfg Config, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	cmds := map[string]func(context.Context, Config, []string, io.Writer) error{
		"migrate": cmdMigrate, "seed": cmdSeed, "check": cmdCheck,
	}
	err := cmds[args[0]](context.Background(), cfg, args[1:], &out)
	return out.String(), err
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

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m, err := Open(ctx, cfg, true)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.Build(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.Start(ctx, true); err != nil {
		t.Fatal(err)
	}
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
	post := func(path, token, key, body string) (int, map[string]any) {
		req, _ := http.NewRequest("POST", m.URL()+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		json.NewDecoder(resp.Body).Decode(&out) //nolint:errcheck
		return resp.StatusCode, out
	}
	code, login := post("/v1/auth/login", "", "", `{"login":"main00001","password":"secret-pw"}`)
	if code != 200 {
		t.Fatalf("login: %d %v", code, login)
	}
	token := login["token"].(string)
	// The sweeper loads every open shard into Redis on start; until then a
	// hold may be refused with a retryable answer.
	var hold map[string]any
	deadline := time.Now().Add(15 * time.Second)
	for {
		code, hold = post("/v1/bookings/hold", token, "main-hold-0001", `{"train_no":"12301","journey_date":"`+date+`","class":"2A",
			"from":"ASN","to":"CNB","passengers":[{"name":"Kavya Nair","age":50,"gender":"F","id_type":"AADHAAR","id_ref":"234567890123"}]}`)
		if code != 503 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
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
	_, err := Open(context.Background(), bad, false)
	if err == nil || !strings.Contains(err.Error(), "Redis") || !strings.Contains(err.Error(), "redis-server") {
		t.Fatalf("unreachable Redis: %v", err)
	}
	bad = cfg
	bad.DatabaseURL = "postgres://127.0.0.1:1/tatkal?sslmode=disable&connect_timeout=2"
	_, err = Open(context.Background(), bad, false)
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
	for _, cmd := range []string{"dev", "serve", "worker", "migrate", "check", "bench"} {
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
}
