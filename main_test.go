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

// testPool caps each test process's pool: the suite runs many at once
// against one PostgreSQL (README: the connection budget).
const testPool = 10

func testConfig(t *testing.T) (Config, *testenv.Env) {
	t.Helper()
	env := testenv.New(t)
	cfg, err := configFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	cfg.DatabaseURL, cfg.RedisURL, cfg.RedisPrefix, cfg.Addr = env.DatabaseURL, env.RedisURL, env.KeyPrefix, "127.0.0.1:0"
	cfg.MetricsAddr, cfg.DBPool = "127.0.0.1:0", testPool
	cfg = cfg.withDevSecrets()
	cfg.SessionKey = bytes.Repeat([]byte{7}, 32)
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

// serve, worker, psp and prs refuse to start without their secrets, or
// with a value once compiled into the source, and say which variable to
// set and how to make one. Nothing is opened before the refusal.
func TestSecretsRequiredOutsideDev(t *testing.T) {
	good := map[string]string{
		"TATKAL_WEBHOOK_SECRETS": "swiftpay=" + strings.Repeat("a", 64) + ",bharatpg=" + strings.Repeat("b", 64),
		"TATKAL_PSP_API_KEYS":    "swiftpay=" + strings.Repeat("c", 64) + ",bharatpg=" + strings.Repeat("d", 64),
		"TATKAL_PRS_KEY":         strings.Repeat("e", 64),
		"TATKAL_SESSION_KEY":     strings.Repeat("f", 64),
		// A database nobody can reach: a command that got past the
		// secrets check would fail on it instead, saying so.
		"DATABASE_URL": "postgres://127.0.0.1:1/none?connect_timeout=1",
	}
	cases := []struct {
		cmd, unset, set, value, want string
	}{
		{"serve", "TATKAL_WEBHOOK_SECRETS", "", "", "TATKAL_WEBHOOK_SECRETS is not set"},
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

// tatkal dev makes fresh secrets at each start and hands the same ones to
// its simulators: two starts share none.
func TestDevSecretsAreFreshEachStart(t *testing.T) {
	t.Parallel()
	var base Config
	a, b := base.withDevSecrets(), base.withDevSecrets()
	if err := a.requireSecrets(needGateways | needPRSKey); err != nil {
		t.Fatalf("dev secrets refused: %v", err)
	}
	if a.PRSKey == b.PRSKey || a.SimAdminToken == b.SimAdminToken || a.WebhookSecrets.String() == b.WebhookSecrets.String() ||
		a.PSPAPIKeys.String() == b.PSPAPIKeys.String() {
		t.Fatal("two dev starts share a secret")
	}
	sim, merchant := a.simGateways(), a.gateways()
	if len(sim) != 2 || len(merchant) != 2 {
		t.Fatalf("gateways: %d simulated, %d known", len(sim), len(merchant))
	}
	for i := range sim {
		if sim[i].ID != merchant[i].ID || sim[i].APIKeys[0] != merchant[i].APIKey || string(sim[i].WebhookSecret) != string(merchant[i].WebhookSecrets[0]) {
			t.Fatalf("gateway %s: the simulator and the merchant hold different secrets", sim[i].ID)
		}
	}
}

// During a rotation both sides hold two secrets: we accept callbacks
// signed with either and call with the newest key; the simulator signs with
// the newest secret and accepts either key.
func TestRotationListsReachBothSides(t *testing.T) {
	newS, oldS, newK, oldK, bpS, bpK := strings.Repeat("1", 32), strings.Repeat("2", 32), strings.Repeat("3", 32), strings.Repeat("4", 32),
		strings.Repeat("5", 32), strings.Repeat("6", 32)
	t.Setenv("TATKAL_WEBHOOK_SECRETS", "swiftpay="+newS+",bharatpg="+bpS+",swiftpay="+oldS)
	t.Setenv("TATKAL_PSP_API_KEYS", "swiftpay="+newK+",swiftpay="+oldK+",bharatpg="+bpK)
	cfg, err := configFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.requireSecrets(needGateways); err != nil {
		t.Fatal(err)
	}
	for _, g := range cfg.gateways() {
		if g.ID == "swiftpay" && (g.APIKey != newK || len(g.WebhookSecrets) != 2 || string(g.WebhookSecrets[0]) != newS || string(g.WebhookSecrets[1]) != oldS) {
			t.Errorf("merchant side of swiftpay: %+v", g)
		}
	}
	for _, g := range cfg.simGateways() {
		if g.ID == "swiftpay" && (string(g.WebhookSecret) != newS || len(g.APIKeys) != 2 || g.APIKeys[0] != newK || g.APIKeys[1] != oldK) {
			t.Errorf("simulator side of swiftpay: %+v", g)
		}
	}
}
