package app

import (
	"math"
	"strings"
	"testing"
	"time"

	"tatkal/console/alarms"
)

// tatkal dev makes fresh secrets at each start and hands the same ones to
// its simulators: two starts share none.
func TestDevSecretsAreFreshEachStart(t *testing.T) {
	t.Parallel()
	var base Config
	a, b := base.WithDevSecrets(), base.WithDevSecrets()
	if err := a.RequireSecrets(NeedGateways | NeedPRSKey); err != nil {
		t.Fatalf("dev secrets refused: %v", err)
	}
	if a.PRSKey == b.PRSKey || a.SimAdminToken == b.SimAdminToken || a.WebhookSecrets.String() == b.WebhookSecrets.String() ||
		a.PSPAPIKeys.String() == b.PSPAPIKeys.String() {
		t.Fatal("two dev starts share a secret")
	}
	sim, merchant := a.SimGateways(), a.Gateways()
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
	cfg, err := FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.RequireSecrets(NeedGateways); err != nil {
		t.Fatal(err)
	}
	for _, g := range cfg.Gateways() {
		if g.ID == "swiftpay" && (g.APIKey != newK || len(g.WebhookSecrets) != 2 || string(g.WebhookSecrets[0]) != newS || string(g.WebhookSecrets[1]) != oldS) {
			t.Errorf("merchant side of swiftpay: %+v", g)
		}
	}
	for _, g := range cfg.SimGateways() {
		if g.ID == "swiftpay" && (string(g.WebhookSecret) != newS || len(g.APIKeys) != 2 || g.APIKeys[0] != newK || g.APIKeys[1] != oldK) {
			t.Errorf("simulator side of swiftpay: %+v", g)
		}
	}
}

// serve without workers gets a soft memory limit by default; the variable
// overrides it for every command; a bad size is refused at start.
func TestMemoryLimit(t *testing.T) {
	if got := MemoryLimitFor(Config{}, Options{Serve: true}); got != DefaultServeMemoryLimit {
		t.Errorf("serve without workers: %d, want %d", got, DefaultServeMemoryLimit)
	}
	if got := MemoryLimitFor(Config{}, Options{Serve: true, Work: true}); got != math.MaxInt64 {
		t.Errorf("serve with workers: %d, want no limit", got)
	}
	t.Setenv("TATKAL_MEMORY_LIMIT", "300MiB")
	cfg, err := FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if got := MemoryLimitFor(cfg, Options{Work: true}); got != 300<<20 {
		t.Errorf("TATKAL_MEMORY_LIMIT=300MiB: %d", got)
	}
	for _, bad := range []string{"lots", "-5MiB", "1MiB", "12TB"} {
		t.Setenv("TATKAL_MEMORY_LIMIT", bad)
		if _, err := FromEnv(); err == nil {
			t.Errorf("TATKAL_MEMORY_LIMIT=%s was taken", bad)
		}
	}
}

// The booking challenge's difficulty is an operator's setting within
// bounds: below 8 bits it stops costing a bot anything, above 24 an honest
// phone works for minutes.
func TestChallengeBits(t *testing.T) {
	t.Setenv("TATKAL_CHALLENGE_BITS", "10")
	cfg, err := FromEnv()
	if err != nil || cfg.ChallengeBits != 10 {
		t.Fatalf("TATKAL_CHALLENGE_BITS=10: %d %v", cfg.ChallengeBits, err)
	}
	for _, bad := range []string{"7", "25", "hard", "-1"} {
		t.Setenv("TATKAL_CHALLENGE_BITS", bad)
		if _, err := FromEnv(); err == nil {
			t.Errorf("TATKAL_CHALLENGE_BITS=%s was taken", bad)
		}
	}
}

// The daily reconciliation's time is a time of day in IST, to the second;
// its re-run window whole days within a month. Anything else is refused at
// start, naming the variable.
func TestReconSchedule(t *testing.T) {
	cfg, err := FromEnv()
	if err != nil || cfg.ReconAt != nil || cfg.ReconRerunDays != 0 {
		t.Fatalf("unset: %v %v %d (want the schedule's defaults)", err, cfg.ReconAt, cfg.ReconRerunDays)
	}
	t.Setenv("TATKAL_RECON_AT", "05:30:15")
	t.Setenv("TATKAL_RECON_RERUN_DAYS", "10")
	cfg, err = FromEnv()
	if err != nil || cfg.ReconAt == nil || cfg.ReconAt.String() != "05:30:15" || cfg.ReconRerunDays != 10 {
		t.Fatalf("05:30:15, 10 days: %v %v %d", err, cfg.ReconAt, cfg.ReconRerunDays)
	}
	for _, bad := range []string{"25:00", "6", "06:00 IST", "noon"} {
		t.Setenv("TATKAL_RECON_AT", bad)
		if _, err := FromEnv(); err == nil || !strings.Contains(err.Error(), "TATKAL_RECON_AT") {
			t.Errorf("TATKAL_RECON_AT=%s: %v", bad, err)
		}
	}
	t.Setenv("TATKAL_RECON_AT", "06:00")
	for _, bad := range []string{"0", "31", "week", "-2"} {
		t.Setenv("TATKAL_RECON_RERUN_DAYS", bad)
		if _, err := FromEnv(); err == nil || !strings.Contains(err.Error(), "TATKAL_RECON_RERUN_DAYS") {
			t.Errorf("TATKAL_RECON_RERUN_DAYS=%s: %v", bad, err)
		}
	}
}

