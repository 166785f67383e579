package rehearse

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"tatkal/booking"
	"tatkal/booking/admission"
	"tatkal/booking/app"
	"tatkal/booking/auth"
	"tatkal/booking/inventory"
	"tatkal/booking/lab/seed"
)

// Tick is one second of a running mode, for a live chart.
type Tick struct {
	Mode     string `json:"mode"`
	Seed     uint64 `json:"seed"`
	Second   second `json:"second"`
	Booked   int64  `json:"booked_total"`
	Finished int    `json:"finished"`
	Of       int    `json:"of"`
}

// modeRun is one mode of one seed.
type modeRun struct {
	opts       Options
	t          *target
	mode       string
	seed       uint64
	idx        int
	base       string
	pspURL     string
	http       *http.Client
	noRedirect *http.Client
	opens      time.Time
	date       time.Time
	shardID    int64
	stats      *stats
	// decideCtx ends with the drain: customers on a bank's page when
	// the window ends still press their button.
	decideCtx context.Context
	// entered and stratified: Options.Stratify's barrier.
	entered    sync.WaitGroup
	stratified chan struct{}
}

const password = "rehearsal-password"

// Run rehearses o: against its own stack unless o.URL is set, every seed,
// each mode in turn, and returns the report. With o.Parallel the seeds
// run at once, each on its own stack.
func Run(ctx context.Context, cfg app.Config, o Options, log *slog.Logger) (*Report, error) {
	if err := o.Check(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	rep := &Report{Options: o, StartedAt: time.Now().UTC(), OwnStack: o.URL == ""}
	var mu sync.Mutex // rep.Runs, o.OnRun
	done := func(rr RunReport) {
		mu.Lock()
		defer mu.Unlock()
		rep.Runs = append(rep.Runs, rr)
		if o.OnRun != nil {
			o.OnRun(rep)
		}
	}
	var err error
	if o.Parallel && o.URL == "" && o.Seeds > 1 {
		errs := make([]error, o.Seeds)
		var wg sync.WaitGroup
		for s := range o.Seeds {
			wg.Add(1)
			go func() { defer wg.Done(); errs[s] = runSeeds(ctx, cfg, o, log, []uint64{o.Seed + uint64(s)}, done) }()
		}
		wg.Wait()
		err = errors.Join(errs...)
		// Seed by seed, modes in order, as a sequential run lists them.
		order := map[string]int{}
		for i, m := range o.modes() {
			order[m] = i
		}
		slices.SortStableFunc(rep.Runs, func(a, b RunReport) int {
			return cmp.Or(cmp.Compare(a.Seed, b.Seed), cmp.Compare(order[a.Mode], order[b.Mode]))
		})
	} else {
		var seeds []uint64
		for s := range o.Seeds {
			seeds = append(seeds, o.Seed+uint64(s))
		}
		err = runSeeds(ctx, cfg, o, log, seeds, done)
	}
	if err != nil {
		return rep, err
	}
	rep.FinishedAt = time.Now().UTC()
	rep.summarise()
	return rep, nil
}

// runSeeds runs the seeds, each mode in turn, on one stack: its own
// unless o.URL is set.
func runSeeds(ctx context.Context, cfg app.Config, o Options, log *slog.Logger, seeds []uint64, done func(RunReport)) error {
	var t *target
	var err error
	if o.URL != "" {
		t, err = attach(ctx, cfg, o.URL)
	} else {
		t, err = startOwn(ctx, cfg, log, false, normalRoutes())
	}
	if err != nil {
		return err
	}
	defer t.close()
	open := -time.Minute
	if _, err := seed.Demo(ctx, t.pool, seed.DemoOptions{OpensIn: &open}); err != nil {
		return fmt.Errorf("seed the network: %w", err)
	}
	hash, err := auth.HashPassword(password, auth.Argon2Params{MemoryKiB: 64, Time: 1, Threads: 1})
	if err != nil {
		return err
	}
	idx := 0
	for _, sd := range seeds {
		profs := profiles(o, sd)
		for _, mode := range o.modes() {
			mr := &modeRun{opts: o, t: t, mode: mode, seed: sd, idx: idx, base: t.base, pspURL: t.pspURL}
			idx++
			rr, err := mr.run(ctx, profs, hash)
			if err != nil {
				return fmt.Errorf("%s, seed %d: %w", mode, sd, err)
			}
			done(rr)
		}
	}
	return nil
}

// bands are the account ages travellers are drawn from (traveller i is
// in band i mod 4).
var bands = []struct {
	Name string
	Age  time.Duration
}{{"1-3 months", 40 * 24 * time.Hour}, {"3-12 months", 200 * 24 * time.Hour}, {"1-3 years", 800 * 24 * time.Hour}, {"3+ years", 2000 * 24 * time.Hour}}

func (mr *modeRun) run(ctx context.Context, profs []profile, hash string) (RunReport, error) {
	o, t := mr.opts, mr.t
	transport := &http.Transport{MaxIdleConns: 4000, MaxIdleConnsPerHost: 4000, IdleConnTimeout: 30 * time.Second}
	defer transport.CloseIdleConnections()
	mr.http = &http.Client{Transport: transport, Timeout: 30 * time.Second}
	mr.noRedirect = &http.Client{Transport: transport, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	// Verified accounts in four age bands, with wallets.
	prefix := fmt.Sprintf("rh%s%d", mr.mode[:1], mr.idx)
	ts := make([]*traveller, len(profs))
	for b, band := range bands {
		n := (len(profs) - b + len(bands) - 1) / len(bands)
		if n <= 0 {
			continue
		}
		if _, err := seed.Users(ctx, t.pool, seed.UsersSpec{Count: n, Prefix: prefix + "b" + strconv.Itoa(b), PasswordHash: hash,
			WalletRupees: 20000, CreatedAt: time.Now().Add(-band.Age)}); err != nil {
			return RunReport{}, fmt.Errorf("seed travellers: %w", err)
		}
	}
	for i, p := range profs {
		ts[i] = &traveller{profile: p, run: mr, login: fmt.Sprintf("%sb%d%05d", prefix, i%len(bands), i/len(bands)+1),
			rng: newRand(mr.seed, uint64(i))}
	}
	mr.stats = newStats(time.Now().Add(time.Hour), &o) // counts nothing before the opening
	if o.Progress != nil {
		fmt.Fprintf(o.Progress, "%s, seed %d: signing in %d travellers\n", mr.mode, mr.seed, len(ts))
	}
	signCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	err := forEach(signCtx, ts, 16, func(tv *traveller) error { return tv.signIn(signCtx, password) })
	cancel()
	if err != nil {
		return RunReport{}, err
	}
	if err := mr.openShard(ctx); err != nil {
		return RunReport{}, err
	}
	mr.stats = newStats(mr.opens, &o)
	cpu0 := sampleCPU()

	// The rush: travellers, faults, and a sampler, until the window ends.
	runCtx, stop := context.WithDeadline(ctx, mr.opens.Add(o.Duration))
	defer stop()
	decideCtx, stopDeciding := context.WithDeadline(ctx, mr.opens.Add(o.Duration+o.Drain))
	defer stopDeciding()
	mr.decideCtx = decideCtx
	if mr.mode == Queue {
		if err := t.meterAdmission(ctx, mr.shardID, o.Capacity); err != nil {
			return RunReport{}, fmt.Errorf("meter admission: %w", err)
		}
	}
	if o.Stratify && mr.mode == Queue {
		mr.stratify(runCtx, ts)
	}
	var wg sync.WaitGroup
	for _, tv := range ts {
		wg.Add(1)
		go func() { defer wg.Done(); tv.visit(runCtx) }()
	}
	faultErrs := make(chan error, 2*len(o.Faults)+1)
	var fwg sync.WaitGroup
	for _, f := range o.Faults {
		fwg.Add(1)
		go func() {
			defer fwg.Done()
			at := func(d time.Duration) bool {
				select {
				case <-time.After(time.Until(mr.opens.Add(d))):
					return true
				case <-runCtx.Done():
					return false
				}
			}
			if !at(f.From) {
				return
			}
			if err := t.pull(ctx, f, mr.shardID, true, o.Capacity); err != nil {
				faultErrs <- err
			}
			at(f.To)
			if err := t.pull(context.WithoutCancel(ctx), f, mr.shardID, false, o.Capacity); err != nil {
				faultErrs <- err
			}
		}()
	}
	sampled := make(chan struct{})
	go func() { defer close(sampled); mr.sample(runCtx, ts) }()
	wg.Wait()
	if mr.stratified != nil {
		<-mr.stratified
	}
	stop()
	fwg.Wait()
	<-sampled
	close(faultErrs)
	var ferrs []error
	for err := range faultErrs {
		ferrs = append(ferrs, err)
	}
	if err := errors.Join(ferrs...); err != nil {
		return RunReport{}, fmt.Errorf("faults: %w", err)
	}
	rr := mr.report(ts)
	rr.CPU = cpu0.since()
	// The drain: payments get o.Drain to resolve, then the checks.
	if o.Progress != nil {
		fmt.Fprintf(o.Progress, "%s, seed %d: window over, draining payments\n", mr.mode, mr.seed)
	}
	if err := mr.check(ctx, &rr); err != nil {
		return rr, err
	}
	if o.Progress != nil {
		fmt.Fprintf(o.Progress, "%s, seed %d: %d booked, %d/%d ordinary, %d/%d aggressive; oversold %d, unresolved payments %d\n",
			mr.mode, mr.seed, rr.Booked, rr.ordinaryOK, rr.ordinaryN, rr.aggressiveOK, rr.aggressiveN, rr.OversoldBerthLegs, rr.UnresolvedPayments)
	}
	return rr, nil
}

// stratify starts Options.Stratify's barrier: everyone enters as
// ordinary, then exactly the aggressive share of every ten consecutive
// places in the drawn order becomes aggressive.
func (mr *modeRun) stratify(ctx context.Context, ts []*traveller) {
	mr.stratified = make(chan struct{})
	mr.entered.Add(len(ts))
	aggressive := 0
	for _, tv := range ts {
		if tv.Aggressive {
			aggressive++
		}
		tv.Aggressive = false
	}
	share := float64(aggressive) / float64(max(len(ts), 1))
	go func() {
		defer close(mr.stratified)
		done := make(chan struct{})
		go func() { mr.entered.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			return
		}
		members, err := mr.t.rdb.ZRange(ctx, mr.t.prefix+":{q"+strconv.FormatInt(mr.shardID, 10)+"}:z", 0, -1).Result()
		if err != nil {
			return
		}
		byUID := map[string]*traveller{}
		for _, tv := range ts {
			byUID[strconv.FormatInt(tv.uid, 10)] = tv
		}
		var order []*traveller
		for _, m := range members {
			if tv := byUID[m]; tv != nil {
				order = append(order, tv)
			}
		}
		pick := newRand(mr.seed, 10)
		for blk := 0; blk < len(order); blk += 10 {
			matchedPick(order[blk:min(blk+10, len(order))], share, pick)
		}
	}()
}

// matchedPick makes the share of block aggressive, matched to the rest of
// the block in what else decides a booking: the bank's answer, the party's
// size and the journey. The block is shuffled, sorted by those, and every
// (len/k)th taken from a random start. Picked at random instead, one
// seed's dozen aggressive bookings swung the ratio between 0.6 and 1.4
// by who happened to have a declining bank or a party too large for the
// last berths, not by how they behaved.
func matchedPick(block []*traveller, share float64, rng *rand.Rand) {
	n := len(block)
	k := int(float64(n)*share + 0.5)
	if k == 0 {
		return
	}
	idx := rng.Perm(n)
	key := func(tv *traveller) string {
		return fmt.Sprintf("%t|%d|%s|%s", tv.Decline, tv.Party, tv.From, tv.To)
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(key(block[a]), key(block[b])) })
	step := float64(n) / float64(k)
	start := rng.Float64() * step
	for i := range k {
		block[idx[int(start+float64(i)*step)]].Aggressive = true
	}
}

// openShard creates the run's sandbox shard, opening three seconds from
// now, and loads it into Redis.
func (mr *modeRun) openShard(ctx context.Context) error {
	t := mr.t
	d := time.Now().In(booking.IST).AddDate(0, 0, 3+mr.idx)
	mr.date = time.Date(d.Year(), d.Month(), d.Day(), 0, 0, 0, 0, booking.IST)
	mr.opens = time.Now().Add(3 * time.Second).Truncate(time.Millisecond)
	zero := 0
	id, err := seed.Shard(ctx, t.pool, seed.ShardSpec{Train: "12951", Date: mr.date, Class: "3A", Berths: mr.opts.Berths,
		OpensAt: mr.opens, Mode: mr.mode, WaitlistCap: &zero})
	if err != nil {
		return fmt.Errorf("seed the shard: %w", err)
	}
	mr.shardID = id
	if _, err := t.pool.Exec(ctx, `UPDATE inventory_shards SET sandbox = true WHERE id = $1`, id); err != nil {
		return err
	}
	return t.load(ctx, id)
}

// load loads a new shard into Redis: the own stack's service rebuilds it,
// a deployment's sweeper does.
func (t *target) load(ctx context.Context, id int64) error {
	if t.app != nil {
		if _, err := t.app.Booking.Rebuild(ctx, id); err != nil {
			return fmt.Errorf("load the shard: %w", err)
		}
		return nil
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if ok, _, err := t.store.Ready(ctx, id); err == nil && ok {
			return nil
		}
	}
	return fmt.Errorf("shard %d was not loaded into Redis within 30s", id)
}

// sample records the queue depth every second and prints the progress
// line every two.
func (mr *modeRun) sample(ctx context.Context, ts []*traveller) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			var depth int64
			if mr.mode == Queue {
				depth = mr.queueDepth(ctx)
			}
			mr.stats.perSecond(now, func(s *second) { s.QueueDepth = depth })
			finished, booked := int(mr.stats.finished.Load()), int64(0)
			for _, s := range mr.stats.snapshot() {
				booked += s.Booked
			}
			secs := mr.stats.snapshot()
			var last second
			if i := int(now.Sub(mr.opens)/time.Second) - 1; i >= 0 && i < len(secs) {
				last = secs[i]
			}
			if mr.opts.OnTick != nil {
				mr.opts.OnTick(Tick{Mode: mr.mode, Seed: mr.seed, Second: last, Booked: booked, Finished: finished, Of: len(ts)})
			}
			if mr.opts.Progress != nil && n%2 == 1 {
				fmt.Fprintf(mr.opts.Progress, "%-6s seed %d  +%3.0fs  booked %4d  finished %4d/%d  backend %4d/s (%d refused)  queue %5d  edge %d\n",
					mr.mode, mr.seed, now.Sub(mr.opens).Seconds(), booked, finished, len(ts), last.Backend, last.Rejected, depth, mr.stats.edge.Load())
			}
		}
	}
}

