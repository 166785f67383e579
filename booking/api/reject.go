package api

import (
	"log/slog"
	"net/http"

	"tatkal/booking"
	"tatkal/booking/api/reply"
)

// RejectInput answers a request refused before routing (httpx.Bodies,
// httpx.ValidText) as a problem document like every other /v1 error.
func RejectInput(w http.ResponseWriter, r *http.Request, status int, msg string) {
	code := booking.EINVALID
	reason := "INVALID_TEXT"
	switch status {
	case http.StatusRequestEntityTooLarge:
		reason = "BODY_TOO_LARGE"
	case http.StatusUnsupportedMediaType:
		reason = reply.ReasonUnsupportedMedia
	}
	reply.Error(w, r, slog.Default(), booking.Errorf(code, reason, "%s", msg))
}
