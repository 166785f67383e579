package httpx

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// Every way text reaches a handler is checked; clean text passes through
// with its body intact.
func TestValidText(t *testing.T) {
	t.Parallel()
	var reached string
	h := ValidText(func(w http.ResponseWriter, r *http.Request, status int, msg string) { http.Error(w, msg, status) })(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			reached = string(b)
		}))
	cases := []struct {
		name, target, ctype, body string
		want                      int
	}{
		{"clean json", "/v1/x?q=ok", "application/json", `{"login":"asha ₹ \\n"}`, 200},
		{"escaped backslash then u0000", "/v1/x", "application/json", `{"login":"a\\u0000"}`, 200},
		{"unicode", "/v1/x?q=%E2%82%B9", "application/json", `{"login":"आशा ₹"}`, 200},
		{"query NUL", "/v1/x?q=a%00b", "", "", 400},
		{"query key NUL", "/v1/x?a%00=b", "", "", 400},
		{"query bad utf8", "/v1/x?q=%FF", "", "", 400},
		{"path NUL", "/console/lookup/a%00b", "", "", 400},
		{"path bad utf8", "/console/lookup/%C3%28", "", "", 400},
		{"form NUL", "/console/login", "application/x-www-form-urlencoded", "login=a%00&password=x", 400},
		{"form bad utf8", "/console/login", "application/x-www-form-urlencoded", "login=%FE", 400},
		{"json NUL escape", "/v1/x", "application/json", `{"login":"a\u0000"}`, 400},
		{"json raw NUL", "/v1/x", "application/json", "{\"login\":\"a\x00\"}", 400},
		{"json bad utf8", "/v1/x", "application/json", "{\"login\":\"a\xff\"}", 400},
		{"json without content type", "/v1/x", "", `{"login":"\u0000"}`, 400},
		{"too large", "/v1/x", "application/json", strings.Repeat(" ", MaxTextBody+1), 413},
		{"header bad utf8", "/v1/x", "application/json; x=\xff", `{}`, 400},
		{"multipart left to handler", "/v1/x", "multipart/form-data; boundary=x", "\x00", 200},
	}
	for _, tc := range cases {
		reached = ""
		var body io.Reader
		if tc.body != "" {
			body = strings.NewReader(tc.body)
		}
		req := httptest.NewRequest("POST", tc.target, body)
		if tc.ctype != "" {
			req.Header.Set("Content-Type", tc.ctype)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.name, rec.Code, rec.Body, tc.want)
		}
		if tc.want == 200 && reached != tc.body {
			t.Errorf("%s: handler read %q, want the body unchanged", tc.name, reached)
		}
	}
}

func TestHeaders(t *testing.T) {
	t.Parallel()
	h := Headers(true, map[string]string{"/console/river": "style-src 'self' 'unsafe-inline'"})(http.NotFoundHandler())
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/payments/return", nil))
	for k, v := range map[string]string{"X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
		"Content-Security-Policy": StrictCSP, "Strict-Transport-Security": "max-age=63072000; includeSubDomains"} {
		if got := rec.Header().Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	rec = httptest.NewRecorder()
	Headers(false, nil)(http.NotFoundHandler()).ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if rec.Header().Get("Strict-Transport-Security") != "" {
		t.Error("HSTS sent over plain http")
	}
}

// A client that sends its headers and then trickles (or never sends) its
// body is cut off at the read timeout instead of holding the connection.
func TestSlowBodyIsCutOff(t *testing.T) {
	t.Parallel()
	srv := NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			return
		}
		w.Write([]byte("read it all")) //nolint:errcheck
	}))
	srv.ReadTimeout = 300 * time.Millisecond
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln) //nolint:errcheck
	defer srv.Close()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\npartial")
	start := time.Now()
	conn.SetReadDeadline(time.Now().Add(5 * time.Second)) //nolint:errcheck
	b, _ := io.ReadAll(conn)
	if took := time.Since(start); took > 3*time.Second || strings.Contains(string(b), "read it all") {
		t.Fatalf("slow body held the connection %v and got %q", took, b)
	}
}

// A long-lived answer (a websocket) clears the server's deadlines and
// outlives the write timeout.
func TestClearDeadlines(t *testing.T) {
	t.Parallel()
	srv := NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("clear") == "1" {
			ClearDeadlines(w)
		}
		time.Sleep(400 * time.Millisecond)
		w.Write([]byte("still here")) //nolint:errcheck
	}))
	srv.WriteTimeout = 150 * time.Millisecond
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln) //nolint:errcheck
	defer srv.Close()
	get := func(q string) (string, error) {
		resp, err := http.Get("http://" + ln.Addr().String() + "/?" + q)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	if body, err := get("clear=1"); err != nil || body != "still here" {
		t.Fatalf("cleared: %q %v", body, err)
	}
	if body, err := get(""); err == nil && body == "still here" {
		t.Fatal("the write timeout did not apply to an ordinary answer")
	}
}
