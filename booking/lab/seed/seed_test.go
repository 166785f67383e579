package seed

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"tatkal/booking/auth"
	"tatkal/booking/india"
	"tatkal/booking/lab/testenv"
)

// count runs a SELECT count(*) ... and returns the number.
func count(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

var seededTables = []string{"stations", "fare_rules", "trains", "train_stops", "coaches", "berths", "inventory_shards", "shard_berths", "users", "passenger_master"}

func tableCounts(t *testing.T, pool *pgxpool.Pool) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, tbl := range seededTables {
		out[tbl] = count(t, pool, "SELECT count(*) FROM "+tbl)
	}
	return out
}

func ist(y int, m time.Month, d, h, min int) time.Time {
	return time.Date(y, m, d, h, min, 0, 0, india.IST)
}

func seedDemo(t *testing.T, pool *pgxpool.Pool, opts DemoOptions) DemoResult {
	t.Helper()
	res, err := Demo(context.Background(), pool, opts)
	if err != nil {
		t.Fatalf("Demo: %v", err)
	}
	return res
}

func TestReferenceData(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	if n := count(t, env.Pool, "SELECT count(*) FROM fare_rules"); n != 8 {
		t.Errorf("fare_rules has %d rows, want 8", n)
	}
	type rule struct {
		pct, min, max, minKm, gst, clerk int
		ac                               bool
	}
	want := map[string]rule{
		"1A": {30, 40000, 50000, 500, 500, 6500, true},
		"2A": {30, 40000, 50000, 500, 500, 6500, true},
		"3A": {30, 30000, 40000, 500, 500, 6500, true},
		"3E": {30, 30000, 40000, 500, 500, 6500, true},
		"EC": {30, 40000, 50000, 250, 500, 6500, true},
		"CC": {30, 12500, 22500, 250, 500, 6500, true},
		"SL": {30, 10000, 20000, 500, 0, 6000, false},
		"2S": {10, 1000, 1500, 100, 0, 6000, false},
	}
	for class, w := range want {
		var g rule
		err := env.Pool.QueryRow(context.Background(), `SELECT tatkal_pct, tatkal_min_paise, tatkal_max_paise, tatkal_min_km,
			gst_bps, clerkage_paise, ac FROM fare_rules WHERE class = $1`, class).
			Scan(&g.pct, &g.min, &g.max, &g.minKm, &g.gst, &g.clerk, &g.ac)
		if err != nil {
			t.Fatalf("fare rule %s: %v", class, err)
		}
		if g != w {
			t.Errorf("fare rule %s = %+v, want %+v", class, g, w)
		}
	}
	for code, region := range map[string]int{"MMCT": 8, "HWH": 6, "SDAH": 6, "NDLS": 2, "BKN": 3} {
		if n := count(t, env.Pool, "SELECT count(*) FROM stations WHERE code = $1 AND region = $2", code, region); n != 1 {
			t.Errorf("station %s with region %d: %d rows", code, region, n)
		}
	}
}

