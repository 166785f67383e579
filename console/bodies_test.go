package console_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"tatkal/booking/httpx"
	"tatkal/booking/lab/teststack"
)

// countingBody counts what the app reads of a request body.
type countingBody struct {
	io.ReadCloser
	n atomic.Int64
}

func (c *countingBody) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// statusWriter keeps the status the app answered.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// probed is what the app did with one probe's request.
type probed struct {
	status int
	read   int64
}

// probeServer serves the app's handler on its own test server and
// records, per X-Probe header, the status and the bytes of body the app
// read, so a test sees what the server did even when the client's
// connection is cut while it still sends.
func probeServer(t *testing.T, s *teststack.Stack) (string, func(name string) []probed) {
	var mu sync.Mutex
	seen := map[string][]probed{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := &countingBody{ReadCloser: r.Body}
		r.Body = body
		sw := &statusWriter{ResponseWriter: w}
		s.App.Handler.ServeHTTP(sw, r)
		if name := r.Header.Get("X-Probe"); name != "" {
			mu.Lock()
			seen[name] = append(seen[name], probed{sw.status, body.n.Load()})
			mu.Unlock()
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func(name string) []probed {
		mu.Lock()
		defer mu.Unlock()
		return seen[name]
	}
}

// endlessA is a file's content, made as it is read.
type endlessA struct{}

func (endlessA) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'a'
	}
	return len(p), nil
}

const boundary = "probe-boundary"

// streamedForm is a multipart form with fields and a file of size bytes
// starting with first, generated as it is sent and sent without a length
// (chunked), as an attacker would, so no Content-Length refuses it early.
func streamedForm(fields url.Values, first string, size int64) io.Reader {
	var head strings.Builder
	for k, vs := range fields {
		for _, v := range vs {
			fmt.Fprintf(&head, "--%s\r\nContent-Disposition: form-data; name=%q\r\n\r\n%s\r\n", boundary, k, v)
		}
	}
	fmt.Fprintf(&head, "--%s\r\nContent-Disposition: form-data; name=\"file\"; filename=\"big.csv\"\r\nContent-Type: text/csv\r\n\r\n%s", boundary, first)
	return io.MultiReader(strings.NewReader(head.String()), io.LimitReader(endlessA{}, size-int64(len(first))),
		strings.NewReader("\r\n--"+boundary+"--\r\n"))
}

// stream posts a streamed form as b's browser (its session and csrf
// field). The client may see its upload cut off instead of an answer;
// what the server did is the probe server's record.
func (b *browser) stream(path, probe string, size int64, first string) {
	form := url.Values{"csrf": {b.csrf}, "source": {"SETTLEMENT"}, "gateway": {"swiftpay"}, "date": {financeDay}}
	req, _ := http.NewRequest("POST", b.base+path, streamedForm(form, first, size))
	req.Header.Set("Content-Type", "multipart/form-data; boundary="+boundary)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	req.Header.Set("X-Probe", probe)
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Logf("%s: %v (the server cut the upload off)", probe, err)
		return
	}
	io.Copy(io.Discard, resp.Body) //nolint:errcheck
	resp.Body.Close()
}

// TestMultipartCannotFillDisk: 20 parallel 100 MB multipart posts, from
// nobody and from roles that may not upload, to the passenger sign-in,
// the console's forms, the API and the upload itself, leave no file in
// the temporary directory, and the app reads at most MaxTextBody of each
// (none of a multipart body it refuses): memory and disk stay bounded.
// The one multipart endpoint, finance's upload, removes what it spilled
// to disk, whether the file is refused or too large.
func TestMultipartCannotFillDisk(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // where Go's multipart parser spills (not parallel: the environment is the process's)
	// Sizes above httpx.UploadMemory (so uploads spill to disk) and
	// MaxTextBody, small enough to stream quickly under -race.
	const limit, badFile = 8 << 20, 4 << 20
	s := setup(t, teststack.Options{ReconMaxFileBytes: limit})
	base, seen := probeServer(t, s)
	spilled := func() []string {
		m, _ := filepath.Glob(filepath.Join(tmp, "multipart-*"))
		return m
	}
	as := func(login string) *browser {
		b := newBrowser(t, base)
		if login != "" {
			b.login(login)
		}
		return b
	}
	anon, ops, fin, admin := as(""), as("ops1"), as("finance1"), as("admin1")
	anon.get("/signin") // its csrf cookie, as a browser would have

	probes := []struct {
		name, path string
		b          *browser
		want       int
	}{
		{"signin", "/signin", anon, http.StatusUnsupportedMediaType},
		{"console login", "/console/login", anon, http.StatusUnsupportedMediaType},
		{"payment review", "/console/payments/reviews/1", fin, http.StatusUnsupportedMediaType},
		{"tokens", "/console/tokens", admin, http.StatusUnsupportedMediaType},
		{"api login", "/v1/auth/login", anon, http.StatusUnsupportedMediaType},
		{"upload, signed out", "/console/finance/files", anon, http.StatusUnauthorized},
		{"upload as ops", "/console/finance/files", ops, http.StatusForbidden},
	}
	const posts, size = 20, 100 << 20
	var wg sync.WaitGroup
	for i := range posts {
		p := probes[i%len(probes)]
		wg.Go(func() { p.b.stream(p.path, p.name, size, "") })
	}
	wg.Wait()
	for _, p := range probes {
		got := seen(p.name)
		if len(got) == 0 {
			t.Errorf("%s: the app never answered", p.name)
		}
		for _, g := range got {
			if g.status != p.want {
				t.Errorf("%s: %d, want %d", p.name, g.status, p.want)
			}
			if g.read > httpx.MaxTextBody {
				t.Errorf("%s: the app read %d bytes of a refused 100 MB body, want at most %d", p.name, g.read, httpx.MaxTextBody)
			}
		}
	}
	if left := spilled(); len(left) > 0 {
		t.Fatalf("%d refused posts left %d temporary files", posts, len(left))
	}

	// Finance's own upload is read, spills to disk past httpx.UploadMemory,
	// and is cleaned up: refused by its content, or by its size.
	fin.stream("/console/finance/files", "upload, bad file", badFile, "not,a,settlement,header\n")
	if got := seen("upload, bad file"); len(got) != 1 || got[0].status != http.StatusBadRequest || got[0].read < badFile {
		t.Errorf("finance uploading a %d MB file with a bad header: %+v, want 400 after reading it", badFile>>20, got)
	}
	fin.stream("/console/finance/files", "upload, too large", size, "")
	if got := seen("upload, too large"); len(got) != 1 || got[0].status != http.StatusRequestEntityTooLarge || got[0].read > limit+1<<20 {
		t.Errorf("finance uploading 100 MB past a %d MB limit: %+v, want 413 before reading past the limit", limit>>20, got)
	}
	if left := spilled(); len(left) > 0 {
		t.Fatalf("finance's refused uploads left %d temporary files", len(left))
	}
	var files int
	s.Pool.QueryRow(t.Context(), `SELECT count(*) FROM recon_files`).Scan(&files) //nolint:errcheck
	if files != 0 {
		t.Fatalf("refused uploads stored %d files", files)
	}
}
