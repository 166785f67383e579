package rehearse

import (
	"fmt"
	"maps"

	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"tatkal/booking/admission"
	"time"
)

func newRand(seed, stream uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, stream^0x5eed)) }

// Money is a run's money: in for the shard's holds, out as tickets and
// refunds, to the paisa.
type Money struct {
	InPaise         int64 `json:"in_paise"`
	TicketsPaise    int64 `json:"tickets_paise"`
	RefundsPaise    int64 `json:"refunds_paise"`
	DifferencePaise int64 `json:"difference_paise"`
	Balanced        bool  `json:"balanced"`
}

// Followed is one traveller's path through a run.
type Followed struct {
	Profile profile `json:"profile"`
	Outcome string  `json:"outcome"`
	Steps   []Step  `json:"steps"`
}

// RunReport is one mode of one seed: seeds/001's comparison table's
// column, and what the model cannot show.
type RunReport struct {
	Mode              string  `json:"mode"`
	Seed              uint64  `json:"seed"`
	ShardID           int64   `json:"shard_id"`
	Status            string  `json:"status"`
	ElapsedS          float64 `json:"elapsed_s"`
	Booked            int     `json:"booked"`
	BookingsPerMin    float64 `json:"bookings_per_min"`
	BackendPerBooking float64 `json:"backend_per_booking"`
	BackendRequests   int64   `json:"backend_requests"`
	// BackendRefused are the hold and payment calls refused retryably
	// (503, 429) before they reached the core: seeds/001 counts such
	// "rejected buffer entries" as origin traffic, and its "PRS requests
	// per successful booking" as the calls that reached it
	// (BackendReachedPerBooking). BackendPerBooking counts every call sent.
	BackendRefused           int64   `json:"backend_refused"`
	BackendReachedPerBooking float64 `json:"backend_reached_per_booking"`
	EdgeRequests             int64   `json:"edge_requests"`
	RetryableRejections      int64   `json:"retryable_rejections"`
	TransportErrors          int64   `json:"transport_errors"`
	P95BackendS              float64 `json:"p95_backend_s"`
	P95TerminalS             float64 `json:"p95_terminal_s"`
	OrdinarySuccess          float64 `json:"ordinary_success"`
	AggressiveSuccess        float64 `json:"aggressive_success"`
	SuccessRatio             float64 `json:"aggressive_over_ordinary"`
	// AggressiveByChance: how likely aggressive travellers would book at
	// least as often as they did were bookings blind to client type
	// (admission.ByChance); 1 when they booked no more often than the rest.
	AggressiveByChance *float64       `json:"aggressive_by_chance,omitempty"`
	StillWaiting       int            `json:"still_waiting"`
	Declined           int            `json:"declined"`
	Expired            int            `json:"expired"`
	SoldOut            int            `json:"sold_out"`
	RefundDue          int            `json:"refund_due"`
	Errors             int            `json:"errors"`
	ErrorKinds         map[string]int `json:"error_kinds,omitempty"`
	// RejectionKinds are the retryable refusals (503, 429) by step, status and reason.
	RejectionKinds      map[string]int `json:"rejection_kinds,omitempty"`
	AdmissionViolations *int           `json:"admission_violations"` // nil: not applicable (direct)
	OversoldBerthLegs   int            `json:"oversold_berth_legs"`
	// BerthLegsUnsold of BerthLegs (berths × legs) were free after the
	// drain: what a sold-out answer left behind (fragments no party fit).
	BerthLegsUnsold     int      `json:"berth_legs_unsold"`
	BerthLegs           int      `json:"berth_legs"`
	InvariantViolations []string `json:"invariant_violations"`
	UnresolvedPayments  int      `json:"unresolved_payments"`
	// Unresolved tells each unresolved payment's story (state, method,
	// its events from the opening), so a failed drain says why.
	Unresolved      []string           `json:"unresolved,omitempty"`
	DrainS          float64            `json:"drain_s"`
	Money           Money              `json:"money"`
	CPU             map[string]float64 `json:"cpu_s"`
	PeakBackendPerS int64              `json:"peak_backend_per_s"`
	// PeakLoad is the highest backend load over capacity of any second
	// (calls sent, those refused at the door included: seeds/001 counts
	// them as origin traffic); FaultPeakLoad the same inside the faults'
	// windows (nil: no fault).
	PeakLoad      Load     `json:"peak_load"`
	FaultPeakLoad *Load    `json:"fault_peak_load,omitempty"`
	Seconds       []second `json:"seconds"`
	Follow        Followed `json:"follow"`
	// Fairness: the window's fairness figures (queue mode), as the
	// fairness job computes them after the draw.
	Fairness *admission.Figures `json:"fairness,omitempty"`

	ordinaryN, aggressiveN, ordinaryOK, aggressiveOK int
}

