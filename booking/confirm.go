package booking

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/riverqueue/river"

	"tatkal/booking/db"
	"tatkal/booking/fraud"
	"tatkal/booking/funnel"
	"tatkal/booking/i18n"
	"tatkal/booking/india"
	"tatkal/booking/inventory"
)

// ConfirmResult says what ConfirmTx did.
type ConfirmResult struct {
	HoldID    uuid.UUID
	ShardID   int64
	BookingID int64
	PNR       string
	Already   bool // the hold was confirmed before; nothing changed
	// started is when the confirmation's transaction began its work:
	// AfterConfirm observes the confirmation stage's latency from it.
	started time.Time
}

// Confirm turns a live hold into a booking with a PNR (see ConfirmTx), then
// marks the seats sold in Redis. Confirming a confirmed hold returns its
// booking.
func (s Settlement) Confirm(ctx context.Context, id uuid.UUID) (HoldView, error) {
	var res ConfirmResult
	err := db.Transact(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		res, err = s.ConfirmTx(ctx, tx, id)
		return err
	})
	if err != nil {
		if ErrorCode(err) == EINTERNAL {
			return HoldView{}, fmt.Errorf("confirm hold %s: %w", id, err)
		}
		return HoldView{}, err
	}
	s.AfterConfirm(ctx, res)
	return s.view(ctx, s.pool, id)
}

// ConfirmTx confirms a HELD hold inside tx: compare-and-set on the hold
// state, one booking per hold, berths fixed per passenger, the e-ticket
// notifications and the reservation-core sync enqueued, all in tx. The
// payments work calls it in the same transaction that records the money.
// Call AfterConfirm once tx commits.
func (s Settlement) ConfirmTx(ctx context.Context, tx pgx.Tx, id uuid.UUID) (ConfirmResult, error) {
	return s.confirmOne(ctx, tx, id, false)
}

// ConfirmManyTx is ConfirmTx for several holds at once, set-based: the
// same four round trips and about nine statements whatever their number,
// where one at a time costs that much each. It confirms all of them or
// fails: a hold missing, not HELD, or named twice is an error, and tx must
// then be rolled back (some holds may already be changed in it).
func (s Settlement) ConfirmManyTx(ctx context.Context, tx pgx.Tx, ids []uuid.UUID) ([]ConfirmResult, error) {
	return s.confirmMany(ctx, tx, ids, false)
}

func (s Settlement) confirmOne(ctx context.Context, tx pgx.Tx, id uuid.UUID, lapsed bool) (ConfirmResult, error) {
	res, err := s.confirmMany(ctx, tx, []uuid.UUID{id}, lapsed)
	if err != nil {
		return ConfirmResult{HoldID: id}, err
	}
	return res[0], nil
}

// confirming is one hold being confirmed, as read under its lock.
type confirming struct {
	at                     int // in the results
	userID                 int64
	kind, lang, instrument string
	from, to, wl           int
	fare                   int64
	pax                    []byte
	berths                 []int32
	heldAt                 time.Time
	shard                  *Shard
	passengers             []storedPassenger // ID numbers sealed, copied as they are
	pnr                    string
}

