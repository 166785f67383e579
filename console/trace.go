package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"tatkal/views"
)

// tracePage answers "why did this person not get a ticket": every hold,
// payment (with its events), refund, notification and booking of the
// account, in time order, and the outcome, with each refusal the waiting
// room gave (kind queue: rate limit, early poll, sold out, lapsed offer),
// each admission from a queue (kind admission, from admission_log) and each
// refused hold attempt (kind refused: sold out, daily cap, live hold,
// throttled, high demand; the booking service's bounded per-account log).
func (c *Console) tracePage(w http.ResponseWriter, r *http.Request) {
	login := strings.TrimSpace(r.URL.Query().Get("login"))
	p := views.TracePage{Login: login}
	if login != "" {
		err := c.trace(r.Context(), &p)
		if errors.Is(err, pgx.ErrNoRows) {
			p.Error = "No passenger account " + login + "."
		} else if err != nil {
			c.serverError(w, r, err)
			return
		}
	}
	c.render(w, r, "User trace", views.ConsoleTrace(p))
}

type traceEvent struct {
	at time.Time
	views.TraceEvent
}

func (c *Console) trace(ctx context.Context, p *views.TracePage) error {
	if err := c.pool.QueryRow(ctx, `SELECT id FROM users WHERE login = $1`, p.Login).Scan(&p.UserID); err != nil {
		return err
	}
	p.Found = true
	var evs []traceEvent
	addRows := func(sql string, kind string) error {
		rows, err := c.pool.Query(ctx, sql, p.UserID)
		if err != nil {
			return fmt.Errorf("trace %s: %w", kind, err)
		}
		defer rows.Close()
		for rows.Next() {
			var e traceEvent
			if err := rows.Scan(&e.at, &e.Ref, &e.What, &e.Detail); err != nil {
				return fmt.Errorf("trace %s: %w", kind, err)
			}
			e.Kind, e.At = kind, ist(e.at)
			evs = append(evs, e)
		}
		return rows.Err()
	}
	queries := []struct{ kind, sql string }{
		{"hold", `SELECT h.created_at, h.id::text, h.kind || ' hold granted on ' || s.train_number || ' ' || s.class || ' ' || s.journey_date::text,
			h.seat_count || ' seat(s), held until ' || to_char(h.expires_at AT TIME ZONE 'Asia/Kolkata', 'HH24:MI:SS') || ', now ' || h.state
			FROM holds h JOIN inventory_shards s ON s.id = h.shard_id WHERE h.user_id = $1`},
		{"hold", `SELECT h.updated_at, h.id::text, 'hold ended: ' || h.state, h.state_reason
			FROM holds h WHERE h.user_id = $1 AND h.state <> 'HELD'`},
		{"payment", `SELECT e.at, p.id::text, p.method || ' ' || e.from_state || ' → ' || e.to_state, e.cause
			FROM payment_events e JOIN payments p ON p.id = e.payment_id WHERE p.user_id = $1`},
		{"refund", `SELECT r.initiated_at, r.id::text, 'refund ' || r.state || ' ₹' || (r.amount_paise / 100)::text, r.reason
			FROM refunds r JOIN payments p ON p.id = r.payment_id WHERE p.user_id = $1`},
		{"booking", `SELECT b.booked_at, b.pnr, 'booking ' || b.status, 'hold ' || b.hold_id::text FROM bookings b WHERE b.user_id = $1`},
		{"notification", `SELECT n.created_at, n.channel, n.kind, n.subject FROM notifications n WHERE n.user_id = $1`},
		{"admission", `SELECT l.issued_at, 'shard ' || l.shard_id::text, 'admitted from the queue at place ' || (l.seq + 1)::text,
			coalesce('offer valid until ' || to_char(l.expires_at AT TIME ZONE 'Asia/Kolkata', 'HH24:MI:SS'), '')
			FROM admission_log l WHERE l.user_id = $1 AND l.shard_id IS NOT NULL`},
	}
	for _, q := range queries {
		if err := addRows(q.sql, q.kind); err != nil {
			return err
		}
	}
	if c.cfg.QueueRefusals != nil {
		// Best effort: they live in Redis, and a trace without them still helps.
		rs, err := c.cfg.QueueRefusals(ctx, p.UserID)
		if err != nil {
			c.log.Warn("trace: queue refusals", "user", p.UserID, "err", err)
		}
		for _, r := range rs {
			evs = append(evs, traceEvent{at: r.At, TraceEvent: views.TraceEvent{At: ist(r.At), Kind: "queue",
				Ref: fmt.Sprintf("shard %d", r.ShardID), What: "refused in the queue: " + r.Reason, Detail: r.Detail}})
		}
	}
	if c.cfg.Booking != nil {
		// Best effort, as the queue's: a diagnosis kept in Redis.
		rs, err := c.cfg.Booking.HoldRefusals(ctx, p.UserID)
		if err != nil {
			c.log.Warn("trace: hold refusals", "user", p.UserID, "err", err)
		}
		for _, r := range rs {
			evs = append(evs, traceEvent{at: r.At, TraceEvent: views.TraceEvent{At: ist(r.At), Kind: "refused",
				Ref: fmt.Sprintf("shard %d", r.ShardID), What: "hold refused: " + r.Reason, Detail: r.Detail}})
		}
	}
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].at.Before(evs[j].at) })
	for _, e := range evs {
		p.Events = append(p.Events, e.TraceEvent)
	}
	p.Outcome = outcome(evs)
	return nil
}

// outcome sums up the attempts in one sentence.
func outcome(evs []traceEvent) string {
	var holds, confirmed, refunds, failed, refused int
	var lastRefusal string
	for _, e := range evs {
		switch {
		case e.Kind == "refused":
			refused++
			lastRefusal = strings.TrimPrefix(e.What, "hold refused: ")
		case e.Kind == "booking" && strings.Contains(e.What, "CONFIRMED"):
			confirmed++
		case e.Kind == "hold" && strings.Contains(e.What, "hold granted"):
			holds++
		case e.Kind == "refund":
			refunds++
		case e.Kind == "payment" && strings.HasSuffix(e.What, "FAILED"):
			failed++
		}
	}
	switch {
	case confirmed > 0:
		return fmt.Sprintf("Got a ticket (%d booking(s)).", confirmed)
	case holds == 0 && refused > 0:
		return fmt.Sprintf("Never held a seat: %d hold attempt(s) refused, the last one %s.", refused, lastRefusal)
	case holds == 0:
		return "Never held a seat: no hold was granted (sold out, refused at the door, or never reached the hold step)."
	case failed > 0 && refunds > 0:
		return fmt.Sprintf("Held seats but payment failed (%d failure(s)); %d refund(s) issued.", failed, refunds)
	case failed > 0:
		return fmt.Sprintf("Held seats but payment failed (%d failure(s)); the seats went back.", failed)
	default:
		return fmt.Sprintf("Held seats %d time(s) but never completed payment; the holds expired or were released.", holds)
	}
}
