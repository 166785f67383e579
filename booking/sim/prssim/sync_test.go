package prssim_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"tatkal/booking/prs"
)

func TestSyncIsIdempotentByPNR(t *testing.T) {
	t.Parallel()
	st := newStack(t)
	b := confirmed("4100000001", 0, 3, berth{"B1", 11}, berth{"B1", 12})

	status, first := st.raw(t, http.MethodPut, "/v1/bookings/"+b.PNR, apiKey, b)
	if status != http.StatusCreated {
		t.Fatalf("first sync: %d %s, want 201", status, first)
	}
	ack1 := decodeJSON[prs.Ack](t, first)
	if ack1.PNR != b.PNR || ack1.CoreRef == "" || ack1.AcceptedAt.IsZero() {
		t.Fatalf("first ack incomplete: %+v", ack1)
	}
	status, again := st.raw(t, http.MethodPut, "/v1/bookings/"+b.PNR, apiKey, b)
	if status != http.StatusOK {
		t.Fatalf("replay: %d %s, want 200", status, again)
	}
	if string(again) != string(first) {
		t.Fatalf("replay ack differs:\n first %s\n again %s", first, again)
	}
	// The client sees the same ack, also when the passengers come in
	// another order: the request is the same.
	b.Passengers[0], b.Passengers[1] = b.Passengers[1], b.Passengers[0]
	if ack := mustSync(t, st.client, b); ack != ack1 {
		t.Fatalf("client ack %+v, want %+v", ack, ack1)
	}

	got, err := st.client.Get(context.Background(), b.PNR)
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	if got.State != prs.StatusConfirmed || got.CoreRef != ack1.CoreRef || !got.AcceptedAt.Equal(ack1.AcceptedAt) ||
		got.CancelledAt != nil || len(got.Passengers) != 2 || got.Passengers[0].Seq != 1 || got.Passengers[1].BerthNo != 12 {
		t.Fatalf("stored booking wrong: %+v", got)
	}
	// A booking read back from the core syncs as a replay.
	if ack := mustSync(t, st.client, got); ack != ack1 {
		t.Fatalf("re-sync of the stored booking: %+v, want %+v", ack, ack1)
	}

	other := mustSync(t, st.client, confirmed("4100000002", 0, 3, berth{"B1", 13}))
	if other.CoreRef == ack1.CoreRef {
		t.Fatalf("two PNRs share core ref %s", other.CoreRef)
	}
}

func TestConflictingBodyIs409(t *testing.T) {
	t.Parallel()
	st := newStack(t)
	b := confirmed("4100000011", 0, 3, berth{"B1", 11})
	mustSync(t, st.client, b)

	changed := b
	changed.FarePaise++
	_, err := st.client.Sync(context.Background(), changed)
	var pe *prs.ProtocolError
	if !errors.As(err, &pe) || pe.Status != http.StatusConflict || pe.Code != prs.CodeConflict {
		t.Fatalf("want ProtocolError 409 CONFLICT, got %T %v", err, err)
	}
	var rej *prs.RejectedError
	if prs.IsRetryable(err) || errors.As(err, &rej) {
		t.Fatalf("a conflict is neither retryable nor a rejection: %v", err)
	}
	got, err := st.client.Get(context.Background(), b.PNR)
	if err != nil || got.FarePaise != b.FarePaise {
		t.Fatalf("the stored booking must be unchanged: %+v %v", got, err)
	}
}

func TestBerthConflictOnOverlappingLegs(t *testing.T) {
	t.Parallel()
	st := newStack(t)
	ctx := context.Background()
	mustSync(t, st.client, confirmed("4100000021", 0, 3, berth{"B1", 7})) // legs 0,1,2

	_, err := st.client.Sync(ctx, confirmed("4100000022", 2, 5, berth{"B1", 8}, berth{"B1", 7})) // leg 2 overlaps
	wantRejected(t, err, prs.ReasonBerthTaken)
	if rej := (*prs.RejectedError)(nil); errors.As(err, &rej) && (rej.PNR != "4100000022" || rej.Detail == "") {
		t.Fatalf("rejection lacks PNR or detail: %+v", rej)
	}
	// Nothing of the rejected booking stays, not even its free berth.
	_, err = st.client.Get(ctx, "4100000022")
	wantNotFound(t, err)
	mustSync(t, st.client, confirmed("4100000023", 0, 5, berth{"B1", 8}))

	// The same berth on legs that do not overlap, another date, another coach.
	mustSync(t, st.client, confirmed("4100000024", 3, 6, berth{"B1", 7}))
	nextDay := confirmed("4100000025", 0, 6, berth{"B1", 7})
	nextDay.JourneyDate = day2
	mustSync(t, st.client, nextDay)
	mustSync(t, st.client, confirmed("4100000026", 0, 6, berth{"B2", 7}))

	// A waitlisted booking holds no berth and blocks nothing.
	mustSync(t, st.client, waitlisted("4100000027", 3))
}

