// Package funnel counts what happens at each stage of the booking funnel
// (queue, admission, holds, payments, confirmations, expiries, refunds),
// per shard and second, with latency histograms per stage. Counting is
// in-process and cheap; a flusher adds the counts to Redis every half
// second, so the console sees the sum over every app process. Beside the
// per-second counts (kept two hours, read a few minutes at a time) the
// flusher keeps a coarser series of 5-second buckets for the console's
// charts, so ten minutes of a shard is ten reads, not six hundred.
package funnel

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"tatkal/booking/metrics"
)

// Stages of the funnel.
const (
	QueueEntered  = "queue_entered"
	Admitted      = "admitted"
	HoldAttempt   = "hold_attempt"
	Held          = "held"
	Waitlisted    = "waitlisted"
	SoldOut       = "sold_out"
	HoldRefused   = "hold_refused" // limits, bad input, shard rebuilding
	PayInitiated  = "pay_initiated"
	PaySucceeded  = "pay_succeeded"
	PayFailed     = "pay_failed"
	PayUnknown    = "pay_unknown"
	Confirmed     = "confirmed"
	Expired       = "expired"
	Released      = "released" // cancelled or failed holds whose seats went back
	RefundStarted = "refund_started"
	RefundDone    = "refund_done"
	Shed          = "shed" // turned away at the door (overload, or a shard_throttle)
)

// Stages lists every stage in funnel order.
var Stages = []string{QueueEntered, Admitted, HoldAttempt, Held, Waitlisted, SoldOut, HoldRefused, Shed, PayInitiated,
	PaySucceeded, PayFailed, PayUnknown, Confirmed, Expired, Released, RefundStarted, RefundDone}

// Buckets are the upper bounds of the latency histogram, in milliseconds.
var Buckets = []int{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 1 << 30}

// Retention is how long per-second counts are kept in Redis.
const Retention = 2 * time.Hour

// SeriesStep is the width of one bucket of the charted series.
const SeriesStep = 5 * time.Second

// SeriesRetention is how long the charted series is kept in Redis: each
// shard holds one hash per minute, so at most 60 of them.
const SeriesRetention = time.Hour

// Recorder counts events. A nil *Recorder records nothing, so code paths
// that do not care need no checks.
type Recorder struct {
	rdb    redis.UniversalClient
	prefix string
	log    *slog.Logger

	mu     sync.Mutex
	counts map[stageSecond]int64
	hist   map[latencySecond]int64
	routes map[string]int64 // "route|sec|event" -> n
}

// stageSecond and latencySecond key the counts gathered between flushes:
// built on every event of the hot path, so no string is made for them.
type stageSecond struct {
	shard, sec int64
	stage      string
}

type latencySecond struct {
	stage  string
	sec    int64
	bucket int
}

// New returns a recorder writing under prefix.
func New(rdb redis.UniversalClient, prefix string, log *slog.Logger) *Recorder {
	if log == nil {
		log = slog.Default()
	}
	return &Recorder{rdb: rdb, prefix: prefix, log: log, counts: map[stageSecond]int64{}, hist: map[latencySecond]int64{}, routes: map[string]int64{}}
}

// Add counts n events of stage on shard (0 for events of no shard), and
// in this process's tatkal_funnel_events_total even on a nil Recorder.
func (r *Recorder) Add(shardID int64, stage string, n int64) {
	metrics.FunnelEvents.WithLabelValues(stage).Add(float64(n))
	if r == nil {
		return
	}
	r.addAt(shardID, stage, n, time.Now())
}

func (r *Recorder) addAt(shardID int64, stage string, n int64, at time.Time) {
	key := stageSecond{shard: shardID, sec: at.Unix(), stage: stage}
	r.mu.Lock()
	r.counts[key] += n
	r.mu.Unlock()
}

// Observe records how long one event of stage took.
func (r *Recorder) Observe(stage string, d time.Duration) {
	if r == nil {
		return
	}
	r.observeAt(stage, d, time.Now())
}

func (r *Recorder) observeAt(stage string, d time.Duration, at time.Time) {
	ms := int(d.Milliseconds())
	key := latencySecond{stage: stage, sec: at.Unix(), bucket: sort.SearchInts(Buckets, ms)}
	r.mu.Lock()
	r.hist[key]++
	r.mu.Unlock()
}

// Outcomes of one call to a payment route, as the route charts tell them.
const (
	RouteAnswered = "answered"  // the gateway answered
	RouteRefused  = "refused"   // it answered with a final refusal (4xx)
	RouteNoAnswer = "no_answer" // a timeout, a 5xx or a 429: what opens the breaker
)

// RouteOutcomes lists the outcomes in chart order.
var RouteOutcomes = []string{RouteAnswered, RouteRefused, RouteNoAnswer}

