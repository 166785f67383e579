package app

import (
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"tatkal/booking/httpx"
	"tatkal/booking/payment"
	"tatkal/booking/pii"
	"tatkal/booking/secrets"
	"tatkal/booking/sim/pspsim"
	"tatkal/console/alarms"
	"tatkal/jobs/schedule"
)

// Config is everything a process needs, from the environment.
type Config struct {
	DatabaseURL      string
	DBPool           int // TATKAL_DB_POOL: connections of this process's pool; 0: the command's default
	RedisURL         string
	Addr             string
	MetricsAddr      string // Prometheus text, kept off the public listener
	MetricsToken     string // TATKAL_METRICS_TOKEN: asked of every request to MetricsAddr; needed off loopback (CheckMetrics)
	SessionKey       []byte
	RedisPrefix      string
	HoldWindow       time.Duration
	MaxHoldsInFlight int
	CommitWriters    int
	// ConfirmWriters: payment confirmation groups written at once
	// (TATKAL_CONFIRM_WRITERS, default DefaultConfirmWriters); 0: no
	// grouping, each confirmation its own transaction.
	ConfirmWriters int
	// ChallengeBits is the booking-time proof of work for an attested
	// client (TATKAL_CHALLENGE_BITS, 8-24; 0: the waiting room's 14); an
	// unattested one pays 6 bits more, each bit doubling the work.
	ChallengeBits int
	SweepInterval time.Duration
	PublicURL     string
	// TrustedProxies may set X-Forwarded-For (TATKAL_TRUSTED_PROXIES).
	TrustedProxies []netip.Prefix
	PSPURL         string
	PRSURL         string
	PRSKey         string
	// MsgURL is the messaging gateway (SMS and e-mail) the outbox is sent
	// to; MsgKey the key we call it with (TATKAL_MSG_KEY).
	MsgURL string
	MsgKey string
	// KYCURL is the identity verifier (booking/kyc) new accounts verify
	// through; KYCKey the key we call it with (TATKAL_KYC_URL,
	// TATKAL_KYC_KEY). Either unset: identity verification is off (sign-up
	// still works; the account cannot book Tatkal until it is on).
	KYCURL string
	KYCKey string
	// SimAdminToken guards the simulators' fault-setting API. It is the
	// simulators' own and no identity in the product.
	SimAdminToken string
	// BankToken is the bank statement API's credential, which the daily
	// reconciliation fetches statements with (TATKAL_BANK_TOKEN; empty: no
	// statement is fetched, and the statement job says why).
	BankToken string
	// WebhookSecrets and PSPAPIKeys are per gateway, newest first: we call
	// with the first key and accept callbacks signed with any secret; the
	// simulator signs with the first secret and accepts any key.
	WebhookSecrets secrets.PerGateway
	PSPAPIKeys     secrets.PerGateway
	// FraudKey keys the hashes of passengers' ID numbers and payment
	// instruments in the fraud signals (TATKAL_FRAUD_KEY).
	FraudKey string
	// IDKeys seal passengers' ID numbers at rest (TATKAL_ID_KEYS,
	// id=hex,... newest first; booking/pii).
	IDKeys string
	// ReconMaxFileBytes is the largest reconciliation file taken by upload,
	// the CLI or the daily fetch (TATKAL_RECON_MAX_FILE_MB; 0: recon's default).
	ReconMaxFileBytes int64
	// ReconApprovalLimitPaise: an automatic money-moving resolution above it
	// waits for a second finance person, and a person's money move on a
	// payment review above it is approved by a finance lead
	// (TATKAL_RECON_APPROVAL_RUPEES; 0: the default, ₹10,000).
	ReconApprovalLimitPaise int64
	// ReconAt is the daily reconciliation's time of day, IST
	// (TATKAL_RECON_AT, HH:MM[:SS]; nil: schedule.DefaultReconAt, 06:00).
	ReconAt *schedule.Clock
	// ReconRerunDays: a day with open items is reconciled again daily
	// until T+ReconRerunDays (TATKAL_RECON_RERUN_DAYS; 0: 7).
	ReconRerunDays int
	// WatchInterval is how often the invariant watch runs
	// (TATKAL_WATCH_INTERVAL, 5s-10m; 0: schedule.DefaultWatch, 30s);
	// Alarms its thresholds (TATKAL_ALARM_*, see console/alarms).
	WatchInterval time.Duration
	Alarms        alarms.Thresholds
	// FraudEarlyPasses: how long after each window opens it is clustered
	// while still open (TATKAL_FRAUD_EARLY_PASSES, durations such as
	// "10m,30m"; "none": only once closed; nil: fraud.DefaultEarlyPasses).
	FraudEarlyPasses []time.Duration

	// RedisClusterAddrs (REDIS_CLUSTER_ADDRS, host:port,...) selects a
	// Redis Cluster; so does a REDIS_URL listing several nodes.
	RedisClusterAddrs string

	// MemoryLimit is the Go runtime's soft memory limit in bytes
	// (TATKAL_MEMORY_LIMIT, e.g. 200MiB; 0: the command's default, see
	// MemoryLimitFor). GOMEMLIMIT, when set, wins over both.
	MemoryLimit int64
}