func TestCancelFreesTheBerth(t *testing.T) {
	t.Parallel()
	st := newStack(t)
	ctx := context.Background()
	a := confirmed("4100000031", 0, 4, berth{"A1", 3})
	ackA := mustSync(t, st.client, a)
	b := confirmed("4100000032", 1, 2, berth{"A1", 3})
	_, err := st.client.Sync(ctx, b)
	wantRejected(t, err, prs.ReasonBerthTaken)

	if err := st.client.Cancel(ctx, a.PNR); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	first, err := st.client.Get(ctx, a.PNR)
	if err != nil || first.State != prs.StateCancelled || first.CancelledAt == nil || first.Status != prs.StatusConfirmed {
		t.Fatalf("cancelled booking: %+v %v", first, err)
	}
	if err := st.client.Cancel(ctx, a.PNR); err != nil {
		t.Fatalf("second cancel: %v", err)
	}
	second, err := st.client.Get(ctx, a.PNR)
	if err != nil || !second.CancelledAt.Equal(*first.CancelledAt) {
		t.Fatalf("a second cancel must change nothing: %+v %v", second, err)
	}

	mustSync(t, st.client, b)
	// A late replay of the cancelled booking is acknowledged as before and
	// resurrects nothing (its berth now belongs to b).
	if ack := mustSync(t, st.client, a); ack != ackA {
		t.Fatalf("replay after cancel: %+v, want %+v", ack, ackA)
	}
	if got, err := st.client.Get(ctx, a.PNR); err != nil || got.State != prs.StateCancelled {
		t.Fatalf("replay after cancel changed the state: %+v %v", got, err)
	}

	wantNotFound(t, st.client.Cancel(ctx, "4199999999"))
	_, err = st.client.Get(ctx, "4199999999")
	wantNotFound(t, err)
	if status, body := st.raw(t, http.MethodPost, "/v1/bookings/notapnr/cancel", apiKey, nil); status != http.StatusBadRequest {
		t.Fatalf("cancel of a malformed PNR: %d %s", status, body)
	}
}

func TestMalformedBookingsAre400(t *testing.T) {
	t.Parallel()
	st := newStack(t)
	const pnr = "4100000041"
	valid := func() prs.Booking { return confirmed(pnr, 0, 3, berth{"B1", 1}, berth{"B1", 2}) }
	cases := map[string]any{
		"not json":        "{",
		"trailing data":   mustJSON(t, valid()) + "{}",
		"unknown field":   `{"pnr":"4100000041","berth":"B1/1"}`,
		"empty":           "{}",
		"path mismatch":   func() prs.Booking { b := valid(); b.PNR = "4100000042"; return b }(),
		"bad date":        func() prs.Booking { b := valid(); b.JourneyDate = "10-03-2026"; return b }(),
		"legs backwards":  func() prs.Booking { b := valid(); b.FromSeq, b.ToSeq = 3, 3; return b }(),
		"same station":    func() prs.Booking { b := valid(); b.To = b.From; return b }(),
		"bad status":      func() prs.Booking { b := valid(); b.Status = "CANCELLED"; return b }(),
		"negative fare":   func() prs.Booking { b := valid(); b.FarePaise = -1; return b }(),
		"no passengers":   func() prs.Booking { b := valid(); b.Passengers = nil; return b }(),
		"no berth":        func() prs.Booking { b := valid(); b.Passengers[1].BerthNo = 0; return b }(),
		"shared berth":    func() prs.Booking { b := valid(); b.Passengers[1].BerthNo = 1; return b }(),
		"duplicate seq":   func() prs.Booking { b := valid(); b.Passengers[1].Seq = 1; return b }(),
		"bad gender":      func() prs.Booking { b := valid(); b.Passengers[0].Gender = "X"; return b }(),
		"waitlist berth":  func() prs.Booking { b := valid(); b.Status, b.WaitlistNo = prs.StatusWaitlisted, 2; return b }(),
		"waitlist no num": func() prs.Booking { b := waitlisted(pnr, 0); return b }(),
	}
	for name, body := range cases {
		status, data := st.raw(t, http.MethodPut, "/v1/bookings/"+pnr, apiKey, body)
		if status != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", name, status, data)
			continue
		}
		if e := decodeJSON[map[string]string](t, data); e["code"] != prs.CodeBadRequest || e["message"] == "" {
			t.Errorf("%s: error body %s", name, data)
		}
	}
	_, err := st.client.Get(context.Background(), pnr)
	wantNotFound(t, err)

	// The client refuses to send what the core would refuse to read.
	bad := valid()
	bad.Passengers[0].Age = -4
	_, err = st.client.Sync(context.Background(), bad)
	var pe *prs.ProtocolError
	if !errors.As(err, &pe) || prs.IsRetryable(err) {
		t.Fatalf("client-side validation: %T %v", err, err)
	}
	// The valid one is still accepted afterwards.
	mustSync(t, st.client, valid())
}

