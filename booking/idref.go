package booking

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"tatkal/booking/pii"
)

// storedPassenger is a passenger as the hold row (holds.passengers) keeps
// it: the ID number sealed (booking/pii), never in clear. Readers that
// need only names and ages unmarshal it into Passenger, whose IDRef stays
// empty; the confirmation copies the sealed fields to booking_passengers
// without opening them.
type storedPassenger struct {
	Passenger
	IDSealed string `json:"id_sealed,omitempty"`
	IDHint   string `json:"id_hint,omitempty"`
	IDIndex  string `json:"id_index,omitempty"`
}

// sealedID is one ID number at rest: sealed, its hint and its keyed hash.
type sealedID struct{ sealed, hint, index string }

// sealID seals one passenger's ID number; the zero value when none.
func (s *Service) sealID(idType, ref string) (sealedID, error) {
	if ref == "" {
		return sealedID{}, nil
	}
	sealed, err := s.ids.Seal(ref)
	if err != nil {
		return sealedID{}, err
	}
	return sealedID{sealed: sealed, hint: pii.Hint(ref), index: s.idIndex(idType, ref)}, nil
}

// idIndex is the keyed hash equality lookups use: the fraud signals' own
// (TATKAL_FRAUD_KEY), so one passenger has one key everywhere.
func (s *Service) idIndex(idType, ref string) string {
	if s.fraud == nil {
		return ""
	}
	return s.fraud.IDIndex(idType, ref)
}

// storedPassengers is the JSON of a hold's passengers as stored.
func (s *Service) storedPassengers(ps []Passenger) ([]byte, error) {
	out := make([]storedPassenger, len(ps))
	for i, p := range ps {
		id, err := s.sealID(p.IDType, p.IDRef)
		if err != nil {
			return nil, fmt.Errorf("hold passenger %d: %w", i+1, err)
		}
		p.IDRef = ""
		out[i] = storedPassenger{Passenger: p, IDSealed: id.sealed, IDHint: id.hint, IDIndex: id.index}
	}
	return json.Marshal(out)
}

// hashablePassengers is ps with each ID number replaced by its keyed hash,
// for the hold's request fingerprint (holds.request_hash): a plain hash
// over a number whose passenger's name and age sit beside it would let
// anyone who reads the table try every number of a type.
func (s *Service) hashablePassengers(ps []Passenger) []Passenger {
	out := make([]Passenger, len(ps))
	for i, p := range ps {
		if p.IDRef != "" {
			p.IDRef = "k:" + s.idIndex(p.IDType, p.IDRef)
		}
		out[i] = p
	}
	return out
}

// openPassengers reads a hold row's passengers with their ID numbers
// opened, for the paths that hold again (RetakeAndConfirm).
func (s *Service) openPassengers(raw []byte) ([]Passenger, error) {
	var sps []storedPassenger
	if err := json.Unmarshal(raw, &sps); err != nil {
		return nil, err
	}
	out := make([]Passenger, len(sps))
	for i, sp := range sps {
		if sp.IDRef == "" && sp.IDSealed != "" {
			ref, err := s.ids.Open(sp.IDSealed)
			if err != nil {
				return nil, fmt.Errorf("passenger %d: %w", i+1, err)
			}
			sp.IDRef = ref
		}
		out[i] = sp.Passenger
	}
	return out, nil
}

// withoutIDRefs is ps with no ID number, for rows written without Stored.
func withoutIDRefs(ps []Passenger) []Passenger {
	out := make([]Passenger, len(ps))
	for i, p := range ps {
		p.IDRef = ""
		out[i] = p
	}
	return out
}

// SealClearIDs seals the ID numbers older versions wrote in clear, in
// batches of 500 rows, and reports how many rows it sealed: the saved
// passengers, the bookings' passengers and the holds' passengers. Every
// process runs it at start (a partial index finds the clear rows at no
// cost once there are none); `tatkal ids reseal` runs it too.
func (s *Service) SealClearIDs(ctx context.Context) (int, error) {
	return s.reseal(ctx, "")
}

// ResealIDs moves every sealed ID number not sealed with the newest key of
// the ring to it (after a key was added in front of TATKAL_ID_KEYS), and
// seals what is still in clear; it reports the rows it rewrote. The old
// key can leave the ring once it has run.
func (s *Service) ResealIDs(ctx context.Context) (int, error) {
	n, err := s.reseal(ctx, "")
	if err != nil {
		return n, err
	}
	m, err := s.reseal(ctx, s.ids.Newest())
	return n + m, err
}

const resealBatch = 500

// reseal rewrites, batch by batch, the rows in clear (newest == "") or
// sealed with another key than newest.
func (s *Service) reseal(ctx context.Context, newest string) (int, error) {
	if s.ids == nil {
		return 0, fmt.Errorf("reseal ids: no key ring (%s)", pii.EnvKeys)
	}
	total := 0
	for _, t := range resealTables(newest) {
		for {
			n, err := s.resealBatch(ctx, t)
			total += n
			if err != nil {
				return total, fmt.Errorf("reseal ids of %s: %w", t.name, err)
			}
			if n < resealBatch {
				break
			}
		}
	}
	return total, nil
}

type resealTable struct {
	name string
	// pick selects up to $1 rows to rewrite, locked, as (key text, ref
	// text, sealed text, id_type text); key is what update names a row by.
	pick string
	args []any
	// update rewrites them: $1 keys, $2 sealed values; with clear (rows in
	// clear) also $3 hints and $4 indexes, unless jsonb.
	update string
	clear  bool
	jsonb  bool // the row is a hold: ref holds the passengers' JSON
}