// The invariant watch's interval and its alarm thresholds come from the
// environment; unset they are the defaults, a bad value is refused at
// start, naming the variable.
func TestWatchSettings(t *testing.T) {
	cfg, err := FromEnv()
	if err != nil || cfg.WatchInterval != 0 || cfg.Alarms != alarms.DefaultThresholds() {
		t.Fatalf("unset: %v %v %+v (want the defaults)", err, cfg.WatchInterval, cfg.Alarms)
	}
	t.Setenv("TATKAL_WATCH_INTERVAL", "10s")
	t.Setenv("TATKAL_ALARM_UNKNOWN_AFTER", "2m")
	t.Setenv("TATKAL_ALARM_QUEUE_DEPTH", "5000")
	cfg, err = FromEnv()
	if err != nil || cfg.WatchInterval != 10*time.Second || cfg.Alarms.UnknownAfter != 2*time.Minute || cfg.Alarms.QueueDepth != 5000 ||
		cfg.Alarms.RefundBacklog != alarms.DefaultThresholds().RefundBacklog {
		t.Fatalf("10s, 2m, 5000: %v %+v", err, cfg)
	}
	for name, bad := range map[string]string{"TATKAL_WATCH_INTERVAL": "1s", "TATKAL_ALARM_UNKNOWN_AFTER": "soon",
		"TATKAL_ALARM_ROUTE_ERROR_PCT": "150", "TATKAL_ALARM_REFUND_BACKLOG": "0"} {
		t.Run(name, func(t *testing.T) {
			t.Setenv(name, bad)
			if _, err := FromEnv(); err == nil || !strings.Contains(err.Error(), name) {
				t.Errorf("%s=%s: %v", name, bad, err)
			}
		})
	}
}

// The fraud clustering's early passes: durations after the opening, or
// "none"; anything else is refused at start, naming the variable.
func TestFraudEarlyPasses(t *testing.T) {
	cfg, err := FromEnv()
	if err != nil || cfg.FraudEarlyPasses != nil {
		t.Fatalf("unset: %v %v (want nil, the default passes)", err, cfg.FraudEarlyPasses)
	}
	t.Setenv("TATKAL_FRAUD_EARLY_PASSES", "15m, 45m")
	if cfg, err = FromEnv(); err != nil || len(cfg.FraudEarlyPasses) != 2 || cfg.FraudEarlyPasses[1] != 45*time.Minute {
		t.Fatalf("15m,45m: %v %v", err, cfg.FraudEarlyPasses)
	}
	t.Setenv("TATKAL_FRAUD_EARLY_PASSES", "none")
	if cfg, err = FromEnv(); err != nil || cfg.FraudEarlyPasses == nil || len(cfg.FraudEarlyPasses) != 0 {
		t.Fatalf("none: %v %v (want an empty list)", err, cfg.FraudEarlyPasses)
	}
	for _, bad := range []string{"10", "30s", "5h", "10m,", "soon"} {
		t.Setenv("TATKAL_FRAUD_EARLY_PASSES", bad)
		if _, err := FromEnv(); err == nil || !strings.Contains(err.Error(), "TATKAL_FRAUD_EARLY_PASSES") {
			t.Errorf("TATKAL_FRAUD_EARLY_PASSES=%s: %v", bad, err)
		}
	}
}

// A booking process without TATKAL_ID_KEYS, or with a malformed one,
// refuses to start and names the variable; dev makes a fresh key.
func TestIDKeysRequiredOutsideDev(t *testing.T) {
	t.Parallel()
	base := Config{}.WithDevSecrets()
	base.SessionKey = []byte(strings.Repeat("s", 32))
	if err := base.RequireSecrets(NeedSessionKey); err != nil {
		t.Fatalf("dev secrets refused: %v", err)
	}
	for _, spec := range []string{"", "k1=short", "k1"} {
		c := base
		c.IDKeys = spec
		if err := c.RequireSecrets(NeedSessionKey); err == nil || !strings.Contains(err.Error(), "TATKAL_ID_KEYS") {
			t.Errorf("TATKAL_ID_KEYS=%q: %v, want a refusal naming it", spec, err)
		}
	}
}
