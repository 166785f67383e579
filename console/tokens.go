package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/jackc/pgx/v5"

	"tatkal/booking"
	"tatkal/booking/audit"
	"tatkal/booking/db"
	"tatkal/console/levers"
	"tatkal/views"
)

// Personal API tokens: an admin creates one for a console user (themselves
// or another); it acts as that user on /v1/admin, with that user's role at
// the time of each call. Only its SHA-256 is stored; the token is shown
// once, on the page that created it.
const (
	apiTokenPrefix      = "tkc_"
	apiTokenDaysMax     = 365
	apiTokenDaysDefault = 90
)

// tokenUser returns the user a personal API token acts as, and records its
// use; the zero User for an unknown, expired or revoked token or a
// disabled user.
func (c *Console) tokenUser(ctx context.Context, tok string) (User, error) {
	if !strings.HasPrefix(tok, apiTokenPrefix) || len(tok) > 100 {
		return User{}, nil
	}
	var u User
	err := c.pool.QueryRow(ctx, `UPDATE console_api_tokens t SET last_used_at = now()
		FROM console_users u
		WHERE t.token_hash = $1 AND u.id = t.user_id AND t.revoked_at IS NULL AND t.expires_at > now() AND NOT u.disabled
		RETURNING t.id, t.created_by, u.id, u.login, u.name, u.role, u.teams`, hashToken(tok)).
		Scan(&u.TokenID, &u.IssuerID, &u.ID, &u.Login, &u.Name, &u.Role, &u.Teams)
	if errors.Is(err, pgx.ErrNoRows) {
		return User{}, nil
	}
	if err != nil {
		return User{}, fmt.Errorf("api token: %w", err)
	}
	return u, nil
}

// createToken makes a token for the user with login forLogin, audited in
// the same transaction. It returns the token, shown once.
func (c *Console) createToken(ctx context.Context, by User, forLogin, label string, days int, nonce string) (string, int64, error) {
	if nonce == "" || len(nonce) > 64 {
		return "", 0, booking.Errorf(booking.EINVALID, "FORM_EXPIRED", "The form expired; fill it in again.")
	}
	label = strings.TrimSpace(label)
	if label == "" || len(label) > 80 || audit.CleanText(label, 80) != label {
		return "", 0, booking.Errorf(booking.EINVALID, "BAD_LABEL", "Give the token a label of 1 to 80 plain characters (what it is for).")
	}
	if days < 1 || days > apiTokenDaysMax {
		return "", 0, booking.Errorf(booking.EINVALID, "BAD_EXPIRY", "A token lasts 1 to %d days.", apiTokenDaysMax)
	}
	tok := apiTokenPrefix + randomToken()
	var id int64
	err := db.Transact(ctx, c.pool, func(tx pgx.Tx) error {
		var userID int64
		var role string
		err := tx.QueryRow(ctx, `SELECT id, role FROM console_users WHERE login = $1 AND NOT disabled`, strings.TrimSpace(forLogin)).Scan(&userID, &role)
		if errors.Is(err, pgx.ErrNoRows) {
			return booking.Errorf(booking.EINVALID, "NO_SUCH_USER", "Choose an active console user for the token.")
		}
		if err != nil {
			return fmt.Errorf("token user: %w", err)
		}
		var expires time.Time
		if err := tx.QueryRow(ctx, `INSERT INTO console_api_tokens (user_id, label, token_hash, hint, created_by, expires_at, form_nonce)
			VALUES ($1, $2, $3, $4, $5, now() + make_interval(days => $6), $7) RETURNING id, expires_at`,
			userID, label, hashToken(tok), tok[:len(apiTokenPrefix)+4], by.ID, days, nonce).Scan(&id, &expires); err != nil {
			if db.IsUniqueViolation(err) {
				return errFormSent
			}
			return fmt.Errorf("insert api token: %w", err)
		}
		return levers.AuditTx(ctx, tx, by.Login, "token.create", "token "+strconv.FormatInt(id, 10), map[string]any{
			"token_id": id, "user": forLogin, "role": role, "label": label, "expires_at": expires.UTC().Format(time.RFC3339)})
	})
	if errors.Is(err, errFormSent) {
		// A reload sends the form again: it made its token already, whose
		// value was shown once and is not kept.
		var made int64
		if err := c.pool.QueryRow(ctx, `SELECT id FROM console_api_tokens WHERE form_nonce = $1`, nonce).Scan(&made); err != nil {
			return "", 0, fmt.Errorf("token by form: %w", err)
		}
		return "", 0, booking.Errorf(booking.ECONFLICT, "ALREADY_CREATED", "This form was already sent and made token %d. "+
			"Its value was shown once, then; if it was not copied, revoke token %d and create a new one.", made, made)
	}
	if err != nil {
		return "", 0, err
	}
	return tok, id, nil
}

var errFormSent = errors.New("token form sent twice")

