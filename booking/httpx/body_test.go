package httpx

import (
	"bytes"
	"errors"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// countingBody counts what is read of a request body.
type countingBody struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingBody) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// endless is a body that never ends: whatever bound there is must come
// from the server.
type endless struct{}

func (endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'a'
	}
	return len(p), nil
}

// Multipart reaches only an upload's handler, unread until then; every
// other body is cut off at MaxTextBody, at once when its length says so,
// and the /v1 refusal is the API's own.
func TestBodies(t *testing.T) {
	t.Parallel()
	var reached bool
	var handlerRead int64
	var handlerErr error
	h := App(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached = true
		n, err := io.Copy(io.Discard, r.Body)
		handlerRead, handlerErr = n, err
		if err != nil {
			http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
		}
	}), AppOptions{Uploads: []string{"/upload"}, APIReject: func(w http.ResponseWriter, r *http.Request, status int, msg string) {
		w.Header().Set("Content-Type", "application/problem+json")
		http.Error(w, `{"api":true}`, status)
	}})
	cases := []struct {
		name, method, target, ctype string
		length                      int64 // -1: unknown (chunked)
		want                        int
		reaches                     bool
	}{
		{"multipart form", "POST", "/signin", "multipart/form-data; boundary=x", -1, 415, false},
		{"multipart, odd case", "POST", "/console/login", "  Multipart/Form-Data; boundary=x", -1, 415, false},
		{"multipart mixed", "POST", "/console/tokens", "multipart/mixed; boundary=x", -1, 415, false},
		{"multipart, malformed", "POST", "/console/tokens", "multipart/form-data; boundary", -1, 415, false},
		{"multipart on GET", "GET", "/console/lookup", "multipart/form-data; boundary=x", -1, 415, false},
		{"multipart to /v1", "POST", "/v1/auth/login", "multipart/form-data; boundary=x", -1, 415, false},
		{"multipart, upload path but GET", "GET", "/upload", "multipart/form-data; boundary=x", -1, 415, false},
		{"upload", "POST", "/upload", "multipart/form-data; boundary=x", -1, 200, true},
		{"long declared length", "POST", "/v1/x", "application/octet-stream", MaxTextBody + 1, 413, false},
		{"endless binary body", "POST", "/v1/x", "application/octet-stream", -1, 413, true},
		{"endless form body", "POST", "/signin", "application/x-www-form-urlencoded", -1, 413, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			reached, handlerRead, handlerErr = false, 0, nil
			body := &countingBody{r: io.LimitReader(endless{}, 64<<20)}
			if tc.name == "upload" {
				body = &countingBody{r: strings.NewReader("--x--\r\n")}
			}
			req := httptest.NewRequest(tc.method, tc.target, body)
			req.ContentLength = tc.length
			req.Header.Set("Content-Type", tc.ctype)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.want || reached != tc.reaches {
				t.Fatalf("%d (handler reached: %t), want %d (%t): %s", rec.Code, reached, tc.want, tc.reaches, rec.Body)
			}
			if got := body.n.Load(); tc.want != 200 && got > MaxTextBody+64<<10 {
				t.Errorf("read %d bytes of a refused body, want at most %d", got, MaxTextBody)
			}
			if tc.want == 415 && body.n.Load() != 0 {
				t.Errorf("read %d bytes of a multipart body it refuses unread", body.n.Load())
			}
			if tc.reaches && tc.want == 413 {
				var tooBig *http.MaxBytesError
				if !errors.As(handlerErr, &tooBig) || handlerRead != MaxTextBody {
					t.Errorf("the handler read %d bytes, %v; want MaxTextBody, then the bound", handlerRead, handlerErr)
				}
			}
			if !tc.reaches && strings.HasPrefix(tc.target, "/v1/") && !strings.Contains(rec.Body.String(), `"api":true`) {
				t.Errorf("a /v1 refusal not in the API's format: %s", rec.Body)
			}
		})
	}
}

// ParseUpload reads at most its bound, and its cleanup removes the files
// the form spilled to disk; CleanForm refuses text PostgreSQL cannot store.
func TestParseUpload(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("TMPDIR", dir) // where Go's multipart parser spills
	form := func(field, filename string, size int) (*bytes.Buffer, string) {
		var b bytes.Buffer
		mw := multipart.NewWriter(&b)
		mw.WriteField("source", field) //nolint:errcheck
		fw, _ := mw.CreateFormFile("file", filename)
		fw.Write(bytes.Repeat([]byte("a"), size)) //nolint:errcheck
		mw.Close()
		return &b, mw.FormDataContentType()
	}
	spilled := func() []string {
		m, _ := filepath.Glob(filepath.Join(dir, "multipart-*"))
		return m
	}

	body, ctype := form("SETTLEMENT", "f.csv", 3*UploadMemory)
	req := httptest.NewRequest("POST", "/upload", body)
	req.Header.Set("Content-Type", ctype)
	cleanup, err := ParseUpload(httptest.NewRecorder(), req, 4*UploadMemory)
	if err != nil || !CleanForm(req.MultipartForm) {
		t.Fatalf("parse: %v", err)
	}
	if len(spilled()) == 0 {
		t.Fatal("a file past UploadMemory did not go to disk: the test proves nothing")
	}
	cleanup()
	if left := spilled(); len(left) != 0 {
		t.Fatalf("cleanup left %v", left)
	}

	body, ctype = form("SETTLEMENT", "f.csv", 3*UploadMemory)
	req = httptest.NewRequest("POST", "/upload", body)
	req.Header.Set("Content-Type", ctype)
	cleanup, err = ParseUpload(httptest.NewRecorder(), req, 2*UploadMemory)
	cleanup()
	var tooBig *http.MaxBytesError
	if !errors.As(err, &tooBig) {
		t.Fatalf("past the bound: %v, want *http.MaxBytesError", err)
	}
	if left := spilled(); len(left) != 0 {
		t.Fatalf("a refused upload left %v", left)
	}

	for _, c := range []struct{ field, filename string }{{"SETT\x00LEMENT", "f.csv"}, {"\xff", "f.csv"}, {"SETTLEMENT", "f\xfe.csv"},
		{"SETTLEMENT", "f\x00.csv"}} {
		body, ctype := form(c.field, c.filename, 10)
		req := httptest.NewRequest("POST", "/upload", body)
		req.Header.Set("Content-Type", ctype)
		cleanup, err := ParseUpload(httptest.NewRecorder(), req, UploadMemory)
		cleanup()
		if err == nil && CleanForm(req.MultipartForm) { // Go itself refuses a NUL in a part's header
			t.Errorf("field %q, file %q: taken, want it refused", c.field, c.filename)
		}
	}
}
