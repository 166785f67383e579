package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"tatkal/booking"
	"tatkal/booking/admission/token"
	"tatkal/booking/funnel"
)

// Statuses of a queue ticket.
const (
	Waiting  = "WAITING"
	Admitted = "ADMITTED"
	Expired  = "EXPIRED"
	SoldOut  = "SOLD_OUT"
)

// Alternative is another train or class with seats, offered when a queue
// is released.
type Alternative struct {
	TrainNo     string `json:"train_no"`
	TrainName   string `json:"train_name"`
	JourneyDate string `json:"journey_date"`
	Class       string `json:"class"`
	Quota       string `json:"quota"`
	SeatsLeft   int    `json:"seats_left"`
	Mode        string `json:"mode"`
}

// View is what a queued passenger is told.
type View struct {
	Ticket         string        `json:"queue_ticket"`
	ShardID        int64         `json:"window_id"`
	Status         string        `json:"status"`
	PositionHint   *int64        `json:"position_hint"`
	AdmissionToken *string       `json:"admission_token"`
	ExpiresInS     int           `json:"expires_in_s,omitempty"`
	EstimatedWaitS *int          `json:"estimated_wait_s"`
	PollAfterMs    int           `json:"poll_after_ms"`
	RandomiseUntil time.Time     `json:"randomise_until"`
	Message        string        `json:"message"`
	Odds           string        `json:"odds,omitempty"`
	Alternatives   []Alternative `json:"alternatives,omitempty"`
	AlreadyInQueue bool          `json:"already_in_queue,omitempty"`
	// AlternativesOff says, instead of alternatives, that suggestions are
	// switched off during the peak (the NON_ESSENTIAL kill switch).
	AlternativesOff string `json:"alternatives_off,omitempty"`
	RetryAfterS     int    `json:"-"`
	expiresAt       time.Time
	nextPollAt      time.Time // the time given
	nextPollAllowed time.Time // polls before this get this answer again
	earlyNoted      bool      // an early poll of this answer is in the trace
}

// Intent names a queue: train, journey date, class, quota.
type Intent struct {
	TrainNo     string
	JourneyDate time.Time
	Class       string
	Quota       string
}

// eligible applies the account rules of DOMAIN.md to a queue entry.
func (s *Service) eligible(c Caller, shard *booking.Shard, now time.Time) error {
	switch {
	case !c.Verified:
		if now.Sub(c.CreatedAt) < 3*24*time.Hour {
			return booking.Errorf(booking.EFORBIDDEN, "NOT_VERIFIED", "Accounts younger than 3 days must verify their identity before booking Tatkal; verify with a one-time code first.")
		}
		return booking.Errorf(booking.EFORBIDDEN, "NOT_VERIFIED", "Only identity-verified accounts can book Tatkal tickets online. Verify your account with a one-time code first.")
	case c.Agent && now.Before(shard.OpensAt.Add(s.rules().AgentBar)):
		return booking.Errorf(booking.EFORBIDDEN, "AGENT_BARRED", "Agents may book Tatkal tickets from %s IST.", shard.OpensAt.Add(s.rules().AgentBar).In(booking.IST).Format("15:04"))
	}
	return booking.CheckAccountAge(c.CreatedAt, now, s.rules())
}

// device checks the caller's device binding; a missing or forged one is
// answered like overload (it is what bots send).
func (s *Service) device(c Caller) (string, error) {
	dev, err := token.DeviceOf(s.devices, c.DeviceToken, c.UserID)
	if err != nil {
		return "", highDemand()
	}
	return dev, nil
}