func (mr *modeRun) queueDepth(ctx context.Context) int64 {
	k := mr.t.prefix + ":{q" + strconv.FormatInt(mr.shardID, 10) + "}:"
	n, _ := mr.t.rdb.ZCard(ctx, k+"z").Result()
	adm, err := mr.t.rdb.HGet(ctx, k+"m", "admitted").Int64()
	if err != nil && !errors.Is(err, redis.Nil) {
		return n
	}
	return max(n-adm, 0)
}

// unresolvedStories tells, for each payment of the run still unresolved,
// its state and method and every event with its time from the opening.
func (mr *modeRun) unresolvedStories(ctx context.Context) ([]string, error) {
	rows, err := mr.t.pool.Query(ctx, `SELECT p.id::text, p.state, p.method, p.inquiries,
			extract(epoch FROM p.initiated_at - $2::timestamptz)::float8,
			coalesce(string_agg(format('+%s %s→%s (%s)', round(extract(epoch FROM e.at - $2::timestamptz)::numeric, 1),
				e.from_state, e.to_state, e.cause), ', ' ORDER BY e.id), '')
		FROM payments p JOIN holds h ON h.id = p.hold_id LEFT JOIN payment_events e ON e.payment_id = p.id
		WHERE h.shard_id = $1 AND p.state NOT IN ('SUCCESS', 'FAILED', 'REFUNDED')
		GROUP BY p.id ORDER BY p.initiated_at LIMIT 20`, mr.shardID, mr.opens)
	if err != nil {
		return nil, fmt.Errorf("unresolved payments: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id, state, method, events string
		var inquiries int
		var at float64
		if err := rows.Scan(&id, &state, &method, &inquiries, &at, &events); err != nil {
			return nil, fmt.Errorf("unresolved payments: %w", err)
		}
		out = append(out, fmt.Sprintf("%s %s %s since +%.1fs, %d inquiries: %s", short(id), method, state, at, inquiries, events))
	}
	return out, rows.Err()
}

// check drains the payments and checks the run against the database.
func (mr *modeRun) check(ctx context.Context, rr *RunReport) error {
	pool, id := mr.t.pool, mr.shardID
	unresolved := func() (int, error) {
		var n int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM payments p JOIN holds h ON h.id = p.hold_id
			WHERE h.shard_id = $1 AND p.state NOT IN ('SUCCESS', 'FAILED', 'REFUNDED')`, id).Scan(&n)
		return n, err
	}
	start := time.Now()
	for {
		n, err := unresolved()
		if err != nil {
			return fmt.Errorf("count unresolved payments: %w", err)
		}
		rr.UnresolvedPayments = n
		if n == 0 || time.Since(start) > mr.opts.Drain {
			break
		}
		time.Sleep(time.Second)
	}
	rr.DrainS = round3(time.Since(start).Seconds())
	if rr.UnresolvedPayments > 0 {
		story, err := mr.unresolvedStories(ctx)
		if err != nil {
			return err
		}
		rr.Unresolved = story
	}
	// Oversold berth-legs: two confirmed passengers on one berth for
	// overlapping legs.
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM booking_passengers a JOIN booking_passengers b
		ON a.shard_id = b.shard_id AND a.berth_idx = b.berth_idx AND (a.booking_id, a.seq) < (b.booking_id, b.seq)
		AND int4range(a.from_seq, a.to_seq) && int4range(b.from_seq, b.to_seq)
		WHERE a.shard_id = $1 AND a.status = 'CONFIRMED' AND b.status = 'CONFIRMED'`, id).Scan(&rr.OversoldBerthLegs); err != nil {
		return fmt.Errorf("count oversold: %w", err)
	}
	hw := booking.DefaultRules().HoldWindow
	if mr.t.app != nil {
		hw = mr.t.app.Config.HoldWindow
	}
	inv, err := inventory.Check(ctx, pool, mr.t.store, id, hw)
	if err != nil {
		return fmt.Errorf("check the shard: %w", err)
	}
	rr.InvariantViolations = inv.Violations
	for _, l := range inv.Legs {
		rr.BerthLegsUnsold += l.RedisFree
		rr.BerthLegs += l.Total
	}
	// Money: what came in for the shard's holds is what the tickets cost
	// plus what was (or is being) refunded.
	m := &rr.Money
	if err := pool.QueryRow(ctx, `SELECT
		coalesce((SELECT sum(p.amount_paise) FROM payments p JOIN holds h ON h.id = p.hold_id
			WHERE h.shard_id = $1 AND p.state IN ('SUCCESS', 'REFUNDED')), 0),
		coalesce((SELECT sum(b.fare_paise) FROM bookings b WHERE b.shard_id = $1 AND b.status <> 'CANCELLED'), 0),
		coalesce((SELECT sum(r.amount_paise) FROM refunds r JOIN payments p ON p.id = r.payment_id JOIN holds h ON h.id = p.hold_id
			WHERE h.shard_id = $1), 0)`, id).Scan(&m.InPaise, &m.TicketsPaise, &m.RefundsPaise); err != nil {
		return fmt.Errorf("money: %w", err)
	}
	m.DifferencePaise = m.InPaise - m.TicketsPaise - m.RefundsPaise
	m.Balanced = m.DifferencePaise == 0
	// Admission invariant (queue mode): every hold on the shard is by an
	// admitted traveller, and no place in the queue admitted twice.
	if mr.mode == Queue {
		var v int
		if err := pool.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM holds h WHERE h.shard_id = $1
				AND NOT EXISTS (SELECT 1 FROM admission_log l WHERE l.shard_id = $1 AND l.user_id = h.user_id))
			+ (SELECT count(*) - count(DISTINCT user_id) FROM admission_log WHERE shard_id = $1)`, id).Scan(&v); err != nil {
			return fmt.Errorf("admission invariant: %w", err)
		}
		rr.AdmissionViolations = &v
		// The fairness figures, as the window's job computes them (here
		// at once, not ten minutes after the seal).
		if mr.t.app != nil {
			f, err := mr.t.app.Admission.ComputeFairness(ctx, id)
			if err != nil {
				return fmt.Errorf("fairness figures: %w", err)
			}
			rr.Fairness = &f
		} else if f, ok, err := admission.StoredFigures(ctx, pool, id); err == nil && ok {
			rr.Fairness = &f
		}
	}
	return nil
}

// forEach runs f over ts, n at a time, stopping at the first error.
func forEach(ctx context.Context, ts []*traveller, n int, f func(*traveller) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	sem := make(chan struct{}, n)
	var wg sync.WaitGroup
	for _, tv := range ts {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := f(tv); err != nil {
				cancel(err)
			}
		}()
	}
	wg.Wait()
	return context.Cause(ctx)
}
