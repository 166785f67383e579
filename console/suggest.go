package console

import (
	"context"
	"fmt"
	"time"

	"tatkal/booking/funnel"
	"tatkal/booking/payment"
	"tatkal/console/levers"
	"tatkal/views"
)

// LeverSuggestion is a suggested lever change (views.LeverSuggestion).
type LeverSuggestion = views.LeverSuggestion

// What makes a suggestion. A route is failing when its breaker is open or
// fewer than half its calls of the last minute were answered (over at
// least routeMinCalls); a queue is deep from queueDeepAt waiting, and the
// admission rate is worth raising only while holds are fast (the
// controller's own p95 target), so the suggestion never feeds a struggling
// core.
const (
	routeMinCalls   = 10
	routeFailing    = 0.5
	queueDeepAt     = 200
	queueDrainIn    = 60 // seconds the suggested rate takes to drain the queue
	rateSuggestMin  = 50
	rateSuggestMax  = 5000 // the two-admin line of admission_rate
	holdFastEnough  = 800 * time.Millisecond
	suggestRevertIn = "15m"
)

// queueDepthOf is one shard's queue, as the suggestions read it.
type queueDepthOf struct {
	shardID, waiting int64
	label            string
}

// suggest turns route health and queue depth into lever suggestions, in a
// stable order: routes, then queues. Pure, so its rules are tested alone.
func suggest(hs []payment.Health, qs []queueDepthOf, holdP95 time.Duration, holdSamples int64) []LeverSuggestion {
	var out []LeverSuggestion
	for _, h := range hs {
		if !h.Enabled {
			continue
		}
		failing := h.Calls >= routeMinCalls && h.SuccessRate < routeFailing
		if !h.Open && !failing {
			continue
		}
		why := fmt.Sprintf("%.0f%% of %d calls answered in the last minute", h.SuccessRate*100, h.Calls)
		if h.Open {
			why += ", breaker open"
		}
		out = append(out, LeverSuggestion{Name: levers.Route, Scope: h.Gateway + "/" + h.Method, Value: "0,off",
			Reason: "route failing: " + why, RevertAfter: suggestRevertIn, Why: why})
	}
	for _, q := range qs {
		if q.waiting < queueDeepAt {
			continue
		}
		if holdSamples > 0 && holdP95 > holdFastEnough {
			continue // the core is slow: more admissions would only queue at the hold
		}
		rate := min(max((q.waiting+queueDrainIn-1)/queueDrainIn, rateSuggestMin), rateSuggestMax)
		why := fmt.Sprintf("%d waiting on shard %s; holds p95 %s", q.waiting, q.label, holdP95)
		out = append(out, LeverSuggestion{Name: levers.AdmissionRate, Scope: fmt.Sprintf("shard:%d", q.shardID), Value: fmt.Sprint(rate),
			Reason: fmt.Sprintf("deep queue: %d waiting, drain in about %d s", q.waiting, queueDrainIn), RevertAfter: suggestRevertIn, Why: why})
	}
	return out
}

// suggestions reads route health, every listed shard's queue and the
// holds' p95 over the last minute, and suggests.
func (c *Console) suggestions(ctx context.Context) ([]LeverSuggestion, error) {
	var hs []payment.Health
	if c.cfg.Payments != nil {
		var err error
		if hs, err = c.cfg.Payments.Healths(ctx); err != nil {
			return nil, err
		}
	}
	var qs []queueDepthOf
	if c.cfg.QueueDepth != nil {
		shards, err := c.shardList(ctx)
		if err != nil {
			return nil, err
		}
		for _, s := range shards {
			w, _, err := c.cfg.QueueDepth(ctx, s.id)
			if err != nil {
				return nil, err
			}
			qs = append(qs, queueDepthOf{shardID: s.id, waiting: w, label: fmt.Sprintf("%d %s %s %s", s.id, s.train, s.class, s.date)})
		}
	}
	now := time.Now()
	p95, n, err := c.cfg.Funnel.Quantile(ctx, funnel.HoldAttempt, now.Add(-time.Minute), now, 0.95)
	if err != nil {
		return nil, err
	}
	return suggest(hs, qs, p95, n), nil
}
