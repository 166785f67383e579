// Package prs is the wire protocol of the passenger reservation system
// ("reservation core"): the system of record for berths and charting that
// confirmed Tatkal bookings are synchronised to. It holds the request and
// answer bodies, the CSV export's columns and the client our booking side
// uses; the simulator that serves the protocol (`tatkal prs`) is
// booking/sim/prssim, so the domain never links an HTTP server and the
// adapter could later point at a real core.
//
// The protocol is JSON over HTTP (Authorization: Bearer <api key>):
//
//	PUT  /v1/bookings/{pnr}          sync a booking: 201 first time, 200 with the same Ack on a replay,
//	                                 409 for a different body under the same PNR, 422 REJECTED, 400 malformed
//	POST /v1/bookings/{pnr}/cancel   cancel (idempotent), frees the berths; 404 unknown PNR
//	GET  /v1/bookings/{pnr}          the stored booking with its state
//	GET  /v1/exports/{date}          every booking of a journey date (YYYY-MM-DD); ?format=csv for CSV
//	PUT  /v1/charts/{train}/{date}/{class}/{quota}
//	                                 the prepared chart (Chart): 201, 200 with the same ChartAck on a replay,
//	                                 409 another chart under the key, 422 REJECTED CHART_MISMATCH, 400 malformed
//	GET  /v1/charts/{train}/{date}/{class}/{quota}
//	                                 {"chart": Chart, "ack": ChartAck}; 404 when none was sent
//
// The admin API (Authorization: Bearer <admin token>) sets injected faults:
//
//	GET /admin/faults
//	PUT /admin/faults   body Faults
//
// Errors are JSON: {"code": "...", "reason": "...", "message": "..."}; a
// rejection is {"code":"REJECTED","reason":"BERTH_TAKEN"|"CORE_REJECTED",...}.
package prs

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"time"
	"unicode/utf8"
)

// Booking statuses we send, and the states the core reports.
const (
	StatusConfirmed  = "CONFIRMED"
	StatusWaitlisted = "WAITLISTED"
	StateCancelled   = "CANCELLED" // only ever in State, set by a cancel
)

// Rejection reasons.
const (
	ReasonBerthTaken   = "BERTH_TAKEN"   // a berth is held by another PNR on an overlapping leg
	ReasonCoreRejected = "CORE_REJECTED" // the core refused for its own reasons (injected fault)
)

// Error codes in error bodies.
const (
	CodeRejected     = "REJECTED"
	CodeBadRequest   = "BAD_REQUEST"
	CodeConflict     = "CONFLICT"
	CodeNotFound     = "NOT_FOUND"
	CodeUnauthorized = "UNAUTHORIZED"
	CodeUnavailable  = "UNAVAILABLE"
	CodeTimeout      = "TIMEOUT"
	CodeInternal     = "INTERNAL"
)

// DateLayout is the wire form of a journey date.
const DateLayout = "2006-01-02"

// MaxPassengers is the most passengers one PNR may carry.
const MaxPassengers = 6

// maxName is generous: the core must never be stricter than the booking side.
const maxName = 100

// Booking is one PNR as the core knows it. The fields down to Passengers
// are what we send; the rest are set by the core and ignored in a sync, so
// a booking read back from the core can be synced again as a replay.
type Booking struct {
	PNR         string      `json:"pnr"`
	Train       string      `json:"train"`
	JourneyDate string      `json:"journey_date"` // YYYY-MM-DD, the date at the train's origin
	Class       string      `json:"class"`
	Quota       string      `json:"quota"`
	From        string      `json:"from"` // station codes
	To          string      `json:"to"`
	FromSeq     int         `json:"from_seq"` // the journey covers legs FromSeq..ToSeq-1
	ToSeq       int         `json:"to_seq"`
	Status      string      `json:"status"` // CONFIRMED or WAITLISTED
	WaitlistNo  int         `json:"waitlist_no,omitempty"`
	FarePaise   int64       `json:"fare_paise"`
	Passengers  []Passenger `json:"passengers"`

	State       string     `json:"state,omitempty"` // Status, or CANCELLED
	CoreRef     string     `json:"core_ref,omitempty"`
	AcceptedAt  time.Time  `json:"accepted_at,omitzero"`
	CancelledAt *time.Time `json:"cancelled_at,omitempty"`
}

// Passenger is one traveller of a booking with the berth they hold for the
// whole journey (no berth while waitlisted).
type Passenger struct {
	Seq       int    `json:"seq"` // 1..n within the PNR
	Name      string `json:"name"`
	Age       int    `json:"age"`
	Gender    string `json:"gender"` // M, F or T
	Coach     string `json:"coach,omitempty"`
	BerthNo   int    `json:"berth_no,omitempty"`
	BerthType string `json:"berth_type,omitempty"`
}

// Ack is the core's acknowledgement of a sync; a replay gets the same one.
type Ack struct {
	PNR        string    `json:"pnr"`
	CoreRef    string    `json:"core_ref"`
	AcceptedAt time.Time `json:"accepted_at"`
}