// RouteBreakerOpened is a route event that is no call: its breaker opened.
const RouteBreakerOpened = "breaker_opened"

// RouteEvent counts one event of a payment route ("gateway/method"): a
// call's outcome or its breaker opening, for the route charts. A nil
// Recorder records nothing.
func (r *Recorder) RouteEvent(route, what string) {
	if r == nil {
		return
	}
	r.routeEventAt(route, what, time.Now())
}

func (r *Recorder) routeEventAt(route, what string, at time.Time) {
	key := route + "|" + strconv.FormatInt(at.Unix(), 10) + "|" + what
	r.mu.Lock()
	r.routes[key]++
	r.mu.Unlock()
}

func (r *Recorder) countKey(shardID, sec string) string {
	return r.prefix + ":funnel:" + shardID + ":" + sec
}

// seriesKey is the hash of one shard's minute starting at the Unix second
// minute; its fields are "slot|stage", slot the 5-second bucket (0-11).
func (r *Recorder) seriesKey(shardID string, minute int64) string {
	return r.prefix + ":fseries:" + shardID + ":" + strconv.FormatInt(minute, 10)
}

func (r *Recorder) histKey(stage, sec string) string {
	return r.prefix + ":lat:" + stage + ":" + sec
}

// latencyKey is the hash of every stage's latency histogram over one
// minute, in SeriesStep slots: fields "slot|stage|bucket". Histograms,
// not quantiles, because only counts add up across processes.
func (r *Recorder) latencyKey(minute int64) string {
	return r.prefix + ":lseries:" + strconv.FormatInt(minute, 10)
}

// routeKey is the hash of every payment route's events over one minute:
// fields "slot|route|event".
func (r *Recorder) routeKey(minute int64) string {
	return r.prefix + ":rseries:" + strconv.FormatInt(minute, 10)
}

// slotField is a series hash's field prefix: the SeriesStep slot of the
// Unix second sec within its minute.
func slotField(sec int64) string {
	return strconv.FormatInt(sec%60/int64(SeriesStep/time.Second), 10) + "|"
}

// Flush adds the counts gathered so far to Redis.
func (r *Recorder) Flush(ctx context.Context) error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	counts, hist, routes := r.counts, r.hist, r.routes
	r.counts, r.hist, r.routes = map[stageSecond]int64{}, map[latencySecond]int64{}, map[string]int64{}
	r.mu.Unlock()
	if len(counts) == 0 && len(hist) == 0 && len(routes) == 0 {
		return nil
	}
	pipe := r.rdb.Pipeline()
	keys := map[string]time.Duration{}
	active := map[string]bool{}
	step := int64(SeriesStep / time.Second)
	for k, n := range counts {
		shard := strconv.FormatInt(k.shard, 10)
		key := r.countKey(shard, strconv.FormatInt(k.sec, 10))
		pipe.HIncrBy(ctx, key, k.stage, n)
		keys[key] = Retention
		skey := r.seriesKey(shard, k.sec-k.sec%60)
		pipe.HIncrBy(ctx, skey, strconv.FormatInt(k.sec%60/step, 10)+"|"+k.stage, n)
		keys[skey] = SeriesRetention
		active[shard] = true
	}
	// Each shard is scored by when it was last counted, so Shards can
	// forget one whose counts have all expired.
	for id := range active {
		pipe.ZAdd(ctx, r.activeKey(), redis.Z{Score: float64(time.Now().Unix()), Member: id})
	}
	for k, n := range hist {
		bucket := strconv.Itoa(k.bucket)
		key := r.histKey(k.stage, strconv.FormatInt(k.sec, 10))
		pipe.HIncrBy(ctx, key, bucket, n)
		keys[key] = Retention
		lkey := r.latencyKey(k.sec - k.sec%60)
		pipe.HIncrBy(ctx, lkey, slotField(k.sec)+k.stage+"|"+bucket, n)
		keys[lkey] = SeriesRetention
	}
	for k, n := range routes {
		f := strings.SplitN(k, "|", 3)
		sec, _ := strconv.ParseInt(f[1], 10, 64)
		key := r.routeKey(sec - sec%60)
		pipe.HIncrBy(ctx, key, slotField(sec)+f[0]+"|"+f[2], n)
		keys[key] = SeriesRetention
	}
	for k, ttl := range keys {
		pipe.Expire(ctx, k, ttl)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		// Put the counts back so a Redis blip loses nothing.
		r.mu.Lock()
		for k, n := range counts {
			r.counts[k] += n
		}
		for k, n := range hist {
			r.hist[k] += n
		}
		for k, n := range routes {
			r.routes[k] += n
		}
		r.mu.Unlock()
		return fmt.Errorf("flush funnel: %w", err)
	}
	return nil
}

