package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"tatkal/booking/api"
	"tatkal/booking/auth"
	"tatkal/booking/lab/testenv"
)

// Twenty wrong passwords for one account posted at once to /v1/auth/login
// get five password checks, as five in a row would (eight were recorded
// against five): the rest are 429 with Retry-After. Every admitted check
// waits until all twenty requests are answered or checking, so each
// decides on the counters as they were before any failure was recorded.
func TestParallelWrongLoginsGetOnlyTheAllowance(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	const n = 20
	arrived, release := make(chan struct{}, n), make(chan struct{})
	pause := func(ctx context.Context, point string) {
		if point == "login.checking" {
			arrived <- struct{}{}
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
	}
	g := auth.NewGuard(auth.GuardConfig{Pool: env.Pool, Slots: n, Pause: pause, DummyParams: cheap})
	signer, _ := auth.NewSigner([]byte(strings.Repeat("k", 32)))
	r := chi.NewRouter()
	api.New(api.Config{Pool: env.Pool, Signer: signer, Guard: g}).Routes(r)
	srv := httptest.NewServer(r)
	defer srv.Close()
	seedUsers(t, env, "race", 1, "right-pw", cheap)
	c := &client{base: srv.URL, http: &http.Client{Transport: sharedTransport}}

	answers := make(chan reply, n)
	for i := range n {
		go func() {
			answers <- c.do(t, "POST", "/v1/auth/login", nil, loginBody("race00001", "guess-"+strconv.Itoa(i)))
		}()
	}
	var got []reply
	for waiting := 0; waiting+len(got) < n; {
		select {
		case <-arrived:
			waiting++
		case a := <-answers:
			got = append(got, a)
		}
	}
	close(release)
	for len(got) < n {
		got = append(got, <-answers)
	}
	wrong, refused := 0, 0
	for _, a := range got {
		switch secs, _ := strconv.Atoi(a.header.Get("Retry-After")); {
		case a.status == http.StatusUnauthorized:
			wrong++
		case a.status == http.StatusTooManyRequests && secs >= 1 && a.body["reason"] == "TOO_MANY_ATTEMPTS":
			refused++
		default:
			t.Errorf("answer %d %v %s, want 401, or 429 with Retry-After", a.status, a.header, a.raw)
		}
	}
	var recorded int
	if err := env.Pool.QueryRow(context.Background(), `SELECT count(*) FROM login_failures WHERE login = 'race00001'`).Scan(&recorded); err != nil {
		t.Fatal(err)
	}
	if wrong != 5 || refused != n-5 || recorded != 5 || g.Hashes() != 5 {
		t.Fatalf("%d wrong, %d refused, %d failures recorded, %d passwords hashed; want 5, %d, 5, 5", wrong, refused, recorded, g.Hashes(), n-5)
	}
}