func TestAPIAuth(t *testing.T) {
	t.Parallel()
	st := newStack(t)
	for _, tok := range []string{"", "wrong", adminToken} {
		if status, body := st.raw(t, http.MethodGet, "/v1/exports/"+day1, tok, nil); status != http.StatusUnauthorized {
			t.Errorf("token %q on /v1: %d %s, want 401", tok, status, body)
		}
	}
	c := prs.NewClient(st.http.URL, "wrong", nil)
	_, err := c.Sync(context.Background(), confirmed("4100000051", 0, 1, berth{"B1", 1}))
	var pe *prs.ProtocolError
	if !errors.As(err, &pe) || pe.Status != http.StatusUnauthorized || prs.IsRetryable(err) {
		t.Fatalf("wrong key: want ProtocolError 401, got %T %v", err, err)
	}
	// A wrong base URL is a 404 too, but not "no such PNR".
	_, err = prs.NewClient(st.http.URL+"/nope", apiKey, nil).Get(context.Background(), "4100000051")
	if !errors.As(err, &pe) || pe.Status != http.StatusNotFound || errors.Is(err, prs.ErrNotFound) {
		t.Fatalf("wrong base URL: %T %v", err, err)
	}
	if status, _ := st.raw(t, http.MethodGet, "/healthz", "", nil); status != http.StatusOK {
		t.Fatalf("healthz: %d", status)
	}
}

func TestRestartKnowsEarlierPNRs(t *testing.T) {
	t.Parallel()
	st := newStack(t)
	ctx := context.Background()
	b := confirmed("4100000061", 0, 2, berth{"S1", 40})
	ack := mustSync(t, st.client, b)
	if err := st.client.Cancel(ctx, b.PNR); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	held := mustSync(t, st.client, confirmed("4100000062", 0, 2, berth{"S1", 41}))

	st.http.Close()
	st.start(t, "") // a new process on the same schema

	if again := mustSync(t, st.client, b); again != ack {
		t.Fatalf("after restart: ack %+v, want %+v", again, ack)
	}
	if status, _ := st.raw(t, http.MethodPut, "/v1/bookings/"+b.PNR, apiKey, b); status != http.StatusOK {
		t.Fatalf("replay after restart: %d, want 200", status)
	}
	got, err := st.client.Get(ctx, b.PNR)
	if err != nil || got.State != prs.StateCancelled {
		t.Fatalf("after restart: %+v %v", got, err)
	}
	_, err = st.client.Sync(ctx, confirmed("4100000063", 1, 2, berth{"S1", 41}))
	wantRejected(t, err, prs.ReasonBerthTaken)
	fresh := mustSync(t, st.client, confirmed("4100000064", 0, 2, berth{"S1", 42}))
	if fresh.CoreRef == ack.CoreRef || fresh.CoreRef == held.CoreRef {
		t.Fatalf("core ref reused after restart: %s", fresh.CoreRef)
	}
	if !fresh.AcceptedAt.After(ack.AcceptedAt.Add(-time.Second)) {
		t.Fatalf("accepted_at went back in time: %v then %v", ack.AcceptedAt, fresh.AcceptedAt)
	}
}

func TestSchemaIsTheCoresOwn(t *testing.T) {
	t.Parallel()
	st := newStack(t)
	ctx := context.Background()
	mustSync(t, st.client, confirmed("4100000071", 0, 2, berth{"S1", 1}))
	var n int
	if err := st.env.Pool.QueryRow(ctx, `SELECT count(*) FROM prs.passengers WHERE active`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("prs.passengers: %d %v", n, err)
	}

	st.start(t, "prs-other") // another core in another schema sees nothing of the first
	_, err := st.client.Get(ctx, "4100000071")
	wantNotFound(t, err)
	mustSync(t, st.client, confirmed("4100000072", 0, 2, berth{"S1", 1}))
	if err := st.env.Pool.QueryRow(ctx, `SELECT count(*) FROM "prs-other".bookings`).Scan(&n); err != nil || n != 1 {
		t.Fatalf(`"prs-other".bookings: %d %v`, n, err)
	}
}