// Run flushes every interval until ctx ends, then once more.
func (r *Recorder) Run(ctx context.Context, interval time.Duration) {
	if r == nil {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			r.Flush(context.WithoutCancel(ctx)) //nolint:errcheck
			return
		case <-t.C:
			if err := r.Flush(ctx); err != nil {
				r.log.Warn("funnel flush", "err", err)
			}
		}
	}
}

// Second is one second of counts.
type Second struct {
	At     time.Time
	Counts map[string]int64
}

// Read returns per-second counts of a shard (0: events of no shard) for
// the seconds in [from, to], summed over every process.
func (r *Recorder) Read(ctx context.Context, shardID int64, from, to time.Time) ([]Second, error) {
	var out []Second
	pipe := r.rdb.Pipeline()
	var cmds []*redis.MapStringStringCmd
	for s := from.Unix(); s <= to.Unix(); s++ {
		cmds = append(cmds, pipe.HGetAll(ctx, r.countKey(strconv.FormatInt(shardID, 10), strconv.FormatInt(s, 10))))
	}
	if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
		return nil, fmt.Errorf("read funnel: %w", err)
	}
	for i, c := range cmds {
		sec := Second{At: time.Unix(from.Unix()+int64(i), 0), Counts: map[string]int64{}}
		for k, v := range c.Val() {
			n, _ := strconv.ParseInt(v, 10, 64)
			sec.Counts[k] = n
		}
		out = append(out, sec)
	}
	return out, nil
}

// Bucket is one SeriesStep of counts, starting at At.
type Bucket struct {
	At     time.Time
	Counts map[string]int64
}

// Series returns each shard's buckets from the one holding from to the
// one holding to, summed over every process: one read per shard and
// minute, all in one round trip. Buckets older than SeriesRetention are
// empty.
func (r *Recorder) Series(ctx context.Context, shardIDs []int64, from, to time.Time) (map[int64][]Bucket, error) {
	first, last, n, err := slotRange(from, to)
	if err != nil {
		return nil, fmt.Errorf("read funnel series: %w", err)
	}
	step := int64(SeriesStep / time.Second)
	out := make(map[int64][]Bucket, len(shardIDs))
	keys := make([]func(minute int64) string, len(shardIDs))
	for j, id := range shardIDs {
		bs := make([]Bucket, n)
		for i := range bs {
			bs[i] = Bucket{At: time.Unix(first+int64(i)*step, 0), Counts: map[string]int64{}}
		}
		out[id] = bs
		shard := strconv.FormatInt(id, 10)
		keys[j] = func(minute int64) string { return r.seriesKey(shard, minute) }
	}
	err = r.readSlots(ctx, keys, first, last, func(j, i int, stage string, c int64) { out[shardIDs[j]][i].Counts[stage] += c })
	if err != nil {
		return nil, fmt.Errorf("read funnel series: %w", err)
	}
	return out, nil
}

func (r *Recorder) activeKey() string { return r.prefix + ":funnel:active" }

// Shards lists the shards counted within Retention: a shard whose counts
// have all expired is dropped, so the list does not grow with every
// window ever sold.
func (r *Recorder) Shards(ctx context.Context) ([]int64, error) {
	cutoff := strconv.FormatInt(time.Now().Add(-Retention).Unix(), 10)
	pipe := r.rdb.Pipeline()
	pipe.ZRemRangeByScore(ctx, r.activeKey(), "-inf", "("+cutoff)
	members := pipe.ZRange(ctx, r.activeKey(), 0, -1)
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("funnel shards: %w", err)
	}
	ids := members.Val()
	var out []int64
	for _, s := range ids {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			out = append(out, n)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out, nil
}

// Quantile estimates the q-quantile (0..1) of stage's latency over
// [from, to] from the histogram: the upper bound of the bucket it falls in.
func (r *Recorder) Quantile(ctx context.Context, stage string, from, to time.Time, q float64) (time.Duration, int64, error) {
	pipe := r.rdb.Pipeline()
	var cmds []*redis.MapStringStringCmd
	for s := from.Unix(); s <= to.Unix(); s++ {
		cmds = append(cmds, pipe.HGetAll(ctx, r.histKey(stage, strconv.FormatInt(s, 10))))
	}
	if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
		return 0, 0, fmt.Errorf("read latency: %w", err)
	}
	counts := make([]int64, len(Buckets))
	for _, c := range cmds {
		for k, v := range c.Val() {
			b, _ := strconv.Atoi(k)
			n, _ := strconv.ParseInt(v, 10, 64)
			if b >= 0 && b < len(counts) {
				counts[b] += n
			}
		}
	}
	d, total := quantile(counts, q)
	return d, total, nil
}