// Secret variables, by the commands that need them.
const (
	envWebhookSecrets = "TATKAL_WEBHOOK_SECRETS"
	envPSPAPIKeys     = "TATKAL_PSP_API_KEYS"
	envPRSKey         = "TATKAL_PRS_KEY"
	EnvMsgKey         = "TATKAL_MSG_KEY"
	EnvSessionKey     = "TATKAL_SESSION_KEY"
	EnvSimAdminToken  = "TATKAL_SIM_ADMIN_TOKEN"
	EnvFraudKey       = "TATKAL_FRAUD_KEY"
	EnvBankToken      = "TATKAL_BANK_TOKEN"
	EnvKYCKey         = "TATKAL_KYC_KEY"
)

// DefaultConfirmWriters: confirmation groups are set-based (their holds
// confirmed in one statement each), which halves PostgreSQL's work per
// confirmation (booking/payment's doc); each writer holds a connection
// while it writes. Two: what a group costs is now mostly per statement,
// not per confirmation, so fewer writers with larger groups confirm more
// on the same cores (1.4-1.7 times the callbacks of eight).
const DefaultConfirmWriters = 2

func FromEnv() (Config, error) {
	cfg := Config{
		DatabaseURL:      env("DATABASE_URL", "postgres://127.0.0.1:5432/tatkal?sslmode=disable"),
		RedisURL:         env("REDIS_URL", "redis://127.0.0.1:6379/0"),
		Addr:             env("TATKAL_ADDR", ":8080"),
		MetricsAddr:      env("TATKAL_METRICS_ADDR", "127.0.0.1:9090"),
		MetricsToken:     os.Getenv(EnvMetricsToken),
		RedisPrefix:      env("TATKAL_REDIS_PREFIX", "tk"),
		HoldWindow:       3 * time.Minute,
		MaxHoldsInFlight: 512,
		CommitWriters:    1,
		ConfirmWriters:   DefaultConfirmWriters,
		SweepInterval:    30 * time.Second,
		PublicURL:        env("TATKAL_PUBLIC_URL", "http://127.0.0.1:8080"),
		PSPURL:           env("TATKAL_PSP_URL", "http://127.0.0.1:8081"),
		PRSURL:           env("TATKAL_PRS_URL", "http://127.0.0.1:8082"),
		PRSKey:           os.Getenv(envPRSKey),
		MsgURL:           env("TATKAL_MSG_URL", "http://127.0.0.1:8083"),
		MsgKey:           os.Getenv(EnvMsgKey),
		KYCURL:           os.Getenv("TATKAL_KYC_URL"),
		KYCKey:           os.Getenv(EnvKYCKey),
		SimAdminToken:    os.Getenv(EnvSimAdminToken),
		BankToken:        os.Getenv(EnvBankToken),
		FraudKey:         os.Getenv(EnvFraudKey),
		IDKeys:           os.Getenv(pii.EnvKeys),
	}
	cfg.RedisClusterAddrs = os.Getenv("REDIS_CLUSTER_ADDRS")
	if os.Getenv("TATKAL_ADMIN_TOKEN") != "" {
		return cfg, fmt.Errorf("TATKAL_ADMIN_TOKEN is gone: the simulators' token is now %s, and the console accepts no shared token (operators use personal API tokens)", EnvSimAdminToken)
	}
	if u, err := url.Parse(cfg.PublicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return cfg, fmt.Errorf("TATKAL_PUBLIC_URL %q: want http(s)://host[:port]", cfg.PublicURL)
	}
	var err error
	if cfg.TrustedProxies, err = httpx.ParseProxies(os.Getenv("TATKAL_TRUSTED_PROXIES")); err != nil {
		return cfg, fmt.Errorf("TATKAL_TRUSTED_PROXIES: %w", err)
	}
	if cfg.WebhookSecrets, err = secrets.ParseList(envWebhookSecrets, os.Getenv(envWebhookSecrets)); err != nil {
		return cfg, err
	}
	if cfg.PSPAPIKeys, err = secrets.ParseList(envPSPAPIKeys, os.Getenv(envPSPAPIKeys)); err != nil {
		return cfg, err
	}
	if v := os.Getenv(EnvSessionKey); v != "" {
		key, err := hex.DecodeString(v)
		if err != nil || len(key) < 32 {
			return cfg, fmt.Errorf("%s must be at least 32 bytes in hex; %s", EnvSessionKey, secrets.Hint)
		}
		cfg.SessionKey = key
	}
	if v := os.Getenv("TATKAL_DB_POOL"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 4 || n > 1000 {
			return cfg, fmt.Errorf("TATKAL_DB_POOL %q: want 4-1000 connections", v)
		}
		cfg.DBPool = n
	}
	if v := os.Getenv("TATKAL_HOLD_WINDOW"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 10*time.Second || d > 30*time.Minute {
			return cfg, fmt.Errorf("TATKAL_HOLD_WINDOW %q: want a duration between 10s and 30m", v)
		}
		cfg.HoldWindow = d
	}
	if v := os.Getenv("TATKAL_COMMIT_WRITERS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 16 {
			return cfg, fmt.Errorf("TATKAL_COMMIT_WRITERS %q: want 1-16", v)
		}
		cfg.CommitWriters = n
	}
	if v := os.Getenv("TATKAL_CHALLENGE_BITS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 8 || n > 24 {
			return cfg, fmt.Errorf("TATKAL_CHALLENGE_BITS %q: want 8-24 (the proof of work of an attested client; unattested ones pay 6 more)", v)
		}
		cfg.ChallengeBits = n
	}
	if v := os.Getenv("TATKAL_CONFIRM_WRITERS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 16 {
			return cfg, fmt.Errorf("TATKAL_CONFIRM_WRITERS %q: want 0-16", v)
		}
		cfg.ConfirmWriters = n
	}
	if v := os.Getenv("TATKAL_RECON_MAX_FILE_MB"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 64<<10 {
			return cfg, fmt.Errorf("TATKAL_RECON_MAX_FILE_MB %q: want 1-65536 (megabytes)", v)
		}
		cfg.ReconMaxFileBytes = int64(n) << 20
	}
	if v := os.Getenv("TATKAL_RECON_APPROVAL_RUPEES"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 || n > 10_000_000 {
			return cfg, fmt.Errorf("TATKAL_RECON_APPROVAL_RUPEES %q: want whole rupees, 1-10000000", v)
		}
		cfg.ReconApprovalLimitPaise = n * 100
	}
	if v := os.Getenv("TATKAL_RECON_AT"); v != "" {
		at, err := schedule.ParseClock(v)
		if err != nil {
			return cfg, fmt.Errorf("TATKAL_RECON_AT: %w", err)
		}
		cfg.ReconAt = &at
	}
	if v := os.Getenv("TATKAL_RECON_RERUN_DAYS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 30 {
			return cfg, fmt.Errorf("TATKAL_RECON_RERUN_DAYS %q: want 1-30 (a day with open items is reconciled again daily until T+N; 1: never again)", v)
		}
		cfg.ReconRerunDays = n
	}
	if v := os.Getenv("TATKAL_WATCH_INTERVAL"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 5*time.Second || d > 10*time.Minute {
			return cfg, fmt.Errorf("TATKAL_WATCH_INTERVAL %q: want a duration between 5s and 10m (how often the invariant watch runs)", v)
		}
		cfg.WatchInterval = d
	}
	if cfg.Alarms, err = alarms.ThresholdsFromEnv(os.Getenv); err != nil {
		return cfg, err
	}
	if v := os.Getenv("TATKAL_FRAUD_EARLY_PASSES"); v != "" {
		passes, err := parseEarlyPasses(v)
		if err != nil {
			return cfg, fmt.Errorf("TATKAL_FRAUD_EARLY_PASSES %q: %w", v, err)
		}
		cfg.FraudEarlyPasses = passes
	}
	if v := os.Getenv("TATKAL_MEMORY_LIMIT"); v != "" {
		n, err := ParseBytes(v)
		if err != nil || n < 32<<20 {
			return cfg, fmt.Errorf("TATKAL_MEMORY_LIMIT %q: want a size of at least 32MiB, e.g. 200MiB, 1GiB or a number of bytes", v)
		}
		cfg.MemoryLimit = n
	}
	if v := os.Getenv("TATKAL_MAX_HOLDS_IN_FLIGHT"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return cfg, fmt.Errorf("TATKAL_MAX_HOLDS_IN_FLIGHT %q: want a positive number", v)
		}
		cfg.MaxHoldsInFlight = n
	}
	return cfg, nil
}

