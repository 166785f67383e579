package admission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"tatkal/booking/db"
)

// JobInserter inserts a River job in a transaction (the River client).
type JobInserter interface {
	InsertTx(ctx context.Context, tx pgx.Tx, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error)
}

// FairnessArgs computes one window's fairness figures (jobs registers
// its worker; the seal inserts it).
type FairnessArgs struct {
	ShardID int64 `json:"shard_id"`
}

// Kind names the job.
func (FairnessArgs) Kind() string { return "window_fairness" }

// Rate is the success of one group of entrants.
type Rate struct {
	Group    string  `json:"group"`
	Entrants int     `json:"entrants"`
	Booked   int     `json:"booked"`
	Rate     float64 `json:"rate"`
}

// Figures are a window's fairness figures: who got a ticket, by client
// type, account age and arrival second inside the randomised window, and
// whether arriving early bought a better place (Spearman's ρ between
// arrival time and queue rank; near 0 when it did not).
type Figures struct {
	WindowID   int64     `json:"window_id"`
	ComputedAt time.Time `json:"computed_at"`
	Entrants   int       `json:"entrants"`
	// WithArrival is how many entrants have a recorded arrival time (ρ
	// and the arrival seconds are over these).
	WithArrival int `json:"with_arrival"`
	// SpearmanRho between arrival time and queue rank inside the
	// randomised window; nil below three entrants with arrivals.
	SpearmanRho *float64 `json:"spearman_rho"`
	Verified    bool     `json:"verified"`
	VerifyNote  string   `json:"verify_note"`
	// DrawsReopened: how often the queue was lost before its seal and the
	// draw reopened for everyone to join again.
	DrawsReopened int    `json:"draws_reopened"`
	ByClient      []Rate `json:"by_client"`
	ByAge         []Rate `json:"by_account_age"`
	BySecond      []Rate `json:"by_arrival_second"`
	// Method says how each figure is counted.
	Method string `json:"method"`
}

const figuresMethod = "Over the randomised cohort (everyone who joined by randomise_until). Booked: a confirmed or waitlisted booking on the shard. " +
	"Client type: agent accounts; aggressive, those the waiting room refused for polling early or too fast on this window; ordinary, the rest. " +
	"Account age at the opening. Arrival second: seconds from the opening (before: joined in the pre-queue). " +
	"Spearman's rho: rank correlation of arrival time with queue place, ties averaged."

// ageBands are the account-age bands of the figures.
var ageBands = []struct {
	name string
	upTo time.Duration
}{{"under 3 months", 90 * 24 * time.Hour}, {"3-12 months", 365 * 24 * time.Hour}, {"1-3 years", 3 * 365 * 24 * time.Hour}, {"3+ years", math.MaxInt64}}

