package booking

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Notify puts a message for a passenger into the outbox, by SMS and email,
// in tx. The same (kind, ref) is sent once however often it is asked for.
func Notify(ctx context.Context, tx pgx.Tx, userID int64, kind, ref, subject, body string) error {
	for _, ch := range []string{"SMS", "EMAIL"} {
		if _, err := tx.Exec(ctx, `INSERT INTO notifications (user_id, channel, kind, ref, subject, body)
			VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (kind, ref, channel) DO NOTHING`,
			userID, ch, kind, ref, subject, body); err != nil {
			return fmt.Errorf("notify %s %s: %w", kind, ref, err)
		}
	}
	return nil
}
