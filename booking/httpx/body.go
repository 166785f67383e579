package httpx

import (
	"mime/multipart"
	"net/http"
	"slices"
	"strings"
)

// Bodies bounds what any request may make the server read or store: a
// multipart body is refused with 415 before a byte of it is read, unless
// the request is a POST to one of uploads, whose handler bounds it itself
// and parses it with ParseUpload; every other body is cut off after
// MaxTextBody bytes (413 at once when its Content-Length says so). Go
// parses a multipart form wherever a handler asks for a form value,
// keeping 10 MB of fields in memory and spilling large parts to temporary
// files that nobody removes when the form is parsed on a copy of the
// request (r.WithContext); so no handler but an upload's may see one.
func Bodies(uploads []string, reject func(w http.ResponseWriter, r *http.Request, status int, msg string)) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost && slices.Contains(uploads, r.URL.Path) {
				next.ServeHTTP(w, r)
				return
			}
			if isMultipart(r.Header.Get("Content-Type")) {
				w.Header().Set("Connection", "close") // the body is not read
				reject(w, r, http.StatusUnsupportedMediaType, "Send forms as application/x-www-form-urlencoded: only file uploads take multipart bodies.")
				return
			}
			if r.ContentLength > MaxTextBody {
				w.Header().Set("Connection", "close")
				reject(w, r, http.StatusRequestEntityTooLarge, "The request body is too large.")
				return
			}
			if r.Body != nil && r.Body != http.NoBody {
				r.Body = http.MaxBytesReader(w, r.Body, MaxTextBody)
			}
			next.ServeHTTP(w, r)
		})
	}
}

// isMultipart reports whether a Content-Type is one Go's form parsing
// reads as multipart; a malformed one counts, so nothing slips past as
// "not quite multipart".
func isMultipart(contentType string) bool {
	return strings.HasPrefix(strings.ToLower(strings.TrimSpace(contentType)), "multipart/")
}

// UploadMemory is how much of an upload's files ParseUpload keeps in
// memory; the rest goes to temporary files, removed when the request ends.
const UploadMemory = 1 << 20

// ParseUpload parses the multipart form of an upload (a path Bodies lets
// through), reading at most maxBytes of body (past it the error is an
// *http.MaxBytesError), and returns the function that removes the form's
// temporary files: the caller defers it, since the server removes only
// the files of the request it created, not of a copy. The form's fields
// then stay in memory (at most 10 MB, Go's reserve for them).
func ParseUpload(w http.ResponseWriter, r *http.Request, maxBytes int64) (cleanup func(), err error) {
	r.Body = http.MaxBytesReader(w, r.Body, maxBytes)
	err = r.ParseMultipartForm(UploadMemory) // on failure it removes what it spilled
	form := r.MultipartForm
	return func() {
		if form != nil {
			form.RemoveAll() //nolint:errcheck // best effort; a file still open is gone on close
		}
	}, err
}

// CleanForm reports whether every name, value and file name of a parsed
// multipart form is text PostgreSQL can store (valid UTF-8 without NUL),
// as ValidText checks every other body.
func CleanForm(f *multipart.Form) bool {
	if f == nil {
		return true
	}
	for k, vs := range f.Value {
		if !cleanText(k) {
			return false
		}
		for _, v := range vs {
			if !cleanText(v) {
				return false
			}
		}
	}
	for k, fhs := range f.File {
		if !cleanText(k) {
			return false
		}
		for _, fh := range fhs {
			if !cleanText(fh.Filename) {
				return false
			}
		}
	}
	return true
}