// report sums up the travellers of a finished window.
func (mr *modeRun) report(ts []*traveller) RunReport {
	st := mr.stats
	rr := RunReport{Mode: mr.mode, Seed: mr.seed, ShardID: mr.shardID, EdgeRequests: st.edge.Load(), BackendRequests: st.backend.Load(), BackendRefused: st.backendRejected.Load(),
		RetryableRejections: st.rejected.Load(), TransportErrors: st.transport.Load(), Seconds: st.snapshot()}
	st.mu.Lock()
	rr.P95BackendS = quantile(st.latencies, 0.95)
	if len(st.errors) > 0 {
		rr.ErrorKinds = map[string]int{}
		for k, v := range st.errors {
			rr.ErrorKinds[k] = v
		}
	}
	if len(st.rejections) > 0 {
		rr.RejectionKinds = maps.Clone(st.rejections)
	}
	st.mu.Unlock()
	var terminal []time.Duration
	var last time.Time
	for _, tv := range ts {
		if tv.Aggressive {
			rr.aggressiveN++
		} else {
			rr.ordinaryN++
		}
		if !tv.endAt.IsZero() {
			terminal = append(terminal, tv.endAt.Sub(mr.opens))
			if tv.endAt.After(last) {
				last = tv.endAt
			}
		}
		switch tv.outcome {
		case Booked:
			rr.Booked++
			if tv.Aggressive {
				rr.aggressiveOK++
			} else {
				rr.ordinaryOK++
			}
		case Declined:
			rr.Declined++
		case Expired:
			rr.Expired++
		case SoldOut:
			rr.SoldOut++
		case Refund:
			rr.RefundDue++
		case Waiting:
			rr.StillWaiting++
		default:
			rr.Errors++
		}
	}
	rr.Status = "complete"
	if rr.StillWaiting > 0 {
		rr.Status = fmt.Sprintf("window ended with %d still waiting", rr.StillWaiting)
		last = mr.opens.Add(mr.opts.Duration)
	}
	if !last.IsZero() {
		rr.ElapsedS = round3(last.Sub(mr.opens).Seconds())
	}
	if rr.ElapsedS > 0 {
		rr.BookingsPerMin = round3(float64(rr.Booked) / (rr.ElapsedS / 60))
	}
	if rr.Booked > 0 {
		rr.BackendPerBooking = round3(float64(rr.BackendRequests) / float64(rr.Booked))
		rr.BackendReachedPerBooking = round3(float64(rr.BackendRequests-rr.BackendRefused) / float64(rr.Booked))
	}
	rr.P95TerminalS = quantile(terminal, 0.95)
	rr.OrdinarySuccess = round3(float64(rr.ordinaryOK) / float64(max(rr.ordinaryN, 1)))
	rr.AggressiveSuccess = round3(float64(rr.aggressiveOK) / float64(max(rr.aggressiveN, 1)))
	rr.SuccessRatio = ratio(rr.AggressiveSuccess, rr.OrdinarySuccess)
	p := aggressiveByChance(rr.aggressiveOK, rr.aggressiveN, rr.ordinaryOK, rr.ordinaryN)
	rr.AggressiveByChance = &p
	for _, s := range rr.Seconds {
		rr.PeakBackendPerS = max(rr.PeakBackendPerS, s.Backend)
		rr.PeakLoad = rr.PeakLoad.higher(s)
		if inFault(mr.opts.Faults, time.Duration(s.T)*time.Second) {
			l := rr.FaultPeakLoad
			if l == nil {
				l = &Load{}
			}
			rr.FaultPeakLoad = ptr(l.higher(s))
		}
	}
	if rr.FaultPeakLoad == nil && len(mr.opts.Faults) > 0 {
		rr.FaultPeakLoad = &Load{} // the window had no second of load
	}
	f := mr.opts.Follow
	if f >= 0 && f < len(ts) {
		tv := ts[f]
		tv.mu.Lock()
		rr.Follow = Followed{Profile: tv.profile, Outcome: tv.outcome, Steps: append([]Step(nil), tv.steps...)}
		tv.mu.Unlock()
	}
	return rr
}

