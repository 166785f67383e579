package booking

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/singleflight"

	"tatkal/booking/fraud"
	"tatkal/booking/funnel"
	"tatkal/booking/inventory"
	"tatkal/booking/pii"
)

// Caller is the authenticated account behind a request, as its session
// token states it (no database read on the hot path).
type Caller struct {
	UserID    int64
	Verified  bool
	Agent     bool
	CreatedAt time.Time
	// Device is the device of the request's binding (X-Device-Token),
	// verified by the edge that read it (BoundDevice); "" when the request
	// carries no binding of this account. Every hold needs one.
	Device string
}

// ErrDeviceNotBound refuses a hold from an account that has not bound the
// device it books from: a binding ties the hold to a device the account
// registered (and the device to at most a few accounts), on every shard,
// whether or not it goes through the waiting room.
func ErrDeviceNotBound() error {
	return Errorf(EFORBIDDEN, "DEVICE_NOT_BOUND", "Bind this device to your account before booking: the app sends POST /v1/devices/bind "+
		"with its device_token and then the device_binding it gets back as X-Device-Token; on the website, sign in again.")
}

// Service holds, confirms, cancels and expires seats.
type Service struct {
	// The verbs, each a type of its own over this one state, so that a
	// reader finds holding in Holds, paying for a hold in Settlement and so
	// on; their methods are promoted, so a caller may name the verb
	// (svc.Charts.Chart) or not (svc.Chart).
	Holds      // taking and ending holds (hold.go, holdops.go, refusals.go)
	Settlement // a paid hold becomes a booking (confirm.go, paid.go)
	Lifecycle  // status, cancellation, expiry of holds and bookings (lifecycle.go)
	Waitlist   // promotion of waitlisted bookings (promote.go)
	Charts     // charting a shard and sending the chart (chart.go)
	CoreSync   // keeping the reservation core in step (coresync.go, syncgroup.go)
	Passengers // saved passengers and history (passengers.go)

	pool      *pgxpool.Pool
	store     *inventory.Store
	catalog   *Catalog
	committer *Committer
	jobs      JobInserter
	rules     Rules
	log       *slog.Logger
	now       func() time.Time
	newPNR    func(region int, location string) (string, error) // NewPNR; a test may force collisions
	rebuilds  singleflight.Group
	// background bounds the work started beside a request (rebuilds,
	// holds in doubt); Close ends it and waits for it.
	background context.Context
	stop       context.CancelFunc
	working    sync.WaitGroup
	avail      *availCache
	sweepGrace time.Duration
	core       CoreClient
	funnel     *funnel.Recorder
	levers     Levers
	admission  Admission
	refunds    Refunds
	pause      PauseFunc
	fraud      *fraud.Recorder
	throttle   *Throttle
	refusals   *refusalLog // hold refusals per account, for the user trace (refusals.go)
	ids        *pii.Keyring
}

// Levers are the operator's switches the hold path obeys, read from a
// cache that follows the console within a second (console/levers.Reader).
type Levers interface {
	WaitlistEnabled() bool
	WindowClosesAt(shardID int64) (time.Time, bool)
	ShardMode(shardID int64) (string, bool)
	// The degradation ladder and rules as data (degrade.go).
	NonEssentialEnabled() bool
	AvailabilityStaleness() (time.Duration, bool)
	LightForm(shardID int64) bool
	Rules(base Rules) Rules
}

// Admission is the waiting room as the hold path of a queue-mode shard
// sees it (admission.Service): a token checked by signature alone, and
// single use marked inside the HOLD script's atomic step.
type Admission interface {
	// AdmitHold checks an admission token for this hold. An error wrapping
	// ErrAdmissionExpired means the holder's turn lapsed; any other error
	// is a token that is not good for this caller and shard.
	AdmitHold(check AdmissionCheck) (AdmissionUse, error)
	// UndoUse lets the token be used again after a hold that was not saved.
	UndoUse(ctx context.Context, use AdmissionUse) error
}

// AdmissionCheck is what an admission token is checked against.
type AdmissionCheck struct {
	Token        string
	UserID       int64
	SessionToken string // the raw bearer token of the request
	DeviceToken  string // the raw X-Device-Token header
	ShardID      int64
	Now          time.Time
}

// AdmissionUse is how the HOLD script marks a token used: SET of Key for
// TTL in the same atomic step as the seats, so a token holds once.
type AdmissionUse struct {
	Key     string
	TTL     time.Duration
	TokenID string // recorded on the hold
}

// ErrAdmissionExpired is an admission token whose turn has lapsed.
var ErrAdmissionExpired = errors.New("admission token expired")