func TestDemoIdempotent(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	now := ist(2025, 3, 10, 9, 0)
	first := seedDemo(t, env.Pool, DemoOptions{Now: now})
	before := tableCounts(t, env.Pool)
	second := seedDemo(t, env.Pool, DemoOptions{Now: now})
	after := tableCounts(t, env.Pool)
	for _, tbl := range seededTables {
		if before[tbl] != after[tbl] {
			t.Errorf("%s: %d rows after the first Demo, %d after the second", tbl, before[tbl], after[tbl])
		}
	}

	if want := ist(2025, 3, 11, 0, 0); !first.JourneyDate.Equal(want) {
		t.Errorf("journey date %s, want %s (tomorrow in IST)", first.JourneyDate, want)
	}
	if before["trains"] != 3 {
		t.Errorf("%d trains, want 3", before["trains"])
	}
	if before["inventory_shards"] != 10 || len(first.Shards) != 10 {
		t.Errorf("%d shards in the database, %d in the result; want 10 (3+3+4 classes)", before["inventory_shards"], len(first.Shards))
	}
	if len(second.Shards) != len(first.Shards) {
		t.Fatalf("second Demo lists %d shards, first %d", len(second.Shards), len(first.Shards))
	}
	for i, s := range first.Shards {
		s2 := second.Shards[i]
		if !s.Created || s2.Created {
			t.Errorf("shard %s %s: Created %v then %v, want true then false", s.Train, s.Class, s.Created, s2.Created)
		}
		s2.Created = true
		if s2.ID != s.ID || !s2.OpensAt.Equal(s.OpensAt) || !s2.ClosesAt.Equal(s.ClosesAt) || s2.Berths != s.Berths || s2.WaitlistCap != s.WaitlistCap {
			t.Errorf("second Demo reports %+v, first %+v", s2, s)
		}
	}

	for train, w := range map[string]struct{ stops, km int }{"12951": {8, 1384}, "12301": {9, 1452}, "12259": {11, 1916}} {
		var stops, km, firstKm int
		var lastDepart, firstArrive *int
		err := env.Pool.QueryRow(context.Background(), `SELECT count(*), max(km), min(km),
			(SELECT depart_min FROM train_stops WHERE train_number = $1 ORDER BY seq DESC LIMIT 1),
			(SELECT arrive_min FROM train_stops WHERE train_number = $1 ORDER BY seq LIMIT 1)
			FROM train_stops WHERE train_number = $1`, train).Scan(&stops, &km, &firstKm, &lastDepart, &firstArrive)
		if err != nil {
			t.Fatal(err)
		}
		if stops != w.stops || km != w.km || firstKm != 0 || lastDepart != nil || firstArrive != nil {
			t.Errorf("train %s: %d stops, %d..%d km, last depart %v, first arrive %v; want %d stops, 0..%d km, no times at the ends",
				train, stops, firstKm, km, lastDepart, firstArrive, w.stops, w.km)
		}
		// Times and distances grow along the route.
		if n := count(t, env.Pool, `SELECT count(*) FROM train_stops a JOIN train_stops b
			ON a.train_number = b.train_number AND b.seq = a.seq + 1
			WHERE a.train_number = $1 AND (b.km <= a.km OR b.arrive_min <= coalesce(a.depart_min, -1)
				OR a.depart_min < a.arrive_min)`, train); n != 0 {
			t.Errorf("train %s: %d stops out of order", train, n)
		}
	}

	type key struct{ train, class string }
	type want struct{ berths, legs, wlCap int }
	wants := map[key]want{
		{"12951", "1A"}: {7, 7, 4},     // 30% of 24 = 7; 60% of 7 = 4
		{"12951", "2A"}: {42, 7, 25},   // 3 × 14
		{"12951", "3A"}: {168, 7, 100}, // 8 × 21
		{"12301", "3A"}: {168, 8, 100},
		{"12259", "2A"}: {28, 10, 16},
		{"12259", "3A"}: {126, 10, 75},
		{"12259", "SL"}: {126, 10, 37}, // non-AC: 30%
	}
	for _, s := range first.Shards {
		if s.Quota != "TQ" || s.Mode != "direct" {
			t.Errorf("shard %s %s: quota %s mode %s", s.Train, s.Class, s.Quota, s.Mode)
		}
		if w, ok := wants[key{s.Train, s.Class}]; ok && (s.Berths != w.berths || s.Legs != w.legs || s.WaitlistCap != w.wlCap) {
			t.Errorf("shard %s %s: %d berths, %d legs, cap %d; want %+v", s.Train, s.Class, s.Berths, s.Legs, s.WaitlistCap, w)
		}
		var total, legs, wlCap, rows int
		if err := env.Pool.QueryRow(context.Background(), `SELECT total_berths, legs, waitlist_cap,
			(SELECT count(*) FROM shard_berths WHERE shard_id = s.id) FROM inventory_shards s WHERE id = $1`, s.ID).
			Scan(&total, &legs, &wlCap, &rows); err != nil {
			t.Fatal(err)
		}
		if total != s.Berths || rows != s.Berths || legs != s.Legs || wlCap != s.WaitlistCap {
			t.Errorf("shard %d stored %d berths (%d rows), %d legs, cap %d; result says %+v", s.ID, total, rows, legs, wlCap, s)
		}
	}
}

func TestDemoDefaultDateIsTomorrowInIST(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	// 20:00 UTC is already 01:30 the next day in IST.
	now := time.Date(2025, 3, 10, 20, 0, 0, 0, time.UTC)
	res := seedDemo(t, env.Pool, DemoOptions{Now: now})
	if want := ist(2025, 3, 12, 0, 0); !res.JourneyDate.Equal(want) {
		t.Errorf("journey date %s, want %s", res.JourneyDate, want)
	}
	if n := count(t, env.Pool, "SELECT count(*) FROM inventory_shards WHERE journey_date = '2025-03-12'"); n != 10 {
		t.Errorf("%d shards on 2025-03-12, want 10", n)
	}
}

