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

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/singleflight"

	"tatkal/booking/db"
	"tatkal/booking/fraud"
	"tatkal/booking/funnel"
	"tatkal/booking/inventory"
	"tatkal/booking/metrics"
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
	Holds      // taking and ending holds (service.go's hold path, holdops.go, refusals.go)
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

// Hold decides one attempt to take seats. HELD and WAITLIST_OFFERED are
// answered only once the hold is durable in PostgreSQL.
func (s Holds) Hold(ctx context.Context, c Caller, req HoldRequest) (HoldResult, error) {
	start := time.Now()
	s.pause.At(ctx, "hold.begin")
	res, shardID, err := s.hold(ctx, c, req)
	if IsThrottled(err) {
		// Turned away at the door: origin traffic, not core load, so it is
		// neither a hold attempt nor a refusal (whose rate and latency the
		// adaptive admission rate follows), but shed on its shard.
		s.funnel.Add(shardID, funnel.Shed, 1)
		s.noteRefusal(c.UserID, shardID, ReasonThrottled, ErrorMessage(err))
		metrics.Hold.WithLabelValues("throttled").Observe(time.Since(start).Seconds())
		return res, err
	}
	s.funnel.Add(shardID, funnel.HoldAttempt, 1)
	outcome := "other"
	switch {
	case err != nil:
		s.funnel.Add(shardID, funnel.HoldRefused, 1)
		s.noteRefusal(c.UserID, shardID, cmp.Or(ErrorReason(err), string(ErrorCode(err))), ErrorMessage(err))
		outcome = "refused"
	case res.Replayed:
		outcome = "replayed"
	case res.Status == "HELD":
		s.funnel.Add(shardID, funnel.Held, 1)
		outcome = "held"
	case res.Status == "WAITLIST_OFFERED":
		s.funnel.Add(shardID, funnel.Waitlisted, 1)
		outcome = "waitlisted"
	case res.Status == "SOLD_OUT":
		s.funnel.Add(shardID, funnel.SoldOut, 1)
		s.noteRefusal(c.UserID, shardID, "SOLD_OUT", "No berths left for the journey asked.")
		outcome = "sold_out"
	}
	took := time.Since(start)
	s.funnel.Observe(funnel.HoldAttempt, took)
	metrics.Hold.WithLabelValues(outcome).Observe(took.Seconds())
	return res, err
}

// Funnel returns the funnel recorder (nil when counting is off).
func (s *Service) Funnel() *funnel.Recorder { return s.funnel }

