package rehearse

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// second is one second of a run, from the opening.
type second struct {
	T          int   `json:"t"`
	Backend    int64 `json:"backend"`  // hold and payment calls sent
	Rejected   int64 `json:"rejected"` // of them, refused retryably
	Holds      int64 `json:"holds"`
	Payments   int64 `json:"payments"` // payments started
	Booked     int64 `json:"booked"`
	Admitted   int64 `json:"admitted"`
	QueueDepth int64 `json:"queue_depth"` // sampled
	// Capacity is the backend's capacity in this second (Options.capacityAt).
	Capacity float64 `json:"capacity"`
}

// stats are one run's counters.
type stats struct {
	opens           time.Time
	capacity        func(time.Duration) float64 // a second's capacity, from its start
	edge            atomic.Int64
	backend         atomic.Int64
	rejected        atomic.Int64
	backendRejected atomic.Int64
	transport       atomic.Int64
	finished        atomic.Int64 // travellers with a terminal answer
	mu              sync.Mutex
	latencies       []time.Duration
	seconds         []second
	errors          map[string]int
	rejections      map[string]int // retryable refusals by step, status and reason
}

func newStats(opens time.Time, o *Options) *stats {
	d := o.Duration
	return &stats{opens: opens, capacity: o.capacityAt, seconds: make([]second, 0, int(d.Seconds())+1), errors: map[string]int{}, rejections: map[string]int{}}
}

func (s *stats) latency(d time.Duration) {
	s.mu.Lock()
	s.latencies = append(s.latencies, d)
	s.mu.Unlock()
}

func (s *stats) noteRejection(why string) {
	s.mu.Lock()
	s.rejections[why]++
	s.mu.Unlock()
}

func (s *stats) noteError(why string) {
	s.mu.Lock()
	s.errors[why]++
	s.mu.Unlock()
}

// perSecond changes the second at (ignoring what falls before the
// opening).
func (s *stats) perSecond(at time.Time, f func(*second)) {
	i := int(at.Sub(s.opens) / time.Second)
	if i < 0 || i > 24*3600 {
		return
	}
	s.mu.Lock()
	for len(s.seconds) <= i {
		t := len(s.seconds)
		s.seconds = append(s.seconds, second{T: t, Capacity: s.capacity(time.Duration(t) * time.Second)})
	}
	f(&s.seconds[i])
	s.mu.Unlock()
}

func (s *stats) snapshot() []second {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.seconds)
}

// quantile of ds (sorted here), in seconds.
func quantile(ds []time.Duration, q float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	ds = slices.Clone(ds)
	slices.Sort(ds)
	return round3(ds[min(int(q*float64(len(ds))), len(ds)-1)].Seconds())
}
