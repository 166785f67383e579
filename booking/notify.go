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
	if _, err := tx.Exec(ctx, notifySQL, []int64{userID}, []string{kind}, []string{ref}, []string{subject}, []string{body}); err != nil {
		return fmt.Errorf("notify %s %s: %w", kind, ref, err)
	}
	return nil
}

// notifySQL writes messages on both channels in one statement: its
// arguments are the messages' columns.
const notifySQL = `INSERT INTO notifications (user_id, channel, kind, ref, subject, body)
	SELECT m.user_id, ch, m.kind, m.ref, m.subject, m.body
	FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[]) AS m(user_id, kind, ref, subject, body),
		unnest('{SMS,EMAIL}'::text[]) AS ch
	ON CONFLICT (kind, ref, channel) DO NOTHING`

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

// notifications are messages written together (notifySQL), each in its
// passenger's language (i18n.Norm'd) as NotifyT writes one.
type notifications struct {
	users                         []int64
	kinds, refs, subjects, bodies []string
}

func (n *notifications) add(lang string, userID int64, kind, ref, key string, args ...any) {
	n.users, n.kinds, n.refs = append(n.users, userID), append(n.kinds, kind), append(n.refs, ref)
	n.subjects = append(n.subjects, i18n.Format(lang, key+".subject", args...))
	n.bodies = append(n.bodies, i18n.Format(lang, key+".body", args...))
}

// queue adds the messages to b as one statement.
func (n *notifications) queue(b *pgx.Batch) {
	if len(n.users) > 0 {
		b.Queue(notifySQL, n.users, n.kinds, n.refs, n.subjects, n.bodies)
	}
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
