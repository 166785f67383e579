package rehearse

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"tatkal/booking/payment"
)

// Modes a rehearsal runs.
const (
	Direct = "direct"
	Queue  = "queue"
	Both   = "both"
)

// Faults a rehearsal can pull.
const (
	// FaultCoreSlow slows the reservation core (latency on every call)
	// and the hold path (a delay at hold.begin) to about a quarter of
	// their capacity.
	FaultCoreSlow = "core-slow"
	// FaultController pauses admissions (the admission_paused lever's
	// effect, through the controller's own reader): nobody new is
	// admitted; admitted travellers keep their permits.
	FaultController = "controller-outage"
	// FaultGateway degrades every gateway route: declines, timeouts and
	// lost callbacks, through the gateway simulator's admin API.
	FaultGateway = "gateway-degraded"
	// FaultRedis deletes the shard's seat state in Redis; the shard
	// refuses holds (503, retryable) until the sweeper rebuilds it.
	FaultRedis = "redis-shard-loss"
)

// FaultNames lists the faults, for --help.
var FaultNames = []string{FaultCoreSlow, FaultController, FaultGateway, FaultRedis}

// Fault is one fault, From and To counted from the opening.
type Fault struct {
	Name     string        `json:"name"`
	From, To time.Duration `json:"-"`
	FromS    float64       `json:"from_s"`
	ToS      float64       `json:"to_s"`
}

// ParseFault reads NAME@20s-40s.
func ParseFault(s string) (Fault, error) {
	name, span, ok := strings.Cut(s, "@")
	if !ok {
		span = "20s-40s"
	}
	known := false
	for _, n := range FaultNames {
		known = known || n == name
	}
	if !known {
		return Fault{}, fmt.Errorf("fault %q: give one of %s, as NAME@20s-40s", name, strings.Join(FaultNames, ", "))
	}
	a, b, ok := strings.Cut(span, "-")
	from, err1 := time.ParseDuration(a)
	to, err2 := time.ParseDuration(b)
	if !ok || err1 != nil || err2 != nil || from < 0 || to <= from {
		return Fault{}, fmt.Errorf("fault %q: the span is FROM-TO after the opening, e.g. 20s-40s", s)
	}
	return Fault{Name: name, From: from, To: to, FromS: from.Seconds(), ToS: to.Seconds()}, nil
}

// Options are one rehearsal's settings (the command's flags).
type Options struct {
	Travellers      int           `json:"travellers"`
	Berths          int           `json:"berths"`
	Aggressive      float64       `json:"aggressive"`       // share of aggressive travellers
	RetryMultiplier float64       `json:"retry_multiplier"` // how much faster they retry and poll
	Duration        time.Duration `json:"-"`                // observation window from the opening
	DurationS       float64       `json:"duration_s"`
	Mode            string        `json:"mode"`
	Seed            uint64        `json:"seed"`
	Seeds           int           `json:"seeds"`
	Faults          []Fault       `json:"faults"`
	// Capacity is the backend's capacity in hold and payment calls a
	// second (see capacityAt): the line the Lab chart draws and the
	// report's load figures divide by.
	Capacity float64 `json:"capacity_per_s"`
	// Parallel runs the seeds at once, each on a stack of its own (not
	// with URL): the wall time of one seed, not of all.
	Parallel bool `json:"parallel,omitempty"`
	// URL is a running deployment to rehearse against instead of a stack
	// of our own (its database and Redis come from the configuration).
	URL string `json:"url,omitempty"`
	// Arrivals spreads the travellers' first request over this long
	// after the opening (2s).
	Arrivals time.Duration `json:"-"`
	// Drain is how long, after the observation window, payments are given
	// to resolve before they count as unresolved (defaultDrain). It ends
	// as soon as none is left.
	Drain time.Duration `json:"-"`
	// Stratify (queue mode) makes exactly the aggressive share of every
	// ten consecutive places of the drawn order aggressive, once everyone
	// has entered (one call, the same for both kinds): the figure then
	// measures what client behaviour does to the outcome, not the draw's
	// sampling noise (the draw's fairness has its own proofs:
	// verify-window and the fairness figures).
	Stratify bool `json:"stratify,omitempty"`
	// Follow is the traveller (0-based) whose path the report shows.
	Follow int `json:"follow"`
	// Progress gets a progress line every two seconds (nil: none).
	Progress io.Writer `json:"-"`
	// OnTick, when set, gets every second's figures of a running mode (the
	// console's live chart).
	OnTick func(Tick) `json:"-"`
	// OnRun, when set, gets the report so far after every finished run (a
	// long --seeds run keeps what it measured if it is stopped).
	OnRun func(*Report) `json:"-"`
}