// revokeToken ends a token at once, audited.
func (c *Console) revokeToken(ctx context.Context, by User, id int64) error {
	return db.Transact(ctx, c.pool, func(tx pgx.Tx) error {
		var login, label string
		err := tx.QueryRow(ctx, `UPDATE console_api_tokens t SET revoked_at = now(), revoked_by = $2
			FROM console_users u WHERE t.id = $1 AND t.revoked_at IS NULL AND u.id = t.user_id
			RETURNING u.login, t.label`, id, by.ID).Scan(&login, &label)
		if errors.Is(err, pgx.ErrNoRows) {
			return booking.Errorf(booking.ENOTFOUND, "NO_SUCH_TOKEN", "No active API token %d.", id)
		}
		if err != nil {
			return fmt.Errorf("revoke api token %d: %w", id, err)
		}
		return levers.AuditTx(ctx, tx, by.Login, "token.revoke", "token "+strconv.FormatInt(id, 10),
			map[string]any{"token_id": id, "user": login, "label": label})
	})
}

// tokensPage lists every token and the form to create one.
func (c *Console) tokensPage(w http.ResponseWriter, r *http.Request) {
	c.renderTokens(w, r, views.TokensPage{Form: newTokenForm()}, http.StatusOK)
}

// newTokenForm is an empty create form with a fresh one-time value.
func newTokenForm() views.TokenForm {
	return views.TokenForm{Days: strconv.Itoa(apiTokenDaysDefault), Nonce: randomToken()}
}

func (c *Console) renderTokens(w http.ResponseWriter, r *http.Request, p views.TokensPage, status int) {
	ctx := r.Context()
	users, err := c.pool.Query(ctx, `SELECT login, role FROM console_users WHERE NOT disabled ORDER BY login`)
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	p.Users, err = pgx.CollectRows(users, pgx.RowToStructByPos[views.TokenUser])
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	rows, err := c.pool.Query(ctx, `SELECT t.id, u.login, u.role, t.label, t.hint, c.login, t.created_at, t.expires_at, t.last_used_at,
		t.revoked_at, coalesce(rb.login, 'the command line')
		FROM console_api_tokens t JOIN console_users u ON u.id = t.user_id JOIN console_users c ON c.id = t.created_by
		LEFT JOIN console_users rb ON rb.id = t.revoked_by
		ORDER BY (t.revoked_at IS NULL AND t.expires_at > now()) DESC, t.id DESC LIMIT 500`)
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	defer rows.Close()
	now := time.Now()
	for rows.Next() {
		var t views.TokenRow
		var created, expires time.Time
		var used, revoked *time.Time
		if err := rows.Scan(&t.ID, &t.Login, &t.Role, &t.Label, &t.Hint, &t.CreatedBy, &created, &expires, &used, &revoked, &t.RevokedBy); err != nil {
			c.serverError(w, r, err)
			return
		}
		t.Created, t.Expires = ist(created), ist(expires)
		t.LastUsed = "never"
		if used != nil {
			t.LastUsed = ist(*used)
		}
		switch {
		case revoked != nil:
			t.State, t.Revoked = "revoked", ist(*revoked)
		case !now.Before(expires):
			t.State = "expired"
		default:
			t.State = "active"
		}
		p.Tokens = append(p.Tokens, t)
	}
	if err := rows.Err(); err != nil {
		c.serverError(w, r, err)
		return
	}
	u, _ := userFrom(ctx)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	c.render(w, r, "API tokens", views.ConsoleTokens(p, u.CSRF))
}

// tokenCreate makes a token and shows it once, on this answer only
// (never in a redirect, a cookie or the log).
func (c *Console) tokenCreate(w http.ResponseWriter, r *http.Request) {
	u, _ := userFrom(r.Context())
	f := views.TokenForm{User: r.PostFormValue("user"), Label: r.PostFormValue("label"), Days: strings.TrimSpace(r.PostFormValue("days")),
		Nonce: r.PostFormValue("form_nonce")}
	days, err := strconv.Atoi(f.Days)
	if err != nil {
		days = -1
	}
	tok, id, err := c.createToken(r.Context(), u, f.User, f.Label, days, f.Nonce)
	if err != nil {
		status := http.StatusUnprocessableEntity
		switch booking.ErrorCode(err) {
		case booking.EINTERNAL:
			c.serverError(w, r, err)
			return
		case booking.ECONFLICT:
			status, f = http.StatusConflict, newTokenForm()
		}
		if booking.ErrorReason(err) == "FORM_EXPIRED" {
			f.Nonce = randomToken()
		}
		c.renderTokens(w, r, views.TokensPage{Form: f, Error: userError(err)}, status)
		return
	}
	c.renderTokens(w, r, views.TokensPage{Form: newTokenForm(),
		NewToken: tok, NewTokenID: id, NewTokenFor: f.User}, http.StatusCreated)
}

// tokenRevoke ends a token.
func (c *Console) tokenRevoke(w http.ResponseWriter, r *http.Request) {
	u, _ := userFrom(r.Context())
	id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	if err := c.revokeToken(r.Context(), u, id); err != nil {
		if booking.ErrorCode(err) == booking.EINTERNAL {
			c.serverError(w, r, err)
			return
		}
		c.renderTokens(w, r, views.TokensPage{Form: newTokenForm(), Error: userError(err)}, http.StatusNotFound)
		return
	}
	c.redirectNotice(w, r, "/console/tokens", fmt.Sprintf("API token %d is revoked; it stops working at once.", id))
}
