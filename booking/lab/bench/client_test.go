package bench

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// A bench client's kept connection survives what a server does to
// connections: an answer that closes it (the next request dials afresh),
// and a connection dropped without an answer (status 0, a transport
// failure; the next request dials afresh). Every answer is read whole.
func TestKeptConnectionRedialsWhenTheServerCloses(t *testing.T) {
	var n, conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch n.Add(1) {
		case 2:
			w.Header().Set("Connection", "close")
		case 4:
			c, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				c.Close()
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"status":"SOLD_OUT","padding":"` + strings.Repeat("x", 5000) + `"}`)) //nolint:errcheck
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	c := newClient(&runEnv{baseURL: srv.URL, opts: Options{Concurrency: 1}})
	defer c.close()
	var want []int
	for i := 1; i <= 6; i++ {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/bookings/hold", strings.NewReader(`{}`))
		var a answer
		status, err := c.do(0, req, &a)
		if i == 4 {
			if status != 0 || err == nil {
				t.Fatalf("request %d on a dropped connection: %d %v, want a transport failure", i, status, err)
			}
			continue
		}
		if status != 200 || err != nil || a.Status != "SOLD_OUT" {
			t.Fatalf("request %d: %d %v %+v", i, status, err, a)
		}
		want = append(want, i)
	}
	// Dialled for 1-2, after the close for 3-4, after the drop for 5-6.
	if got := conns.Load(); got != 3 {
		t.Fatalf("%d connections for answers %v, want 3", got, want)
	}
}