// ComputeFairness computes shard's window figures and stores them
// (replacing earlier ones). The window must be sealed.
func (s *Service) ComputeFairness(ctx context.Context, shardID int64) (Figures, error) {
	f := Figures{WindowID: shardID, ComputedAt: s.now().UTC().Truncate(time.Millisecond), Method: figuresMethod}
	var opens time.Time
	var sealed bool
	err := s.pool.QueryRow(ctx, `SELECT opens_at, sealed_at IS NOT NULL, draws_reopened FROM admission_windows WHERE shard_id = $1`,
		shardID).Scan(&opens, &sealed, &f.DrawsReopened)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && !sealed) {
		return f, fmt.Errorf("window %d: not sealed yet", shardID)
	}
	if err != nil {
		return f, fmt.Errorf("fairness of window %d: %w", shardID, err)
	}
	type entrant struct {
		uid       int64
		ticket    string
		score     int64
		entered   *time.Time
		created   time.Time
		agent     bool
		booked    bool
		aggressor bool
	}
	rows, err := s.pool.Query(ctx, `SELECT e.user_id, e.ticket, e.score, e.entered_at, u.created_at, u.user_type = 'AGENT',
			EXISTS (SELECT 1 FROM bookings b WHERE b.shard_id = e.shard_id AND b.user_id = e.user_id AND b.status IN ('CONFIRMED', 'WAITLISTED'))
		FROM admission_entrants e JOIN users u ON u.id = e.user_id WHERE e.shard_id = $1`, shardID)
	if err != nil {
		return f, fmt.Errorf("fairness of window %d: %w", shardID, err)
	}
	var es []*entrant
	var e entrant
	if _, err := pgx.ForEachRow(rows, []any{&e.uid, &e.ticket, &e.score, &e.entered, &e.created, &e.agent, &e.booked}, func() error {
		c := e
		es = append(es, &c)
		return nil
	}); err != nil {
		return f, fmt.Errorf("fairness of window %d: %w", shardID, err)
	}
	f.Entrants = len(es)
	// Aggressive: refused for early polls or rate on this window (the
	// waiting room's per-account trace, in Redis).
	pipe := s.rdb.Pipeline()
	lists := make([]interface{ Val() []string }, len(es))
	for i, e := range es {
		lists[i] = pipe.LRange(ctx, refusalsKey(s.cfg.Prefix, e.uid), 0, refusalsKept-1)
	}
	if len(es) > 0 {
		pipe.Exec(ctx) //nolint:errcheck // a missing trace reads as ordinary
	}
	shard := strconv.FormatInt(shardID, 10)
	for i, e := range es {
		for _, v := range lists[i].Val() {
			p := strings.SplitN(v, "|", 4)
			if len(p) == 4 && p[1] == shard && (p[2] == RefusedEarlyPoll || p[2] == RefusedRateLimit) {
				e.aggressor = true
			}
		}
	}
	// Ranks: queue place by (score, ticket); arrival rank by time.
	slices.SortFunc(es, func(a, b *entrant) int {
		if a.score != b.score {
			return compare(a.score, b.score)
		}
		return strings.Compare(a.ticket, b.ticket)
	})
	var places, arrivals []float64
	for i, e := range es {
		if e.entered != nil {
			places = append(places, float64(i+1))
			arrivals = append(arrivals, float64(e.entered.UnixMicro()))
		}
	}
	f.WithArrival = len(arrivals)
	if len(arrivals) >= 3 {
		rho := Spearman(arrivals, places)
		f.SpearmanRho = &rho
	}
	groups := func(key func(*entrant) string, order []string) []Rate {
		m := map[string]*Rate{}
		for _, g := range order {
			m[g] = &Rate{Group: g}
		}
		for _, e := range es {
			k := key(e)
			if k == "" {
				continue
			}
			r := m[k]
			if r == nil {
				r = &Rate{Group: k}
				m[k] = r
				order = append(order, k)
			}
			r.Entrants++
			if e.booked {
				r.Booked++
			}
		}
		var out []Rate
		for _, g := range order {
			r := m[g]
			if r.Entrants > 0 {
				r.Rate = math.Round(1e4*float64(r.Booked)/float64(r.Entrants)) / 1e4
			}
			out = append(out, *r)
		}
		return out
	}
	f.ByClient = groups(func(e *entrant) string {
		switch {
		case e.agent:
			return "agent"
		case e.aggressor:
			return "aggressive"
		}
		return "ordinary"
	}, []string{"ordinary", "aggressive", "agent"})
	var bandNames []string
	for _, b := range ageBands {
		bandNames = append(bandNames, b.name)
	}
	f.ByAge = groups(func(e *entrant) string {
		age := opens.Sub(e.created)
		for _, b := range ageBands {
			if age < b.upTo {
				return b.name
			}
		}
		return ageBands[len(ageBands)-1].name
	}, bandNames)
	f.BySecond = groups(func(e *entrant) string {
		if e.entered == nil {
			return ""
		}
		if e.entered.Before(opens) {
			return "before opening"
		}
		return "+" + strconv.Itoa(int(e.entered.Sub(opens)/time.Second)) + "s"
	}, []string{"before opening"})
	slices.SortStableFunc(f.BySecond, func(a, b Rate) int { return compare(secondOrder(a.Group), secondOrder(b.Group)) })
	rep, err := VerifyWindow(ctx, s.pool, shardID)
	if err != nil {
		return f, err
	}
	f.Verified = rep.OK()
	f.VerifyNote = strings.TrimSpace(rep.String())
	b, _ := json.Marshal(f)
	if _, err := s.pool.Exec(ctx, `INSERT INTO window_fairness (shard_id, computed_at, entrants, spearman_rho, verified, figures)
		VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (shard_id) DO UPDATE SET computed_at = EXCLUDED.computed_at,
		entrants = EXCLUDED.entrants, spearman_rho = EXCLUDED.spearman_rho, verified = EXCLUDED.verified, figures = EXCLUDED.figures`,
		shardID, f.ComputedAt, f.Entrants, f.SpearmanRho, f.Verified, b); err != nil {
		return f, fmt.Errorf("store fairness of window %d: %w", shardID, err)
	}
	return f, nil
}