// Enter puts the caller in the queue of intent, once: entering again
// returns the same ticket and place.
func (s *Service) Enter(ctx context.Context, c Caller, in Intent) (View, error) {
	// The queue stage's latency: how long joining took, whatever the answer.
	start := time.Now()
	defer func() { s.cfg.Funnel.Observe(funnel.QueueEntered, time.Since(start)) }()
	now := s.now()
	if in.Quota == "" {
		in.Quota = "TQ"
	}
	shard, err := s.cfg.Catalog.Find(ctx, in.TrainNo, in.JourneyDate, in.Class, in.Quota)
	if err != nil {
		return View{}, err
	}
	if shard.Mode != "queue" {
		return View{}, booking.Errorf(booking.ECONFLICT, "NO_WAITING_ROOM", "Train %s %s on %s has no waiting room: book directly from %s IST.",
			shard.Train, shard.Class, shard.Date.Format(time.DateOnly), shard.OpensAt.In(booking.IST).Format("15:04"))
	}
	dev, err := s.device(c)
	if err != nil {
		return View{}, err
	}
	if err := s.limit(ctx, c, dev, shard.ID); err != nil {
		return View{}, err
	}
	if err := s.eligible(c, shard, now); err != nil {
		return View{}, err
	}
	w, err := s.WindowFor(ctx, shard)
	if err != nil {
		return View{}, err
	}
	switch {
	case now.Before(w.PrequeueOpensAt):
		return View{}, booking.Errorf(booking.ECONFLICT, "QUEUE_NOT_OPEN", "The waiting room for train %s opens at %s IST, %s before booking opens.",
			shard.Train, w.PrequeueOpensAt.In(booking.IST).Format("15:04"), s.cfg.Prequeue)
	case !now.Before(shard.ClosesAt):
		return View{}, booking.Errorf(booking.ECONFLICT, "WINDOW_CLOSED", "Tatkal booking for train %s on %s has closed.", shard.Train, shard.Date.Format(time.DateOnly))
	}
	return s.enterShard(ctx, shard.ID, w, c, dev, now)
}

func (s *Service) enterShard(ctx context.Context, shardID int64, w *Window, c Caller, dev string, now time.Time) (View, error) {
	ticket := s.Ticket(shardID, c.UserID)
	// A drawn place while the draw is open; past it but before the seal,
	// one the queue may take if its draw was reopened (Controller.reopen)
	// since this process last read the window.
	cohort, reopened := "", ""
	switch {
	case now.Before(w.RandomiseUntil):
		cohort = strconv.FormatInt(Score(w.Seed, ticket), 10)
	case w.SealedAt == nil:
		reopened = strconv.FormatInt(Score(w.Seed, ticket), 10)
	}
	keys := append(s.queueKeys(shardID)[:2:2], s.qkey(shardID, "at"))
	var en, st *redis.Cmd
	if err := s.pipe(ctx, func(p redis.Pipeliner) {
		en = s.enter.EvalSha(ctx, p, keys, c.UserID, cohort, w.keysExpireAt(), now.UnixMilli(), w.sealedFlag(), reopened)
		st = s.statusCmd(ctx, p, shardID, w, c.UserID, now)
	}); err != nil {
		return View{}, unreachable()
	}
	res, _ := en.Slice()
	if len(res) > 0 && res[0] == "LOST" {
		return View{}, recovering()
	}
	var created int64
	if len(res) > 0 {
		created, _ = res[0].(int64)
	}
	if created == 1 {
		s.cfg.Funnel.Add(shardID, funnel.QueueEntered, 1)
	}
	sres, _ := st.Slice()
	v, err := s.view(ctx, shardID, w, c, dev, ticket, now, sres)
	v.AlreadyInQueue = created == 0
	return v, err
}

// statusCmd queues the STATUS script for member; an admitted member inside
// the pick-up window claims its offer in the same step.
func (s *Service) statusCmd(ctx context.Context, p redis.Pipeliner, shardID int64, w *Window, member int64, now time.Time) *redis.Cmd {
	k := s.queueKeys(shardID)
	return s.status.EvalSha(ctx, p, []string{k[0], k[1], k[2], k[4]}, member, now.UnixMilli(), s.cfg.OfferTTL.Milliseconds(), w.keysExpireAt(), w.sealedFlag())
}

// sealedFlag tells the queue scripts whether PostgreSQL has sealed the
// window: a sealed window's queue missing from Redis, or written on
// another node, is lost (lua/common.lua, queue_lost).
func (w *Window) sealedFlag() string {
	if w.SealedAt != nil {
		return "1"
	}
	return ""
}

// keysExpireAt is when a window's queue keys may go: a day after it closes.
func (w *Window) keysExpireAt() int64 {
	return later(w.RandomiseUntil, w.ClosesAt).Add(24 * time.Hour).UnixMilli()
}

