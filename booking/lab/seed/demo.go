package seed

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"tatkal/booking/db"
	"tatkal/booking/india"
)

// DemoOptions tunes Demo. The zero value seeds tomorrow's trains with the
// real Tatkal windows.
type DemoOptions struct {
	// JourneyDate defaults to tomorrow in IST.
	JourneyDate time.Time
	// OpensIn nil means the real opening time (the day before the journey,
	// 10:00 IST AC, 11:00 IST non-AC); otherwise every window opens at
	// Now+OpensIn (negative: already open).
	OpensIn *time.Duration
	// Now defaults to time.Now().
	Now time.Time
}

// DemoShard is one Tatkal shard of the demo.
type DemoShard struct {
	ID          int64
	Train       string
	Class       string
	Quota       string
	Berths      int
	Legs        int
	WaitlistCap int
	Mode        string
	OpensAt     time.Time
	ClosesAt    time.Time
	// Created is false when the shard was already there.
	Created bool
}

// DemoResult is what Demo made (or found).
type DemoResult struct {
	JourneyDate time.Time // midnight IST
	Shards      []DemoShard
}

// stopDef is one stop of a demo train; minutes count from the origin's
// departure, -1 where the train does not arrive (origin) or depart (end).
type stopDef struct {
	station        string
	arrive, depart int
	km             int
}

type trainDef struct {
	number, name string
	departs      time.Duration // after midnight IST
	stops        []stopDef
	coaches      []coachDef
}

// Stations12951 are the stops of the demo's train 12951 in order, for
// journeys that tests and rushes book.
var Stations12951 = []string{"MMCT", "BVI", "ST", "BRC", "RTM", "NAD", "KOTA", "NDLS"}

// demoTrains are DOMAIN.md's demo trains. Intermediate times and distances
// are invented but plausible (about 80-90 km/h for the Rajdhanis).
func demoTrains() []trainDef {
	rajdhaniCoaches := func() []coachDef {
		return coachSet(classCount{"1A", 1}, classCount{"2A", 3}, classCount{"3A", 8})
	}
	return []trainDef{
		{
			number: "12951", name: "Mumbai Rajdhani", departs: 17 * time.Hour,
			stops: []stopDef{
				{"MMCT", -1, 0, 0},
				{"BVI", 22, 24, 30},
				{"ST", 175, 180, 263},
				{"BRC", 284, 289, 392},
				{"RTM", 465, 468, 653},
				{"NAD", 506, 508, 694},
				{"KOTA", 675, 680, 919},
				{"NDLS", 932, -1, 1384}, // 08:32 next day
			},
			coaches: rajdhaniCoaches(),
		},
		{
			number: "12301", name: "Howrah Rajdhani", departs: 16*time.Hour + 50*time.Minute,
			stops: []stopDef{
				{"HWH", -1, 0, 0},
				{"ASN", 138, 140, 200},
				{"DHN", 190, 195, 259},
				{"PNME", 222, 224, 306},
				{"GAYA", 330, 333, 458},
				{"DDU", 470, 480, 661},
				{"PRYJ", 590, 595, 814},
				{"CNB", 725, 730, 1007},
				{"NDLS", 1035, -1, 1452}, // 10:05 next day
			},
			coaches: rajdhaniCoaches(),
		},
		{
			number: "12259", name: "Sealdah-Bikaner Duronto", departs: 18*time.Hour + 35*time.Minute,
			stops: []stopDef{
				{"SDAH", -1, 0, 0},
				{"DHN", 225, 230, 266},
				{"DDU", 560, 570, 668},
				{"CNB", 860, 865, 1014},
				{"NDLS", 1240, 1260, 1454},
				{"LHU", 1395, 1397, 1607},
				{"SDLP", 1440, 1442, 1659},
				{"CUR", 1490, 1493, 1717},
				{"RTGH", 1530, 1532, 1775},
				{"SDGH", 1590, 1592, 1842},
				{"BKN", 1665, -1, 1916}, // 18:20 two days later
			},
			coaches: coachSet(classCount{"1A", 1}, classCount{"2A", 2}, classCount{"3A", 6}, classCount{"SL", 6}),
		},
	}
}