// ErrorBody is every error answer.
type ErrorBody struct {
	Code    string `json:"code"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

var (
	pnrRE  = regexp.MustCompile(`^[1-9][0-9]{9}$`)
	codeRE = regexp.MustCompile(`^[A-Z0-9]{1,8}$`) // train numbers, station, class, quota, coach codes
)

// ValidPNR reports whether s is a 10-digit PNR.
func ValidPNR(s string) bool { return pnrRE.MatchString(s) }

// Validate says what is malformed in a booking to be synced, or nil.
func (b *Booking) Validate() error {
	switch {
	case !ValidPNR(b.PNR):
		return fmt.Errorf("pnr %q is not a 10-digit PNR", b.PNR)
	case !codeRE.MatchString(b.Train):
		return fmt.Errorf("train %q is not a train number", b.Train)
	case !codeRE.MatchString(b.Class):
		return fmt.Errorf("class %q is not a class code", b.Class)
	case !codeRE.MatchString(b.Quota):
		return fmt.Errorf("quota %q is not a quota code", b.Quota)
	case !codeRE.MatchString(b.From) || !codeRE.MatchString(b.To):
		return fmt.Errorf("from %q and to %q must be station codes", b.From, b.To)
	case b.From == b.To:
		return fmt.Errorf("from and to are the same station %q", b.From)
	case b.FromSeq < 0 || b.ToSeq <= b.FromSeq:
		return fmt.Errorf("legs %d..%d are not a journey (need 0 <= from_seq < to_seq)", b.FromSeq, b.ToSeq)
	case b.FarePaise < 0:
		return fmt.Errorf("fare_paise %d is negative", b.FarePaise)
	case len(b.Passengers) == 0 || len(b.Passengers) > MaxPassengers:
		return fmt.Errorf("%d passengers; a PNR carries 1 to %d", len(b.Passengers), MaxPassengers)
	}
	if _, err := time.Parse(DateLayout, b.JourneyDate); err != nil {
		return fmt.Errorf("journey_date %q is not YYYY-MM-DD", b.JourneyDate)
	}
	switch b.Status {
	case StatusConfirmed:
		if b.WaitlistNo != 0 {
			return fmt.Errorf("a confirmed booking has no waitlist_no (got %d)", b.WaitlistNo)
		}
	case StatusWaitlisted:
		if b.WaitlistNo <= 0 {
			return fmt.Errorf("a waitlisted booking needs a positive waitlist_no (got %d)", b.WaitlistNo)
		}
	default:
		return fmt.Errorf("status %q is neither %s nor %s", b.Status, StatusConfirmed, StatusWaitlisted)
	}
	seqs := make(map[int]bool, len(b.Passengers))
	berths := make(map[string]int, len(b.Passengers))
	for i, p := range b.Passengers {
		n := i + 1
		switch {
		case p.Seq < 1 || p.Seq > len(b.Passengers) || seqs[p.Seq]:
			return fmt.Errorf("passenger %d: seq %d must be unique in 1..%d", n, p.Seq, len(b.Passengers))
		case p.Name == "" || utf8.RuneCountInString(p.Name) > maxName:
			return fmt.Errorf("passenger %d: name must be 1 to %d characters", n, maxName)
		case p.Age < 0 || p.Age > 125:
			return fmt.Errorf("passenger %d: age %d out of range", n, p.Age)
		case p.Gender != "M" && p.Gender != "F" && p.Gender != "T":
			return fmt.Errorf("passenger %d: gender %q must be M, F or T", n, p.Gender)
		}
		seqs[p.Seq] = true
		hasBerth := p.Coach != "" || p.BerthNo != 0 || p.BerthType != ""
		if b.Status == StatusWaitlisted {
			if hasBerth {
				return fmt.Errorf("passenger %d: a waitlisted passenger holds no berth", n)
			}
			continue
		}
		if !codeRE.MatchString(p.Coach) || p.BerthNo <= 0 || !codeRE.MatchString(p.BerthType) {
			return fmt.Errorf("passenger %d: a confirmed passenger needs coach, berth_no and berth_type", n)
		}
		key := fmt.Sprintf("%s/%d", p.Coach, p.BerthNo)
		if other, dup := berths[key]; dup {
			return fmt.Errorf("passengers %d and %d share berth %s", other, n, key)
		}
		berths[key] = n
	}
	return nil
}

// Request is the booking as sent: core-set fields cleared and passengers
// in seq order, so equal requests compare equal however they were built.
func (b Booking) Request() Booking {
	b.State, b.CoreRef, b.AcceptedAt, b.CancelledAt = "", "", time.Time{}, nil
	b.Passengers = slices.Clone(b.Passengers)
	slices.SortFunc(b.Passengers, func(x, y Passenger) int { return x.Seq - y.Seq })
	return b
}

// Digest fingerprints the request so a replay can be told from a
// conflicting body under the same PNR.
func (b Booking) Digest() string {
	body, err := json.Marshal(b.Request())
	if err != nil {
		// Only plain strings and numbers: cannot fail.
		panic(fmt.Sprintf("prs: marshal booking: %v", err))
	}
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:])
}