// Status tells the holder of ticket where they stand. A poll earlier than
// the server asked for gets the previous answer with no backend work, and
// is counted.
func (s *Service) Status(ctx context.Context, c Caller, ticket string) (View, error) {
	now := s.now()
	shardID, ok := token.CheckTicket(s.ticketKey, ticket, c.UserID)
	if !ok {
		return View{}, booking.Errorf(booking.ENOTFOUND, "NO_SUCH_TICKET", "That queue ticket is not yours or does not exist; join the queue to get one.")
	}
	dev, err := s.device(c)
	if err != nil {
		return View{}, err
	}
	// A poll before the time the server gave costs nothing and needs no
	// limit: the previous answer, from process memory. The client learns
	// nothing new by it, which is its whole penalty; the first early poll
	// per answer is noted in its trace.
	ck := ticket + "|" + token.SessionHash(c.SessionToken) + "|" + dev
	if v, first, ok := s.polls.get(ck, now); ok {
		s.EarlyPolls.Add(1)
		s.cfg.Funnel.Add(shardID, "queue_early_poll", 1)
		if first {
			s.refused(ctx, c.UserID, shardID, RefusedEarlyPoll, fmt.Sprintf("polled %d ms before the time given; got the previous answer (%s)",
				v.nextPollAt.Sub(now).Milliseconds(), v.Status))
		}
		return v, nil
	}
	shard, err := s.cfg.Catalog.ByID(ctx, shardID)
	if err != nil {
		return View{}, err
	}
	w, err := s.WindowFor(ctx, shard)
	if err != nil {
		return View{}, err
	}
	// Rate limits and the status in one round trip.
	var over func() string
	var st *redis.Cmd
	if err := s.pipe(ctx, func(p redis.Pipeliner) {
		over = s.limitCmds(ctx, p, c, dev)
		st = s.statusCmd(ctx, p, shardID, w, c.UserID, now)
	}); err != nil {
		return View{}, unreachable()
	}
	if what := over(); what != "" {
		s.refused(ctx, c.UserID, shardID, RefusedRateLimit, what)
		return View{}, highDemand()
	}
	res, _ := st.Slice()
	v, err := s.view(ctx, shardID, w, c, dev, ticket, now, res)
	if err != nil {
		return View{}, err
	}
	s.polls.put(ck, v)
	return v, nil
}

func unreachable() error {
	return booking.Errorf(booking.EUNAVAIL, "QUEUE_UNREACHABLE", "The waiting room is not reachable right now; please retry in a few seconds.")
}

// recovering is the answer while a queue that lost its Redis state waits
// for the controller to rebuild it from PostgreSQL (Controller.rebuild):
// nobody's place is known until then, so nobody is told one.
func recovering() error {
	return booking.Errorf(booking.EUNAVAIL, "QUEUE_RECOVERING", "The waiting room is restoring its queue after a fault; your place is kept. Please retry in a few seconds.")
}

