package console

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"tatkal/booking/audit"
	"tatkal/views"
)

const auditPageSize = 100

// auditPage lists the audit log, newest first, a page at a time (keyset on
// id: ?before=N shows the records older than N), filtered by action prefix
// and exact actor; the filters stay in the paging links.
func (c *Console) auditPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p := views.AuditPage{Action: strings.TrimSpace(q.Get("action")), Actor: strings.TrimSpace(q.Get("actor"))}
	var before int64
	if v := q.Get("before"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			p.Error = "The page link is broken: before is a record number."
		}
		before = n
	}
	for _, f := range []string{p.Action, p.Actor} {
		if len(f) > 100 || audit.CleanText(f, 100) != f {
			p.Error = "Filters are plain text up to 100 characters."
		}
	}
	if p.Error != "" {
		p.Action, p.Actor = "", ""
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusBadRequest)
		c.render(w, r, "Audit log", views.ConsoleAudit(p))
		return
	}
	// Shown cut short too: rows written before the writer bounded them
	// may be large.
	rows, err := c.pool.Query(r.Context(), `SELECT id, at, left(actor, 200), action, left(subject, 300), left(detail::text, 8192) FROM audit_log
		WHERE action LIKE $1 ESCAPE '\' AND ($2 = '' OR actor = $2) AND ($3 = 0 OR id < $3)
		ORDER BY id DESC LIMIT $4`, likePrefix(p.Action), p.Actor, before, auditPageSize+1)
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	defer rows.Close()
	for rows.Next() {
		var a views.AuditRow
		var at time.Time
		if err := rows.Scan(&a.ID, &at, &a.Actor, &a.Action, &a.Subject, &a.Detail); err != nil {
			c.serverError(w, r, err)
			return
		}
		a.At = ist(at)
		p.Rows = append(p.Rows, a)
	}
	if err := rows.Err(); err != nil {
		c.serverError(w, r, err)
		return
	}
	link := url.Values{}
	if p.Action != "" {
		link.Set("action", p.Action)
	}
	if p.Actor != "" {
		link.Set("actor", p.Actor)
	}
	if before != 0 {
		p.NewestHref = "/console/audit?" + link.Encode()
	}
	if len(p.Rows) > auditPageSize {
		p.Rows = p.Rows[:auditPageSize]
		link.Set("before", strconv.FormatInt(p.Rows[len(p.Rows)-1].ID, 10))
		p.OlderHref = "/console/audit?" + link.Encode()
	}
	c.render(w, r, "Audit log", views.ConsoleAudit(p))
}

// likePrefix matches values starting with s, taking s literally.
func likePrefix(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s) + "%"
}
