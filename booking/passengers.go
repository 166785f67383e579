package booking

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"tatkal/booking/db"
	"tatkal/booking/pii"
)

// MaxSavedPassengers bounds an account's master list.
const MaxSavedPassengers = 20

// SavedPassenger is one entry of an account's master list. Its IDRef is
// empty: the number stays sealed (idref.go) but for a hold
// (PassengersForHold); IDHint is what may be shown (pii.Mask).
type SavedPassenger struct {
	ID int64
	Passenger
	IDHint string
	// Validated: the photo ID's type and number were checked when saved.
	Validated bool
	sealed    string
}

// masterClass is the class whose berth preferences a saved passenger may
// ask for: sleeper berths, the widest set (a preference a train's class
// lacks is dropped at booking time, see PassengersForHold).
const masterClass = "SL"

// SavePassenger validates and adds a passenger to the account's master
// list, so the passenger step at 10:00 is a selection, not typing.
func (s Passengers) SavePassenger(ctx context.Context, userID int64, p Passenger) (SavedPassenger, error) {
	ps := []Passenger{p}
	_, _, err := ValidatePassengers(masterClass, ps, s.rules)
	if err != nil && ErrorReason(err) != "NO_ID" { // an ID is needed per booking, not per passenger
		return SavedPassenger{}, err
	}
	sp := SavedPassenger{Passenger: ps[0], Validated: err == nil}
	id, err := s.sealID(sp.IDType, sp.IDRef)
	if err != nil {
		return SavedPassenger{}, fmt.Errorf("save passenger of %d: %w", userID, err)
	}
	sp.IDRef, sp.IDHint = "", id.hint
	err = db.Transact(ctx, s.pool, func(tx pgx.Tx) error {
		// The duplicate is found by the number's keyed hash, never the number.
		var n int
		var dup bool
		if err := tx.QueryRow(ctx, `SELECT count(*), coalesce(bool_or(id_index = $2 AND $2 <> ''), false) FROM passenger_master
			WHERE user_id = $1 AND removed_at IS NULL`, userID, id.index).Scan(&n, &dup); err != nil {
			return err
		}
		if dup {
			return Errorf(ECONFLICT, "DUPLICATE_PASSENGER", "A passenger with this %s number is already on your list.", sp.IDType)
		}
		if n >= MaxSavedPassengers {
			return Errorf(ELIMIT, "TOO_MANY_SAVED", "You can save at most %d passengers; remove one first.", MaxSavedPassengers)
		}
		return tx.QueryRow(ctx, `INSERT INTO passenger_master (user_id, name, age, gender, berth_pref, id_type, id_sealed, id_hint, id_index, validated)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING id`, userID, sp.Name, sp.Age, sp.Gender, sp.BerthPref, sp.IDType,
			id.sealed, id.hint, id.index, sp.Validated).Scan(&sp.ID)
	})
	if err != nil {
		if ErrorCode(err) != EINTERNAL {
			return SavedPassenger{}, err
		}
		return SavedPassenger{}, fmt.Errorf("save passenger of %d: %w", userID, err)
	}
	return sp, nil
}

// SavedPassengers is the account's master list, oldest first.
func (s Passengers) SavedPassengers(ctx context.Context, userID int64) ([]SavedPassenger, error) {
	// A row an older version wrote in clear is shown masked all the same
	// (SealClearIDs seals it at the next start).
	rows, err := s.pool.Query(ctx, `SELECT id, name, age, gender, berth_pref, id_type,
		id_hint, id_sealed, id_ref, validated FROM passenger_master
		WHERE user_id = $1 AND removed_at IS NULL ORDER BY id`, userID)
	if err != nil {
		return nil, fmt.Errorf("saved passengers of %d: %w", userID, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (SavedPassenger, error) {
		var p SavedPassenger
		var clear string
		err := r.Scan(&p.ID, &p.Name, &p.Age, &p.Gender, &p.BerthPref, &p.IDType, &p.IDHint, &p.sealed, &clear, &p.Validated)
		if clear != "" {
			p.IDHint, p.sealed = pii.Hint(clear), "clear:"+clear
		}
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("saved passengers of %d: %w", userID, err)
	}
	return out, nil
}

// RemovePassenger takes a passenger off the account's master list.
func (s Passengers) RemovePassenger(ctx context.Context, userID, id int64) error {
	tag, err := s.pool.Exec(ctx, `UPDATE passenger_master SET removed_at = now() WHERE id = $1 AND user_id = $2 AND removed_at IS NULL`, id, userID)
	if err != nil {
		return fmt.Errorf("remove passenger %d of %d: %w", id, userID, err)
	}
	if tag.RowsAffected() == 0 {
		return Errorf(ENOTFOUND, "NO_SUCH_PASSENGER", "That passenger is not on your list.")
	}
	return nil
}

// PassengersForHold picks saved passengers by id, in the order given, for
// a hold in class: at most the rules' passengers, each once, each the
// account's own. A berth preference the class does not have is dropped.
func (s Passengers) PassengersForHold(ctx context.Context, userID int64, class string, ids []int64) ([]Passenger, error) {
	if len(ids) == 0 {
		return nil, Errorf(EINVALID, "NO_PASSENGERS", "Choose at least one passenger.")
	}
	if most := s.Rules().MaxPassengers; len(ids) > most {
		return nil, Errorf(EINVALID, "TOO_MANY_PASSENGERS", "A Tatkal ticket carries at most %d passengers; you chose %d.", most, len(ids))
	}
	saved, err := s.SavedPassengers(ctx, userID)
	if err != nil {
		return nil, err
	}
	byID := map[int64]SavedPassenger{}
	for _, p := range saved {
		byID[p.ID] = p
	}
	allowed := berthPrefs(class)
	seen := map[int64]bool{}
	var out []Passenger
	for _, id := range ids {
		p, ok := byID[id]
		if !ok || seen[id] {
			return nil, Errorf(EINVALID, "BAD_PASSENGER", "Choose passengers from your saved list, each once.")
		}
		seen[id] = true
		if _, ok := allowed[p.BerthPref]; !ok {
			p.BerthPref = ""
		}
		// The hold needs the number itself (its rules and the passenger
		// limit read it): opened here, sealed again in the hold row.
		if ref, ok := strings.CutPrefix(p.sealed, "clear:"); ok {
			p.IDRef = ref
		} else if p.IDRef, err = s.ids.Open(p.sealed); err != nil {
			return nil, fmt.Errorf("passenger %d of %d: %w", id, userID, err)
		}
		out = append(out, p.Passenger)
	}
	return out, nil
}

// History is the account's holds and bookings, newest first, at most limit.
func (s Passengers) History(ctx context.Context, userID int64, limit int) ([]HoldView, error) {
	rows, err := s.pool.Query(ctx, `SELECT id FROM holds WHERE user_id = $1 ORDER BY created_at DESC LIMIT $2`, userID, limit)
	if err != nil {
		return nil, fmt.Errorf("history of %d: %w", userID, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		return nil, fmt.Errorf("history of %d: %w", userID, err)
	}
	out := make([]HoldView, 0, len(ids))
	for _, id := range ids {
		v, err := s.view(ctx, s.pool, id)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}
