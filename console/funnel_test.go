package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"tatkal/booking/lab/teststack"
	"tatkal/console"
	"tatkal/console/levers"
	"tatkal/views"
)

// rush holds one seat for each user through the service, concurrently.
func rush(t *testing.T, s *teststack.Stack, users []int64, date time.Time, tag string) {
	t.Helper()
	var wg sync.WaitGroup
	for i, u := range users {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.Service.Hold(context.Background(), teststack.Caller(u), holdReq(u, fmt.Sprintf("%s-%06d", tag, i), date)) //nolint:errcheck
		}()
	}
	wg.Wait()
}

func stage(f views.FunnelShard, name string) views.FunnelStage {
	for _, st := range f.Stages {
		if st.Stage == name {
			return st
		}
	}
	return views.FunnelStage{}
}

func shardOf(snap views.FunnelView, id int64) views.FunnelShard {
	for _, f := range snap.Shards {
		if f.ID == id {
			return f
		}
	}
	return views.FunnelShard{}
}

// TestFunnelOverWebsocket: a rush in one process shows in the funnel
// pushed by the other process's websocket (figures come from Redis and
// PostgreSQL, not process memory): attempts, held, sold out, conversion,
// seats left and a green invariant check.
func TestFunnelOverWebsocket(t *testing.T) {
	s := setup(t, teststack.Options{})
	viewer := teststack.Start(t, s.Env, teststack.Options{})
	shard, date := s.DemoShard(t, 8, 0)
	users := s.Users(t, "fun", 12)

	b := newBrowser(t, viewer.Server.URL)
	b.login("ops1")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(viewer.Server.URL, "http")+"/console/funnel/ws",
		&websocket.DialOptions{HTTPClient: b.c, HTTPHeader: http.Header{"Origin": {viewer.Server.URL}}})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer conn.CloseNow() //nolint:errcheck
	conn.SetReadLimit(4 << 20)
	read := func() views.FunnelView {
		_, msg, err := conn.Read(ctx)
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		var v views.FunnelView
		if err := json.Unmarshal(msg, &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	first := read()
	if f := shardOf(first, shard); f.ID != shard || f.SeatsLeft != 8 {
		t.Fatalf("before the rush: %+v", f)
	}
	rush(t, s, users, date, "fun")
	var last time.Time
	for {
		v := read()
		f := shardOf(v, shard)
		if stage(f, "held").Total == 8 && stage(f, "sold_out").Total == 4 && stage(f, "hold_attempt").Total == 12 && f.SeatsLeft == 0 && f.Checked {
			if !f.InvariantOK {
				t.Fatalf("invariants red: %v", f.Violations)
			}
			if c := stage(f, "held").ConvPct; c < 66 || c > 67 {
				t.Fatalf("held conversion %.1f%%, want 8/12", c)
			}
			all := shardOf(v, 0)
			if stage(all, "held").Total < 8 || stage(all, "hold_attempt").P95ms < 0 {
				t.Fatalf("all shards: %+v", stage(all, "held"))
			}
			break
		}
		if !last.IsZero() && time.Since(last) > 3*time.Second {
			t.Fatalf("no message for 3 s")
		}
		last = time.Now()
		if ctx.Err() != nil {
			t.Fatalf("the funnel never showed the rush: %+v", f)
		}
	}
	// An operator throttles the shard in the other process: the pushed
	// snapshot says so, and so does the page without JS.
	if f := shardOf(first, shard); f.Throttle != "off" {
		t.Fatalf("before any throttle the shard reads %q, want off", f.Throttle)
	}
	if _, err := s.Console.Levers().Propose(context.Background(), actor(t, s, "ops1"),
		propose(levers.ShardThrottle, fmt.Sprintf("shard:%d", shard), "11")); err != nil {
		t.Fatal(err)
	}
	for f := shardOf(read(), shard); f.Throttle != "11 holds + 11 payments /s"; f = shardOf(read(), shard) {
		if ctx.Err() != nil {
			t.Fatalf("the funnel never showed the throttle: %q", f.Throttle)
		}
	}
	// The page without JS is the same snapshot, server-rendered.
	_, body, _ := b.get("/console/funnel")
	if !strings.Contains(body, fmt.Sprintf(`data-testid="total-%d-held">8<`, shard)) {
		t.Fatalf("server-rendered funnel lacks the held total:\n%.3000s", body)
	}
	if !strings.Contains(body, fmt.Sprintf(`data-testid="throttle-%d">11 holds + 11 payments /s<`, shard)) {
		t.Fatalf("server-rendered funnel lacks the shard's throttle:\n%.3000s", body)
	}
}

// TestHubDropsSlowConsumers: a subscriber that stops reading is dropped
// after a few ticks; the others keep getting every snapshot on time.
func TestHubDropsSlowConsumers(t *testing.T) {
	n := 0
	var mu sync.Mutex
	h := console.NewHub(20*time.Millisecond, func(context.Context) (views.FunnelView, error) {
		mu.Lock()
		defer mu.Unlock()
		n++
		return views.FunnelView{At: fmt.Sprint(n)}, nil
	}, nil)
	slow := h.Subscribe()
	fast := h.Subscribe()
	defer fast.Close()
	got := 0
	timeout := time.After(5 * time.Second)
	for got < 20 {
		select {
		case <-fast.C:
			got++
		case <-timeout:
			t.Fatalf("fast subscriber got %d snapshots", got)
		}
	}
	select {
	case <-slow.Done():
	default:
		t.Fatal("slow subscriber was not dropped")
	}
	if h.Subscribers() != 1 {
		t.Fatalf("%d subscribers, want 1", h.Subscribers())
	}
	fast.Close()
	time.Sleep(100 * time.Millisecond)
	mu.Lock()
	before := n
	mu.Unlock()
	time.Sleep(100 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if n != before {
		t.Fatal("the hub keeps computing with no subscribers")
	}
}
