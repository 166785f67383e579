// Package audit is the one writer of audit_log: whoever records an action
// (console, levers, logins, the booking side) goes through Write, which
// cleans and bounds every field, so no caller can flood the log or put
// control characters on the page that shows it.
package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"
)

// Caps of what one audit record may hold. Callers pass whatever they have
// (a login a stranger typed, an error from a gateway): the writer bounds it,
// so no caller can flood the log or break the page that shows it.
const (
	actorMax   = 100  // bytes
	actionMax  = 64   // bytes
	subjectMax = 200  // bytes
	keyMax     = 64   // bytes, each key in detail
	stringMax  = 1000 // bytes, each string in detail
	detailMax  = 8 << 10
)

// Execer is a transaction or a pool.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Write records one audit record in q: in the caller's transaction, so it
// commits with the change it describes, or on a pool for a lone record.
func Write(ctx context.Context, q Execer, actor, action, subject string, detail map[string]any) error {
	b, err := cleanDetail(detail)
	if err != nil {
		return fmt.Errorf("audit %s: %w", action, err)
	}
	action = CleanText(action, actionMax)
	if _, err := q.Exec(ctx, `INSERT INTO audit_log (actor, action, subject, detail) VALUES ($1, $2, $3, $4)`,
		CleanText(actor, actorMax), action, CleanText(subject, subjectMax), b); err != nil {
		return fmt.Errorf("audit %s: %w", action, err)
	}
	return nil
}

// CLIActor is the actor of a change made at the command line: the
// operating-system user running it, as cli:NAME (cli:uidN when the name is
// unknown). It never reads the environment, which the caller sets, and a
// console login cannot contain a colon, so it is never taken for a person
// signed in to the console.
func CLIActor() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return "cli:" + u.Username
	}
	return "cli:uid" + strconv.Itoa(os.Getuid())
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
// capped, and the whole at most detailMax bytes: a larger one is kept
// as an excerpt marked truncated.
func cleanDetail(detail map[string]any) ([]byte, error) {
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
	if len(out) <= detailMax {
		return out, nil
	}
	// At most 2 bytes a byte once escaped (quotes, backslashes), so the
	// excerpt keeps the record within the cap.
	return marshalPlain(map[string]any{"truncated": true, "bytes": len(out), "excerpt": CleanText(string(out), detailMax/2-64)})
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
		return CleanText(x, stringMax)
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[CleanText(k, keyMax)] = cleanJSON(e)
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
