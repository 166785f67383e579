package console

import (
	"errors"
	"net/http"

	"tatkal/booking"
	"tatkal/booking/httpx"
	"tatkal/views"
)

// Uploads are the console's paths whose POST takes a multipart body: the
// app lets multipart reach these alone (httpx.AppOptions.Uploads), and
// uploadLimit bounds, checks and cleans up after each.
func Uploads() []string { return []string{uploadPath} }

// uploadRoles may upload a reconciliation file: financeRoutes' roles,
// checked again before the body is read, so that nobody else makes the
// server read or store a byte of it.
var uploadRoles = []string{Finance, Admin}

// readUpload reads an upload's form for the handlers after it (csrf, the
// upload itself), at most limit plus the form's slack, and removes its
// temporary files once they are done. A form that does not parse, or
// whose fields or file name hold text PostgreSQL cannot store, is refused
// here and changes nothing.
func (c *Console) readUpload(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c.noRecon(w, r) {
			return
		}
		limit := c.cfg.Recon.MaxFileBytes()
		if r.ContentLength > limit+uploadSlack {
			c.uploadTooLarge(w, r, limit)
			return
		}
		cleanup, err := httpx.ParseUpload(w, r, limit+uploadSlack)
		defer cleanup()
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			c.uploadTooLarge(w, r, limit)
			return
		case errors.Is(err, http.ErrNotMultipart):
			// No file: the upload says so.
		case err != nil:
			// Left unread, the rest of the body would be parsed again by the next form lookup.
			c.uploadRefused(w, r, "bad-upload", booking.Errorf(booking.EINVALID, "BAD_UPLOAD",
				"The upload is not a form the upload page sends (multipart/form-data with the file and its fields); nothing was stored."))
			return
		case !httpx.CleanForm(r.MultipartForm):
			c.uploadRefused(w, r, "bad-text", booking.Errorf(booking.EINVALID, "BAD_TEXT",
				"A field or the file name holds a NUL byte or invalid UTF-8; nothing was stored."))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// uploadRefused answers an upload refused before its handler: 400 with
// the reason, nothing stored.
func (c *Console) uploadRefused(w http.ResponseWriter, r *http.Request, testID string, err error) {
	c.log.Warn("console upload refused", "path", r.URL.Path, "reason", booking.ErrorReason(err))
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(http.StatusBadRequest)
	c.render(w, r, "Upload refused", views.ConsoleMessage(views.ConsoleMessagePage{Title: "Upload refused", TestID: testID,
		Message: booking.ErrorMessage(err) + " (" + booking.ErrorReason(err) + ")"}))
}