// view turns a STATUS answer into what the passenger is told.
func (s *Service) view(ctx context.Context, shardID int64, w *Window, c Caller, dev, ticket string, now time.Time, res []any) (View, error) {
	if len(res) > 0 && res[0] == "LOST" {
		return View{}, recovering()
	}
	if len(res) < 12 {
		return View{}, unreachable()
	}
	rank, _ := res[0].(int64)
	card, _ := res[1].(int64)
	admitted, _ := res[2].(int64)
	str := func(i int) string { v, _ := res[i].(string); return v }
	soldout, rate, capLeft, alts, batch, sealed := str(3) != "", atof(str(4)), atof(str(5)), str(6), str(7), str(8) != ""
	v := View{Ticket: ticket, ShardID: shardID, RandomiseUntil: w.RandomiseUntil}
	if rank < 0 {
		return View{}, booking.Errorf(booking.ENOTFOUND, "NOT_IN_QUEUE", "You are not in this queue (it may have been reset); join it again.")
	}
	waiting := card - admitted
	released := str(10) == "-1" // told sold out before: it left the queue
	switch {
	case rank < admitted && !released:
		// The offer was made at the batch's time; claimed (this token
		// fetched) inside its pick-up window, the permit lives TokenTTL
		// from the claim, and the controller keeps its place until then.
		f := strings.Split(batch, ":")
		offered, _ := strconv.ParseInt(f[min(1, len(f)-1)], 10, 64)
		claimed, _ := strconv.ParseInt(str(10), 10, 64)
		exp := time.UnixMilli(claimed + s.cfg.TokenTTL.Milliseconds())
		if claimed == 0 || !now.Before(exp) {
			v.Status, v.Message = Expired, fmt.Sprintf("You were let in at %s IST, but did not come back within %s to start booking. Your admission has lapsed.",
				time.UnixMilli(offered).In(booking.IST).Format("15:04:05"), s.cfg.OfferTTL)
			v.PollAfterMs, v.RetryAfterS = 60000, 60
			s.refused(ctx, c.UserID, shardID, RefusedLapsed, v.Message)
			break
		}
		tok := s.keys.Issue(token.Claims{TokenID: token.TokenID(shardID, c.UserID, 0), UserID: c.UserID, ShardID: shardID,
			Session: token.SessionHash(c.SessionToken), Device: dev, ExpiresAt: exp})
		v.Status, v.AdmissionToken, v.ExpiresInS, v.expiresAt = Admitted, &tok, int(exp.Sub(now).Seconds()), exp
		v.Message = fmt.Sprintf("It is your turn. Book within %d seconds: send this admission token with your hold.", v.ExpiresInS)
		v.PollAfterMs, v.RetryAfterS = 5000, 5
		zero := int64(0)
		v.PositionHint = &zero
	case soldout || released:
		v.Status = SoldOut
		v.Message = "Sold out: every seat and waitlist place on this train and class is taken. Your place in this queue is released; try one of the alternatives."
		why := "every seat and waitlist place taken; queue released"
		switch {
		case !soldout && str(11) != "":
			v.Message = "Sold out for your place in the queue: every seat on this train and class is held by travellers paying now, and even if all of their payments failed, the seats coming back would not reach you. Your place in this queue is released; try one of the alternatives."
			why = "every seat held; the held seats cannot reach this place; queue place released"
		case !soldout: // reopened since: the answer it had stands
			v.Message = "Sold out: this train and class sold out while you waited, and your place in this queue was released then. Seats that come back later go to those still in the queue; try one of the alternatives."
			why = "told sold out earlier; queue place released"
		case str(3) == "2":
			v.Message = "Sold out: the few berths left on this train and class are free only on parts of the route, and the travellers let in before you could not book them. Your place in this queue is released; try one of the alternatives."
			why = "only fragments of the route left, which admitted travellers could not book; queue released"
		}
		if alts != "" {
			json.Unmarshal([]byte(alts), &v.Alternatives) //nolint:errcheck
		}
		v.PollAfterMs, v.RetryAfterS = 30000, 30
		s.refused(ctx, c.UserID, shardID, RefusedSoldOut, why)
	case !sealed && now.Before(w.RandomiseUntil.Add(time.Second)) && atof(str(9)) < LateBase:
		v.Status = Waiting
		v.Message = fmt.Sprintf("You are in. Everyone who joins by %s IST gets a place drawn at random, so there is no need to hurry or refresh; your place is shown once the draw is done.",
			w.RandomiseUntil.In(booking.IST).Format("15:04:05"))
		until := w.RandomiseUntil.Sub(now)
		v.PollAfterMs = int(max(min(until, 5*time.Second), s.cfg.PollMin) / time.Millisecond)
		v.RetryAfterS = max(1, v.PollAfterMs/1000)
	default:
		pos := rank - admitted + 1
		v.Status, v.PositionHint = Waiting, &pos
		if rate > 0 {
			wait := int(math.Ceil(float64(pos) / rate))
			v.EstimatedWaitS = &wait
		}
		v.Message = fmt.Sprintf("You are number %d in the queue.", pos)
		v.PollAfterMs = s.pollAfter(pos, rate)
		v.RetryAfterS = int(math.Ceil(float64(v.PollAfterMs) / 1000))
	}
	if v.Status == Waiting && waiting > 0 && str(5) != "" { // seats known once the controller has looked
		v.Odds = odds(capLeft, waiting)
	}
	if v.Status == Waiting {
		v.PollAfterMs, v.RetryAfterS = s.slowPolls(shardID, v.PollAfterMs, v.RetryAfterS)
	}
	v.PollAfterMs = jitter(v.PollAfterMs)
	v.nextPollAt = now.Add(time.Duration(v.PollAfterMs) * time.Millisecond)
	v.nextPollAllowed = now.Add(time.Duration(v.PollAfterMs) * time.Millisecond * 8 / 10)
	return v, nil
}