// confirmMany is ConfirmManyTx; with lapsed it also confirms EXPIRED or
// RELEASED holds whose seats a retake has just taken back
// (RetakeAndConfirm). Confirmed holds are returned as Already.
//
// Four round trips: the shards' locks and the holds read under lock, one
// batch with the holds' change and the bookings with their passengers (one
// statement), one batch with the e-tickets (one statement) and the fraud
// signals, and the River jobs in one insert. A confirmation is the busiest
// write of a rush; each statement it shares is PostgreSQL work saved.
func (s Settlement) confirmMany(ctx context.Context, tx pgx.Tx, ids []uuid.UUID, lapsed bool) ([]ConfirmResult, error) {
	results := make([]ConfirmResult, len(ids))
	started := time.Now()
	at := make(map[uuid.UUID]int, len(ids))
	for i, id := range ids {
		results[i].started = started
		if _, twice := at[id]; twice {
			return nil, fmt.Errorf("confirm: hold %s named twice", id)
		}
		at[id], results[i].HoldID = i, id
	}
	// The payment's instrument (for the fraud signal) and the passenger's
	// language (for the e-ticket) come with the hold, not in round trips of
	// their own. Locked in id order, as every set of holds is.
	//
	// The shards' writer locks come first, in the same round trip, as on
	// every path; under them a shard's chart state is final for this
	// transaction: a chart prepared meanwhile is refused, not joined.
	lock := &pgx.Batch{}
	lock.Queue(`SELECT pg_advisory_xact_lock_shared($2, s::int)
		FROM (SELECT DISTINCT shard_id FROM holds WHERE id = ANY($1) ORDER BY shard_id) AS x(s)`, ids, inventory.ShardLockClass).
		Exec(func(pgconn.CommandTag) error { return nil })
	lock.Queue(`SELECT h.id, h.shard_id, h.user_id, h.state, h.kind, h.from_seq, h.to_seq, coalesce(h.waitlist_no, 0),
		h.fare_paise, h.passengers, h.berths, h.created_at,
		coalesce((SELECT CASE WHEN p.method = 'UPI' THEN 'upi:' || p.vpa ELSE p.instrument_ref END
			FROM payments p WHERE p.hold_id = h.id AND p.state IN ('SUCCESS', 'PENDING_AT_BANK', 'UNKNOWN')
			AND ((p.method = 'UPI' AND p.vpa <> '') OR (p.method IN ('CARD', 'NB') AND p.instrument_ref <> ''))
			ORDER BY p.initiated_at DESC LIMIT 1), ''),
		u.lang, s.chart_state, u.banned_at IS NOT NULL
		FROM holds h JOIN users u ON u.id = h.user_id JOIN inventory_shards s ON s.id = h.shard_id
		WHERE h.id = ANY($1) ORDER BY h.id FOR UPDATE OF h`, ids)
	br := tx.SendBatch(ctx, lock)
	if _, err := br.Exec(); err != nil {
		br.Close()
		return nil, fmt.Errorf("lock shards: %w", err)
	}
	rows, err := br.Query()
	if err != nil {
		br.Close()
		return nil, fmt.Errorf("lock holds: %w", err)
	}
	var todo []*confirming
	var already []uuid.UUID
	var problem error
	found := make([]bool, len(ids))
	for rows.Next() {
		var id uuid.UUID
		var state, chart string
		var shardID int64
		var banned bool
		c := &confirming{}
		if err := rows.Scan(&id, &shardID, &c.userID, &state, &c.kind, &c.from, &c.to, &c.wl, &c.fare, &c.pax, &c.berths,
			&c.heldAt, &c.instrument, &c.lang, &chart, &banned); err != nil {
			rows.Close()
			br.Close()
			return nil, fmt.Errorf("lock holds: %w", err)
		}
		c.at = at[id]
		results[c.at].ShardID, found[c.at] = shardID, true
		switch {
		case state == HoldConfirmed:
			results[c.at].Already = true
			already = append(already, id)
		case state != HoldHeld && !(lapsed && (state == HoldExpired || state == HoldReleased)):
			if problem == nil {
				problem = Errorf(ECONFLICT, "HOLD_"+state, "Hold %s is %s and can no longer be confirmed.", id, state)
			}
		case chart != ChartOpen || banned:
			// Its payment's path refunds it (HoldInfo.Unconfirmable); here
			// only a backstop, so a ticket is never issued past either.
			if problem == nil {
				why := HoldInfo{Chart: chart, Banned: banned}.Unconfirmable()
				problem = Errorf(ECONFLICT, "HOLD_UNCONFIRMABLE", "Hold %s can no longer be confirmed: %s.", id, why)
			}
		default:
			todo = append(todo, c)
		}
	}
	rows.Close()
	err = rows.Err()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("lock holds: %w", err)
	}
	if i := slices.Index(found, false); i >= 0 {
		return nil, Errorf(ENOTFOUND, "NO_SUCH_HOLD", "No hold %s.", ids[i])
	}
	if problem != nil {
		return nil, problem
	}
	if len(already) > 0 {
		if err := s.readBookings(ctx, tx, already, at, results); err != nil {
			return nil, err
		}
	}
	if len(todo) == 0 {
		return results, nil
	}
	for _, c := range todo {
		if c.shard, err = s.catalog.ByIDTx(ctx, tx, results[c.at].ShardID); err != nil {
			return nil, err
		}
		if err := json.Unmarshal(c.pax, &c.passengers); err != nil {
			return nil, fmt.Errorf("passengers of hold %s: %w", ids[c.at], err)
		}
		for i, p := range c.passengers { // a hold an older version wrote in clear
			if p.IDRef != "" && p.IDSealed == "" {
				id, err := s.sealID(p.IDType, p.IDRef)
				if err != nil {
					return nil, fmt.Errorf("passengers of hold %s: %w", ids[c.at], err)
				}
				c.passengers[i].IDRef, c.passengers[i].IDSealed, c.passengers[i].IDHint, c.passengers[i].IDIndex = "", id.sealed, id.hint, id.index
			}
		}
	}
	if err := s.insertBookings(ctx, tx, todo, ids, results); err != nil {
		return nil, err
	}
	b := &pgx.Batch{}
	var mail notifications
	var signals []fraud.Signal
	var synced []CoreSyncArgs
	var seats []SeatSyncArgs
	for _, c := range todo {
		res := &results[c.at]
		sh := c.shard
		journey := fmt.Sprintf("%s %s %s %s-%s on %s", sh.Train, sh.TrainName, sh.Class, sh.Stops[c.from].Code,
			sh.Stops[c.to].Code, sh.Date.Format("2 Jan 2006"))
		lang := i18n.Norm(c.lang)
		if c.kind == KindWaitlist {
			mail.add(lang, c.userID, "ETICKET", res.PNR, "msg.eticketwl", res.PNR, c.wl, journey, india.Decimal(c.fare))
		} else {
			seats := make([]string, len(c.passengers))
			for i, p := range c.passengers {
				info := berthInfo(sh, int(c.berths[i]))
				seats[i] = fmt.Sprintf("%s %s/%d %s", p.Name, info.Coach, info.BerthNo, info.Type)
			}
			mail.add(lang, c.userID, "ETICKET", res.PNR, "msg.eticket", res.PNR, journey, strings.Join(seats, ", "), india.Decimal(c.fare))
		}
		signals = append(signals, fraud.Signal{HoldID: res.HoldID, BookingID: res.BookingID, ShardID: res.ShardID, UserID: c.userID,
			SolveMS: -1, HeldAt: c.heldAt, Instrument: c.instrument})
		synced = append(synced, CoreSyncArgs{BookingID: res.BookingID, PNR: res.PNR})
		seats = append(seats, SeatSyncArgs{HoldID: res.HoldID, ShardID: res.ShardID})
	}
	mail.queue(b)
	if s.fraud != nil {
		if err := s.fraud.QueueInbox(ctx, b, signals, nil); err != nil {
			return nil, err
		}
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("e-tickets and fraud signals of %d holds: %w", len(todo), err)
	}
	if _, err := s.jobs.InsertManyTx(ctx, tx, syncJobs(synced, seats, s.now())); err != nil {
		return nil, fmt.Errorf("enqueue core sync and seat sync of %d holds: %w", len(todo), err)
	}
	return results, nil
}

