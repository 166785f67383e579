package booking

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Journey is one class of one train between two stations on a date, as a
// search shows it: when it leaves and arrives, the Tatkal window, the fare
// per passenger and how many berths are left (the cached band).
type Journey struct {
	ShardID            int64
	Train, TrainName   string
	Date               time.Time // journey date from the origin
	Class, Quota, Mode string
	From, To           string
	Departs, Arrives   time.Time
	Km                 int
	OpensAt, ClosesAt  time.Time
	Fare               Fare // one passenger
	// Band is the cached availability band; BandErr says why there is none.
	Band        string
	ApproxCount int
	BandErr     string
}

// Search finds the Tatkal journeys from one station to another on a date
// (the journey date from each train's origin), by departure. Each band
// comes from the cached availability answer, never a live count.
func (s *Service) Search(ctx context.Context, from, to string, date time.Time) ([]Journey, error) {
	from, to = strings.ToUpper(strings.TrimSpace(from)), strings.ToUpper(strings.TrimSpace(to))
	if !stationCode(from) || !stationCode(to) || from == to {
		return nil, Errorf(EINVALID, "BAD_STATION", "Give two different station codes of 1-5 letters, like MMCT and NDLS.")
	}
	rows, err := s.pool.Query(ctx, `
		SELECT sh.train_number, sh.class, sh.quota, a.depart_min, b.arrive_min
		FROM inventory_shards sh
		JOIN train_stops a ON a.train_number = sh.train_number AND a.station_code = $1
		JOIN train_stops b ON b.train_number = sh.train_number AND b.station_code = $2 AND b.seq > a.seq
		WHERE sh.journey_date = $3 AND sh.quota = 'TQ'
		ORDER BY a.depart_min, sh.train_number, sh.class
		LIMIT 50`, from, to, date.Format(time.DateOnly))
	if err != nil {
		return nil, fmt.Errorf("search %s-%s: %w", from, to, err)
	}
	type hit struct {
		train, class, quota string
		dep, arr            *int32
	}
	hits, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (hit, error) {
		var h hit
		return h, r.Scan(&h.train, &h.class, &h.quota, &h.dep, &h.arr)
	})
	if err != nil {
		return nil, fmt.Errorf("search %s-%s: %w", from, to, err)
	}
	var out []Journey
	for _, h := range hits {
		sh, err := s.catalog.Find(ctx, h.train, date, h.class, h.quota)
		if err != nil {
			return nil, err
		}
		f, _ := sh.StopSeq(from)
		t, _ := sh.StopSeq(to)
		km := sh.Stops[t].Km - sh.Stops[f].Km
		j := Journey{ShardID: sh.ID, Train: sh.Train, TrainName: sh.TrainName, Date: sh.Date, Class: sh.Class, Quota: sh.Quota, Mode: sh.Mode,
			From: from, To: to, Km: km, OpensAt: sh.OpensAt, ClosesAt: sh.ClosesAt, Fare: ComputeFare(sh.Fare, sh.Superfast, km, 1)}
		if h.dep != nil {
			j.Departs = sh.DepartsAt.Add(time.Duration(*h.dep) * time.Minute)
		}
		if h.arr != nil {
			j.Arrives = sh.DepartsAt.Add(time.Duration(*h.arr) * time.Minute)
		}
		if a, err := s.Availability(ctx, sh.Train, date, sh.Class, sh.Quota, from, to); err != nil {
			j.BandErr = ErrorMessage(err)
		} else {
			j.Band, j.ApproxCount = a.Band, a.ApproxCount
		}
		out = append(out, j)
	}
	return out, nil
}
