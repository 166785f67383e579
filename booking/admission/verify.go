package admission

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"tatkal/booking"
	"tatkal/booking/db"
)

// VerifyReport is the result of recomputing a window's order.
type VerifyReport struct {
	ShardID      int64
	Revealed     bool
	CommitmentOK bool // SHA-256(seed) equals the published commitment
	ScoresOK     int  // entrants whose stored score the seed reproduces
	Cohort       int
	Admitted     int // admissions logged
	CohortInLog  int // admissions compared against the recomputed order
	Mismatches   []string
}

// OK reports whether everything matched.
func (r VerifyReport) OK() bool {
	return r.Revealed && r.CommitmentOK && r.ScoresOK == r.Cohort && len(r.Mismatches) == 0
}

func (r VerifyReport) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "window %d: ", r.ShardID)
	if !r.Revealed {
		b.WriteString("seed not revealed yet; nothing to verify\n")
		return b.String()
	}
	fmt.Fprintf(&b, "commitment %s, %d/%d cohort scores reproduced, %d admitted (%d from the cohort checked against the recomputed order)\n",
		map[bool]string{true: "matches", false: "DOES NOT MATCH"}[r.CommitmentOK], r.ScoresOK, r.Cohort, r.Admitted, r.CohortInLog)
	for i, m := range r.Mismatches {
		if i == 20 {
			fmt.Fprintf(&b, "  ... and %d more\n", len(r.Mismatches)-20)
			break
		}
		fmt.Fprintf(&b, "  %s\n", m)
	}
	if r.OK() {
		b.WriteString("order MATCHES the order recomputed from the revealed seed\n")
	} else {
		b.WriteString("order DOES NOT MATCH\n")
	}
	return b.String()
}

// VerifyWindow recomputes a revealed window's order from its seed and its
// cohort and compares it with the admission log: the first admissions must
// be the cohort in ascending (score, ticket) order, then later entrants.
func VerifyWindow(ctx context.Context, q db.Querier, shardID int64) (VerifyReport, error) {
	r := VerifyReport{ShardID: shardID}
	var seed []byte
	var commitment string
	var revealed bool
	err := q.QueryRow(ctx, `SELECT seed, seed_sha256, revealed_at IS NOT NULL FROM admission_windows WHERE shard_id = $1`, shardID).Scan(&seed, &commitment, &revealed)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, booking.Errorf(booking.ENOTFOUND, "NO_SUCH_WINDOW", "Window %d has no waiting-room record: its shard is not in queue mode, or no one has asked for its window yet.", shardID)
	}
	if err != nil {
		return r, fmt.Errorf("verify window %d: %w", shardID, err)
	}
	r.Revealed = revealed
	if !revealed {
		return r, nil
	}
	r.CommitmentOK = Commitment(seed) == commitment
	rows, err := q.Query(ctx, `SELECT ticket, score FROM admission_entrants WHERE shard_id = $1`, shardID)
	if err != nil {
		return r, fmt.Errorf("verify window %d: %w", shardID, err)
	}
	var cohort []Entrant
	var e Entrant
	if _, err := pgx.ForEachRow(rows, []any{&e.Ticket, &e.Score}, func() error {
		got := Score(seed, e.Ticket)
		if got == e.Score {
			r.ScoresOK++
		} else {
			r.Mismatches = append(r.Mismatches, fmt.Sprintf("ticket %s: stored score %d, the seed gives %d", e.Ticket, e.Score, got))
		}
		cohort = append(cohort, Entrant{Ticket: e.Ticket, Score: got})
		return nil
	}); err != nil {
		return r, fmt.Errorf("verify window %d: %w", shardID, err)
	}
	r.Cohort = len(cohort)
	slices.SortFunc(cohort, func(a, b Entrant) int {
		if a.Score != b.Score {
			return compare(a.Score, b.Score)
		}
		return strings.Compare(a.Ticket, b.Ticket)
	})
	rows, err = q.Query(ctx, `SELECT seq, ticket FROM admission_log WHERE shard_id = $1 ORDER BY seq`, shardID)
	if err != nil {
		return r, fmt.Errorf("verify window %d: %w", shardID, err)
	}
	var seq int64
	var ticket string
	if _, err := pgx.ForEachRow(rows, []any{&seq, &ticket}, func() error {
		if seq != int64(r.Admitted) {
			r.Mismatches = append(r.Mismatches, fmt.Sprintf("admission %d is logged as place %d: a gap or a repeat", r.Admitted, seq))
		}
		if r.Admitted < len(cohort) {
			want := cohort[r.Admitted]
			// Equal scores (a 52-bit collision) may be in either order.
			if want.Ticket != ticket && !(r.Admitted+1 < len(cohort) && cohort[r.Admitted+1].Score == want.Score) &&
				!(r.Admitted > 0 && cohort[r.Admitted-1].Score == want.Score) {
				r.Mismatches = append(r.Mismatches, fmt.Sprintf("place %d admitted %s; the seed puts %s there", seq, ticket, want.Ticket))
			}
			r.CohortInLog++
		}
		r.Admitted++
		return nil
	}); err != nil {
		return r, fmt.Errorf("verify window %d: %w", shardID, err)
	}
	return r, nil
}

func compare(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
