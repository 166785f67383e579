package admission

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"tatkal/booking"
	"tatkal/booking/admission/token"
	"tatkal/booking/funnel"
	"tatkal/booking/inventory"
)

//go:embed lua/*.lua
var luaFS embed.FS

// script is lua/name.lua with lua/common.lua's helpers before it.
func script(name string) *redis.Script {
	common, err := luaFS.ReadFile("lua/common.lua")
	if err != nil {
		panic(err)
	}
	b, err := luaFS.ReadFile("lua/" + name + ".lua")
	if err != nil {
		panic(err)
	}
	return redis.NewScript(string(common) + "\n" + string(b))
}

// Levers are the operator's admission switches (console/levers.Reader).
type Levers interface {
	AdmissionPaused(shardID int64) bool
	AdmissionRate(shardID int64) (int, bool)
	// PollSlowdown multiplies a waiter's poll_after_ms (1: as computed).
	PollSlowdown(shardID int64) int
	// Rules is base under the operators' rule changes (the agent bar).
	Rules(base booking.Rules) booking.Rules
}

// Config wires the waiting room. Zero durations and limits take defaults.
type Config struct {
	Pool    *pgxpool.Pool
	Redis   redis.UniversalClient
	Prefix  string
	Store   *inventory.Store
	Catalog *booking.Catalog
	Funnel  *funnel.Recorder
	Levers  Levers // nil: no operator overrides
	Rules   booking.Rules
	// Secret is the master secret the signing keys are derived from (the
	// session key); ExtraKeys, when set, replace the derived admission keys
	// (first signs, all verify) for rotation.
	Secret    []byte
	ExtraKeys []token.Key
	Log       *slog.Logger
	Now       func() time.Time

	Prequeue  time.Duration // the queue opens this long before the window (15m)
	Randomise time.Duration // entrants until opening + this get a random place (10s)
	// Reopen is how long the draw reopens when the queue was lost before
	// its seal (30s): everyone who joins again in it gets the place the
	// seed gives them, the same as before for those who had one.
	Reopen time.Duration
	// OfferTTL is an admission offer's pick-up window, from when it is made
	// (60s): the admitted must fetch their token (claim it) by then.
	OfferTTL time.Duration
	// TokenTTL is how long a claimed permit (the admission token) lives
	// from its claim (120s).
	TokenTTL time.Duration
	// Allowance caps the no-show allowance: a shard never has more
	// outstanding offers than places left plus an allowance sized from the
	// no-show rate measured so far (0 until offers lapse), at most this.
	Allowance int
	// PollMin and PollMax bound poll_after_ms (1s, 15s): a waiter near the
	// admission cursor polls every PollMin, so it learns of its admission
	// within about that long.
	PollMin, PollMax time.Duration
	// Rate limits per second. Queue calls (signed in, device bound) count
	// per account and per device only: a NAT's neighbours never share a
	// budget. LimitIP is for unauthenticated requests only, per source
	// address, sized so a NAT of thousands of honest users stays under it
	// (see the package doc: pacing).
	LimitIP, LimitDevice, LimitAccount int
	// MaxInFlight queue requests per process; beyond it the static
	// high-demand answer is given.
	MaxInFlight int
	// AccountsPerDevice bounds distinct accounts bound to one device.
	AccountsPerDevice int
	// ChallengeBits is the proof-of-work difficulty for attested clients;
	// others get ChallengeBits+RiskyExtraBits.
	ChallengeBits, RiskyExtraBits int
	// FlaggedExtraBits are added for accounts a fraud decision gave harder
	// challenges (users.risk_score >= 1, the graduated response short of a
	// ban): 4, each bit doubling the expected work.
	FlaggedExtraBits int
	// IdentityKey keys the hash of the phone number an OTP verifies
	// (users.phone_hash), the same key as the fraud signals'
	// (TATKAL_FRAUD_KEY): the per-person cap counts the verified accounts
	// of one phone. Empty: verification records no phone.
	IdentityKey []byte

	// Jobs inserts the window's fairness job in the transaction that seals
	// it (nil: no job; the figures are computed when asked for).
	Jobs JobInserter
	// FairnessAfter is how long after the seal the fairness figures are
	// computed: offers, holds and payments have played out by then (10m).
	FairnessAfter time.Duration

	// anyPlaces lets the controller admit at its rate whatever the places
	// left: for tests of order and leadership only.
	anyPlaces bool
	// VerifyPlatform checks a device's platform integrity evidence (Play
	// Integrity, App Attest) at device binding; only evidence it accepts
	// earns an attestation. nil: no evidence is accepted, every client gets
	// the harder challenge.
	VerifyPlatform func(ctx context.Context, userID int64, deviceID, evidence string) (bool, error)
}