// Pool is the pool size: TATKAL_DB_POOL, else the command's default (see
// README: serve and worker 40, dev 20, psp and prs 20), so that a dev stack
// and the test suite fit beside each other in PostgreSQL's 100 connections.
func (c Config) Pool(def int) int32 {
	if c.DBPool > 0 {
		return int32(c.DBPool)
	}
	return int32(def)
}

// SecureCookies says whether browsers reach us over https (behind a
// TLS-terminating proxy the process itself never sees TLS).
func (c Config) SecureCookies() bool { return strings.HasPrefix(c.PublicURL, "https://") }

// Which secrets a command needs.
const (
	NeedGateways = 1 << iota // TATKAL_WEBHOOK_SECRETS and TATKAL_PSP_API_KEYS
	NeedPRSKey
	NeedSessionKey
	NeedMsgKey // TATKAL_MSG_KEY: the messaging gateway's key (senders and tatkal msg)
)

// RequireSecrets refuses to start without the secrets in need, each set
// from the environment and none a known development value, naming every
// missing one and how to make it.
func (c Config) RequireSecrets(need int) error {
	var errs []error
	if need&NeedGateways != 0 {
		switch {
		case len(c.WebhookSecrets) == 0:
			errs = append(errs, fmt.Errorf("%s is not set (gateway=secret,...: the secret each gateway signs its callbacks with); %s", envWebhookSecrets, secrets.Hint))
		case len(c.PSPAPIKeys) == 0:
			errs = append(errs, fmt.Errorf("%s is not set (gateway=key,...: the key we call each gateway with); %s", envPSPAPIKeys, secrets.Hint))
		case !slices.Equal(c.WebhookSecrets.IDs(), c.PSPAPIKeys.IDs()):
			errs = append(errs, fmt.Errorf("%s names gateways %v but %s names %v: each gateway needs both", envWebhookSecrets,
				c.WebhookSecrets.IDs(), envPSPAPIKeys, c.PSPAPIKeys.IDs()))
		}
	}
	if need&NeedPRSKey != 0 {
		if err := secrets.Check(envPRSKey, c.PRSKey); err != nil {
			errs = append(errs, err)
		}
	}
	if need&NeedMsgKey != 0 {
		if err := secrets.Check(EnvMsgKey, c.MsgKey); err != nil {
			errs = append(errs, fmt.Errorf("%w (the key we call the messaging gateway with)", err))
		}
	}
	if need&NeedSessionKey != 0 && len(c.SessionKey) == 0 {
		errs = append(errs, fmt.Errorf("%s is not set (hex, 32+ bytes: signs passenger sessions and admission tokens); %s", EnvSessionKey, secrets.Hint))
	}
	// Every process that books records fraud signals and seals ID numbers.
	if need&NeedSessionKey != 0 {
		if err := secrets.Check(EnvFraudKey, c.FraudKey); err != nil {
			errs = append(errs, fmt.Errorf("%w (keys the hashes of passenger IDs and payment instruments in fraud signals)", err))
		}
		if _, err := pii.Parse(c.IDKeys); err != nil {
			errs = append(errs, err)
		}
	}
	if c.SimAdminToken != "" {
		if err := secrets.Check(EnvSimAdminToken, c.SimAdminToken); err != nil {
			errs = append(errs, err)
		}
	}
	if c.BankToken != "" {
		if err := secrets.Check(EnvBankToken, c.BankToken); err != nil {
			errs = append(errs, fmt.Errorf("%w (the bank statement API's credential)", err))
		}
	}
	if c.KYCKey != "" {
		if err := secrets.Check(EnvKYCKey, c.KYCKey); err != nil {
			errs = append(errs, fmt.Errorf("%w (the identity verifier's key)", err))
		}
	}
	return errors.Join(errs...)
}

