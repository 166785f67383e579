package prssim_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"tatkal/booking/lab/testenv"
	"tatkal/booking/prs"
)

func TestConcurrentSyncOfOnePNR(t *testing.T) {
	t.Parallel()
	st := newStack(t)
	b := confirmed("4400000001", 0, 3, berth{"B1", 1}, berth{"B1", 2})
	const n = 50

	statuses := make([]int, n)
	bodies := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			var data []byte
			statuses[i], data, errs[i] = st.rawE(http.MethodPut, "/v1/bookings/"+b.PNR, apiKey, b)
			bodies[i] = string(data)
		})
	}
	close(start)
	wg.Wait()

	created := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("request %d: %v", i, errs[i])
		}
		switch statuses[i] {
		case http.StatusCreated:
			created++
		case http.StatusOK:
		default:
			t.Fatalf("request %d: %d %s", i, statuses[i], bodies[i])
		}
		if bodies[i] != bodies[0] {
			t.Fatalf("acks differ:\n %s\n %s", bodies[0], bodies[i])
		}
	}
	if created != 1 {
		t.Fatalf("%d of %d requests were told 201, want exactly 1", created, n)
	}
	if ack := mustSync(t, st.client, b); ack != decodeJSON[prs.Ack](t, []byte(bodies[0])) {
		t.Fatalf("client ack %+v differs from %s", ack, bodies[0])
	}

	var bookings, passengers int
	ctx := context.Background()
	if err := st.env.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM prs.bookings), (SELECT count(*) FROM prs.passengers)`).
		Scan(&bookings, &passengers); err != nil {
		t.Fatal(err)
	}
	if bookings != 1 || passengers != 2 {
		t.Fatalf("stored %d bookings and %d passengers, want 1 and 2", bookings, passengers)
	}
}

// Many PNRs racing for overlapping berths: the core sells each berth once,
// whatever the interleaving, and refuses the rest definitively.
func TestConcurrentBerthRace(t *testing.T) {
	t.Parallel()
	const n = 20
	// One connection per racing booking: the core's own pool would
	// otherwise queue them and the race would be a different one.
	st := newStackOn(t, testenv.NewWithPool(t, n+4))
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			// Opposite berth orders invite deadlocks the store must retry.
			berths := []berth{{"B1", 1}, {"B1", 2}}
			if i%2 == 1 {
				berths[0], berths[1] = berths[1], berths[0]
			}
			from := i % 3
			_, errs[i] = st.client.Sync(context.Background(), confirmed(fmt.Sprintf("44000001%02d", i), from, from+2, berths...))
		})
	}
	close(start)
	wg.Wait()

	accepted := 0
	for i, err := range errs {
		var rej *prs.RejectedError
		switch {
		case err == nil:
			accepted++
		case errors.As(err, &rej) && rej.Reason == prs.ReasonBerthTaken:
		default:
			t.Fatalf("PNR %d: %v", i, err)
		}
	}
	// Legs 0-1, 1-2 and 2-3 all overlap 1-2, so at most two bookings (on
	// 0-1 and 2-3) can share the berths; at least one gets them.
	if accepted < 1 || accepted > 2 {
		t.Fatalf("%d bookings accepted for the same two berths", accepted)
	}
	var overlaps int
	if err := st.env.Pool.QueryRow(context.Background(), `SELECT count(*) FROM prs.passengers a JOIN prs.passengers b
		ON a.pnr < b.pnr AND a.coach = b.coach AND a.berth_no = b.berth_no AND a.active AND b.active
		AND int4range(a.from_seq, a.to_seq) && int4range(b.from_seq, b.to_seq)`).Scan(&overlaps); err != nil {
		t.Fatal(err)
	}
	if overlaps != 0 {
		t.Fatalf("%d berths sold twice", overlaps)
	}
	// Each deadlock costs a second before PostgreSQL breaks it, and under
	// load they chained past the client's timeout: the losers must wait
	// their turn and be refused, not deadlock.
	if n := st.env.DeadlocksAtClose(t); n != 0 {
		t.Fatalf("%d deadlocks while bookings raced for the same berths", n)
	}
}

// Two bookings for one berth, both stopped behind a third transaction that
// holds the berth uncommitted, then released at once: without taking the
// berth in turn, both re-check at the same moment, each sees the other's
// row and they deadlock (broken only after a second). Forced here, so the
// interleaving does not depend on the machine's load.
func TestBerthRaceReleasedAtOnceDoesNotDeadlock(t *testing.T) {
	t.Parallel()
	st := newStackOn(t, testenv.NewWithPool(t, 8))
	ctx := context.Background()
	holder, err := st.env.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback(ctx)
	if _, err := holder.Exec(ctx, `INSERT INTO prs.bookings (pnr, core_ref, digest, train, journey_date, class, quota,
			from_station, to_station, from_seq, to_seq, status, fare_paise)
		VALUES ('4400000299', 'CRHOLDER', 'x', '12951', $1::date, '3A', 'TQ', 'NDLS', 'MMCT', 0, 2, 'CONFIRMED', 1)`, day1); err != nil {
		t.Fatal(err)
	}
	if _, err := holder.Exec(ctx, `INSERT INTO prs.passengers (pnr, seq, name, age, gender, coach, berth_no, berth_type,
			train, journey_date, from_seq, to_seq, active)
		VALUES ('4400000299', 1, 'Holder', 40, 'M', 'B1', 1, 'LB', '12951', $1::date, 0, 2, true)`, day1); err != nil {
		t.Fatal(err)
	}

	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() {
			_, errs[i] = st.client.Sync(ctx, confirmed(fmt.Sprintf("440000020%d", i), 0, 2, berth{"B1", 1}))
		})
	}
	// Both requests are waiting on a lock before the holder lets go.
	testenv.Eventually(t, 15*time.Second, "both bookings waiting on the held berth", func() error {
		var waiting int
		if err := st.env.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		return testenv.Want(waiting >= 2, "%d of 2 waiting", waiting)
	})
	if err := holder.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()

	accepted := 0
	for i, err := range errs {
		var rej *prs.RejectedError
		switch {
		case err == nil:
			accepted++
		case errors.As(err, &rej) && rej.Reason == prs.ReasonBerthTaken:
		default:
			t.Fatalf("PNR %d: %v", i, err)
		}
	}
	if accepted != 1 {
		t.Fatalf("%d of 2 bookings for one free berth accepted, want 1", accepted)
	}
	if n := st.env.DeadlocksAtClose(t); n != 0 {
		t.Fatalf("%d deadlocks between two bookings for one berth", n)
	}
}