// syncJobs are the jobs that follow confirmations: each booking sent to the
// core, and each hold's seats marked sold in Redis once more should
// AfterConfirm not land (a Redis record left held would turn a later
// cancellation into a lost seat). One confirmation has a job of each kind;
// several share one of each (CoreSyncGroupArgs, SeatSyncGroupArgs).
func syncJobs(bookings []CoreSyncArgs, seats []SeatSyncArgs, now time.Time) []river.InsertManyParams {
	later := &river.InsertOpts{ScheduledAt: now.Add(seatSyncDelay)}
	if len(bookings) == 1 {
		return []river.InsertManyParams{{Args: bookings[0]}, {Args: seats[0], InsertOpts: later}}
	}
	return []river.InsertManyParams{{Args: CoreSyncGroupArgs{Bookings: bookings}}, {Args: SeatSyncGroupArgs{Holds: seats}, InsertOpts: later}}
}

// readBookings fills in the bookings of holds confirmed before.
func (s Settlement) readBookings(ctx context.Context, tx pgx.Tx, holds []uuid.UUID, at map[uuid.UUID]int, results []ConfirmResult) error {
	rows, err := tx.Query(ctx, `SELECT hold_id, id, pnr FROM bookings WHERE hold_id = ANY($1)`, holds)
	if err != nil {
		return fmt.Errorf("bookings of confirmed holds: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var hold uuid.UUID
		var id int64
		var pnr string
		if err := rows.Scan(&hold, &id, &pnr); err != nil {
			return fmt.Errorf("bookings of confirmed holds: %w", err)
		}
		results[at[hold]].BookingID, results[at[hold]].PNR = id, pnr
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("bookings of confirmed holds: %w", err)
	}
	for _, hold := range holds {
		if results[at[hold]].PNR == "" {
			return fmt.Errorf("hold %s is CONFIRMED without a booking", hold)
		}
	}
	return nil
}

// insertBookings writes the holds' change to CONFIRMED and their bookings
// with passengers. A PNR already taken inserts nothing for its hold (no
// booking, no passengers), and the next attempt gives that hold another;
// the holds' change is sent once.
func (s Settlement) insertBookings(ctx context.Context, tx pgx.Tx, todo []*confirming, ids []uuid.UUID, results []ConfirmResult) error {
	holds := make([]uuid.UUID, len(todo))
	for i, c := range todo {
		holds[i] = ids[c.at]
	}
	byHold := make(map[uuid.UUID]*confirming, len(todo))
	for _, c := range todo {
		byHold[ids[c.at]] = c
	}
	left := slices.Clone(todo) // DeleteFunc below clears what it removes
	for attempt := 0; len(left) > 0; attempt++ {
		if attempt > 5 {
			return fmt.Errorf("insert bookings: no free PNR for %d holds after %d attempts", len(left), attempt)
		}
		var rows bookingRows
		for _, c := range left {
			pnr, err := s.newPNR(c.shard.OriginRegion, s.rules.BookingLocation)
			if err != nil {
				return err
			}
			c.pnr = pnr
			rows.add(c, ids[c.at], results[c.at].ShardID)
		}
		b := &pgx.Batch{}
		if attempt == 0 {
			// The shards' locks are held since the holds were read; the
			// holds' compare-and-set is decided by their row locks.
			b.Queue(`UPDATE holds SET state = 'CONFIRMED', updated_at = now(), state_version = state_version + 1 WHERE id = ANY($1)`, holds)
		}
		rows.queue(b)
		br := tx.SendBatch(ctx, b)
		if attempt == 0 {
			if _, err := br.Exec(); err != nil {
				br.Close()
				return fmt.Errorf("confirm holds: %w", err)
			}
		}
		inserted, err := br.Query()
		if err != nil {
			br.Close()
			return fmt.Errorf("insert bookings: %w", err)
		}
		done := map[uuid.UUID]bool{}
		for inserted.Next() {
			var hold uuid.UUID
			var id int64
			if err := inserted.Scan(&id, &hold); err != nil {
				inserted.Close()
				br.Close()
				return fmt.Errorf("insert bookings: %w", err)
			}
			c := byHold[hold]
			results[c.at].BookingID, results[c.at].PNR = id, c.pnr
			done[hold] = true
		}
		inserted.Close()
		err = inserted.Err()
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("insert bookings: %w", err)
		}
		left = slices.DeleteFunc(left, func(c *confirming) bool { return done[ids[c.at]] })
	}
	return nil
}