// WithDevSecrets fills every secret the environment leaves unset with a
// fresh random one, as tatkal dev does at each start: nothing that works
// against a dev stack works against any other.
func (c Config) WithDevSecrets() Config {
	if len(c.WebhookSecrets) == 0 && len(c.PSPAPIKeys) == 0 {
		c.WebhookSecrets, c.PSPAPIKeys = secrets.PerGateway{}, secrets.PerGateway{}
		for _, g := range pspsim.NewGateways() {
			c.WebhookSecrets[g.ID] = []string{string(g.WebhookSecret)}
			c.PSPAPIKeys[g.ID] = g.APIKeys
		}
	}
	if c.PRSKey == "" {
		c.PRSKey = secrets.Random()
	}
	if c.SimAdminToken == "" {
		c.SimAdminToken = secrets.Random()
	}
	if c.BankToken == "" {
		c.BankToken = secrets.Random()
	}
	if c.FraudKey == "" {
		c.FraudKey = secrets.Random()
	}
	if c.MsgKey == "" {
		c.MsgKey = secrets.Random()
	}
	if c.KYCKey == "" {
		c.KYCKey = secrets.Random()
	}
	if c.IDKeys == "" {
		c.IDKeys = pii.NewSpec("dev1")
	}
	return c
}

// Gateways is the merchant's side: call with the first key, accept a
// callback signed with any secret.
func (c Config) Gateways() []payment.GatewayConfig {
	var out []payment.GatewayConfig
	for _, id := range c.PSPAPIKeys.IDs() {
		g := payment.GatewayConfig{ID: id, BaseURL: c.PSPURL, APIKey: c.PSPAPIKeys[id][0]}
		for _, s := range c.WebhookSecrets[id] {
			g.WebhookSecrets = append(g.WebhookSecrets, []byte(s))
		}
		out = append(out, g)
	}
	return out
}

