// Package seed writes the data a fresh system needs to be tried or tested:
// the three demo trains of DOMAIN.md with their coaches and berths, Tatkal
// inventory shards, and batches of users with a saved passenger each.
//
// Everything is written in one transaction per call, so a failed call
// leaves nothing behind.
package seed

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"tatkal/booking/india"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

var (
	// ErrShardExists: a shard for that train, date, class and quota is
	// already there.
	ErrShardExists = errors.New("shard already exists")
	// ErrUnknownTrain: no such train (Demo creates the demo trains).
	ErrUnknownTrain = errors.New("unknown train")
	// ErrLoginExists: one of the logins to create is taken.
	ErrLoginExists = errors.New("login already exists")
)

// layout describes how a class's coaches are built (DOMAIN.md, "Coaches and
// berths").
type layout struct {
	prefix   string   // coach letter: B1, B2 ... for 3A
	perCoach int      // berths or seats in one coach
	pattern  []string // berth types repeating from berth 1
}

// layoutOf returns the coach layout of class; false for an unknown class.
// A function rather than a map so there is no package-level mutable state.
func layoutOf(class string) (layout, bool) {
	bay8 := []string{"LB", "MB", "UB", "LB", "MB", "UB", "SL", "SU"}
	switch class {
	case "1A":
		// Cabins of 2 and 4: lower and upper berths alternate.
		return layout{"H", 24, []string{"LB", "UB"}}, true
	case "2A":
		return layout{"A", 48, []string{"LB", "UB", "LB", "UB", "SL", "SU"}}, true
	case "3A":
		// LHB coach (72); ICF coaches with 64 exist but the demo trains are LHB.
		return layout{"B", 72, bay8}, true
	case "3E":
		return layout{"M", 83, bay8}, true
	case "SL":
		return layout{"S", 72, bay8}, true
	case "CC":
		// 3+2 rows: window, middle, aisle | aisle, window.
		return layout{"C", 78, []string{"WS", "MS", "AS", "AS", "WS"}}, true
	case "EC":
		// 2+2 rows.
		return layout{"E", 56, []string{"WS", "AS", "AS", "WS"}}, true
	case "2S":
		// 3+3 rows.
		return layout{"D", 108, []string{"WS", "MS", "AS", "AS", "MS", "WS"}}, true
	}
	return layout{}, false
}

// berthType is the type of berth number no (1-based) in a coach of l.
func (l layout) berthType(no int) string {
	return l.pattern[(no-1)%len(l.pattern)]
}

// coachNumber is the number in a coach name of this layout ("B12" -> 12),
// or 0 when the name does not follow the layout.
func (l layout) coachNumber(name string) int {
	rest, ok := strings.CutPrefix(name, l.prefix)
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n < 1 {
		return 0
	}
	return n
}

// coachDef is one coach to create.
type coachDef struct {
	class  string
	name   string
	seq    int
	berths int
}

// insertCoaches creates coaches and their berths, leaving existing ones
// untouched (Demo runs twice; Shard only adds new names).
func insertCoaches(ctx context.Context, tx pgx.Tx, train string, coaches []coachDef) error {
	if len(coaches) == 0 {
		return nil
	}
	var (
		cClass, cName, bCoach, bType []string
		cSeq, cBerths, bNo           []int32
	)
	for _, c := range coaches {
		l, ok := layoutOf(c.class)
		if !ok {
			return fmt.Errorf("coach %s: unknown class %q", c.name, c.class)
		}
		cClass, cName = append(cClass, c.class), append(cName, c.name)
		cSeq, cBerths = append(cSeq, int32(c.seq)), append(cBerths, int32(c.berths))
		for no := 1; no <= c.berths; no++ {
			bCoach = append(bCoach, c.name)
			bNo = append(bNo, int32(no))
			bType = append(bType, l.berthType(no))
		}
	}
	// unnest keeps this at two statements however many coaches there are,
	// and unlike COPY it allows ON CONFLICT.
	if _, err := tx.Exec(ctx, `INSERT INTO coaches (train_number, class, coach, seq, berths)
		SELECT $1, * FROM unnest($2::text[], $3::text[], $4::int[], $5::int[])
		ON CONFLICT DO NOTHING`, train, cClass, cName, cSeq, cBerths); err != nil {
		return fmt.Errorf("insert coaches: %w", err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO berths (train_number, coach, berth_no, berth_type)
		SELECT $1, * FROM unnest($2::text[], $3::int[], $4::text[])
		ON CONFLICT DO NOTHING`, train, bCoach, bNo, bType); err != nil {
		return fmt.Errorf("insert berths: %w", err)
	}
	return nil
}

// journeyDay is the calendar date of t (read in t's own location) as
// midnight IST: journey dates are counted at the origin station.
func journeyDay(t time.Time) time.Time {
	y, m, d := t.Date()
	return time.Date(y, m, d, 0, 0, 0, 0, india.IST)
}

// pgDate encodes a journey day for a date column without any time-zone
// shift.
func pgDate(day time.Time) pgtype.Date {
	y, m, d := day.Date()
	return pgtype.Date{Time: time.Date(y, m, d, 0, 0, 0, 0, time.UTC), Valid: true}
}

// realOpening is when the Tatkal window opens for a journey day: the day
// before, 10:00 IST for AC classes and 11:00 IST for the others.
func realOpening(day time.Time, ac bool) time.Time {
	hour := 11
	if ac {
		hour = 10
	}
	y, m, d := day.Date()
	return time.Date(y, m, d-1, hour, 0, 0, 0, india.IST)
}

// defaultWaitlistCap is DOMAIN.md's 2025 rule: 60% of the shard's berths
// for AC classes, 30% for the others, rounded down.
func defaultWaitlistCap(berths int, ac bool) int {
	if ac {
		return berths * 60 / 100
	}
	return berths * 30 / 100
}
