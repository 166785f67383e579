package rehearse_test

import (
	"context"
	"testing"
	"time"

	"tatkal/booking/fraud"
	"tatkal/booking/lab/rehearse"
)

// TestAbuseThroughAPI is issue 13's measure in the suite, through the live
// path: a small abuse population (4 rings of 6, 15 families, 150 honest)
// signs in, verifies, binds its devices, holds in one window with the
// rings' shared devices, addresses, cards and customers (first trying
// customers past the passenger limit, refused), and pays at the
// gateway's page, all through the HTTP API of a running stack; the window's
// signals are what the group commit and the confirmations recorded.
// Clustering them must find ≥ 95 % of the ring accounts and flag ≤ 1 % of
// the honest and family accounts. The rush runs at twice real speed.
func TestAbuseThroughAPI(t *testing.T) {
	// Not parallel: beside the small rehearsal's three stacks and the Lab's
	// on two cores its gateway calls timed out and payments stayed UNKNOWN
	// past its bound (CI, 3 Dec, twice); alone it runs before them.
	start := time.Now()
	rep, err := rehearse.Abuse(context.Background(), testConfig(), rehearse.AbuseOptions{
		Population: fraud.Population{Rings: 4, RingSize: 6, Families: 15, Honest: 150, Seed: 1},
		Scratch:    true, Speed: 2, Cluster: true, Progress: testWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("in %s:\n%s", time.Since(start).Round(time.Second), rep)
	q := rep.Quality
	if rep.Held < rep.Accounts*95/100 || rep.Booked < rep.Held*95/100 {
		t.Fatalf("%d accounts, %d held, %d booked: the drive itself fell short", rep.Accounts, rep.Held, rep.Booked)
	}
	if q.Signals != rep.Held || rep.WithDevice != rep.Held || rep.WithInstrument != rep.Booked {
		t.Errorf("%d signals for %d holds, %d with a device, %d with an instrument for %d bookings",
			q.Signals, rep.Held, rep.WithDevice, rep.WithInstrument, rep.Booked)
	}
	// The rings' scripts tried customers past the passenger limit; each
	// refusal was recorded (a try the limit let through, its holders not
	// yet durable, is a hold instead).
	if rep.Tries == 0 || rep.TriesRecorded < rep.Tries*8/10 || rep.TriesRecorded > rep.Tries {
		t.Errorf("%d refused attempts recorded of %d planned", rep.TriesRecorded, rep.Tries)
	}
	if q.Recall() < 0.95 {
		t.Errorf("ring recall %d/%d = %.3f < 0.95", q.RingFound, q.Rings, q.Recall())
	}
	if q.InnocentRate() > 0.01 {
		t.Errorf("honest or family accounts flagged %d/%d = %.4f > 0.01", q.Flagged, q.Innocents, q.InnocentRate())
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}