// SimGateways is the simulator's side: sign with the first secret, accept
// any key.
func (c Config) SimGateways() []pspsim.GatewayConfig {
	var out []pspsim.GatewayConfig
	for _, id := range c.WebhookSecrets.IDs() {
		out = append(out, pspsim.GatewayConfig{ID: id, APIKeys: c.PSPAPIKeys[id], WebhookSecret: []byte(c.WebhookSecrets[id][0])})
	}
	return out
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// Environ is the environment that gives a child process (tatkal serve or
// worker, started by tatkal chaos) this configuration's stores, peers and
// secrets; the rest of the parent's environment is kept before it.
func (c Config) Environ() []string {
	env := append(os.Environ(),
		"DATABASE_URL="+c.DatabaseURL, "REDIS_URL="+c.RedisURL, "TATKAL_REDIS_PREFIX="+c.RedisPrefix,
		"TATKAL_PSP_URL="+c.PSPURL, "TATKAL_PRS_URL="+c.PRSURL, "TATKAL_MSG_URL="+c.MsgURL,
		EnvSessionKey+"="+hex.EncodeToString(c.SessionKey), envPRSKey+"="+c.PRSKey, EnvFraudKey+"="+c.FraudKey, pii.EnvKeys+"="+c.IDKeys,
		EnvMsgKey+"="+c.MsgKey, envPSPAPIKeys+"="+c.PSPAPIKeys.String(), envWebhookSecrets+"="+c.WebhookSecrets.String())
	if c.RedisClusterAddrs != "" {
		env = append(env, "REDIS_CLUSTER_ADDRS="+c.RedisClusterAddrs)
	}
	if c.SimAdminToken != "" {
		env = append(env, EnvSimAdminToken+"="+c.SimAdminToken)
	}
	// A worker's daily reconciliation fetches the bank's statements.
	if c.BankToken != "" {
		env = append(env, EnvBankToken+"="+c.BankToken)
	}
	if c.HoldWindow > 0 {
		env = append(env, "TATKAL_HOLD_WINDOW="+c.HoldWindow.String())
	}
	if c.KYCURL != "" && c.KYCKey != "" {
		env = append(env, "TATKAL_KYC_URL="+c.KYCURL, EnvKYCKey+"="+c.KYCKey)
	}
	return env
}

// parseEarlyPasses reads TATKAL_FRAUD_EARLY_PASSES: "none", or durations
// after a window's opening, comma-separated, each 1m-4h.
func parseEarlyPasses(v string) ([]time.Duration, error) {
	if v == "none" {
		return []time.Duration{}, nil
	}
	var out []time.Duration
	for _, f := range strings.Split(v, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(f))
		if err != nil || d < time.Minute || d > 4*time.Hour {
			return nil, errors.New(`want "none" or durations between 1m and 4h after the opening, comma-separated, e.g. "10m,30m"`)
		}
		out = append(out, d)
	}
	return out, nil
}