// quantile is the q-quantile of a histogram over Buckets (the upper bound
// of the bucket it falls in) and how many samples it holds; 0 for none.
func quantile(counts []int64, q float64) (time.Duration, int64) {
	var total int64
	for _, n := range counts {
		total += n
	}
	if total == 0 {
		return 0, 0
	}
	want := int64(float64(total)*q + 0.999999)
	var seen int64
	for b, n := range counts {
		seen += n
		if seen >= want {
			return time.Duration(Buckets[b]) * time.Millisecond, total
		}
	}
	return time.Duration(Buckets[len(Buckets)-1]) * time.Millisecond, total
}

// slotRange is the span of SeriesStep buckets from the one holding from
// to the one holding to, as Unix seconds of the first and last, and how
// many there are.
func slotRange(from, to time.Time) (first, last int64, n int, err error) {
	step := int64(SeriesStep / time.Second)
	first, last = from.Unix()-from.Unix()%step, to.Unix()-to.Unix()%step
	if last < first {
		return 0, 0, 0, fmt.Errorf("%v is before %v", to, from)
	}
	return first, last, int((last-first)/step) + 1, nil
}

// readSlots reads per-minute series hashes over [first, last], every
// series (keys[j] names its hash of a minute) in one round trip, and calls
// add with the series, the field's bucket index, the field after its slot,
// and its count.
func (r *Recorder) readSlots(ctx context.Context, keys []func(minute int64) string, first, last int64, add func(series, i int, field string, n int64)) error {
	step := int64(SeriesStep / time.Second)
	type read struct {
		series int
		minute int64
		cmd    *redis.MapStringStringCmd
	}
	var reads []read
	pipe := r.rdb.Pipeline()
	for j, key := range keys {
		for m := first - first%60; m <= last; m += 60 {
			reads = append(reads, read{j, m, pipe.HGetAll(ctx, key(m))})
		}
	}
	if len(reads) == 0 {
		return nil
	}
	if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
		return err
	}
	for _, rd := range reads {
		for field, v := range rd.cmd.Val() {
			slot, rest, ok := strings.Cut(field, "|")
			s, err := strconv.ParseInt(slot, 10, 64)
			if !ok || err != nil {
				continue
			}
			at := rd.minute + s*step
			if at < first || at > last {
				continue
			}
			c, _ := strconv.ParseInt(v, 10, 64)
			add(rd.series, int((at-first)/step), rest, c)
		}
	}
	return nil
}

// LatencyBucket is one SeriesStep of latency histograms: per stage, the
// count of samples in each of Buckets, summed over every process.
type LatencyBucket struct {
	At   time.Time
	Hist map[string][]int64
}

// Quantile is the q-quantile of stage's latency in this bucket and the
// number of samples it is taken from (0: none, and no quantile).
func (b LatencyBucket) Quantile(stage string, q float64) (time.Duration, int64) {
	return quantile(b.Hist[stage], q)
}

// LatencySeries returns the latency histograms of every stage in the
// buckets from the one holding from to the one holding to, summed over
// every process: one read per minute, in one round trip.
func (r *Recorder) LatencySeries(ctx context.Context, from, to time.Time) ([]LatencyBucket, error) {
	first, last, n, err := slotRange(from, to)
	if err != nil {
		return nil, fmt.Errorf("read latency series: %w", err)
	}
	out := make([]LatencyBucket, n)
	for i := range out {
		out[i] = LatencyBucket{At: time.Unix(first+int64(i)*int64(SeriesStep/time.Second), 0), Hist: map[string][]int64{}}
	}
	err = r.readSlots(ctx, []func(int64) string{r.latencyKey}, first, last, func(_, i int, field string, c int64) {
		stage, bs, _ := strings.Cut(field, "|")
		b, err := strconv.Atoi(bs)
		if err != nil || b < 0 || b >= len(Buckets) {
			return
		}
		h := out[i].Hist[stage]
		if h == nil {
			h = make([]int64, len(Buckets))
			out[i].Hist[stage] = h
		}
		h[b] += c
	})
	if err != nil {
		return nil, fmt.Errorf("read latency series: %w", err)
	}
	return out, nil
}

// RouteSeries returns every payment route's events in the buckets from
// the one holding from to the one holding to, summed over every process:
// Counts are keyed "route|event" (an outcome or RouteBreakerOpened).
func (r *Recorder) RouteSeries(ctx context.Context, from, to time.Time) ([]Bucket, error) {
	first, last, n, err := slotRange(from, to)
	if err != nil {
		return nil, fmt.Errorf("read route series: %w", err)
	}
	out := make([]Bucket, n)
	for i := range out {
		out[i] = Bucket{At: time.Unix(first+int64(i)*int64(SeriesStep/time.Second), 0), Counts: map[string]int64{}}
	}
	if err := r.readSlots(ctx, []func(int64) string{r.routeKey}, first, last, func(_, i int, field string, c int64) { out[i].Counts[field] += c }); err != nil {
		return nil, fmt.Errorf("read route series: %w", err)
	}
	return out, nil
}
