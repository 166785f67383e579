package api_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"tatkal/booking/api"
	"tatkal/booking/auth"
	"tatkal/booking/lab/testenv"
)

// TestMeasureLoginMemory measures 40 parallel logins at production argon2
// cost, with the hashing unbounded (1000 slots, as before the guard) and
// with the default bound; peak heap and answers are logged. Run with
// TATKAL_MEASURE_LOGIN=1 (README, Benchmarks; booking/auth: the login guard).
func TestMeasureLoginMemory(t *testing.T) {
	if os.Getenv("TATKAL_MEASURE_LOGIN") == "" {
		t.Skip("a measurement; set TATKAL_MEASURE_LOGIN=1")
	}
	for _, slots := range []int{1000, 0} {
		env := testenv.New(t)
		signer, _ := auth.NewSigner([]byte(strings.Repeat("k", 32)))
		r := chi.NewRouter()
		api.New(api.Config{Pool: env.Pool, Signer: signer, Guard: auth.NewGuard(auth.GuardConfig{Pool: env.Pool, Slots: slots})}).Routes(r)
		srv := httptest.NewServer(r)
		c := &client{base: srv.URL, http: &http.Client{Timeout: 60 * time.Second}}
		seedUsers(t, env, fmt.Sprintf("m%d", slots), 40, "right-pw", auth.DefaultParams)
		runtime.GC()
		var peak atomic.Uint64
		stop := make(chan struct{})
		go func() {
			for {
				select {
				case <-stop:
					return
				case <-time.After(5 * time.Millisecond):
					var m runtime.MemStats
					runtime.ReadMemStats(&m)
					if m.HeapInuse > peak.Load() {
						peak.Store(m.HeapInuse)
					}
				}
			}
		}()
		var wg sync.WaitGroup
		codes := map[int]int{}
		var mu sync.Mutex
		var maxDur atomic.Int64
		for i := range 40 {
			wg.Go(func() {
				s := time.Now()
				code := c.do(t, "POST", "/v1/auth/login", nil, loginBody(fmt.Sprintf("m%d%05d", slots, i+1), "right-pw")).status
				d := time.Since(s)
				mu.Lock()
				codes[code]++
				mu.Unlock()
				if int64(d) > maxDur.Load() {
					maxDur.Store(int64(d))
				}
			})
		}
		wg.Wait()
		close(stop)
		srv.Close()
		t.Logf("slots=%d peak heap in use %d MB codes=%v slowest=%s", slots, peak.Load()>>20, codes, time.Duration(maxDur.Load()))
	}
}
