package booking_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"tatkal/booking"
	"tatkal/booking/db"
	"tatkal/booking/fraud"
	"tatkal/booking/lab/teststack"
	"tatkal/booking/pii"
)

// cleartextRows names every row of every table (our schema, the
// simulators' and River's) whose text holds one of refs.
func cleartextRows(t *testing.T, s *teststack.Stack, refs ...string) []string {
	t.Helper()
	ctx := context.Background()
	rows, err := s.Pool.Query(ctx, `SELECT format('%I.%I', table_schema, table_name) FROM information_schema.tables
		WHERE table_type = 'BASE TABLE' AND table_schema NOT IN ('pg_catalog', 'information_schema')`)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, tb := range tables {
		for _, ref := range refs {
			var n int
			if err := s.Pool.QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FROM %s x WHERE strpos(upper(x::text), $1) > 0`, tb), ref).Scan(&n); err != nil {
				t.Fatalf("scan %s: %v", tb, err)
			}
			if n > 0 {
				found = append(found, fmt.Sprintf("%s: %d rows hold %s", tb, n, ref))
			}
		}
	}
	return found
}

// After saving passengers, holding with one typed ID and one saved, and
// confirming, no table of the database holds either ID number: they are
// sealed (and open again with the key ring), shown by their last four
// characters, and known to lookups by the fraud signals' keyed hash. A
// second save of the same number on the account is refused by that hash.
func TestNoCleartextIDAfterBooking(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := teststack.New(t, teststack.Options{})
	_, date := s.DemoShard(t, 8, 0)
	user := s.Users(t, "idseal", 1)[0]
	const saved, typed = "QWERT6789Z", "ZXCVB4321K"

	sp, err := s.Service.SavePassenger(ctx, user, booking.Passenger{Name: "Saved Sharma", Age: 40, Gender: "F", IDType: "PAN", IDRef: saved})
	if err != nil {
		t.Fatal(err)
	}
	if sp.IDRef != "" || pii.Mask(sp.IDHint) != "••••789Z" {
		t.Fatalf("saved passenger answered %q, hint %q", sp.IDRef, sp.IDHint)
	}
	_, err = s.Service.SavePassenger(ctx, user, booking.Passenger{Name: "Other Name", Age: 22, Gender: "M", IDType: "PAN", IDRef: saved})
	if booking.ErrorReason(err) != "DUPLICATE_PASSENGER" {
		t.Fatalf("second save of one number: %v, want DUPLICATE_PASSENGER", err)
	}
	list, err := s.Service.SavedPassengers(ctx, user)
	if err != nil || len(list) != 2 {
		t.Fatalf("saved list %+v %v", list, err)
	}
	for _, p := range list {
		if p.IDRef != "" || len(p.IDHint) != 4 {
			t.Fatalf("saved list %+v: want the numbers masked only", list)
		}
	}
	ps, err := s.Service.PassengersForHold(ctx, user, "3A", []int64{sp.ID})
	if err != nil || ps[0].IDRef != saved {
		t.Fatalf("passengers for hold %+v %v: want the number opened for the hold", ps, err)
	}
	ps = append(ps, booking.Passenger{Name: "Typed Verma", Age: 35, Gender: "M", IDType: "PAN", IDRef: typed})
	res, err := s.Service.Hold(ctx, teststack.Caller(user), holdReq(user, "idseal-1", date, "MMCT", "NDLS", ps...))
	if err != nil || res.Status != "HELD" {
		t.Fatalf("hold: %+v %v", res, err)
	}
	if err := db.Transact(ctx, s.Pool, func(tx pgx.Tx) error {
		_, err := s.Service.ConfirmManyTx(ctx, tx, []uuid.UUID{res.HoldID})
		return err
	}); err != nil {
		t.Fatal(err)
	}

	// The request's fingerprint is no plain hash of the numbers either:
	// with the names beside it, every number of a type could be tried.
	var shardID int64
	var from, to int
	var reqHash string
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT shard_id, from_seq, to_seq, request_hash FROM holds WHERE id = $1`, res.HoldID).
		Scan(&shardID, &from, &to, &reqHash), "request hash")
	plain, _ := json.Marshal(struct {
		Shard int64               `json:"s"`
		From  int                 `json:"f"`
		To    int                 `json:"t"`
		Pax   []booking.Passenger `json:"p"`
	}{shardID, from, to, ps})
	if sum := sha256.Sum256(plain); reqHash == hex.EncodeToString(sum[:16]) {
		t.Fatal("holds.request_hash is an unkeyed hash over the passengers' ID numbers")
	}
	// What this version wrote holds no number, before any sealing pass.
	if found := cleartextRows(t, s, saved, typed); len(found) > 0 {
		t.Fatalf("ID numbers readable in the database after a booking:\n%s", strings.Join(found, "\n"))
	}
	// The seed wrote its passenger as older versions did, in clear; and
	// here is a hold as they wrote it. The start's sealing finds both.
	var seeded string
	if err := s.Pool.QueryRow(ctx, `SELECT id_ref FROM passenger_master WHERE user_id = $1 AND id_ref <> ''`, user).Scan(&seeded); err != nil {
		t.Fatal(err)
	}
	oldHold := uuid.New()
	if _, err := s.Pool.Exec(ctx, `INSERT INTO holds (id, shard_id, user_id, idempotency_key, kind, from_seq, to_seq, seat_count, passengers,
			fare_paise, fare_breakup, state, epoch, opening_day, expires_at)
		SELECT $2, shard_id, user_id, 'idseal-old', kind, from_seq, to_seq, seat_count,
			'[{"name":"Old Hold","age":50,"gender":"M","id_type":"PAN","id_ref":"OLDHO1234L"}]', fare_paise, fare_breakup, 'EXPIRED', epoch,
			opening_day, expires_at FROM holds WHERE id = $1`, res.HoldID, oldHold); err != nil {
		t.Fatal(err)
	}
	if found := cleartextRows(t, s, seeded, "OLDHO1234L"); len(found) != 2 {
		t.Fatalf("the fixture's clear rows: %v", found)
	}
	if n, err := s.Service.SealClearIDs(ctx); err != nil || n < 2 {
		t.Fatalf("sealing what is in clear: %d rows, %v", n, err)
	}
	var oldSealed string
	if err := s.Pool.QueryRow(ctx, `SELECT passengers->0->>'id_sealed' FROM holds WHERE id = $1`, oldHold).Scan(&oldSealed); err != nil {
		t.Fatal(err)
	}

	if found := cleartextRows(t, s, saved, typed, seeded, "OLDHO1234L"); len(found) > 0 {
		t.Fatalf("ID numbers readable in the database:\n%s", strings.Join(found, "\n"))
	}
	ring, err := pii.Parse(teststack.IDKeys)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := s.Pool.Query(ctx, `SELECT p.id_sealed, p.id_hint, p.id_index FROM booking_passengers p JOIN bookings b ON b.id = p.booking_id
		WHERE b.hold_id = $1 ORDER BY p.seq`, res.HoldID)
	if err != nil {
		t.Fatal(err)
	}
	type stored struct{ Sealed, Hint, Index string }
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[stored])
	if err != nil || len(got) != 2 {
		t.Fatalf("booking passengers %+v %v", got, err)
	}
	if ref, err := ring.Open(oldSealed); err != nil || ref != "OLDHO1234L" {
		t.Fatalf("the old hold's passenger opens to %q, %v", ref, err)
	}
	if ps, err := s.Service.PassengersForHold(ctx, user, "3A", []int64{list[0].ID}); err != nil || ps[0].IDRef != seeded {
		t.Fatalf("the sealed seeded passenger for a hold: %+v %v", ps, err)
	}
	rec := fraud.Recorder{Key: []byte(teststack.FraudKey)}
	for i, want := range []string{saved, typed} {
		ref, err := ring.Open(got[i].Sealed)
		if err != nil || ref != want || got[i].Hint != want[len(want)-4:] || got[i].Index != rec.IDIndex("PAN", want) {
			t.Fatalf("passenger %d stored %+v (opens to %q, %v); want %s sealed, its hint and keyed hash", i+1, got[i], ref, err, want)
		}
	}
}

