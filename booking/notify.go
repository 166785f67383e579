package booking

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"tatkal/booking/i18n"
)

// Notify puts a message for a passenger into the outbox, by SMS and email,
// in tx. The same (kind, ref) is sent once however often it is asked for.
func Notify(ctx context.Context, tx pgx.Tx, userID int64, kind, ref, subject, body string) error {
	if _, err := tx.Exec(ctx, notifySQL, userID, kind, ref, subject, body); err != nil {
		return fmt.Errorf("notify %s %s: %w", kind, ref, err)
	}
	return nil
}

// notifySQL writes one message on both channels in one statement.
const notifySQL = `INSERT INTO notifications (user_id, channel, kind, ref, subject, body)
	SELECT $1, ch, $2, $3, $4, $5 FROM unnest('{SMS,EMAIL}'::text[]) AS ch ON CONFLICT (kind, ref, channel) DO NOTHING`

// NotifyT is Notify with the subject and body written in the passenger's
// language (users.lang, set by the site's language switch) from the one
// catalogue: keys key+".subject" and key+".body", formatted with args.
func NotifyT(ctx context.Context, tx pgx.Tx, userID int64, kind, ref, key string, args ...any) error {
	lang, err := LanguageTx(ctx, tx, userID)
	if err != nil {
		return fmt.Errorf("notify %s %s: %w", kind, ref, err)
	}
	return Notify(ctx, tx, userID, kind, ref, i18n.Format(lang, key+".subject", args...), i18n.Format(lang, key+".body", args...))
}

// queueNotify is NotifyT as one statement of the caller's batch, for a
// caller that has read the passenger's language already (i18n.Norm'd).
func queueNotify(b *pgx.Batch, lang string, userID int64, kind, ref, key string, args ...any) {
	b.Queue(notifySQL, userID, kind, ref, i18n.Format(lang, key+".subject", args...), i18n.Format(lang, key+".body", args...))
}

// LanguageTx is the language a passenger reads messages in ("en" or "hi").
func LanguageTx(ctx context.Context, tx pgx.Tx, userID int64) (string, error) {
	var lang string
	if err := tx.QueryRow(ctx, `SELECT lang FROM users WHERE id = $1`, userID).Scan(&lang); err != nil {
		return "", fmt.Errorf("language of user %d: %w", userID, err)
	}
	return i18n.Norm(lang), nil
}

// SetLanguage records the language a passenger chose on the site, for the
// messages sent to them.
func (s *Service) SetLanguage(ctx context.Context, userID int64, lang string) error {
	if _, err := s.pool.Exec(ctx, `UPDATE users SET lang = $2 WHERE id = $1`, userID, i18n.Norm(lang)); err != nil {
		return fmt.Errorf("set language of user %d: %w", userID, err)
	}
	return nil
}
