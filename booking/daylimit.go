package booking

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// tatkalCounts are an account's live and confirmed Tatkal holds on an
// opening day and in its month, whether it is identity-verified, and its
// person's (the verified accounts of its phone) on that day: what the
// committer's INSERT counts against the caps. The hold's refusal
// (Committer.diagnose) and the day's remaining tickets shown before the
// window (Service.TatkalLeft) both read it, so what a passenger is shown
// is the rule that refuses them. A cancelled booking stays CONFIRMED on
// its hold, so it counts, as the rule says.
type tatkalCounts struct {
	day, month, person int
	verified           bool
}

func readTatkalCounts(ctx context.Context, pool *pgxpool.Pool, userID int64, openingDay time.Time) (tatkalCounts, error) {
	var n tatkalCounts
	err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE h.opening_day = $2), count(*),
		coalesce((SELECT id_verification_status = 'VERIFIED' FROM users WHERE id = $1), false),
		coalesce((SELECT count(*) FROM users u JOIN users v ON v.phone_hash = u.phone_hash
		          JOIN holds x ON x.user_id = v.id
		          WHERE u.id = $1 AND u.id_verification_status = 'VERIFIED' AND v.id_verification_status = 'VERIFIED'
		            AND x.opening_day = $2 AND x.state IN ('HELD', 'CONFIRMED')), 0)
		FROM holds h
		WHERE h.user_id = $1 AND h.state IN ('HELD', 'CONFIRMED') AND h.opening_day >= date_trunc('month', $2::date)::date
		  AND h.opening_day < (date_trunc('month', $2::date) + interval '1 month')::date`, userID, openingDay).Scan(&n.day, &n.month, &n.verified, &n.person)
	if err != nil {
		return n, fmt.Errorf("count tatkal holds of user %d on %s: %w", userID, openingDay.Format(time.DateOnly), err)
	}
	return n, nil
}

// TatkalLeft is how many of the day's cap of Tatkal tickets the account
// may still hold on the shard's opening day: the account's own count, and
// its person's when verified (PersonDailyCap), whichever is tighter.
func (s *Service) TatkalLeft(ctx context.Context, userID int64, shard *Shard) (left, limit int, err error) {
	n, err := readTatkalCounts(ctx, s.pool, userID, openingDay(shard))
	if err != nil {
		return 0, 0, err
	}
	rules := s.Rules()
	limit = rules.DailyCap
	left = rules.DailyCap - n.day
	if n.verified && rules.PersonDailyCap > 0 {
		left = min(left, rules.PersonDailyCap-n.person)
	}
	return max(left, 0), limit, nil
}