func (c *Config) defaults() {
	if c.FairnessAfter <= 0 {
		c.FairnessAfter = 10 * time.Minute
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Prequeue <= 0 {
		c.Prequeue = 15 * time.Minute
	}
	if c.Randomise <= 0 {
		c.Randomise = 10 * time.Second
	}
	if c.Reopen <= 0 {
		c.Reopen = 30 * time.Second
	}
	if c.OfferTTL <= 0 {
		c.OfferTTL = 60 * time.Second
	}
	if c.TokenTTL <= 0 {
		c.TokenTTL = 120 * time.Second
	}
	if c.Allowance <= 0 {
		c.Allowance = 10
	}
	if c.PollMin <= 0 {
		c.PollMin = time.Second
	}
	if c.PollMax < c.PollMin {
		c.PollMax = max(15*time.Second, c.PollMin)
	}
	if c.LimitIP <= 0 {
		c.LimitIP = DefaultLimitIP
	}
	if c.LimitDevice <= 0 {
		c.LimitDevice = 5
	}
	if c.LimitAccount <= 0 {
		c.LimitAccount = 5
	}
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = 4096
	}
	if c.AccountsPerDevice <= 0 {
		c.AccountsPerDevice = 2
	}
	if c.ChallengeBits <= 0 {
		c.ChallengeBits = 14
	}
	if c.RiskyExtraBits <= 0 {
		c.RiskyExtraBits = 6
	}
	if c.FlaggedExtraBits <= 0 {
		c.FlaggedExtraBits = 4
	}
	if c.Rules.AgentBar == 0 {
		c.Rules = booking.DefaultRules()
	}
}

// Service is the waiting room of one process.
type Service struct {
	cfg       Config
	pool      *pgxpool.Pool
	rdb       redis.UniversalClient
	keys      *token.Keyring // admission tokens
	devices   *token.Keyring // device bindings
	chKeys    *token.Keyring // challenges
	attest    *token.Keyring // device attestations
	ticketKey []byte
	otpKey    []byte
	verifier  *token.Verifier
	log       *slog.Logger
	now       func() time.Time

	enter, status, admit, lease, unlease, maxset, rebuild *redis.Script

	windows    sync.Map // shard id -> *Window
	windowRead booking.Flight[int64, *Window]
	polls      pollCache
	gate       chan struct{}

	// EarlyPolls counts status polls that came before the time the server
	// gave; they got the cached answer.
	EarlyPolls atomic.Int64
}

// New returns the waiting room.
func New(cfg Config) (*Service, error) {
	cfg.defaults()
	if len(cfg.Secret) < 32 {
		return nil, fmt.Errorf("admission: secret shorter than 32 bytes")
	}
	keys := cfg.ExtraKeys
	if len(keys) == 0 {
		keys = []token.Key{{ID: "k1", Secret: token.Derive(cfg.Secret, "admission/k1")}}
	}
	ring, err := token.NewKeyring(keys...)
	if err != nil {
		return nil, err
	}
	dev, _ := token.NewKeyring(token.Key{ID: "d1", Secret: token.Derive(cfg.Secret, "device/d1")})
	ch, _ := token.NewKeyring(token.Key{ID: "c1", Secret: token.Derive(cfg.Secret, "challenge/c1")})
	att, _ := token.NewKeyring(token.Key{ID: "a1", Secret: token.Derive(cfg.Secret, "attestation/a1")})
	s := &Service{
		cfg: cfg, pool: cfg.Pool, rdb: cfg.Redis, keys: ring, devices: dev, chKeys: ch, attest: att,
		ticketKey: token.Derive(cfg.Secret, "ticket"), otpKey: token.Derive(cfg.Secret, "otp"),
		verifier: token.NewVerifier(ring, dev), log: cfg.Log, now: cfg.Now,
		enter: script("enter"), status: script("status"), admit: script("admit"),
		lease: script("lease"), unlease: script("unlease"), maxset: script("maxset"), rebuild: script("rebuild"),
		gate: make(chan struct{}, cfg.MaxInFlight),
	}
	s.polls.init()
	return s, nil
}

// Verifier checks admission tokens by signature; give it to the hold path.
func (s *Service) Verifier() *token.Verifier { return s.verifier }

// Keyring is the admission token keyring (tests forge and rotate with it).
func (s *Service) Keyring() *token.Keyring { return s.keys }