// slowPolls lengthens a waiter's poll by the poll_slowdown lever (a rung
// of the degradation ladder), to at most PollSlowdownCeiling: never so
// long that a waiter admitted meanwhile misses its pick-up window.
func (s *Service) slowPolls(shardID int64, ms, retryS int) (int, int) {
	if s.cfg.Levers == nil {
		return ms, retryS
	}
	k := s.cfg.Levers.PollSlowdown(shardID)
	if k <= 1 {
		return ms, retryS
	}
	ms = min(ms*k, int(min(PollSlowdownCeiling, s.cfg.OfferTTL*3/4)/time.Millisecond))
	return ms, max(retryS, int(math.Ceil(float64(ms)/1000)))
}

// PollSlowdownCeiling bounds a slowed poll_after_ms.
const PollSlowdownCeiling = 45 * time.Second

// rules are the rules in force: the configured ones under the operators'.
func (s *Service) rules() booking.Rules {
	if s.cfg.Levers == nil {
		return s.cfg.Rules
	}
	return s.cfg.Levers.Rules(s.cfg.Rules)
}

// pollAfter paces a waiter pos places from the admission cursor moving at
// rate a second: half the expected wait, so a client that obeys is back
// before its turn whenever the cursor goes at most twice as fast as
// expected, and PollMin once its turn is near, so it learns of its
// admission within about PollMin. Never above PollMax.
func (s *Service) pollAfter(pos int64, rate float64) int {
	eta := time.Duration(float64(pos) / math.Max(rate, 1) * float64(time.Second))
	return int(min(max(eta/2, s.cfg.PollMin), s.cfg.PollMax) / time.Millisecond)
}

func odds(capLeft float64, waiting int64) string {
	switch {
	case capLeft <= 0:
		return "No seats are free right now: they are held by travellers paying. A seat whose payment fails comes back to this queue, in order."
	case capLeft >= float64(waiting):
		return "Most people in this queue should get a seat."
	}
	return fmt.Sprintf("About 1 in %d people in this queue will get a seat.", int64(math.Round(float64(waiting)/capLeft)))
}

// jitter spreads polls by up to 20 %, only earlier: poll_after_ms is
// "come back by", so pacing never makes anyone later than asked.
func jitter(ms int) int {
	return ms - int(float64(ms)*rand.Float64()*0.2)
}

func atof(s string) float64 {
	f, _ := strconv.ParseFloat(s, 64)
	return f
}

// pollCache remembers each ticket's last answer until the client may poll
// again, so fast pollers cost a map lookup.
type pollCache struct {
	mu sync.Mutex
	m  map[string]View
}

const pollCacheMax = 200_000

func (p *pollCache) init() { p.m = map[string]View{} }

// get returns the cached answer for k while it is too early to poll
// again; first is true for the first early poll of that answer.
func (p *pollCache) get(k string, now time.Time) (v View, first, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	v, ok = p.m[k]
	if !ok {
		return View{}, false, false
	}
	if !now.Before(v.nextPollAllowed) || (v.Status == Admitted && !now.Before(v.expiresAt)) {
		delete(p.m, k)
		return View{}, false, false
	}
	if !v.earlyNoted {
		first = true
		e := v
		e.earlyNoted = true
		p.m[k] = e
	}
	if v.Status == Admitted {
		v.ExpiresInS = int(v.expiresAt.Sub(now).Seconds())
	}
	return v, first, true
}

func (p *pollCache) put(k string, v View) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.m) >= pollCacheMax {
		p.m = map[string]View{} // crude, bounded: drop everything
	}
	p.m[k] = v
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