// bookingRows are bookings and their passengers as the columns of one
// set-based insert.
type bookingRows struct {
	pnrs                         []string
	holds                        []uuid.UUID
	users, shards, fares         []int64
	froms, tos                   []int32
	statuses                     []string
	wls                          []*int32
	paxHolds                     []uuid.UUID
	seqs, ages                   []int32
	names, genders, idTypes      []string
	idSealed, idHints, idIndexes []string
	idxs, nos                    []*int32
	coaches, btypes              []*string
}

func (r *bookingRows) add(c *confirming, hold uuid.UUID, shard int64) {
	status := BookingConfirmed
	var wl *int32
	if c.kind == KindWaitlist {
		n := int32(c.wl)
		status, wl = BookingWaitlisted, &n
	}
	r.pnrs, r.holds, r.users, r.shards = append(r.pnrs, c.pnr), append(r.holds, hold), append(r.users, c.userID), append(r.shards, shard)
	r.froms, r.tos, r.statuses, r.wls, r.fares = append(r.froms, int32(c.from)), append(r.tos, int32(c.to)), append(r.statuses, status),
		append(r.wls, wl), append(r.fares, c.fare)
	for i, p := range c.passengers {
		var idx, no *int32
		var coach, btype *string
		if c.kind == KindSeat {
			info := berthInfo(c.shard, int(c.berths[i]))
			b, n := c.berths[i], int32(info.BerthNo)
			idx, no, coach, btype = &b, &n, &info.Coach, &info.Type
		}
		r.paxHolds, r.seqs, r.ages = append(r.paxHolds, hold), append(r.seqs, int32(i+1)), append(r.ages, int32(p.Age))
		r.names, r.genders, r.idTypes = append(r.names, p.Name), append(r.genders, p.Gender), append(r.idTypes, p.IDType)
		r.idSealed, r.idHints, r.idIndexes = append(r.idSealed, p.IDSealed), append(r.idHints, p.IDHint), append(r.idIndexes, p.IDIndex)
		r.idxs, r.nos, r.coaches, r.btypes = append(r.idxs, idx), append(r.nos, no), append(r.coaches, coach), append(r.btypes, btype)
	}
}