func resealTables(newest string) []resealTable {
	if newest == "" {
		return []resealTable{
			{name: "passenger_master", clear: true,
				pick: `SELECT id::text, id_ref, id_sealed, id_type FROM passenger_master WHERE id_ref <> '' ORDER BY id LIMIT $1 FOR UPDATE`,
				update: `UPDATE passenger_master p SET id_ref = '', id_sealed = x.s, id_hint = x.h, id_index = x.i
					FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS x(k, s, h, i) WHERE p.id = x.k::bigint`},
			{name: "booking_passengers", clear: true,
				pick: `SELECT booking_id || '/' || seq, id_ref, id_sealed, id_type FROM booking_passengers WHERE id_ref <> ''
					ORDER BY booking_id, seq LIMIT $1 FOR UPDATE`,
				update: `UPDATE booking_passengers p SET id_ref = '', id_sealed = x.s, id_hint = x.h, id_index = x.i
					FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS x(k, s, h, i)
					WHERE p.booking_id = split_part(x.k, '/', 1)::bigint AND p.seq = split_part(x.k, '/', 2)::int`},
			{name: "holds", clear: true, jsonb: true,
				pick: `SELECT id::text, passengers::text, '', '' FROM holds WHERE jsonb_path_exists(passengers, '$[*].id_ref ? (@ != "")')
					ORDER BY id LIMIT $1 FOR UPDATE`,
				update: `UPDATE holds h SET passengers = x.s::jsonb FROM unnest($1::text[], $2::text[]) AS x(k, s) WHERE h.id = x.k::uuid`},
		}
	}
	prefix := newest + ":"
	return []resealTable{
		{name: "passenger_master", args: []any{prefix},
			pick: `SELECT id::text, '', id_sealed, id_type FROM passenger_master WHERE id_sealed <> '' AND NOT starts_with(id_sealed, $2)
				ORDER BY id LIMIT $1 FOR UPDATE`,
			update: `UPDATE passenger_master p SET id_sealed = x.s FROM unnest($1::text[], $2::text[]) AS x(k, s) WHERE p.id = x.k::bigint`},
		{name: "booking_passengers", args: []any{prefix},
			pick: `SELECT booking_id || '/' || seq, '', id_sealed, id_type FROM booking_passengers
				WHERE id_sealed <> '' AND NOT starts_with(id_sealed, $2) ORDER BY booking_id, seq LIMIT $1 FOR UPDATE`,
			update: `UPDATE booking_passengers p SET id_sealed = x.s FROM unnest($1::text[], $2::text[]) AS x(k, s)
				WHERE p.booking_id = split_part(x.k, '/', 1)::bigint AND p.seq = split_part(x.k, '/', 2)::int`},
		{name: "holds", jsonb: true, args: []any{newest},
			pick: `SELECT id::text, passengers::text, '', '' FROM holds
				WHERE jsonb_path_exists(passengers, '$[*].id_sealed ? (@ != "" && !(@ starts with $k))', jsonb_build_object('k', $2::text || ':'))
				ORDER BY id LIMIT $1 FOR UPDATE`,
			update: `UPDATE holds h SET passengers = x.s::jsonb FROM unnest($1::text[], $2::text[]) AS x(k, s) WHERE h.id = x.k::uuid`},
	}
}

// resealBatch rewrites one batch of t in one transaction; it reports the
// rows it rewrote.
func (s *Service) resealBatch(ctx context.Context, t resealTable) (int, error) {
	n := 0
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, t.pick, append([]any{resealBatch}, t.args...)...)
		if err != nil {
			return err
		}
		type row struct{ Key, Ref, Sealed, IDType string }
		got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[row])
		if err != nil {
			return err
		}
		n = len(got)
		if n == 0 {
			return nil
		}
		keys := make([]string, n)
		seals, hints, indexes := make([]string, n), make([]string, n), make([]string, n)
		for i, r := range got {
			keys[i] = r.Key
			if t.jsonb {
				if seals[i], err = s.resealHold(r.Ref); err != nil {
					return fmt.Errorf("hold %s: %w", r.Key, err)
				}
				continue
			}
			ref := r.Ref
			if ref == "" { // sealed under an older key: open it
				if ref, err = s.ids.Open(r.Sealed); err != nil {
					return fmt.Errorf("row %s: %w", r.Key, err)
				}
			}
			id, err := s.sealID(r.IDType, ref)
			if err != nil {
				return fmt.Errorf("row %s: %w", r.Key, err)
			}
			seals[i], hints[i], indexes[i] = id.sealed, id.hint, id.index
		}
		if t.clear && !t.jsonb {
			_, err = tx.Exec(ctx, t.update, keys, seals, hints, indexes)
		} else {
			_, err = tx.Exec(ctx, t.update, keys, seals)
		}
		return err
	})
	return n, err
}

// resealHold is a hold's passengers' JSON with every ID number in clear
// sealed and every sealed one sealed again with the newest key.
func (s *Service) resealHold(js string) (string, error) {
	var ps []storedPassenger
	if err := json.Unmarshal([]byte(js), &ps); err != nil {
		return "", err
	}
	for i, p := range ps {
		ref := p.IDRef
		if ref == "" && p.IDSealed != "" {
			var err error
			if ref, err = s.ids.Open(p.IDSealed); err != nil {
				return "", err
			}
		}
		if ref == "" {
			continue
		}
		id, err := s.sealID(p.IDType, ref)
		if err != nil {
			return "", err
		}
		p.Passenger.IDRef = ""
		ps[i] = storedPassenger{Passenger: p.Passenger, IDSealed: id.sealed, IDHint: id.hint, IDIndex: id.index}
	}
	b, err := json.Marshal(ps)
	return string(b), err
}
