package schedule

import (
	"testing"
	"time"

	"tatkal/booking/india"
	"tatkal/recon"
)

func TestParseClock(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]time.Duration{
		"06:00": 6 * time.Hour, "00:00": 0, "23:59:59": 24*time.Hour - time.Second, "10:30:05": 10*time.Hour + 30*time.Minute + 5*time.Second,
	} {
		c, err := ParseClock(in)
		if err != nil || time.Duration(c) != want {
			t.Errorf("ParseClock(%q) = %v, %v; want %v", in, time.Duration(c), err, want)
		}
		if c.String() != in {
			t.Errorf("Clock(%v).String() = %q, want %q", want, c.String(), in)
		}
	}
	for _, bad := range []string{"", "6", "24:00", "06:60", "06:00 IST", "6am", "-01:00", "06:00:60"} {
		if _, err := ParseClock(bad); err == nil {
			t.Errorf("ParseClock(%q) took it", bad)
		}
	}
}

func clock(t *testing.T, s string) Clock {
	t.Helper()
	c, err := ParseClock(s)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

// A daily schedule runs at its time of day in IST, whatever the zone of
// the time it is asked about, and across the IST midnight that is 18:30
// UTC of the day before.
func TestDailyNextIsATimeOfDayInIST(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		at       string
		now      string // RFC 3339
		want     string // the next run, UTC
		wantSlot string // the run now belongs to, UTC
	}{
		// 06:00 IST is 00:30 UTC.
		{"06:00", "2026-03-10T00:29:59Z", "2026-03-10T00:30:00Z", "2026-03-09T00:30:00Z"},
		// At the time itself: this run is now, the next is tomorrow.
		{"06:00", "2026-03-10T00:30:00Z", "2026-03-11T00:30:00Z", "2026-03-10T00:30:00Z"},
		{"06:00", "2026-03-10T06:00:00+05:30", "2026-03-11T00:30:00Z", "2026-03-10T00:30:00Z"},
		// 23:00 UTC on the 9th is 04:30 IST on the 10th: today's run (IST) is still ahead.
		{"06:00", "2026-03-09T23:00:00Z", "2026-03-10T00:30:00Z", "2026-03-09T00:30:00Z"},
		// 02:00 IST is 20:30 UTC of the day before: at 19:00 UTC on the
		// 10th (00:30 IST on the 11th) the next run is 20:30 UTC the same
		// UTC day, which is the 11th in IST.
		{"02:00", "2026-03-10T19:00:00Z", "2026-03-10T20:30:00Z", "2026-03-09T20:30:00Z"},
		{"02:00", "2026-03-10T21:00:00Z", "2026-03-11T20:30:00Z", "2026-03-10T20:30:00Z"},
		// Just before the IST midnight (18:29 UTC) and just after it.
		{"00:15", "2026-03-10T18:29:00Z", "2026-03-10T18:45:00Z", "2026-03-09T18:45:00Z"},
		{"23:45", "2026-03-10T18:31:00Z", "2026-03-11T18:15:00Z", "2026-03-10T18:15:00Z"},
		// Seconds, for tests that run it a moment from now; and a month's end.
		{"23:59:30", "2026-03-31T18:29:00Z", "2026-03-31T18:29:30Z", "2026-03-30T18:29:30Z"},
		{"00:00", "2026-12-31T18:30:00Z", "2027-01-01T18:30:00Z", "2026-12-31T18:30:00Z"},
	} {
		w := Daily(clock(t, c.at))
		now := utc(c.now)
		if got := w.Next(now); !got.Equal(utc(c.want)) {
			t.Errorf("daily at %s, now %s: next %s, want %s", c.at, c.now, got.UTC().Format(time.RFC3339), c.want)
		}
		if got := w.Slot(now); !got.Equal(utc(c.wantSlot)) {
			t.Errorf("daily at %s, now %s: slot %s, want %s", c.at, c.now, got.UTC().Format(time.RFC3339), c.wantSlot)
		}
		// River asks for the next run after the one it just inserted.
		if got := w.Next(w.Next(now)); !got.Equal(utc(c.want).Add(24 * time.Hour)) {
			t.Errorf("daily at %s: the run after %s is %s", c.at, c.want, got.UTC().Format(time.RFC3339))
		}
	}
	if got := Daily(DefaultReconAt).String(); got != "daily at 06:00 IST" {
		t.Errorf("String %q", got)
	}
}

