package api

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"tatkal/booking/banner"
)

// NoticeHeader is the header that carries the operators' status banners
// on /v1 answers (see doc.go).
const NoticeHeader = "Tatkal-Notice"

// Notices adds one Tatkal-Notice header per live status banner of scope
// api or both to every /v1 answer but the console's /v1/admin and the
// gateways' /v1/internal: a header, so that no answer's body changes and a
// client that ignores it loses nothing. The text is percent-encoded UTF-8.
func Notices(b *banner.Store) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p := r.URL.Path
			if b != nil && strings.HasPrefix(p, "/v1/") && !strings.HasPrefix(p, "/v1/admin/") && !strings.HasPrefix(p, "/v1/internal/") {
				for _, n := range b.Live(r.Context(), banner.API) {
					w.Header().Add(NoticeHeader, noticeValue(n))
				}
			}
			next.ServeHTTP(w, r)
		})
	}
}

func noticeValue(n banner.Banner) string {
	return "id=" + strconv.FormatInt(n.ID, 10) + "; severity=" + n.Severity + "; until=" + n.EndsAt.UTC().Format(time.RFC3339) +
		"; text=" + url.PathEscape(n.Text)
}