// queue is one statement: the bookings, then each one's passengers, who
// take its shard, legs and status.
func (r *bookingRows) queue(b *pgx.Batch) {
	b.Queue(`WITH b AS (
			INSERT INTO bookings (pnr, hold_id, user_id, shard_id, from_seq, to_seq, status, waitlist_no, fare_paise)
			SELECT * FROM unnest($1::text[], $2::uuid[], $3::bigint[], $4::bigint[], $5::int[], $6::int[], $7::text[], $8::int[], $9::bigint[])
			ON CONFLICT (pnr) DO NOTHING RETURNING id, hold_id, shard_id, from_seq, to_seq, status),
		p AS (
			INSERT INTO booking_passengers (booking_id, seq, shard_id, name, age, gender, id_type, id_sealed, id_hint, id_index,
				berth_idx, coach, berth_no, berth_type, from_seq, to_seq, status)
			SELECT b.id, x.seq, b.shard_id, x.name, x.age, x.gender, x.id_type, x.id_sealed, x.id_hint, x.id_index,
				x.idx, x.coach, x.no, x.btype, b.from_seq, b.to_seq, b.status
			FROM unnest($10::uuid[], $11::int[], $12::text[], $13::int[], $14::text[], $15::text[], $16::text[], $17::text[], $18::text[],
				$19::int[], $20::text[], $21::int[], $22::text[])
				AS x(hold_id, seq, name, age, gender, id_type, id_sealed, id_hint, id_index, idx, coach, no, btype)
			JOIN b ON b.hold_id = x.hold_id)
		SELECT id, hold_id FROM b`,
		r.pnrs, r.holds, r.users, r.shards, r.froms, r.tos, r.statuses, r.wls, r.fares,
		r.paxHolds, r.seqs, r.names, r.ages, r.genders, r.idTypes, r.idSealed, r.idHints, r.idIndexes, r.idxs, r.coaches, r.nos, r.btypes)
}

// AfterConfirm marks the seats sold in Redis once ConfirmTx has committed,
// on a context of its own (see afterCommit). If Redis is unreachable, the
// seat-sync job committed with the confirmation repeats it.
func (s Settlement) AfterConfirm(ctx context.Context, res ConfirmResult) {
	if res.Already {
		return
	}
	s.funnel.Add(res.ShardID, funnel.Confirmed, 1)
	if !res.started.IsZero() { // from the confirmation's work to its commit
		s.funnel.Observe(funnel.Confirmed, time.Since(res.started))
	}
	ctx, cancel := afterCommit(ctx)
	defer cancel()
	if _, err := s.store.Confirm(ctx, res.ShardID, res.HoldID.String()); err != nil {
		s.log.Warn("confirm in Redis failed; the seat-sync job will repeat it", "hold", res.HoldID, "err", err)
	}
}