// The daily reconciliation names its day in IST: a run at 02:00 IST on
// the 11th happens at 20:30 UTC on the 10th, and still reconciles the
// 10th (yesterday in IST), not the 9th.
func TestDailyReconciliationNamesTheISTDay(t *testing.T) {
	t.Parallel()
	at := clock(t, "02:00")
	var e Entry
	for _, x := range List(Config{ReconAt: &at, ReconRerunDays: 5}) {
		if x.Kind == (recon.DailyArgs{}).Kind() {
			e = x
		}
	}
	if !e.When.IsDaily() || !e.Office || e.Args == nil {
		t.Fatalf("the reconciliation's entry: %+v", e)
	}
	// River calls the constructor up to 100 ms before the time.
	fired := utc("2026-03-10T20:30:00Z").Add(-100 * time.Millisecond)
	args := e.Args(e.When.Slot(fired.Add(slotMargin))).(recon.DailyArgs)
	if want := time.Date(2026, 3, 11, 0, 0, 0, 0, india.IST); !args.On.Equal(want) || args.RerunDays != 5 {
		t.Fatalf("args %+v, want the day %s and 5 days", args, want)
	}
	// A process that starts later that day catches the same day up.
	late := e.Args(e.When.Slot(utc("2026-03-11T09:00:00Z").Add(slotMargin))).(recon.DailyArgs)
	if !late.On.Equal(args.On) {
		t.Fatalf("catching up at 14:30 IST names %s, the run at 02:00 named %s", late.On, args.On)
	}
}

func TestEveryAndTriggered(t *testing.T) {
	t.Parallel()
	now := utc("2026-03-10T10:00:00Z")
	w := Every(30 * time.Second)
	if !w.Next(now).Equal(now.Add(30*time.Second)) || !w.Slot(now).Equal(now) || w.String() != "every 30s" || !w.Periodic() || w.IsDaily() {
		t.Fatalf("every 30s: next %s, slot %s, %q", w.Next(now), w.Slot(now), w)
	}
	for d, s := range map[time.Duration]string{time.Minute: "every 1m", 15 * time.Minute: "every 15m", 90 * time.Minute: "every 1h30m", 2 * time.Hour: "every 2h"} {
		if got := Every(d).String(); got != s {
			t.Errorf("Every(%v) = %q, want %q", d, got, s)
		}
	}
	tr := Triggered("after each window")
	if tr.Periodic() || !tr.Next(now).IsZero() || tr.String() != "after each window" {
		t.Fatalf("triggered: %+v", tr)
	}
}

// The list is the one schedule: each kind once (River's periodic job IDs
// must be unique), every periodic entry with its job, every kind of the
// booking stack and of the back office registered by its side.
func TestListIsOneSchedule(t *testing.T) {
	t.Parallel()
	list := List(Config{})
	seen := map[string]bool{}
	periodic := map[bool]int{}
	for _, e := range list {
		if seen[e.Kind] || e.Kind == "" || e.Name == "" || e.What == "" {
			t.Errorf("entry %+v: a kind twice, or unnamed", e)
		}
		seen[e.Kind] = true
		if e.When.Periodic() {
			periodic[e.Office]++
			if e.Args == nil || e.Args(time.Now()).Kind() != e.Kind {
				t.Errorf("%s: its job is not of its kind", e.Kind)
			}
		}
	}
	for _, office := range []bool{false, true} {
		if n := len(Periodic(list, office)); n != periodic[office] || n == 0 {
			t.Errorf("office %t: %d periodic jobs, want %d", office, n, periodic[office])
		}
	}
	for _, kind := range []string{"hold_sweep", "chart_schedule", "chart_prepare", "notify_relay", "fraud_signal_drain", "window_fairness",
		"recon_daily", "recon_fetch", "recon_statement", "recon_escalate", "fraud_schedule", "fraud_cluster_window", "fraud_enforce", "invariant_watch", "window_review"} {
		if !seen[kind] {
			t.Errorf("%s is not on the schedule", kind)
		}
	}
}