func TestBerthLayouts(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	seedDemo(t, env.Pool, DemoOptions{JourneyDate: ist(2025, 3, 11, 0, 0)})
	ctx := context.Background()
	typeOf := func(train, coach string, no int) string {
		t.Helper()
		var typ string
		if err := env.Pool.QueryRow(ctx, "SELECT berth_type FROM berths WHERE train_number = $1 AND coach = $2 AND berth_no = $3",
			train, coach, no).Scan(&typ); err != nil {
			t.Fatalf("berth %s %s %d: %v", train, coach, no, err)
		}
		return typ
	}
	cases := []struct {
		train, coach string
		no           int
		want         string
	}{
		{"12951", "B1", 1, "LB"}, {"12951", "B1", 2, "MB"}, {"12951", "B1", 3, "UB"}, {"12951", "B1", 4, "LB"},
		{"12951", "B1", 5, "MB"}, {"12951", "B1", 6, "UB"}, {"12951", "B1", 7, "SL"}, {"12951", "B1", 8, "SU"},
		{"12951", "B8", 15, "SL"}, {"12951", "B8", 72, "SU"}, {"12951", "B8", 65, "LB"},
		{"12951", "A1", 1, "LB"}, {"12951", "A1", 2, "UB"}, {"12951", "A1", 3, "LB"}, {"12951", "A1", 4, "UB"},
		{"12951", "A1", 5, "SL"}, {"12951", "A1", 6, "SU"}, {"12951", "A3", 47, "SL"}, {"12951", "A3", 48, "SU"},
		{"12301", "H1", 1, "LB"}, {"12301", "H1", 2, "UB"}, {"12301", "H1", 24, "UB"},
		{"12259", "S6", 7, "SL"}, {"12259", "S6", 69, "MB"}, {"12259", "S6", 70, "UB"}, {"12259", "S1", 71, "SL"},
	}
	for _, c := range cases {
		if got := typeOf(c.train, c.coach, c.no); got != c.want {
			t.Errorf("%s %s berth %d is %s, want %s", c.train, c.coach, c.no, got, c.want)
		}
	}
	// Every coach has exactly as many berth rows as it declares, numbered 1..n.
	if n := count(t, env.Pool, `SELECT count(*) FROM coaches c WHERE berths <> (SELECT count(*) FROM berths b
		WHERE b.train_number = c.train_number AND b.coach = c.coach AND b.berth_no BETWEEN 1 AND c.berths)`); n != 0 {
		t.Errorf("%d coaches whose berth rows do not match their size", n)
	}
	for train, want := range map[string]string{"12951": "1A:1 2A:3 3A:8", "12301": "1A:1 2A:3 3A:8", "12259": "1A:1 2A:2 3A:6 SL:6"} {
		var got string
		if err := env.Pool.QueryRow(ctx, `SELECT string_agg(class || ':' || n, ' ' ORDER BY class) FROM
			(SELECT class, count(*) n FROM coaches WHERE train_number = $1 GROUP BY class) t`, train).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("train %s coaches %s, want %s", train, got, want)
		}
	}
	// Seat layouts for the classes the demo trains do not carry.
	for _, c := range []struct {
		class string
		seats []string // types of seats 1..len
	}{
		{"CC", []string{"WS", "MS", "AS", "AS", "WS", "WS", "MS"}},
		{"EC", []string{"WS", "AS", "AS", "WS", "WS"}},
		{"2S", []string{"WS", "MS", "AS", "AS", "MS", "WS", "WS"}},
		{"3E", []string{"LB", "MB", "UB", "LB", "MB", "UB", "SL", "SU", "LB"}},
	} {
		l, ok := layoutOf(c.class)
		if !ok {
			t.Fatalf("no layout for %s", c.class)
		}
		for i, want := range c.seats {
			if got := l.berthType(i + 1); got != want {
				t.Errorf("%s seat %d is %s, want %s", c.class, i+1, got, want)
			}
		}
	}
}

type shardBerth struct {
	idx   int
	coach string
	no    int
	typ   string
}

