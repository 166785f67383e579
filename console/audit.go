package console

import (
	"net/http"
	"strings"
	"time"

	"tatkal/views"
)

// auditPage lists the audit log, newest first, optionally by action prefix.
func (c *Console) auditPage(w http.ResponseWriter, r *http.Request) {
	action := strings.TrimSpace(r.URL.Query().Get("action"))
	rows, err := c.pool.Query(r.Context(), `SELECT id, at, actor, action, subject, detail::text FROM audit_log
		WHERE action LIKE $1 || '%' ORDER BY id DESC LIMIT 300`, action)
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	defer rows.Close()
	p := views.AuditPage{Action: action}
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
	c.render(w, r, "Audit log", views.ConsoleAudit(p))
}