// AttestationKeys is the device attestation keyring (tests issue with it).
func (s *Service) AttestationKeys() *token.Keyring { return s.attest }

// DeviceKeys is the device binding keyring.
func (s *Service) DeviceKeys() *token.Keyring { return s.devices }

// Config returns the configuration in force.
func (s *Service) Config() Config { return s.cfg }

// Ticket is userID's ticket in shard's queue.
func (s *Service) Ticket(shardID, userID int64) string {
	return token.Ticket(s.ticketKey, shardID, userID)
}

// Keys of one shard's queue share the hash tag {q<id>}.
func (s *Service) qkey(shardID int64, name string) string {
	return s.cfg.Prefix + ":{q" + strconv.FormatInt(shardID, 10) + "}:" + name
}

// queueKeys: z (the order), m (meta), ba (admission batches by count), bt
// (batch counts by time), cl (claim times of offers by member).
func (s *Service) queueKeys(shardID int64) []string {
	return []string{s.qkey(shardID, "z"), s.qkey(shardID, "m"), s.qkey(shardID, "ba"), s.qkey(shardID, "bt"), s.qkey(shardID, "cl")}
}

// highDemand is the one answer for overload, rate limits and suspected
// bots alike: nobody can tell them apart from outside.
func highDemand() error { return booking.HighDemand() }

// IsHighDemand reports whether err is the uniform high-demand answer.
func IsHighDemand(err error) bool { return booking.IsHighDemand(err) }

// Acquire takes a slot of the queue tier; false means answer with the
// static high-demand response at once. Call release when done.
func (s *Service) Acquire() (release func(), ok bool) {
	select {
	case s.gate <- struct{}{}:
		return func() { <-s.gate }, true
	default:
		return nil, false
	}
}

// Caller is an authenticated request to the waiting room.
type Caller struct {
	UserID       int64
	Verified     bool
	Agent        bool
	CreatedAt    time.Time
	SessionToken string // the bearer token
	DeviceToken  string // X-Device-Token: a device binding
	IP           string
	// Attestation is X-Client-Attestation: counts only if this server
	// issued it for this account and device (see BindDevice).
	Attestation string
}

// Consume marks an admission token used with SET NX on token.UsedKey, the
// key the HOLD script marks in its atomic step; true means this call used
// it. For paths outside the hold script (and the single-use tests).
func (s *Service) Consume(ctx context.Context, c token.Claims) (bool, error) {
	ok, err := s.rdb.SetNX(ctx, token.UsedKey(s.cfg.Prefix, c), "1", token.UsedTTL(c, s.now())).Result()
	if err != nil {
		return false, fmt.Errorf("consume admission token: %w", err)
	}
	return ok, nil
}

// Depth reports how many wait in a shard's queue and how many have been
// admitted from it, for the console.
func (s *Service) Depth(ctx context.Context, shardID int64) (waiting, admitted int64, err error) {
	pipe := s.cfg.Redis.Pipeline()
	card := pipe.ZCard(ctx, s.qkey(shardID, "z"))
	adm := pipe.HGet(ctx, s.qkey(shardID, "m"), "admitted")
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return 0, 0, fmt.Errorf("queue depth shard %d: %w", shardID, err)
	}
	admitted, _ = adm.Int64()
	return max(card.Val()-admitted, 0), admitted, nil
}

var _ booking.Admission = (*Service)(nil)

// AdmitHold checks an admission token for a hold by signature alone (no
// backend call) and names the mark the HOLD script sets to use it once:
// booking.Admission.
func (s *Service) AdmitHold(check booking.AdmissionCheck) (booking.AdmissionUse, error) {
	cl, err := s.verifier.Verify(check.Token, token.SessionInfo{UserID: check.UserID, SessionToken: check.SessionToken,
		DeviceToken: check.DeviceToken}, token.Intent{ShardID: check.ShardID}, check.Now)
	switch {
	case errors.Is(err, token.ErrExpired):
		return booking.AdmissionUse{}, fmt.Errorf("%w: %w", booking.ErrAdmissionExpired, err)
	case err != nil:
		return booking.AdmissionUse{}, err
	}
	return booking.AdmissionUse{Key: token.UsedKey(s.cfg.Prefix, cl), TTL: token.UsedTTL(cl, check.Now), TokenID: cl.TokenID}, nil
}

// UndoUse frees a token's use mark after a hold that was not saved.
func (s *Service) UndoUse(ctx context.Context, use booking.AdmissionUse) error {
	if err := s.rdb.Del(ctx, use.Key).Err(); err != nil {
		return fmt.Errorf("undo admission token use: %w", err)
	}
	return nil
}
