package levers

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"tatkal/booking/db"
)

// Caps of what one audit record may hold. Callers pass whatever they have
// (a login a stranger typed, an error from a gateway): the writer bounds it,
// so no caller can flood the log or break the page that shows it.
const (
	auditActorMax   = 100  // bytes
	auditActionMax  = 64   // bytes
	auditSubjectMax = 200  // bytes
	auditKeyMax     = 64   // bytes, each key in detail
	auditStringMax  = 1000 // bytes, each string in detail
	auditDetailMax  = 8 << 10
)

type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// audit writes one audit record in q (a transaction or a pool). It is the
// only writer of audit_log in the console: every record is cleaned and
// bounded here.
func audit(ctx context.Context, q execer, actor, action, subject string, detail map[string]any) error {
	b, err := auditDetail(detail)
	if err != nil {
		return fmt.Errorf("audit %s: %w", action, err)
	}
	action = CleanText(action, auditActionMax)
	if _, err := q.Exec(ctx, `INSERT INTO audit_log (actor, action, subject, detail) VALUES ($1, $2, $3, $4)`,
		CleanText(actor, auditActorMax), action, CleanText(subject, auditSubjectMax), b); err != nil {
		return fmt.Errorf("audit %s: %w", action, err)
	}
	return nil
}

// Audit writes one audit record outside a lever change (logins, rebuilds, inquiries).
func Audit(ctx context.Context, pool *pgxpool.Pool, actor, action, subject string, detail map[string]any) error {
	return db.Transact(ctx, pool, func(tx pgx.Tx) error { return audit(ctx, tx, actor, action, subject, detail) })
}

// CleanText makes s safe to store and show as one line: invalid UTF-8 and
// control, format (bidi overrides, zero-width) and line-separator
// characters are dropped, and the result is cut to at most limit bytes on a
// rune boundary, ending in "…" when something was cut.
func CleanText(s string, limit int) string {
	clean := true
	for _, r := range s {
		if dropRune(r) {
			clean = false
			break
		}
	}
	if !clean || !utf8.ValidString(s) {
		var b strings.Builder
		for _, r := range strings.ToValidUTF8(s, "") {
			if !dropRune(r) {
				b.WriteRune(r)
			}
		}
		s = b.String()
	}
	if len(s) <= limit {
		return s
	}
	const ell = "…"
	cut := limit - len(ell)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:max(cut, 0)] + ell
}

func dropRune(r rune) bool {
	return r == utf8.RuneError || unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp)
}

// auditDetail encodes detail as JSON with every key and string cleaned and
// capped, and the whole at most auditDetailMax bytes: a larger one is kept
// as an excerpt marked truncated.
func auditDetail(detail map[string]any) ([]byte, error) {
	if detail == nil {
		return []byte("{}"), nil
	}
	raw, err := json.Marshal(detail)
	if err != nil {
		return nil, err
	}
	var v any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	out, err := marshalPlain(cleanJSON(v))
	if err != nil {
		return nil, err
	}
	if len(out) <= auditDetailMax {
		return out, nil
	}
	// At most 2 bytes a byte once escaped (quotes, backslashes), so the
	// excerpt keeps the record within the cap.
	return marshalPlain(map[string]any{"truncated": true, "bytes": len(out), "excerpt": CleanText(string(out), auditDetailMax/2-64)})
}

// marshalPlain is json.Marshal without HTML escaping (a "<" stays one
// byte; the page escapes what it shows).
func marshalPlain(v any) ([]byte, error) {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

func cleanJSON(v any) any {
	switch x := v.(type) {
	case string:
		return CleanText(x, auditStringMax)
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[CleanText(k, auditKeyMax)] = cleanJSON(e)
		}
		return m
	case []any:
		for i, e := range x {
			x[i] = cleanJSON(e)
		}
		return x
	}
	return v
}

// AuditTx writes one audit record inside the caller's transaction, so the
// record commits with the change it describes.
func AuditTx(ctx context.Context, tx pgx.Tx, actor, action, subject string, detail map[string]any) error {
	return audit(ctx, tx, actor, action, subject, detail)
}