// ServiceConfig wires a Service.
type ServiceConfig struct {
	Pool    *pgxpool.Pool
	Store   *inventory.Store
	Jobs    JobInserter
	Rules   Rules
	Log     *slog.Logger
	Now     func() time.Time // nil means time.Now
	Catalog *Catalog         // nil means a catalog caching for 5 s
	Core    CoreClient       // the reservation core confirmed bookings are synced to
	// SweepGrace: see DefaultSweepGrace (zero means it).
	SweepGrace time.Duration
	Funnel     *funnel.Recorder // nil: count nothing
	Levers     Levers           // nil: no operator overrides
	// Admission lets queue-mode shards take holds; nil refuses them all.
	Admission Admission
	// Refunds records the refunds a cancellation or a core rejection owes
	// (payment.NewRefunds).
	Refunds Refunds
	// Pause is a test hook between the steps of a path; nil in production.
	Pause PauseFunc
	// Fraud records each hold's signals in its group commit and the
	// payment instrument at confirmation, and keys the passenger limit
	// across accounts; nil records nothing and skips that limit.
	Fraud *fraud.Recorder
	// SoldOutRecheck bounds how long a sold-out shard is answered from
	// memory after a seat comes back (inventory.SoldOutCache); zero means
	// inventory.DefaultSoldOutRecheck, negative turns the cache off.
	SoldOutRecheck time.Duration
	// Throttle paces hold calls by the shard_throttle lever (NewThrottle);
	// nil paces nothing.
	Throttle *Throttle
	// IDs seals passengers' ID numbers before they are stored (idref.go);
	// nil refuses every hold and saved passenger that carries one.
	IDs *pii.Keyring
}

// NewService returns a service. Run its committer with RunCommitter.
func NewService(cfg ServiceConfig) *Service {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Catalog == nil {
		cfg.Catalog = NewCatalog(cfg.Pool, 5*time.Second)
	}
	background, stop := context.WithCancel(context.Background())
	committer := NewCommitter(cfg.Pool, cfg.Jobs, cfg.Rules, cfg.Fraud, cfg.Log)
	committer.pause = cfg.Pause
	if cfg.Store != nil {
		// The cache lives on the store, whose scripts that give seats back
		// drop its views; configured here with the service's bound and hooks.
		var soldOut *inventory.SoldOutCache
		if cfg.SoldOutRecheck >= 0 {
			soldOut = inventory.NewSoldOutCache(cfg.Store, inventory.SoldOutConfig{Recheck: cfg.SoldOutRecheck, Pause: cfg.Pause})
		}
		cfg.Store.SetSoldOut(soldOut)
	}
	s := &Service{
		background: background,
		stop:       stop,
		pool:       cfg.Pool,
		store:      cfg.Store,
		catalog:    cfg.Catalog,
		committer:  committer,
		jobs:       cfg.Jobs,
		rules:      cfg.Rules,
		log:        cfg.Log,
		now:        cfg.Now,
		avail:      newAvailCache(time.Second),
		sweepGrace: cmp.Or(cfg.SweepGrace, DefaultSweepGrace),
		core:       cfg.Core,
		funnel:     cfg.Funnel,
		levers:     cfg.Levers,
		admission:  cfg.Admission,
		refunds:    cfg.Refunds,
		pause:      cfg.Pause,
		fraud:      cfg.Fraud,
		throttle:   cfg.Throttle,
		ids:        cfg.IDs,
		newPNR:     NewPNR,
	}
	s.Holds, s.Settlement, s.Lifecycle, s.Waitlist = Holds{s}, Settlement{s}, Lifecycle{s}, Waitlist{s}
	s.Charts, s.CoreSync, s.Passengers = Charts{s}, CoreSync{s}, Passengers{s}
	committer.live = s.Rules // the caps in PostgreSQL follow the rule lever as Redis's do
	s.startRefusalLog()
	return s
}

// Close stops the work started in the background and waits for it; the
// process calls it before closing Redis and the pool.
func (s *Service) Close() {
	s.stop()
	s.working.Wait()
}

// RunCommitter runs the group-commit writers until ctx ends.
func (s *Service) RunCommitter(ctx context.Context, writers int) { s.committer.Run(ctx, writers) }

// Catalog returns the shard catalog.
func (s *Service) Catalog() *Catalog { return s.catalog }

// Store returns the Redis seat owner.
func (s *Service) Store() *inventory.Store { return s.store }