func shardBerths(t *testing.T, pool *pgxpool.Pool, id int64) []shardBerth {
	t.Helper()
	rows, err := pool.Query(context.Background(), "SELECT idx, coach, berth_no, berth_type FROM shard_berths WHERE shard_id = $1 ORDER BY idx", id)
	if err != nil {
		t.Fatal(err)
	}
	var out []shardBerth
	var b shardBerth
	if _, err := pgx.ForEachRow(rows, []any{&b.idx, &b.coach, &b.no, &b.typ}, func() error {
		out = append(out, b)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkShardBerths asserts the shard's berths are indexed 0..n-1, exist in
// berths with the same type, and each coach's berths are together.
func checkShardBerths(t *testing.T, pool *pgxpool.Pool, train string, id int64, n int) []shardBerth {
	t.Helper()
	sb := shardBerths(t, pool, id)
	if len(sb) != n {
		t.Fatalf("shard %d has %d berths, want %d", id, len(sb), n)
	}
	seen := map[string]bool{}
	for i, b := range sb {
		if b.idx != i {
			t.Fatalf("shard %d: idx %d at position %d", id, b.idx, i)
		}
		if i > 0 && b.coach != sb[i-1].coach {
			if seen[b.coach] {
				t.Fatalf("shard %d: coach %s appears in two runs", id, b.coach)
			}
		}
		seen[b.coach] = true
	}
	if missing := count(t, pool, `SELECT count(*) FROM shard_berths s WHERE shard_id = $1 AND NOT EXISTS
		(SELECT 1 FROM berths b WHERE b.train_number = $2 AND b.coach = s.coach AND b.berth_no = s.berth_no AND b.berth_type = s.berth_type)`,
		id, train); missing != 0 {
		t.Fatalf("shard %d: %d berths not in the train's berths (or of another type)", id, missing)
	}
	return sb
}

func TestTatkalQuotaSpread(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	res := seedDemo(t, env.Pool, DemoOptions{JourneyDate: ist(2025, 3, 11, 0, 0)})
	for _, s := range res.Shards {
		sb := checkShardBerths(t, env.Pool, s.Train, s.ID, s.Berths)
		if s.Train == "12951" && (s.Class == "2A" || s.Class == "1A") {
			// 2A: 14 of 48 (16 LB, 16 UB, 8 SL, 8 SU); 1A: 7 of 24.
			want := map[string]int{"LB": 5, "UB": 5, "SL": 2, "SU": 2}
			if s.Class == "1A" {
				want = map[string]int{"LB": 4, "UB": 3}
			}
			got := map[string]map[string]int{}
			for _, b := range sb {
				if got[b.coach] == nil {
					got[b.coach] = map[string]int{}
				}
				got[b.coach][b.typ]++
			}
			for coach, g := range got {
				if !maps.Equal(g, want) {
					t.Errorf("%s quota in %s: %v, want %v", s.Class, coach, g, want)
				}
			}
		}
		if s.Train != "12951" || s.Class != "3A" {
			continue
		}
		// 21 of each coach's 72 berths, in proportion to the types: 18 each
		// of LB, MB, UB give 5.25, 9 each of SL, SU 2.625; the two left over
		// go to the larger remainders (SL, SU).
		perCoach := map[string]map[string]int{}
		var b1 []int
		for _, b := range sb {
			if perCoach[b.coach] == nil {
				perCoach[b.coach] = map[string]int{}
			}
			perCoach[b.coach][b.typ]++
			if b.coach == "B1" {
				b1 = append(b1, b.no)
			}
		}
		want := map[string]int{"LB": 5, "MB": 5, "UB": 5, "SL": 3, "SU": 3}
		for coach, got := range perCoach {
			if !maps.Equal(got, want) {
				t.Errorf("3A quota in %s: %v, want %v", coach, got, want)
			}
		}
		if len(perCoach) != 8 {
			t.Errorf("3A quota spans %d coaches, want 8", len(perCoach))
		}
		if !slices.IsSorted(b1) || b1[0] > 8 || b1[len(b1)-1] < 64 || b1[10] < 24 || b1[10] > 48 {
			t.Errorf("B1 quota berths %v: not in order or not spread over the coach", b1)
		}
		if testing.Verbose() {
			t.Logf("B1 quota berths %v", b1)
		}
		if sb[0].coach != "B1" || sb[len(sb)-1].coach != "B8" {
			t.Errorf("3A quota runs %s..%s, want B1..B8", sb[0].coach, sb[len(sb)-1].coach)
		}
	}
}

func TestShardSizes(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	day := ist(2025, 3, 11, 0, 0)
	res := seedDemo(t, env.Pool, DemoOptions{JourneyDate: day})
	other := ist(2025, 3, 12, 0, 0)

	t.Run("64 from the first coach", func(t *testing.T) {
		id, err := Shard(ctx, env.Pool, ShardSpec{Train: "12951", Date: other, Class: "3A", Berths: 64})
		if err != nil {
			t.Fatal(err)
		}
		sb := checkShardBerths(t, env.Pool, "12951", id, 64)
		for i, b := range sb {
			if b.coach != "B1" || b.no != i+1 {
				t.Fatalf("berth %d is %s/%d, want B1/%d", i, b.coach, b.no, i+1)
			}
		}
		if n := count(t, env.Pool, "SELECT count(*) FROM coaches WHERE train_number = '12951' AND class = '3A'"); n != 8 {
			t.Errorf("%d 3A coaches, want 8 (none appended)", n)
		}
		var wl, legs int
		var mode string
		if err := env.Pool.QueryRow(ctx, "SELECT waitlist_cap, legs, mode FROM inventory_shards WHERE id = $1", id).Scan(&wl, &legs, &mode); err != nil {
			t.Fatal(err)
		}
		if wl != 38 || legs != 7 || mode != "direct" {
			t.Errorf("cap %d legs %d mode %s, want 38 7 direct", wl, legs, mode)
		}
	})

	t.Run("5000 appends coaches and avoids the TQ berths", func(t *testing.T) {
		id, err := Shard(ctx, env.Pool, ShardSpec{Train: "12951", Date: day, Class: "3A", Quota: "GN", Berths: 5000, Mode: "queue"})
		if err != nil {
			t.Fatal(err)
		}
		sb := checkShardBerths(t, env.Pool, "12951", id, 5000)
		// 8 coaches hold 576 berths, 168 of them Tatkal: 408 free, so
		// 4592 more need 64 coaches, B9..B72.
		var coaches []string
		if err := env.Pool.QueryRow(ctx, `SELECT array_agg(coach ORDER BY seq) FROM coaches
			WHERE train_number = '12951' AND class = '3A'`).Scan(&coaches); err != nil {
			t.Fatal(err)
		}
		if len(coaches) != 72 || coaches[8] != "B9" || coaches[71] != "B72" {
			t.Errorf("3A coaches %v, want B1..B72", coaches)
		}
		if sb[4999].coach != "B72" || sb[408].coach != "B9" || sb[408].no != 1 {
			t.Errorf("berth 408 is %+v, berth 4999 %+v; want B9/1 and in B72", sb[408], sb[4999])
		}
		var tq int64
		for _, s := range res.Shards {
			if s.Train == "12951" && s.Class == "3A" {
				tq = s.ID
			}
		}
		if n := count(t, env.Pool, `SELECT count(*) FROM shard_berths a JOIN shard_berths b USING (coach, berth_no)
			WHERE a.shard_id = $1 AND b.shard_id = $2`, id, tq); n != 0 {
			t.Errorf("%d berths in both the GN and the TQ shard", n)
		}
		var mode string
		var wl int
		if err := env.Pool.QueryRow(ctx, "SELECT mode, waitlist_cap FROM inventory_shards WHERE id = $1", id).Scan(&mode, &wl); err != nil {
			t.Fatal(err)
		}
		if mode != "queue" || wl != 3000 {
			t.Errorf("mode %s cap %d, want queue 3000", mode, wl)
		}
		// Appended coaches follow the 3A layout.
		var typ string
		if err := env.Pool.QueryRow(ctx, "SELECT berth_type FROM berths WHERE train_number = '12951' AND coach = 'B40' AND berth_no = 7").Scan(&typ); err != nil || typ != "SL" {
			t.Errorf("B40 berth 7: %q %v, want SL", typ, err)
		}
	})

	t.Run("400 sleeper", func(t *testing.T) {
		cap := 7
		id, err := Shard(ctx, env.Pool, ShardSpec{Train: "12259", Date: other, Class: "SL", Berths: 400, WaitlistCap: &cap})
		if err != nil {
			t.Fatal(err)
		}
		sb := checkShardBerths(t, env.Pool, "12259", id, 400)
		if sb[399].coach != "S6" || sb[399].no != 400-5*72 {
			t.Errorf("last berth %+v, want S6/40", sb[399])
		}
		if n := count(t, env.Pool, "SELECT count(*) FROM inventory_shards WHERE id = $1 AND waitlist_cap = 7 AND legs = 10", id); n != 1 {
			t.Error("explicit waitlist cap 7 or legs 10 not stored")
		}
	})
}

func TestShardWindows(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	day := ist(2025, 6, 1, 0, 0)
	seedDemo(t, env.Pool, DemoOptions{JourneyDate: day})
	window := func(id int64) (time.Time, time.Time) {
		t.Helper()
		var o, c time.Time
		if err := env.Pool.QueryRow(ctx, "SELECT window_opens_at, window_closes_at FROM inventory_shards WHERE id = $1", id).Scan(&o, &c); err != nil {
			t.Fatal(err)
		}
		return o, c
	}
	cases := []struct {
		train, class string
		opens, close time.Time
	}{
		// 12259 leaves SDAH at 18:35: closes 14:35.
		{"12259", "2A", ist(2025, 6, 1, 10, 0), ist(2025, 6, 2, 14, 35)},
		{"12259", "SL", ist(2025, 6, 1, 11, 0), ist(2025, 6, 2, 14, 35)},
		// 12301 leaves HWH at 16:50.
		{"12301", "1A", ist(2025, 6, 1, 10, 0), ist(2025, 6, 2, 12, 50)},
	}
	for _, c := range cases {
		// The journey date is read as a calendar date in its own zone.
		id, err := Shard(ctx, env.Pool, ShardSpec{Train: c.train, Date: time.Date(2025, 6, 2, 23, 0, 0, 0, time.UTC), Class: c.class, Berths: 10})
		if err != nil {
			t.Fatal(err)
		}
		o, cl := window(id)
		if !o.Equal(c.opens) || !cl.Equal(c.close) {
			t.Errorf("%s %s window %s - %s, want %s - %s", c.train, c.class, o.In(india.IST), cl.In(india.IST), c.opens, c.close)
		}
		if n := count(t, env.Pool, "SELECT count(*) FROM inventory_shards WHERE id = $1 AND journey_date = '2025-06-02'", id); n != 1 {
			t.Errorf("%s %s: journey date not 2025-06-02", c.train, c.class)
		}
	}

	// Explicit times are stored as given.
	opens, closes := time.Date(2025, 7, 1, 3, 4, 5, 0, time.UTC), time.Date(2025, 7, 2, 0, 0, 0, 0, time.UTC)
	id, err := Shard(ctx, env.Pool, ShardSpec{Train: "12951", Date: ist(2025, 7, 2, 0, 0), Class: "2A", OpensAt: opens, ClosesAt: closes})
	if err != nil {
		t.Fatal(err)
	}
	if o, c := window(id); !o.Equal(opens) || !c.Equal(closes) {
		t.Errorf("explicit window stored as %s - %s", o, c)
	}
	// A window that closes before it opens is refused.
	if _, err := Shard(ctx, env.Pool, ShardSpec{Train: "12951", Date: ist(2025, 7, 3, 0, 0), Class: "2A", OpensAt: closes.AddDate(0, 0, 5)}); err == nil {
		t.Error("a window opening after it closes was accepted")
	}

	// Demo's real windows: AC 10:00, SL 11:00 the day before.
	for _, c := range []struct {
		class string
		hour  int
	}{{"1A", 10}, {"3A", 10}, {"SL", 11}} {
		if n := count(t, env.Pool, `SELECT count(*) FROM inventory_shards WHERE train_number = '12259' AND class = $1
			AND journey_date = '2025-06-01' AND window_opens_at = $2`, c.class, ist(2025, 5, 31, c.hour, 0)); n != 1 {
			t.Errorf("demo %s shard does not open at %02d:00 IST the day before", c.class, c.hour)
		}
	}
}

func TestDemoOpensIn(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	now := time.Date(2025, 3, 10, 8, 0, 0, 123000, time.UTC)
	in := -5 * time.Minute
	res := seedDemo(t, env.Pool, DemoOptions{Now: now, OpensIn: &in})
	for _, s := range res.Shards {
		if !s.OpensAt.Equal(now.Add(in)) {
			t.Errorf("shard %s %s opens %s, want %s", s.Train, s.Class, s.OpensAt, now.Add(in))
		}
	}
	if n := count(t, env.Pool, "SELECT count(*) FROM inventory_shards WHERE window_opens_at = $1", now.Add(in)); n != 10 {
		t.Errorf("%d stored shards open at now-5m, want 10", n)
	}
	// 12951 on 2025-03-11 (tomorrow in IST) closes at 13:00 IST.
	if n := count(t, env.Pool, "SELECT count(*) FROM inventory_shards WHERE train_number = '12951' AND window_closes_at = $1",
		ist(2025, 3, 11, 13, 0)); n != 3 {
		t.Errorf("%d 12951 shards close at 13:00 IST on the journey date, want 3", n)
	}
}

func TestShardErrors(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	day := ist(2025, 3, 11, 0, 0)
	seedDemo(t, env.Pool, DemoOptions{JourneyDate: day})
	before := tableCounts(t, env.Pool)

	// Duplicate of a Demo shard, even one that would append coaches.
	_, err := Shard(ctx, env.Pool, ShardSpec{Train: "12951", Date: day, Class: "3A", Berths: 5000})
	if !errors.Is(err, ErrShardExists) {
		t.Errorf("duplicate shard: %v, want ErrShardExists", err)
	}
	if err != nil && !strings.HasPrefix(err.Error(), "seed shard 12951 2025-03-11 3A TQ: ") {
		t.Errorf("error %q does not name the shard", err)
	}
	_, err = Shard(ctx, env.Pool, ShardSpec{Train: "12951", Date: day, Class: "3A", Quota: "TQ"})
	if !errors.Is(err, ErrShardExists) {
		t.Errorf("duplicate shard: %v, want ErrShardExists", err)
	}
	_, err = Shard(ctx, env.Pool, ShardSpec{Train: "99999", Date: day, Class: "3A"})
	if !errors.Is(err, ErrUnknownTrain) {
		t.Errorf("unknown train: %v, want ErrUnknownTrain", err)
	}
	for name, spec := range map[string]ShardSpec{
		"unknown class":      {Train: "12951", Date: day, Class: "9Z"},
		"class not on train": {Train: "12951", Date: day, Class: "SL"},
		"bad mode":           {Train: "12951", Date: day.AddDate(0, 0, 1), Class: "3A", Mode: "bulk"},
		"bad quota":          {Train: "12951", Date: day.AddDate(0, 0, 1), Class: "3A", Quota: "XX"},
		"negative berths":    {Train: "12951", Date: day.AddDate(0, 0, 1), Class: "3A", Berths: -1},
		"no date":            {Train: "12951", Class: "3A"},
		"over 255 coaches":   {Train: "12951", Date: day.AddDate(0, 0, 1), Class: "1A", Berths: 256 * 24},
		"negative cap":       {Train: "12951", Date: day.AddDate(0, 0, 1), Class: "3A", WaitlistCap: new(-1)},
	} {
		if _, err := Shard(ctx, env.Pool, spec); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	after := tableCounts(t, env.Pool)
	for _, tbl := range seededTables {
		if before[tbl] != after[tbl] {
			t.Errorf("%s: %d rows before the failed calls, %d after", tbl, before[tbl], after[tbl])
		}
	}
}

func TestShardNeedsTrain(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	_, err := Shard(context.Background(), env.Pool, ShardSpec{Train: "12951", Date: ist(2025, 3, 11, 0, 0), Class: "3A"})
	if !errors.Is(err, ErrUnknownTrain) {
		t.Errorf("shard before Demo: %v, want ErrUnknownTrain", err)
	}
}

func TestUsers(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	hash, err := auth.HashPassword("secret-1", auth.DefaultParams)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := Users(ctx, env.Pool, UsersSpec{Count: 250, Prefix: "load", PasswordHash: hash})
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 250 || !slices.IsSorted(ids) {
		t.Fatalf("%d ids (sorted %v), want 250 in order", len(ids), slices.IsSorted(ids))
	}
	var login, typ, status, storedHash string
	var created time.Time
	if err := env.Pool.QueryRow(ctx, "SELECT login, user_type, id_verification_status, password_hash, created_at FROM users WHERE id = $1",
		ids[41]).Scan(&login, &typ, &status, &storedHash, &created); err != nil {
		t.Fatal(err)
	}
	if login != "load00042" || typ != "INDIVIDUAL" || status != "VERIFIED" || storedHash != hash {
		t.Errorf("user 42: %s %s %s, hash kept %v", login, typ, status, storedHash == hash)
	}
	if age := time.Since(created); age < 29*24*time.Hour || age > 31*24*time.Hour {
		t.Errorf("created %s ago, want about 30 days", age)
	}
	if n := count(t, env.Pool, `SELECT count(*) FROM users u WHERE u.login LIKE 'load%' AND
		(SELECT count(*) FROM passenger_master p WHERE p.user_id = u.id AND p.validated AND p.age BETWEEN 18 AND 70
			AND p.gender IN ('M', 'F') AND p.id_type IN ('PAN', 'AADHAAR', 'PASSPORT') AND p.id_ref <> '' AND p.name LIKE '% %') = 1`); n != 250 {
		t.Errorf("%d of 250 users have exactly one valid saved passenger", n)
	}
	if n := count(t, env.Pool, "SELECT count(*) FROM passenger_master WHERE age > 60"); n < 10 {
		t.Errorf("only %d of 250 passengers over 60", n)
	}
	if n := count(t, env.Pool, "SELECT count(DISTINCT name) FROM passenger_master"); n < 150 {
		t.Errorf("only %d distinct names among 250 passengers", n)
	}
	if n := count(t, env.Pool, `SELECT count(*) FROM passenger_master WHERE NOT (
		(id_type = 'PAN' AND id_ref ~ '^[A-Z]{3}P[A-Z][0-9]{4}[A-Z]$') OR
		(id_type = 'AADHAAR' AND id_ref ~ '^[2-9][0-9]{11}$') OR
		(id_type = 'PASSPORT' AND id_ref ~ '^[A-Z][0-9]{7}$'))`); n != 0 {
		t.Errorf("%d malformed id references", n)
	}

	// Overlapping logins: nothing written.
	before := tableCounts(t, env.Pool)
	_, err = Users(ctx, env.Pool, UsersSpec{Count: 300, Prefix: "load", PasswordHash: hash})
	if !errors.Is(err, ErrLoginExists) {
		t.Errorf("overlapping batch: %v, want ErrLoginExists", err)
	}
	after := tableCounts(t, env.Pool)
	if before["users"] != after["users"] || before["passenger_master"] != after["passenger_master"] {
		t.Errorf("failed batch wrote rows: users %d -> %d, passengers %d -> %d",
			before["users"], after["users"], before["passenger_master"], after["passenger_master"])
	}

	// Hashing a plain password, agents, unverified, explicit creation time.
	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	agents, err := Users(ctx, env.Pool, UsersSpec{Count: 3, Prefix: "agent", Password: "pw-agent", Agent: true, Unverified: true, CreatedAt: at})
	if err != nil {
		t.Fatal(err)
	}
	if n := count(t, env.Pool, `SELECT count(*) FROM users WHERE id = ANY($1) AND user_type = 'AGENT'
		AND id_verification_status = 'UNVERIFIED' AND created_at = $2`, agents, at); n != 3 {
		t.Errorf("%d of 3 agents stored as asked", n)
	}
	var h1, h3 string
	if err := env.Pool.QueryRow(ctx, "SELECT (SELECT password_hash FROM users WHERE login = 'agent00001'), (SELECT password_hash FROM users WHERE login = 'agent00003')").Scan(&h1, &h3); err != nil {
		t.Fatal(err)
	}
	if ok, err := auth.CheckPassword(h3, "pw-agent"); !ok || err != nil || h1 != h3 {
		t.Errorf("agent password check %v %v, one shared hash %v", ok, err, h1 == h3)
	}

	for name, spec := range map[string]UsersSpec{
		"zero count":  {Prefix: "x", Password: "p"},
		"no prefix":   {Count: 1, Password: "p"},
		"no password": {Count: 1, Prefix: "x"},
	} {
		if _, err := Users(ctx, env.Pool, spec); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestUsersBulk(t *testing.T) {
	if testing.Short() {
		t.Skip("bulk seeding in -short mode")
	}
	t.Parallel()
	env := testenv.New(t)
	start := time.Now()
	ids, err := Users(context.Background(), env.Pool, UsersSpec{Count: 100_000, Prefix: "bulk", PasswordHash: "x"})
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	t.Logf("100,000 users in %s", took)
	if len(ids) != 100_000 {
		t.Fatalf("%d ids", len(ids))
	}
	if n := count(t, env.Pool, "SELECT count(*) FROM users WHERE login IN ('bulk00001', 'bulk99999', 'bulk100000')"); n != 3 {
		t.Errorf("%d of the three sample logins exist", n)
	}
	if n := count(t, env.Pool, "SELECT count(*) FROM passenger_master"); n != 100_000 {
		t.Errorf("%d passengers", n)
	}
	if took > 60*time.Second {
		t.Errorf("took %s: COPY should take seconds", took)
	}
}

func TestPassengerFor(t *testing.T) {
	t.Parallel()
	over60, women := 0, 0
	for i := range 1000 {
		p := passengerFor(i)
		if p != passengerFor(i) {
			t.Fatalf("passenger %d not deterministic", i)
		}
		if p.age < 18 || p.age > 70 || len(p.name) > 60 {
			t.Errorf("passenger %d: %+v", i, p)
		}
		if p.age > 60 {
			over60++
		}
		if p.gender == "F" {
			women++
		}
	}
	if over60 < 100 || women < 400 || women > 600 {
		t.Errorf("%d over 60, %d women of 1000", over60, women)
	}
}

// An opening wallet balance is money that never arrived (issue 32: no
// money moves on one person's word): the seed command refuses it on any
// database but tatkal dev's, creating nobody, and allows it on dev's.
func TestSeedUsersWalletOnlyOnTheDevDatabase(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	open := func(context.Context) (*pgxpool.Pool, error) { return pgxpool.New(ctx, env.DatabaseURL) }
	var out strings.Builder
	err := Command(ctx, []string{"users", "--count", "2", "--prefix", "rich", "--password", "a long password", "--wallet", "5000"}, &out, open)
	if err == nil || !strings.Contains(err.Error(), "tatkal dev") {
		t.Fatalf("seeding wallet money on a real database: %v", err)
	}
	if n := count(t, env.Pool, `SELECT count(*) FROM wallet_accounts`) + count(t, env.Pool, `SELECT count(*) FROM users`); n != 0 {
		t.Fatalf("a refused seed created %d rows", n)
	}
	if err := Command(ctx, []string{"users", "--count", "2", "--prefix", "poor", "--password", "a long password"}, &out, open); err != nil {
		t.Fatalf("seeding users without money: %v", err)
	}
	if _, err := env.Pool.Exec(ctx, `INSERT INTO settings (key, value) VALUES ('session_key', 'dev')`); err != nil {
		t.Fatal(err)
	}
	if err := Command(ctx, []string{"users", "--count", "2", "--prefix", "rich", "--password", "a long password", "--wallet", "5000"}, &out, open); err != nil {
		t.Fatalf("seeding wallet money on the dev database: %v", err)
	}
	if n := count(t, env.Pool, `SELECT count(*) FROM wallet_accounts WHERE balance_paise = 500000`); n != 2 {
		t.Fatalf("%d dev wallets funded, want 2", n)
	}
}