type classCount struct {
	class string
	n     int
}

// coachSet numbers coaches per class (H1, A1..A3, B1..B8) in train order.
func coachSet(counts ...classCount) []coachDef {
	var out []coachDef
	for _, cc := range counts {
		l, _ := layoutOf(cc.class)
		for i := 1; i <= cc.n; i++ {
			out = append(out, coachDef{class: cc.class, name: fmt.Sprintf("%s%d", l.prefix, i), seq: len(out) + 1, berths: l.perCoach})
		}
	}
	return out
}

// Demo creates the demo trains, their stops, coaches and berths, and one
// Tatkal (TQ, direct) shard per train and class for the journey date, all
// in one transaction. Anything already there is left as it is, so running
// it twice changes nothing.
func Demo(ctx context.Context, pool *pgxpool.Pool, opts DemoOptions) (DemoResult, error) {
	now := opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	day := journeyDay(opts.JourneyDate)
	if opts.JourneyDate.IsZero() {
		day = journeyDay(now.In(india.IST)).AddDate(0, 0, 1)
	}
	var opensAt time.Time
	if opts.OpensIn != nil {
		opensAt = now.Add(*opts.OpensIn)
	}
	res := DemoResult{JourneyDate: day}
	err := db.Transact(ctx, pool, func(tx pgx.Tx) error {
		res.Shards = res.Shards[:0]
		for _, t := range demoTrains() {
			if err := insertTrain(ctx, tx, t); err != nil {
				return fmt.Errorf("train %s: %w", t.number, err)
			}
			for _, class := range classesOf(t) {
				spec := ShardSpec{Train: t.number, Date: day, Class: class, Quota: "TQ", Mode: "direct", OpensAt: opensAt}
				info, err := createShard(ctx, tx, spec, true)
				if err != nil {
					return fmt.Errorf("shard %s: %w", spec.label(), err)
				}
				res.Shards = append(res.Shards, DemoShard{
					ID: info.ID, Train: t.number, Class: class, Quota: spec.Quota,
					Berths: info.Berths, Legs: info.Legs, WaitlistCap: info.WaitlistCap, Mode: info.Mode,
					OpensAt: info.OpensAt, ClosesAt: info.ClosesAt, Created: info.Created,
				})
			}
		}
		return nil
	})
	if err != nil {
		return DemoResult{}, fmt.Errorf("seed demo %s: %w", day.Format(time.DateOnly), err)
	}
	return res, nil
}

// classesOf lists a train's classes in coach order, once each.
func classesOf(t trainDef) []string {
	var out []string
	for _, c := range t.coaches {
		if len(out) == 0 || out[len(out)-1] != c.class {
			out = append(out, c.class)
		}
	}
	return out
}

// insertTrain writes a train with its stops, coaches and berths, keeping
// whatever rows already exist.
func insertTrain(ctx context.Context, tx pgx.Tx, t trainDef) error {
	if _, err := tx.Exec(ctx, `INSERT INTO trains (number, name, superfast, departs_at)
		VALUES ($1, $2, true, make_interval(secs => $3)::time) ON CONFLICT DO NOTHING`,
		t.number, t.name, t.departs.Seconds()); err != nil {
		return fmt.Errorf("insert train: %w", err)
	}
	for i, s := range t.stops {
		if _, err := tx.Exec(ctx, `INSERT INTO train_stops (train_number, seq, station_code, arrive_min, depart_min, km)
			VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING`,
			t.number, i, s.station, nullMinute(s.arrive), nullMinute(s.depart), s.km); err != nil {
			return fmt.Errorf("insert stop %s: %w", s.station, err)
		}
	}
	return insertCoaches(ctx, tx, t.number, t.coaches)
}

func nullMinute(m int) *int32 {
	if m < 0 {
		return nil
	}
	v := int32(m)
	return &v
}