func secondOrder(g string) int64 {
	if g == "before opening" {
		return -1
	}
	n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimPrefix(g, "+"), "s"), 10, 64)
	return n
}

// StoredFigures returns a window's stored figures, false when none yet.
func StoredFigures(ctx context.Context, q db.Querier, shardID int64) (Figures, bool, error) {
	var b []byte
	err := q.QueryRow(ctx, `SELECT figures FROM window_fairness WHERE shard_id = $1`, shardID).Scan(&b)
	if errors.Is(err, pgx.ErrNoRows) {
		return Figures{}, false, nil
	}
	if err != nil {
		return Figures{}, false, fmt.Errorf("fairness figures of window %d: %w", shardID, err)
	}
	var f Figures
	if err := json.Unmarshal(b, &f); err != nil {
		return Figures{}, false, fmt.Errorf("fairness figures of window %d: %w", shardID, err)
	}
	return f, true, nil
}

// Spearman is Spearman's rank correlation of x and y (same length ≥ 2),
// ties given their average rank.
func Spearman(x, y []float64) float64 {
	rx, ry := ranks(x), ranks(y)
	n := float64(len(rx))
	var mx, my float64
	for i := range rx {
		mx += rx[i] / n
		my += ry[i] / n
	}
	var sxy, sxx, syy float64
	for i := range rx {
		dx, dy := rx[i]-mx, ry[i]-my
		sxy += dx * dy
		sxx += dx * dx
		syy += dy * dy
	}
	if sxx == 0 || syy == 0 {
		return 0
	}
	return sxy / math.Sqrt(sxx*syy)
}

// Above says whether r's success rate is higher than o's.
func (r Rate) Above(o Rate) bool { return r.Booked*o.Entrants > o.Booked*r.Entrants }

// ByChance is how likely a group would book at least as often as it did
// if bookings fell on entrants blind to the group: the upper tail of the
// hypergeometric distribution (group.Booked or more of all the bookings
// falling on group.Entrants of all the entrants). A small figure says the
// group's advantage is not the luck of a small sample.
func ByChance(group, rest Rate) float64 {
	n, k := group.Entrants+rest.Entrants, group.Entrants
	draws := group.Booked + rest.Booked
	if group.Booked <= 0 || group.Booked > group.Entrants || rest.Booked < 0 || rest.Booked > rest.Entrants {
		return 1 // nothing above chance, or counts that tell nothing
	}
	lnChoose := func(n, k int) float64 {
		a, _ := math.Lgamma(float64(n + 1))
		b, _ := math.Lgamma(float64(k + 1))
		c, _ := math.Lgamma(float64(n - k + 1))
		return a - b - c
	}
	all := lnChoose(n, draws)
	var p, prev float64
	for x := group.Booked; x <= min(draws, k); x++ {
		if draws-x > n-k {
			continue
		}
		term := math.Exp(lnChoose(k, x) + lnChoose(n-k, draws-x) - all)
		p += term
		// Past the mode the terms only shrink: once they no longer count,
		// a window of thousands of bookings needs no more of them.
		if term < prev && term < p*1e-17 {
			break
		}
		prev = term
	}
	return min(p, 1)
}

// ChancePercent writes a ByChance figure as a percentage for people: two
// decimals under 1 %, none above, and a floor at 0.01 %.
func ChancePercent(p float64) string {
	switch {
	case p < 0.0001:
		return "< 0.01 %"
	case p < 0.01:
		return fmt.Sprintf("%.2f %%", 100*p)
	}
	return fmt.Sprintf("%.0f %%", 100*p)
}

// ranks gives each value its rank (1-based), ties the average of theirs.
func ranks(v []float64) []float64 {
	idx := make([]int, len(v))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return compareF(v[a], v[b]) })
	out := make([]float64, len(v))
	for i := 0; i < len(idx); {
		j := i
		for j+1 < len(idx) && v[idx[j+1]] == v[idx[i]] {
			j++
		}
		r := float64(i+j)/2 + 1
		for k := i; k <= j; k++ {
			out[idx[k]] = r
		}
		i = j + 1
	}
	return out
}

func compareF(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