func (s Holds) hold(ctx context.Context, c Caller, req HoldRequest) (HoldResult, int64, error) {
	var shardID int64
	if !validIdemKey(req.IdempotencyKey) {
		return HoldResult{}, 0, Errorf(EINVALID, "BAD_IDEMPOTENCY_KEY", "The Idempotency-Key header must be 8-128 characters of letters, digits and :._-")
	}
	if req.Quota == "" {
		req.Quota = "TQ"
	}
	shard, err := s.catalog.Find(ctx, req.Train, req.Date, req.Class, req.Quota)
	if err != nil {
		return HoldResult{}, 0, err
	}
	shardID = shard.ID
	from, okFrom := shard.StopSeq(req.From)
	to, okTo := shard.StopSeq(req.To)
	switch {
	case !okFrom:
		return HoldResult{}, shardID, Errorf(EINVALID, "BAD_STATION", "Train %s does not stop at %q.", shard.Train, req.From)
	case !okTo:
		return HoldResult{}, shardID, Errorf(EINVALID, "BAD_STATION", "Train %s does not stop at %q.", shard.Train, req.To)
	case from >= to:
		return HoldResult{}, shardID, Errorf(EINVALID, "BAD_JOURNEY", "%s comes before %s on train %s; check the direction of travel.", req.To, req.From, shard.Train)
	}
	now := s.now()
	rules := s.Rules() // one view of the rules for the whole attempt
	if err := s.checkWindow(shard, c, now, rules); err != nil {
		return HoldResult{}, shardID, err
	}
	if c.Device == "" {
		return HoldResult{}, shardID, ErrDeviceNotBound()
	}
	var use AdmissionUse
	mode := shard.Mode
	if s.levers != nil {
		if m, ok := s.levers.ShardMode(shard.ID); ok {
			mode = m // the operator's switch, ahead of the catalog's cache
		}
	}
	if mode == "queue" {
		if s.admission == nil || req.AdmissionToken == "" {
			return HoldResult{}, shardID, Errorf(EFORBIDDEN, "ADMISSION_REQUIRED", "Tatkal booking for this train goes through the waiting room; join the queue first.")
		}
		// The signature alone decides here (no backend call); single use is
		// marked inside the HOLD script's atomic step.
		use, err = s.admission.AdmitHold(AdmissionCheck{Token: req.AdmissionToken, UserID: c.UserID, SessionToken: req.SessionToken,
			DeviceToken: req.DeviceToken, ShardID: shard.ID, Now: now})
		switch {
		case errors.Is(err, ErrAdmissionExpired):
			return HoldResult{}, shardID, Errorf(EFORBIDDEN, "ADMISSION_EXPIRED", "Your turn to book has lapsed; check your place in the queue.")
		case err != nil:
			// A bad token looks exactly like a capacity refusal.
			return HoldResult{}, shardID, HighDemand()
		}
	}
	prefs, idOK, err := ValidatePassengers(shard.Class, req.Passengers, rules)
	if err != nil {
		return HoldResult{}, shardID, err
	}
	if req.Check != nil {
		if err := req.Check(ctx); err != nil {
			return HoldResult{}, shardID, err
		}
	}
	// The passengers as the hold row keeps them, ID numbers sealed: here,
	// on the request's goroutine, not in the committer's one writer.
	stored, err := s.storedPassengers(req.Passengers)
	if err != nil {
		return HoldResult{}, shardID, err
	}
	// The operator's pace for this shard, before any seat work (the
	// sold-out answer included, as that too is the core's); the checks
	// above cost no backend call, so a malformed request spends no slot,
	// nor does the repeat of an attempt already decided.
	if err := s.throttle.AdmitHold(ctx, shard.ID, c.UserID, req.IdempotencyKey); err != nil {
		return HoldResult{}, shardID, err
	}
	ireq := inventory.HoldRequest{
		ShardID: shard.ID, UserID: c.UserID, IdemKey: req.IdempotencyKey,
		From: from, To: to, DailyCap: rules.DailyCap, Prefs: prefs, IDOK: idOK,
		TokenKey: use.Key, TokenTTL: use.TTL,
		AllowWaitlist: rules.Waitlist && shard.WaitlistCap > 0 && (s.levers == nil || s.levers.WaitlistEnabled()), IdemTTL: rules.IdemTTL, MaxPassengers: rules.MaxPassengers,
	}
	// A sold-out shard answers from memory what the script would; every
	// check above ran as for any attempt (see inventory.SoldOutCache).
	if s.store.SoldOut().SoldOut(ctx, ireq) {
		return HoldResult{Status: string(inventory.SoldOut)}, shardID, nil
	}
	fare := ComputeFare(shard.Fare, shard.Superfast, shard.Stops[to].Km-shard.Stops[from].Km, len(req.Passengers))
	holdID, err := uuid.NewV7()
	if err != nil {
		return HoldResult{}, shardID, fmt.Errorf("hold id: %w", err)
	}
	expires := now.Add(rules.HoldWindow).Truncate(time.Millisecond)
	reqHash := holdRequestHash(shard, from, to, s.hashablePassengers(req.Passengers))
	ireq.HoldID, ireq.RequestHash, ireq.ExpiresAt = holdID.String(), reqHash, expires
	hold := func() (inventory.HoldResult, error) { return s.store.Hold(ctx, ireq) }
	res, err := hold()
	if err == nil && res.Replayed && res.Outcome != inventory.SoldOut {
		// A key whose attempt was lost (never durable, its seats freed by
		// the sweeper) is forgotten by replay: this request is then the
		// fresh attempt the retry meant.
		var out HoldResult
		if out, err = s.replay(ctx, c.UserID, shard, res, req.IdempotencyKey, use.Key); !errors.Is(err, errAttemptLost) {
			return out, shardID, err
		}
		s.log.Warn("hold: a retry's earlier attempt was lost before its commit; holding afresh", "shard", shard.Key(), "lost", res.HoldID)
		res, err = hold()
	}
	if err != nil {
		s.log.Error("hold script failed", "shard", shard.Key(), "err", err)
		return HoldResult{}, shardID, Errorf(EUNAVAIL, ReasonSeatsUnreachable, "The seat service is not reachable right now. Nothing was held; please retry.")
	}
	switch res.Outcome {
	case inventory.NotReady:
		s.TriggerRebuild(shard.ID)
		return HoldResult{}, shardID, Errorf(EUNAVAIL, "SHARD_REBUILDING", "Seats for this train are being recounted. Nothing was held; please retry in a moment.")
	case inventory.TokenUsed:
		return HoldResult{}, shardID, HighDemand()
	case inventory.KeyReused:
		return HoldResult{}, shardID, errHoldKeyReused()
	case inventory.HoldExists: // a fresh UUIDv7 never collides; refuse rather than guess
		return HoldResult{}, shardID, Errorf(EUNAVAIL, "NOT_SAVED", "Your hold could not be saved. Nothing was held; please retry.")
	case inventory.LiveHold:
		return HoldResult{}, shardID, Errorf(ELIMIT, "LIVE_HOLD_EXISTS", "You already have seats held (hold %s). Pay for them or cancel them before holding more.", res.HoldID)
	case inventory.DailyCap:
		return HoldResult{}, shardID, Errorf(ELIMIT, "DAILY_CAP", "You have reached today's limit of %d Tatkal tickets.", rules.DailyCap)
	case inventory.BadPassengers, inventory.NoID, inventory.BadJourney:
		return HoldResult{}, shardID, Errorf(EINVALID, string(res.Outcome), "The request breaks a booking rule (%s).", res.Outcome)
	}
	if res.Replayed {
		out, err := s.replay(ctx, c.UserID, shard, res, req.IdempotencyKey, use.Key)
		if errors.Is(err, errAttemptLost) {
			err = Errorf(EUNAVAIL, "IN_PROGRESS", "An earlier request with this Idempotency-Key is still being processed; retry shortly.")
		}
		return out, shardID, err
	}
	if res.Outcome == inventory.SoldOut {
		s.store.SoldOut().Prime(ctx, shard.ID)
		return HoldResult{Status: string(inventory.SoldOut)}, shardID, nil
	}

	kind := KindSeat
	if res.Outcome == inventory.WaitlistOffered {
		kind = KindWaitlist
	}
	row := holdRow{
		ID: holdID, ShardID: shard.ID, UserID: c.UserID, IdemKey: req.IdempotencyKey, RequestHash: reqHash, Kind: kind,
		From: from, To: to, Berths: res.Berths, WaitlistNo: res.WaitlistNo, Passengers: req.Passengers,
		Fare: fare, Epoch: res.Epoch, OpeningDay: openingDay(shard), ExpiresAt: expires, TokenID: use.TokenID,
		HeldAt: now, Client: req.Client, Stored: stored,
	}
	cr := s.committer.Submit(ctx, row)
	undo := func(ctx context.Context) {
		// Not durable: take the seats back as if the attempt never happened.
		if _, err := s.store.Release(ctx, shard.ID, holdID.String(), inventory.ReleaseUndo, c.UserID, req.IdempotencyKey); err != nil {
			s.log.Error("undo hold failed; the sweeper will free it at expiry", "hold", holdID, "err", err)
		}
		if use.Key != "" {
			// Nothing was held, so the admission token may be used again.
			if err := s.admission.UndoUse(ctx, use); err != nil {
				s.log.Error("admission token stays used after a hold that was not saved", "hold", holdID, "err", err)
			}
		}
	}
	switch {
	case (cr.err != nil && !cr.unknown) || (cr.err == nil && cr.verdict != committed):
		undo(context.WithoutCancel(ctx))
	case cr.err != nil:
		s.settleUnknown(holdID, cr.tx, expires, undo)
	}
	switch {
	case cr.err != nil:
		s.log.Error("hold not durable", "hold", holdID, "err", cr.err)
		return HoldResult{}, shardID, Errorf(EUNAVAIL, "NOT_SAVED", "Your hold could not be saved. Nothing was held; please retry.")
	case cr.verdict == rejectedChanged:
		// The account's holds kept changing under every try (Submit's).
		s.log.Warn("hold not saved: the account's holds changed under each try", "hold", holdID)
		return HoldResult{}, shardID, Errorf(EUNAVAIL, "NOT_SAVED", "Your hold could not be saved. Nothing was held; please retry.")
	case cr.verdict == rejectedKeyReused:
		return HoldResult{}, shardID, errHoldKeyReused()
	case cr.verdict == rejectedDuplicate:
		out, err := s.answerFromRecord(ctx, c.UserID, cr.existing)
		return out, shardID, err
	case cr.verdict == rejectedLiveHold:
		return HoldResult{}, shardID, Errorf(ELIMIT, "LIVE_HOLD_EXISTS", "You already have seats held (hold %s). Pay for them or cancel them before holding more.", cr.existing)
	case cr.verdict == rejectedDailyCap:
		return HoldResult{}, shardID, Errorf(ELIMIT, "DAILY_CAP", "You have reached today's limit of %d Tatkal tickets.", rules.DailyCap)
	case cr.verdict == rejectedMonthlyCap:
		return HoldResult{}, shardID, Errorf(ELIMIT, "MONTHLY_CAP", "You have reached this month's limit of Tatkal tickets (%d, or %d for an identity-verified account).",
			rules.MonthlyCap, rules.MonthlyCapVerified)
	case cr.verdict == rejectedBanned:
		return HoldResult{}, shardID, Errorf(EFORBIDDEN, "ACCOUNT_SUSPENDED", "This account may not book Tatkal tickets after a review of its bookings. You can appeal (POST /v1/fraud/appeals).")
	case cr.verdict == rejectedPassenger:
		// A suspected resale looks exactly like a capacity refusal.
		return HoldResult{}, shardID, HighDemand()
	case cr.verdict == rejectedCharted:
		return HoldResult{}, shardID, Errorf(ECONFLICT, "WINDOW_CLOSED", "Tatkal booking for train %s on %s is closed: its chart is prepared.",
			shard.Train, shard.Date.Format(time.DateOnly))
	case cr.verdict == rejectedStaleEpoch:
		// Redis answered under an epoch PostgreSQL has left: a rebuild is
		// loading, or one failed after its epoch bump and every hold will be
		// refused until another succeeds.
		s.TriggerRebuild(shard.ID)
		return HoldResult{}, shardID, Errorf(EUNAVAIL, "SHARD_REBUILDING", "Seats for this train were just recounted. Nothing was held; please retry.")
	}
	out := HoldResult{HoldID: holdID, Status: string(res.Outcome), ExpiresAt: expires, WaitlistNo: res.WaitlistNo, Fare: fare}
	for _, b := range res.Berths {
		out.Berths = append(out.Berths, berthInfo(shard, b))
	}
	return out, shardID, nil
}

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