// Defaults are the command's defaults: seeds/001's rush.
func Defaults() Options {
	return Options{Travellers: 2000, Berths: 600, Aggressive: 0.1, RetryMultiplier: 4, Duration: 180 * time.Second, Mode: Both,
		Seed: 42, Seeds: 1, Arrivals: 2 * time.Second, Drain: defaultDrain, Capacity: DefaultCapacity}
}

// defaultDrain covers the slowest way a payment resolves: a create lost on
// its way to the gateway (under load it can give up before the gateway
// has it) is failed when "not found" can mean "never created", the
// product's two minutes after it was initiated.
const defaultDrain = payment.DefaultNotCreatedAfter + 30*time.Second

// DefaultCapacity is the backend capacity a rehearsal assumes, in hold
// and payment calls a second. seeds/001 takes its PRS capacity as an
// input; ours is a configured figure too (--capacity), not measured per
// run: on a shared machine a measured service time swings tenfold with
// the neighbours' load, and a capacity measured under the rush itself
// would fall as direct mode overloads the backend, hiding the overload.
// The default is what the own stack served on the 2-core machine without
// its calls queueing (queue mode's 86/s kept the p95 backend call at
// 2.6 s, direct mode's 929/s took it to 23 s).
const DefaultCapacity = 100

// capacityAt is the backend capacity t after the opening: Capacity, and
// a quarter of it while core-slow is pulled, as seeds/001's PRS slowdown.
// core-slow makes the hold path four times slower (HoldSlowdown, and the
// core's latency for the calls that reach it); with the concurrency
// bounded, four times the service time is a quarter of the throughput
// (Little's law).
func (o *Options) capacityAt(t time.Duration) float64 {
	c := o.Capacity
	for _, f := range o.Faults {
		if f.Name == FaultCoreSlow && t >= f.From && t < f.To {
			return c / 4
		}
	}
	return c
}

// Check says what is wrong with the options.
func (o *Options) Check() error {
	var errs []error
	if o.Travellers < 1 || o.Travellers > 100000 {
		errs = append(errs, errors.New("--travellers: 1..100000"))
	}
	if o.Berths < 1 || o.Berths > 20000 {
		errs = append(errs, errors.New("--berths: 1..20000"))
	}
	if o.Aggressive < 0 || o.Aggressive > 1 {
		errs = append(errs, errors.New("--aggressive: a share in [0,1]"))
	}
	if o.RetryMultiplier < 1 || o.RetryMultiplier > 100 {
		errs = append(errs, errors.New("--retry-multiplier: 1..100"))
	}
	if o.Duration < 5*time.Second || o.Duration > time.Hour {
		errs = append(errs, errors.New("--duration: 5s..1h"))
	}
	if o.Mode != Direct && o.Mode != Queue && o.Mode != Both {
		errs = append(errs, errors.New("--mode: direct, queue or both"))
	}
	if o.Seeds < 1 || o.Seeds > 50 {
		errs = append(errs, errors.New("--seeds: 1..50"))
	}
	if o.Arrivals <= 0 {
		o.Arrivals = 2 * time.Second
	}
	if o.Drain <= 0 {
		o.Drain = defaultDrain
	}
	if o.Capacity <= 0 {
		o.Capacity = DefaultCapacity
	}
	o.DurationS = o.Duration.Seconds()
	return errors.Join(errs...)
}

// modes lists the modes to run, in order.
func (o *Options) modes() []string {
	if o.Mode == Both {
		return []string{Direct, Queue}
	}
	return []string{o.Mode}
}