// Load is one second's backend load against the capacity of that second.
// As seeds/001 charts "requests reaching PRS" and counts rejected buffer
// entries as origin traffic, the load is the hold and payment calls that
// reached the core: those sent, less those refused retryably at the door
// (the hold path's in-flight bound, the shard's throttle).
type Load struct {
	T        int     `json:"t"`
	Backend  int64   `json:"backend"` // reached the core
	Sent     int64   `json:"sent"`    // sent, refused at the door included
	Capacity float64 `json:"capacity"`
	Ratio    float64 `json:"ratio"` // Backend / Capacity
}

// reached is the second's calls that reached the core.
func (s second) reached() int64 { return s.Backend - s.Rejected }

// higher is l or s's load, whichever is the higher ratio.
func (l Load) higher(s second) Load {
	if s.Capacity <= 0 {
		return l
	}
	if r := float64(s.reached()) / s.Capacity; r > l.Ratio || l.Capacity == 0 {
		return Load{T: s.T, Backend: s.reached(), Sent: s.Backend, Capacity: s.Capacity, Ratio: round3(r)}
	}
	return l
}

func (l Load) String() string {
	if l.Sent > l.Backend {
		return fmt.Sprintf("%.2f× (+%ds: %d/s of %g; %d more refused at the door)", l.Ratio, l.T, l.Backend, l.Capacity, l.Sent-l.Backend)
	}
	return fmt.Sprintf("%.2f× (+%ds: %d/s of %g)", l.Ratio, l.T, l.Backend, l.Capacity)
}

// inFault says whether t after the opening is inside a fault's window.
func inFault(fs []Fault, t time.Duration) bool {
	for _, f := range fs {
		if t >= f.From && t < f.To {
			return true
		}
	}
	return false
}

func ptr[T any](v T) *T { return &v }

// ratio is aggressive over ordinary success (1 when neither succeeded,
// 99 when only aggressive travellers did: JSON has no infinity).
func ratio(a, o float64) float64 {
	if o == 0 {
		if a == 0 {
			return 1
		}
		return 99
	}
	return round3(a / o)
}

// cpu is a sample of the CPU time of this process and of the PostgreSQL
// and Redis servers on this machine.
type cpu map[string]float64

func sampleCPU() cpu {
	c := cpu{}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		c["rehearse (app, workers, simulators, travellers)"] = float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
	}
	tick := 100.0 // USER_HZ
	dirs, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range dirs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		s := string(b)
		open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || closing < open {
			continue
		}
		comm := s[open+1 : closing]
		name := ""
		switch {
		case strings.HasPrefix(comm, "postgres"):
			name = "postgresql (every backend on the machine)"
		case strings.HasPrefix(comm, "redis-server"):
			name = "redis-server"
		default:
			continue
		}
		f := strings.Fields(s[closing+1:])
		if len(f) < 13 {
			continue
		}
		u, _ := strconv.ParseFloat(f[11], 64)
		k, _ := strconv.ParseFloat(f[12], 64)
		c[name] += (u + k) / tick
	}
	return c
}

// since is the CPU seconds used from c to now (processes that ended
// meanwhile are not counted).
func (c cpu) since() map[string]float64 {
	out := map[string]float64{}
	for k, v := range sampleCPU() {
		out[k] = round3(max(v-c[k], 0))
	}
	return out
}

// aggressiveByChance is admission.ByChance of the aggressive travellers
// against the ordinary ones, 1 when they did not book more often.
func aggressiveByChance(aggOK, aggN, ordOK, ordN int) float64 {
	agg, ord := admission.Rate{Entrants: aggN, Booked: aggOK}, admission.Rate{Entrants: ordN, Booked: ordOK}
	if !agg.Above(ord) {
		return 1
	}
	return admission.ByChance(agg, ord)
}
