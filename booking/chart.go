package booking

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"tatkal/booking/db"
	"tatkal/booking/india"
	"tatkal/booking/inventory"
	"tatkal/booking/prs"
)

// A shard's chart states (inventory_shards.chart_state): OPEN sells;
// CHARTING and CHARTED are frozen (no hold, no confirmation, no
// promotion); FAILED is a preparation that failed, frozen until an
// operator retries it.
const (
	ChartOpen     = "OPEN"
	ChartCharting = "CHARTING"
	ChartCharted  = "CHARTED"
	ChartFailed   = "FAILED"
)

// ChartArgs prepares the chart of one shard, scheduled at its chart time
// (Rules.ChartBefore before departure from the origin). Unique per shard.
type ChartArgs struct {
	ShardID int64 `json:"shard_id"`
}

func (ChartArgs) Kind() string { return "chart_prepare" }
func (ChartArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueMoney, MaxAttempts: ChartMaxAttempts, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// ChartMaxAttempts bounds the retries of a chart job: River's backoff
// spreads 20 attempts over more than a day, far past any departure. The
// last failure, or any failure once the train has left, ends the job with
// the shard FAILED and an alarm (ChartJob), never a silent retry loop.
const ChartMaxAttempts = 20

// ChartSendArgs sends a shard's prepared chart to the reservation core.
// Inserted in the chart's own transaction; unique per shard.
type ChartSendArgs struct {
	ShardID int64 `json:"shard_id"`
}

func (ChartSendArgs) Kind() string { return "chart_send" }
func (ChartSendArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueMoney, MaxAttempts: ChartMaxAttempts, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// chartCancelReason is the cancel reason of a waitlisted ticket left at
// charting; it is cancelled automatically whatever the hour (the
// passenger's 30-minute deadline does not bind the chart).
const chartCancelReason = "waitlisted at charting"

// ChartCancelReason is the cancel reason of a ticket cancelled at charting.
const ChartCancelReason = chartCancelReason

// ChartScheduleArgs schedules the chart jobs of shards not charted yet
// (periodic; each shard's job is unique, so repeating it is harmless).
type ChartScheduleArgs struct{}

func (ChartScheduleArgs) Kind() string { return "chart_schedule" }
func (ChartScheduleArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueMoney, MaxAttempts: 3}
}

// ScheduleCharts inserts a chart job for every open shard departing within
// the next two days whose chart time is ahead, at that time (unique per
// shard: the job stays in River's table, so a worker down at chart time
// runs it when it comes back). It returns how many shards it looked at.
func (s Charts) ScheduleCharts(ctx context.Context) (int, error) {
	rows, err := s.pool.Query(ctx, `SELECT id FROM inventory_shards WHERE chart_state = 'OPEN'
		AND journey_date <= (now() AT TIME ZONE 'Asia/Kolkata')::date + 2`)
	if err != nil {
		return 0, fmt.Errorf("schedule charts: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return 0, fmt.Errorf("schedule charts: %w", err)
	}
	err = db.Transact(ctx, s.pool, func(tx pgx.Tx) error {
		for _, id := range ids {
			shard, err := s.catalog.ByIDTx(ctx, tx, id)
			if err != nil {
				return err
			}
			at := shard.DepartsAt.Add(-s.rules.ChartBefore)
			if !at.After(s.now()) {
				// A shard made after its chart time is not charted behind
				// anyone's back; a job scheduled before runs late instead.
				continue
			}
			if _, err := s.jobs.InsertTx(ctx, tx, ChartArgs{ShardID: id}, &river.InsertOpts{ScheduledAt: at}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("schedule charts: %w", err)
	}
	return len(ids), nil
}

// ChartReport says what preparing a chart did.
type ChartReport struct {
	Already   bool // charted before: nothing done
	Promoted  []Promoted
	Cancelled []string // PNRs of the waitlisted tickets cancelled with a refund
	// Ended are the holds still live at charting: they end, and a payment
	// for one that arrives later is refunded (a retake finds the chart).
	Ended []uuid.UUID
	Chart prs.Chart
}

// Chart prepares the chart of a shard: frozen (its window closed, no hold
// granted after), the waitlist confirmed onto whatever berths are free,
// the rest of it cancelled and refunded less clerkage through the
// cancellation's own refund path, the core sent the confirmed chart, and
// the shard marked CHARTED. All in one transaction under the shard's
// exclusive lock; a retried job finds it CHARTED and does nothing again,
// so each waitlisted ticket is refunded once.
func (s Charts) Chart(ctx context.Context, shardID int64) (ChartReport, error) {
	return s.chart(ctx, shardID, false)
}

// RetryChart prepares once more a chart whose preparation FAILED (its job
// gave up and raised the alarm), for an operator: the same preparation as
// Chart, in one transaction, taken only from FAILED. Of two operators
// asking at once one prepares it and the other is told it is in hand (a
// lock tried, not waited for); asked again after, it is refused as
// charted. A retry that fails leaves the shard FAILED with the reason and
// nothing half done. A chart not FAILED is refused and nothing is done.
func (s Charts) RetryChart(ctx context.Context, shardID int64) (ChartReport, error) {
	rep, err := s.chart(ctx, shardID, true)
	if err != nil && ErrorCode(err) == EINTERNAL {
		if _, ferr := s.pool.Exec(context.WithoutCancel(ctx), `UPDATE inventory_shards SET chart_error = $2 WHERE id = $1 AND chart_state = 'FAILED'`,
			shardID, "retry by an operator failed: "+err.Error()); ferr != nil {
			return rep, errors.Join(err, ferr)
		}
	}
	return rep, err
}

func (s Charts) chart(ctx context.Context, shardID int64, retry bool) (ChartReport, error) {
	var rep ChartReport
	var cancelled []CancelDone
	err := db.Transact(ctx, s.pool, func(tx pgx.Tx) error {
		rep, cancelled = ChartReport{}, nil
		if retry {
			var mine bool
			if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock(hashtextextended('chart.retry|' || $1::bigint, 0))`, shardID).Scan(&mine); err != nil {
				return err
			}
			if !mine {
				return Errorf(ECONFLICT, "CHART_PREPARING", "The chart of shard %d is being prepared now by another operator; nothing was done again.", shardID)
			}
		}
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1, $2)", inventory.ShardLockClass, int32(shardID)); err != nil {
			return err
		}
		var state string
		if err := tx.QueryRow(ctx, `SELECT chart_state FROM inventory_shards WHERE id = $1 FOR UPDATE`, shardID).Scan(&state); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return Errorf(ENOTFOUND, "NO_SUCH_SHARD", "There is no shard %d.", shardID)
			}
			return err
		}
		switch {
		case retry && state == "CHARTED":
			return Errorf(ECONFLICT, "CHARTED", "The chart of shard %d is already prepared; nothing was done again.", shardID)
		case retry && state != "FAILED":
			return Errorf(ECONFLICT, "CHART_NOT_FAILED", "Shard %d's chart is %s, not a preparation that failed; its job prepares it at chart time. Nothing was done.", shardID, state)
		case !retry && (state == "CHARTED" || state == "FAILED"):
			rep.Already = true
			return nil
		case retry:
			// Prepared from the start, as the job would have: promotion
			// runs on an OPEN shard only. A failure rolls this back too.
			if _, err := tx.Exec(ctx, `UPDATE inventory_shards SET chart_state = 'OPEN' WHERE id = $1`, shardID); err != nil {
				return err
			}
		}
		var err error
		if rep.Promoted, _, err = s.promoteTx(ctx, tx, shardID); err != nil {
			return err
		}
		s.pause.At(ctx, "chart.after-promote")
		// Frozen from here: no hold, no promotion.
		if _, err := tx.Exec(ctx, `UPDATE inventory_shards SET chart_state = 'CHARTING',
			window_closes_at = least(window_closes_at, now()) WHERE id = $1`, shardID); err != nil {
			return err
		}
		if rep.Ended, err = s.endLiveHoldsTx(ctx, tx, shardID); err != nil {
			return err
		}
		waiting, err := s.waitlistTx(ctx, tx, shardID)
		if err != nil {
			return err
		}
		for _, w := range waiting {
			v, err := s.view(ctx, tx, w.holdID)
			if err != nil {
				return err
			}
			done, err := s.cancelBookingTx(ctx, tx, v, chartCancelReason, nil)
			if err != nil {
				return fmt.Errorf("cancel %s at charting: %w", w.pnr, err)
			}
			cancelled = append(cancelled, done)
			rep.Cancelled = append(rep.Cancelled, w.pnr)
			if err := NotifyT(ctx, tx, w.userID, "CHART", w.pnr, "msg.chartwl", w.pnr, w.wl, india.Decimal(done.RefundPaise)); err != nil {
				return err
			}
		}
		now := s.now().UTC()
		ref := fmt.Sprintf("CH%d-%s", shardID, now.Format("20060102T150405"))
		if rep.Chart, err = s.chartTx(ctx, tx, shardID, ref, now, rep.Cancelled); err != nil {
			return err
		}
		body, err := json.Marshal(rep.Chart)
		if err != nil {
			return err
		}
		if _, err = tx.Exec(ctx, `UPDATE inventory_shards SET chart_state = 'CHARTED', charted_at = $3, chart_ref = $2,
			chart_body = $4, chart_core_state = 'PENDING', chart_error = '' WHERE id = $1`, shardID, ref, now, body); err != nil {
			return err
		}
		_, err = s.jobs.InsertTx(ctx, tx, ChartSendArgs{ShardID: shardID}, nil)
		return err
	})
	if err != nil {
		return rep, fmt.Errorf("chart shard %d: %w", shardID, err)
	}
	if rep.Already {
		return rep, nil
	}
	for _, d := range cancelled {
		s.AfterCancelBooking(ctx, d)
	}
	if _, err := s.Rebuild(ctx, shardID); err != nil {
		s.log.Warn("rebuild after charting failed; the sweeper rebuilds it", "shard", shardID, "err", err)
	}
	s.log.Info("chart prepared", "shard", shardID, "promoted", len(rep.Promoted), "cancelled", len(rep.Cancelled), "holds ended", len(rep.Ended))
	return rep, nil
}

// endLiveHoldsTx ends, in charting's transaction, every hold of the shard
// still live (seats or a waitlist offer): the chart is final, so none may
// become a ticket after it. A payment for one that arrives later goes the
// late-success way, finds the chart prepared and is refunded in full. The
// shard is rebuilt after the commit, which drops their Redis records.
func (s Charts) endLiveHoldsTx(ctx context.Context, tx pgx.Tx, shardID int64) ([]uuid.UUID, error) {
	rows, err := tx.Query(ctx, `UPDATE holds SET state = 'RELEASED', state_reason = 'the chart is prepared', updated_at = now(),
		state_version = state_version + 1 WHERE shard_id = $1 AND state = 'HELD' RETURNING id`, shardID)
	if err != nil {
		return nil, fmt.Errorf("end live holds of shard %d: %w", shardID, err)
	}
	ended, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		return nil, fmt.Errorf("end live holds of shard %d: %w", shardID, err)
	}
	return ended, nil
}

// chartTx builds the prepared chart of a shard as it stands in tx (after
// the promotions and cancellations of charting): every confirmed booking
// with its final berths, and the waitlisted PNRs cancelled. Each
// confirmed passenger is told the berth is final.
func (s Charts) chartTx(ctx context.Context, tx pgx.Tx, shardID int64, ref string, at time.Time, cancelled []string) (prs.Chart, error) {
	shard, err := s.catalog.ByIDTx(ctx, tx, shardID)
	if err != nil {
		return prs.Chart{}, err
	}
	c := prs.Chart{Ref: ref, Train: shard.Train, JourneyDate: shard.Date.Format(prs.DateLayout), Class: shard.Class,
		Quota: shard.Quota, PreparedAt: at, Cancelled: cancelled}
	rows, err := tx.Query(ctx, `SELECT b.pnr, b.user_id, b.from_seq, b.to_seq, p.seq, p.name, p.age, p.gender,
			coalesce(p.coach, ''), coalesce(p.berth_no, 0), coalesce(p.berth_type, '')
		FROM bookings b JOIN booking_passengers p ON p.booking_id = b.id
		WHERE b.shard_id = $1 AND b.status = 'CONFIRMED' ORDER BY b.pnr, p.seq`, shardID)
	if err != nil {
		return prs.Chart{}, fmt.Errorf("chart of shard %d: %w", shardID, err)
	}
	var pnr string
	var userID int64
	var from, to int
	var p prs.Passenger
	users := map[string]int64{}
	_, err = pgx.ForEachRow(rows, []any{&pnr, &userID, &from, &to, &p.Seq, &p.Name, &p.Age, &p.Gender, &p.Coach, &p.BerthNo, &p.BerthType},
		func() error {
			if n := len(c.Confirmed); n == 0 || c.Confirmed[n-1].PNR != pnr {
				c.Confirmed = append(c.Confirmed, prs.ChartEntry{PNR: pnr, FromSeq: from, ToSeq: to})
				users[pnr] = userID
			}
			e := &c.Confirmed[len(c.Confirmed)-1]
			e.Passengers = append(e.Passengers, p)
			return nil
		})
	if err != nil {
		return prs.Chart{}, fmt.Errorf("chart of shard %d: %w", shardID, err)
	}
	for _, e := range c.Confirmed {
		seats := make([]string, 0, len(e.Passengers))
		for _, p := range e.Passengers {
			seats = append(seats, fmt.Sprintf("%s %s/%d %s", p.Name, p.Coach, p.BerthNo, p.BerthType))
		}
		train := fmt.Sprintf("%s %s %s on %s", shard.Train, shard.TrainName, shard.Class, shard.Date.Format("2 Jan 2006"))
		if err := NotifyT(ctx, tx, users[e.PNR], "CHART", e.PNR, "msg.chartok", e.PNR, train, strings.Join(seats, ", ")); err != nil {
			return prs.Chart{}, err
		}
	}
	return c.Request(), nil
}

// SendChart delivers a charted shard's prepared chart to the reservation
// core: first every booking on it is synced (a promotion's sync may still
// be queued), then the chart itself, less any booking the core rejected
// since it was prepared (chartStanding), the same bytes however often it
// is sent. A shard charted and acknowledged already, or not charted, is
// left alone. A retryable failure is returned for the job to retry.
func (s Charts) SendChart(ctx context.Context, shardID int64) error {
	if s.core == nil {
		return errors.New("no reservation core configured")
	}
	var state string
	var body []byte
	err := s.pool.QueryRow(ctx, `SELECT chart_core_state, chart_body FROM inventory_shards WHERE id = $1`, shardID).Scan(&state, &body)
	if err != nil {
		return fmt.Errorf("send chart of shard %d: %w", shardID, err)
	}
	if state != "PENDING" {
		return nil
	}
	var chart prs.Chart
	if err := json.Unmarshal(body, &chart); err != nil {
		return fmt.Errorf("send chart of shard %d: %w", shardID, err)
	}
	rows, err := s.pool.Query(ctx, `SELECT id FROM bookings WHERE shard_id = $1 AND status = 'CONFIRMED' AND prs_state = 'PENDING'`, shardID)
	if err != nil {
		return fmt.Errorf("send chart of shard %d: %w", shardID, err)
	}
	pending, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return fmt.Errorf("send chart of shard %d: %w", shardID, err)
	}
	for _, id := range pending {
		if err := s.SyncToCore(ctx, id); err != nil {
			return fmt.Errorf("send chart of shard %d: booking %d first: %w", shardID, id, err)
		}
	}
	s.pause.At(ctx, "chart.before-send")
	if chart, err = s.chartStanding(ctx, shardID, chart); err != nil {
		return fmt.Errorf("send chart %s: %w", chart.Ref, err)
	}
	ack, err := s.core.SendChart(ctx, chart)
	if err != nil {
		return fmt.Errorf("send chart %s: %w", chart.Ref, err)
	}
	if _, err := s.pool.Exec(ctx, `UPDATE inventory_shards SET chart_core_state = 'SENT', chart_core_ref = $2, chart_sent_at = now(),
		chart_error = '', chart_sending_since = NULL WHERE id = $1 AND chart_core_state = 'PENDING'`, shardID, ack.CoreChartID); err != nil {
		return fmt.Errorf("send chart %s: %w", chart.Ref, err)
	}
	s.log.Info("chart sent to the reservation core", "shard", shardID, "ref", chart.Ref, "core_chart_id", ack.CoreChartID,
		"passengers", ack.Passengers, "cancelled", ack.Cancelled)
	return nil
}

// chartStanding is chart less its confirmed entries whose booking has been
// cancelled since it was prepared. After charting only the core's
// rejection does that (compensateRejected: cancelled, refunded in full,
// the passenger told), and the core, which does not hold the booking,
// refuses every chart that lists it (CHART_MISMATCH): sent as prepared, the
// chart could never be delivered, nor the passengers who do travel charted
// at the core. The core stored no chart listing such a booking, so the
// chart sent instead conflicts with no earlier send. The shard keeps the
// chart as sent, so a resend after a lost answer sends the same bytes.
func (s Charts) chartStanding(ctx context.Context, shardID int64, chart prs.Chart) (prs.Chart, error) {
	pnrs := make([]string, len(chart.Confirmed))
	for i, e := range chart.Confirmed {
		pnrs[i] = e.PNR
	}
	rows, err := s.pool.Query(ctx, `SELECT pnr FROM bookings WHERE shard_id = $1 AND pnr = ANY($2) AND status = 'CANCELLED'`, shardID, pnrs)
	if err != nil {
		return chart, err
	}
	gone, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(gone) == 0 {
		return chart, err
	}
	chart.Confirmed = slices.DeleteFunc(slices.Clone(chart.Confirmed), func(e prs.ChartEntry) bool { return slices.Contains(gone, e.PNR) })
	body, err := json.Marshal(chart.Request())
	if err != nil {
		return chart, err
	}
	if _, err := s.pool.Exec(ctx, `UPDATE inventory_shards SET chart_body = $2 WHERE id = $1 AND chart_core_state = 'PENDING'`,
		shardID, body); err != nil {
		return chart, err
	}
	s.log.Warn("chart sent without bookings cancelled since it was prepared (the core rejected them; refunded)",
		"shard", shardID, "ref", chart.Ref, "pnrs", gone)
	return chart, nil
}

// ChartJob runs one attempt of a chart job (ChartArgs, or ChartSendArgs
// when send) and decides what a failure means. It is retried while that
// can help: not after the last attempt, not once the train has left (a
// chart is for boarding), and never for the core's definitive refusal. A
// job that gives up leaves the shard FAILED (the chart) or its core state
// FAILED (the delivery) with the reason, raises an alarm (error log), and
// ends cancelled in River, so the console shows it and nothing loops.
func (s Charts) ChartJob(ctx context.Context, shardID int64, send bool, attempt, maxAttempts int) error {
	var err error
	if send {
		err = s.SendChart(ctx, shardID)
	} else {
		_, err = s.Chart(ctx, shardID)
	}
	if err == nil || ctx.Err() != nil {
		return err
	}
	why := ""
	switch {
	case attempt >= maxAttempts:
		why = fmt.Sprintf("gave up after %d attempts", attempt)
	case send && coreRefused(err):
		why = "the reservation core refused it"
	default:
		shard, serr := s.catalog.ByID(ctx, shardID)
		if serr == nil && !s.now().Before(shard.DepartsAt) {
			why = "the train has left"
		}
	}
	if why == "" {
		return err
	}
	if ferr := s.chartFailed(ctx, shardID, send, why+": "+err.Error()); ferr != nil {
		return errors.Join(err, ferr)
	}
	return river.JobCancel(fmt.Errorf("chart of shard %d: %s: %w", shardID, why, err))
}

// coreRefused reports a definitive answer of the core (a rejection, or a
// request it calls wrong), which no retry changes; timeouts, outages and
// our own database's errors are worth retrying.
func coreRefused(err error) bool {
	_, rejected := errors.AsType[*prs.RejectedError](err)
	_, protocol := errors.AsType[*prs.ProtocolError](err)
	return rejected || protocol
}

// chartFailed records a chart that will not happen by itself and raises
// the alarm.
func (s Charts) chartFailed(ctx context.Context, shardID int64, send bool, reason string) error {
	q := `UPDATE inventory_shards SET chart_state = 'FAILED', chart_error = $2,
		window_closes_at = least(window_closes_at, now()) WHERE id = $1 AND chart_state IN ('OPEN', 'CHARTING')`
	if send {
		q = `UPDATE inventory_shards SET chart_core_state = 'FAILED', chart_error = $2, chart_sending_since = NULL
			WHERE id = $1 AND chart_core_state = 'PENDING'`
	}
	if _, err := s.pool.Exec(ctx, q, shardID, reason); err != nil {
		return fmt.Errorf("record chart failure of shard %d: %w", shardID, err)
	}
	what := "chart preparation"
	if send {
		what = "chart delivery to the reservation core"
	}
	s.log.Error("ALARM: "+what+" failed; settle the shard by hand", "shard", shardID, "reason", reason)
	return nil
}

// ChartSendLease is how long an operator's send of a chart is taken to be
// in hand. The send is bounded well inside it (ChartSendTimeout), so a
// chart still PENDING from an operator's send older than the lease was
// left by a process that died mid-send, and may be sent again.
const ChartSendLease = 2 * time.Minute

// ChartSendTimeout bounds an operator's send of a chart, the core's answer
// and the syncs before it included.
const ChartSendTimeout = ChartSendLease / 2

// RetryChartSend gives a chart whose delivery to the reservation core
// FAILED (its job gave up and raised the alarm), or whose last operator's
// send was left unfinished past its lease, one more attempt, asked for by
// an operator: the state becomes PENDING, stamped now, by
// compare-and-set, so of two operators clicking at once one sends and the
// other is told it is in hand; then SendChart, which sends the chart as
// prepared less bookings the core rejected since (chartStanding, so a
// chart refused for listing them is delivered), and marks it SENT. A
// failure records FAILED again with the reason. The answer is the core's
// chart id. A chart in neither state is refused and nothing is sent.
func (s Charts) RetryChartSend(ctx context.Context, shardID int64) (string, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE inventory_shards SET chart_core_state = 'PENDING', chart_sending_since = now()
		WHERE id = $1 AND chart_state = 'CHARTED' AND (chart_core_state = 'FAILED'
		   OR (chart_core_state = 'PENDING' AND chart_sending_since < now() - make_interval(secs => $2)))`, shardID, ChartSendLease.Seconds())
	if err != nil {
		return "", fmt.Errorf("retry chart of shard %d: %w", shardID, err)
	}
	if tag.RowsAffected() == 0 {
		var chart, core, ref string
		err := s.pool.QueryRow(ctx, `SELECT chart_state, coalesce(chart_core_state, ''), coalesce(chart_core_ref, '')
			FROM inventory_shards WHERE id = $1`, shardID).Scan(&chart, &core, &ref)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return "", Errorf(ENOTFOUND, "NO_SUCH_SHARD", "There is no shard %d.", shardID)
		case err != nil:
			return "", fmt.Errorf("retry chart of shard %d: %w", shardID, err)
		case chart == "CHARTED" && core == "SENT":
			return "", Errorf(ECONFLICT, "CHART_SENT", "The chart of shard %d is already at the core (%s); nothing was sent again.", shardID, ref)
		case chart == "CHARTED" && core == "PENDING":
			return "", Errorf(ECONFLICT, "CHART_SENDING", "The chart of shard %d is being sent now (by its job or another operator); nothing was sent again. A send from the console that never finishes can be repeated after %d minutes.",
				shardID, int(ChartSendLease.Minutes()))
		}
		return "", Errorf(ECONFLICT, "CHART_NOT_FAILED", "Shard %d's chart is %s, not a prepared chart whose delivery failed; nothing was sent.", shardID, chart)
	}
	s.pause.At(ctx, "chart.retry-claimed")
	// Bounded inside the lease, and not cut short by the operator's page
	// going away: a send either finishes or fails within the lease.
	sendCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ChartSendTimeout)
	defer cancel()
	if err := s.SendChart(sendCtx, shardID); err != nil {
		// Recorded whatever became of the request, so the console offers
		// the retry again rather than showing it in hand forever.
		if ferr := s.chartFailed(context.WithoutCancel(ctx), shardID, true, "retry by an operator failed: "+err.Error()); ferr != nil {
			return "", errors.Join(err, ferr)
		}
		return "", Errorf(EUNAVAIL, "CORE_FAILED", "The reservation core did not take the chart of shard %d: %v. It is FAILED again; retry once the core is healthy.", shardID, err)
	}
	var ref string
	if err := s.pool.QueryRow(ctx, `SELECT coalesce(chart_core_ref, '') FROM inventory_shards WHERE id = $1`, shardID).Scan(&ref); err != nil {
		return "", fmt.Errorf("retry chart of shard %d: %w", shardID, err)
	}
	return ref, nil
}