// A new key put first in the ring: ResealIDs moves every sealed number
// (saved passengers, bookings, holds) to it, and a ring without the old
// key then opens them all; a second run has nothing left to do.
func TestResealIDsRotatesToTheNewestKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := teststack.New(t, teststack.Options{})
	_, date := s.DemoShard(t, 8, 0)
	user := s.Users(t, "idrot", 1)[0]
	sp, err := s.Service.SavePassenger(ctx, user, booking.Passenger{Name: "Rota Singh", Age: 33, Gender: "F", IDType: "PAN", IDRef: "ROTAS1234R"})
	if err != nil {
		t.Fatal(err)
	}
	ps, err := s.Service.PassengersForHold(ctx, user, "3A", []int64{sp.ID})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Service.Hold(ctx, teststack.Caller(user), holdReq(user, "idrot-hold-1", date, "MMCT", "NDLS", ps...))
	if err != nil || res.Status != "HELD" {
		t.Fatalf("hold: %+v %v", res, err)
	}
	if err := db.Transact(ctx, s.Pool, func(tx pgx.Tx) error {
		_, err := s.Service.ConfirmManyTx(ctx, tx, []uuid.UUID{res.HoldID})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	newKey := "k2=" + strings.Repeat("c3", 32)
	ring, err := pii.Parse(newKey + "," + teststack.IDKeys)
	if err != nil {
		t.Fatal(err)
	}
	rotator := booking.NewService(booking.ServiceConfig{Pool: s.Pool, IDs: ring, Rules: booking.DefaultRules(), Fraud: &fraud.Recorder{Key: []byte(teststack.FraudKey)}})
	defer rotator.Close()
	n, err := rotator.ResealIDs(ctx)
	if err != nil || n < 4 { // the seeded passenger, the saved one, the booking's, the hold's
		t.Fatalf("reseal: %d rows, %v", n, err)
	}
	if n, err := rotator.ResealIDs(ctx); err != nil || n != 0 {
		t.Fatalf("second reseal: %d rows, %v; want nothing left", n, err)
	}
	only, err := pii.Parse(newKey)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := s.Pool.Query(ctx, `SELECT id_sealed FROM passenger_master WHERE user_id = $1
		UNION ALL SELECT p.id_sealed FROM booking_passengers p JOIN bookings b ON b.id = p.booking_id WHERE b.hold_id = $2
		UNION ALL SELECT passengers->0->>'id_sealed' FROM holds WHERE id = $2`, user, res.HoldID)
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(sealed) != 4 {
		t.Fatalf("sealed values %v %v", sealed, err)
	}
	for _, v := range sealed {
		if pii.KeyOf(v) != "k2" {
			t.Fatalf("%q still under %s", v, pii.KeyOf(v))
		}
		if _, err := only.Open(v); err != nil {
			t.Fatalf("without the old key: %v", err)
		}
	}
	// The saved passenger still books under the rotated ring.
	if ps, err := rotator.PassengersForHold(ctx, user, "3A", []int64{sp.ID}); err != nil || ps[0].IDRef != "ROTAS1234R" {
		t.Fatalf("passenger after rotation %+v %v", ps, err)
	}
}