// checkWindow applies the window and account rules of DOMAIN.md.
func (s Holds) checkWindow(shard *Shard, c Caller, now time.Time, rules Rules) error {
	closes := shard.ClosesAt
	if s.levers != nil {
		if t, ok := s.levers.WindowClosesAt(shard.ID); ok {
			closes = t
		}
	}
	switch {
	case now.Before(shard.OpensAt):
		return Errorf(ECONFLICT, "WINDOW_NOT_OPEN", "Tatkal booking for train %s on %s opens at %s IST.",
			shard.Train, shard.Date.Format(time.DateOnly), shard.OpensAt.In(IST).Format("15:04 on 2 Jan"))
	case !now.Before(closes):
		return Errorf(ECONFLICT, "WINDOW_CLOSED", "Tatkal booking for train %s on %s closed at %s IST.",
			shard.Train, shard.Date.Format(time.DateOnly), closes.In(IST).Format("15:04 on 2 Jan"))
	case !c.Verified:
		return Errorf(EFORBIDDEN, "NOT_VERIFIED", "Only identity-verified accounts can book Tatkal tickets online. Verify your account first.")
	case c.Agent && now.Before(shard.OpensAt.Add(rules.AgentBar)):
		return Errorf(EFORBIDDEN, "AGENT_BARRED", "Agents may book Tatkal tickets from %s IST.", shard.OpensAt.Add(rules.AgentBar).In(IST).Format("15:04"))
	}
	return CheckAccountAge(c.CreatedAt, now, rules)
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

// replay answers an idempotency key seen before. A HELD answer is repeated
// only once its hold is durable, so a replay racing the first attempt
// waits for that attempt's commit. An attempt that never committed and
// whose seat record is gone (its process died before the commit, and the
// sweeper freed the orphan) will never commit: its key is forgotten and
// the answer is errAttemptLost.
func (s Holds) replay(ctx context.Context, userID int64, shard *Shard, res inventory.HoldResult, idemKey, tokenKey string) (HoldResult, error) {
	if res.Outcome == inventory.SoldOut {
		return HoldResult{Status: string(inventory.SoldOut), Replayed: true}, nil
	}
	id, err := uuid.Parse(res.HoldID)
	if err != nil {
		return HoldResult{}, fmt.Errorf("replay: bad hold id %q: %w", res.HoldID, err)
	}
	deadline := time.Now().Add(3 * time.Second)
	for wait := 2 * time.Millisecond; ; wait = min(wait*2, 100*time.Millisecond) {
		out, err := s.answerFromRecord(ctx, userID, id)
		if ErrorCode(err) != ENOTFOUND {
			return out, err
		}
		// A record still in Redis may yet commit: wait for it. One gone
		// with no row never will (first look, and again at the deadline).
		if first, late := wait == 2*time.Millisecond, time.Now().After(deadline); first || late {
			if lost, err := s.store.Forget(ctx, shard.ID, userID, idemKey, res.HoldID, tokenKey); err == nil && lost == inventory.Forgotten {
				return HoldResult{}, errAttemptLost
			}
			if late {
				return HoldResult{}, Errorf(EUNAVAIL, "IN_PROGRESS", "An earlier request with this Idempotency-Key is still being processed; retry shortly.")
			}
		}
		select {
		case <-ctx.Done():
			return HoldResult{}, ctx.Err()
		case <-time.After(wait):
		}
	}
}

// answerFromRecord rebuilds the answer to a hold attempt from its row in
// PostgreSQL, as it stands now: HELD (or WAITLIST_OFFERED) only while the
// hold is live, else what became of it (the booking's status with its PNR,
// or EXPIRED, RELEASED, CANCELLED), so a retry never reads a lapsed or
// paid hold as seats still waiting for payment.
func (s Holds) answerFromRecord(ctx context.Context, userID int64, id uuid.UUID) (HoldResult, error) {
	v, err := s.Status(ctx, userID, id)
	if err != nil {
		return HoldResult{}, err
	}
	var status string
	switch {
	case v.BookingStat != "":
		status = v.BookingStat // CONFIRMED, WAITLISTED or CANCELLED
	case v.State == HoldHeld && !s.now().Before(v.ExpiresAt):
		status = HoldExpired // lapsed; its expiry job has not run yet
	case v.State == HoldHeld && v.Kind == KindWaitlist:
		status = "WAITLIST_OFFERED"
	default:
		status = v.State // HELD, EXPIRED, RELEASED, CANCELLED
	}
	return HoldResult{HoldID: v.ID, Status: status, ExpiresAt: v.ExpiresAt, Berths: v.Berths,
		WaitlistNo: v.WaitlistNo, Fare: v.Fare, PNR: v.PNR, Replayed: true}, nil
}

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

// settleUnknown finishes a hold whose group commit's outcome could not be
// learnt (PostgreSQL went away mid-commit and stayed away). Redis keeps its
// seats meanwhile: freeing them under a row that did commit would sell them
// twice. Once PostgreSQL answers, a hold that did not commit is undone, so
// the passenger's retry holds afresh at once instead of being told
// IN_PROGRESS until the hold would have lapsed. The answer is final when it
// comes (Committer.committed answers only for a transaction that has ended,
// and ends one left open). If this process ends first, the sweeper frees
// the seats at expiry, as before.
func (s Holds) settleUnknown(holdID uuid.UUID, tx db.ServerTx, expires time.Time, undo func(context.Context)) {
	if s.background.Err() != nil {
		return // closed
	}
	s.working.Go(func() {
		ctx, cancel := context.WithDeadline(s.background, expires)
		defer cancel()
		for wait := 500 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			durable, err := s.committer.committed(ctx, tx)
			if err != nil {
				continue
			}
			if !durable {
				s.log.Warn("hold whose commit was in doubt did not commit; undone", "hold", holdID)
				undo(ctx)
			}
			return
		}
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
