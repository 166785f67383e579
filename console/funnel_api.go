package console

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"tatkal/booking"
	"tatkal/booking/api/reply"
	"tatkal/booking/funnel"
)

// LiveFunnel is the answer of GET /v1/admin/funnel/live: the funnel summed
// over every app process for the last Seconds complete seconds, for
// machines (a person's API token; see doc.go).
type LiveFunnel struct {
	At      time.Time         `json:"at"`
	Seconds int               `json:"seconds"`
	Stages  []LiveStage       `json:"stages"`
	Shards  []LiveShard       `json:"shards"`
	Suggest []LeverSuggestion `json:"lever_suggestions"`
}

// LiveStage is one stage over the whole window: its count and, for stages
// with a latency (queue_entered, hold_attempt, pay_initiated, confirmed),
// its p95 in milliseconds (the upper bound of the histogram bucket it
// falls in) and how many samples it rests on; null without samples.
type LiveStage struct {
	Stage   string `json:"stage"`
	Count   int64  `json:"count"`
	P95MS   *int64 `json:"p95_ms"`
	Samples int64  `json:"samples"`
}

// LiveShard is one shard's counts and its queue now.
type LiveShard struct {
	ID       int64            `json:"id"`
	Label    string           `json:"label"`
	Counts   map[string]int64 `json:"counts"`
	Waiting  int64            `json:"waiting"`
	Admitted int64            `json:"admitted"`
}

const liveMaxSeconds = 600

// apiFunnelLive answers the live funnel as JSON.
func (c *Console) apiFunnelLive(w http.ResponseWriter, r *http.Request) {
	secs := 60
	if v := r.URL.Query().Get("seconds"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > liveMaxSeconds {
			reply.Error(w, r, c.log, booking.Errorf(booking.EINVALID, "BAD_SECONDS", "seconds is a whole number from 1 to %d.", liveMaxSeconds))
			return
		}
		secs = n
	}
	out, err := c.liveFunnel(r, secs)
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	reply.JSON(w, http.StatusOK, out)
}

func (c *Console) liveFunnel(r *http.Request, secs int) (LiveFunnel, error) {
	ctx := r.Context()
	to := time.Now().Truncate(time.Second).Add(-time.Second) // the last complete second
	from := to.Add(-time.Duration(secs-1) * time.Second)
	out := LiveFunnel{At: to, Seconds: secs, Stages: []LiveStage{}, Shards: []LiveShard{}}
	shards, err := c.shardList(ctx)
	if err != nil {
		return out, err
	}
	labels := map[int64]string{0: "no shard (shed at the door)"}
	ids := []int64{0}
	for _, s := range shards {
		labels[s.id] = fmt.Sprintf("%d %s %s %s", s.id, s.train, s.class, s.date)
		ids = append(ids, s.id)
	}
	counted, err := c.cfg.Funnel.Shards(ctx)
	if err != nil {
		return out, err
	}
	for _, id := range counted {
		if _, ok := labels[id]; !ok {
			labels[id] = fmt.Sprintf("%d (not listed)", id)
			ids = append(ids, id)
		}
	}
	total := map[string]int64{}
	for _, id := range ids {
		read, err := c.cfg.Funnel.Read(ctx, id, from, to)
		if err != nil {
			return out, err
		}
		ls := LiveShard{ID: id, Label: labels[id], Counts: map[string]int64{}}
		for _, s := range read {
			for st, n := range s.Counts {
				ls.Counts[st] += n
				total[st] += n
			}
		}
		if id != 0 && c.cfg.QueueDepth != nil {
			if ls.Waiting, ls.Admitted, err = c.cfg.QueueDepth(ctx, id); err != nil {
				return out, err
			}
		}
		if id != 0 || len(ls.Counts) > 0 {
			out.Shards = append(out.Shards, ls)
		}
	}
	for _, st := range funnel.Stages {
		d, n, err := c.cfg.Funnel.Quantile(ctx, st, from, to, 0.95)
		if err != nil {
			return out, err
		}
		s := LiveStage{Stage: st, Count: total[st], Samples: n}
		if n > 0 {
			ms := d.Milliseconds()
			s.P95MS = &ms
		}
		out.Stages = append(out.Stages, s)
	}
	if out.Suggest, err = c.suggestions(ctx); err != nil {
		return out, err
	}
	return out, nil
}
