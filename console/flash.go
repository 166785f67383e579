package console

import (
	"net/http"

	"tatkal/booking/audit"
	"tatkal/booking/httpx"
)

// Notices after a form (a flash): kept with the console session and shown
// once by the next page it renders. Text never comes from the URL, so a
// link cannot put words on a console page.

const flashMax = 1000

// redirectNotice stores notice for the session and redirects to path,
// which some callers build from the request (a cluster id in the URL):
// it goes through the one redirect check, like every such target.
func (c *Console) redirectNotice(w http.ResponseWriter, r *http.Request, path, notice string) {
	path, ok := httpx.LocalPath(path, "/console/")
	if !ok {
		path = "/console/"
	}
	if u, _ := userFrom(r.Context()); u.session != nil {
		if _, err := c.pool.Exec(r.Context(), `UPDATE console_sessions SET flash = $2 WHERE token_hash = $1`,
			u.session, audit.CleanText(notice, flashMax)); err != nil {
			// The change is done; only its notice is lost.
			c.log.Warn("store console notice", "err", err)
		}
	}
	http.Redirect(w, r, path, http.StatusSeeOther)
}

// takeNotice returns the session's pending notice and clears it (unless a
// newer one was stored meanwhile).
func (c *Console) takeNotice(r *http.Request) string {
	u, _ := userFrom(r.Context())
	if u.Flash == "" || u.session == nil {
		return ""
	}
	if _, err := c.pool.Exec(r.Context(), `UPDATE console_sessions SET flash = NULL WHERE token_hash = $1 AND flash = $2`,
		u.session, u.Flash); err != nil {
		c.log.Warn("clear console notice", "err", err)
	}
	return u.Flash
}