// validIdemKey: 8-128 characters of letters, digits and :._- (a loop,
// not a regexp: it runs on every hold, sold-out ones included).
func validIdemKey(k string) bool {
	if len(k) < 8 || len(k) > 128 {
		return false
	}
	for i := range len(k) {
		switch c := k[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == ':', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// Funnel returns the funnel recorder (nil when counting is off).
func (s *Service) Funnel() *funnel.Recorder { return s.funnel }

// holdRequestHash fingerprints what a hold asks for (the shard, the
// journey, the passengers), so its Idempotency-Key cannot be replayed for
// another request; the tokens it carries may change between retries.
func holdRequestHash(shard *Shard, from, to int, pax []Passenger) string {
	b, _ := json.Marshal(struct {
		Shard int64       `json:"s"`
		From  int         `json:"f"`
		To    int         `json:"t"`
		Pax   []Passenger `json:"p"`
	}{shard.ID, from, to, pax})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

func errHoldKeyReused() error {
	return Errorf(ECONFLICT, ReasonKeyReused, "This Idempotency-Key was already used for a different hold request. Send a new key for a new hold.")
}

// CheckAccountAge refuses an account younger than rules.MinAccountAge
// (ACCOUNT_TOO_NEW, saying from when it may book); the hold and the
// waiting room's entry both apply it.
func CheckAccountAge(created, now time.Time, rules Rules) error {
	if rules.MinAccountAge <= 0 || now.Sub(created) >= rules.MinAccountAge {
		return nil
	}
	return Errorf(EFORBIDDEN, "ACCOUNT_TOO_NEW", "Accounts opened less than %s ago cannot book Tatkal tickets yet; yours can from %s IST.",
		ageWords(rules.MinAccountAge), created.Add(rules.MinAccountAge).In(IST).Format("15:04 on 2 Jan"))
}

func ageWords(d time.Duration) string {
	if h := int(d.Hours()); h%24 == 0 {
		return fmt.Sprintf("%d days", h/24)
	}
	return fmt.Sprintf("%d hours", int(d.Hours()))
}

// openingDay is the calendar day (IST) of the shard's window, the day the
// per-account cap counts.
func openingDay(s *Shard) time.Time {
	t := s.OpensAt.In(IST)
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}

func berthInfo(s *Shard, idx int) BerthInfo {
	if idx < 0 || idx >= len(s.Berths) {
		return BerthInfo{}
	}
	b := s.Berths[idx]
	return BerthInfo{Coach: b.Coach, BerthNo: b.No, Type: b.Type}
}

// errAttemptLost is replay's answer for a key whose attempt will never be
// durable and which it has forgotten.
var errAttemptLost = errors.New("the earlier attempt was lost before its commit")

// TriggerRebuild rebuilds a shard's Redis state in the background, once per
// process at a time, if it is missing or behind PostgreSQL's epoch. Nothing
// depends on it finishing: holds keep being refused until it does, and the
// sweeper triggers it again if it fails.
func (s *Service) TriggerRebuild(shardID int64) {
	if s.background.Err() != nil {
		return // closed
	}
	s.working.Go(func() {
		s.rebuilds.Do(fmt.Sprint(shardID), func() (any, error) { //nolint:errcheck
			ctx, cancel := context.WithTimeout(s.background, 30*time.Second)
			defer cancel()
			_, err := s.RebuildIfNeeded(ctx, shardID)
			return nil, err
		})
	})
}

// rebuildSettle is how long a shard behind PostgreSQL's epoch is given
// before it counts as stuck: a rebuild loads right after its epoch bump
// commits, so one in progress elsewhere lands well within it.
const rebuildSettle = time.Second

// RebuildIfNeeded rebuilds the shard when its Redis state is missing, or
// still behind PostgreSQL's epoch after rebuildSettle (a rebuild that bumped
// the epoch and failed to load, or died), or the last rebuild failed. It
// answers whether it rebuilt.
func (s *Service) RebuildIfNeeded(ctx context.Context, shardID int64) (bool, error) {
	for attempt := 0; ; attempt++ {
		ready, redisEpoch, err := s.store.Ready(ctx, shardID)
		if err != nil {
			return false, err
		}
		var epoch int64
		var failed bool
		if err := s.pool.QueryRow(ctx, `SELECT epoch, rebuild_failed_at IS NOT NULL FROM inventory_shards WHERE id = $1`,
			shardID).Scan(&epoch, &failed); err != nil {
			return false, fmt.Errorf("shard %d epoch: %w", shardID, err)
		}
		switch {
		case ready && redisEpoch == epoch && !failed:
			return false, nil
		case ready && redisEpoch != epoch && !failed && attempt == 0:
			select {
			case <-ctx.Done():
				return false, ctx.Err()
			case <-time.After(rebuildSettle):
			}
			continue
		}
		epoch, err = s.Rebuild(ctx, shardID)
		if err != nil {
			s.log.Error("rebuild failed", "shard", shardID, "err", err)
			return false, err
		}
		s.log.Info("rebuilt shard from PostgreSQL", "shard", shardID, "epoch", epoch)
		return true, nil
	}
}

// Rebuild reloads a shard now, under a new epoch.
func (s *Service) Rebuild(ctx context.Context, shardID int64) (int64, error) {
	return inventory.Rebuild(ctx, s.pool, s.store, shardID)
}
