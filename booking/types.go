package booking

import (
	"context"
	"net/netip"
	"time"

	"github.com/google/uuid"
)

// Hold states in PostgreSQL.
const (
	HoldHeld      = "HELD"
	HoldConfirmed = "CONFIRMED"
	HoldExpired   = "EXPIRED"
	HoldReleased  = "RELEASED"
	HoldCancelled = "CANCELLED"
)

// Hold kinds: seats, or a place on the Tatkal waitlist (TQWL).
const (
	KindSeat     = "SEAT"
	KindWaitlist = "WAITLIST"
)

// Booking states.
const (
	BookingConfirmed  = "CONFIRMED"
	BookingWaitlisted = "WAITLISTED"
	BookingCancelled  = "CANCELLED"
)

// Passenger is one traveller on a hold or booking.
type Passenger struct {
	Name      string `json:"name"`
	Age       int    `json:"age"`
	Gender    string `json:"gender"`
	BerthPref string `json:"berth_pref,omitempty"`
	IDType    string `json:"id_type,omitempty"`
	IDRef     string `json:"id_ref,omitempty"`
}

// HoldRequest is a passenger's attempt to take seats.
type HoldRequest struct {
	UserID         int64
	IdempotencyKey string
	Train          string
	Date           time.Time // journey date (from the origin station)
	Class          string
	Quota          string
	From, To       string // station codes
	Passengers     []Passenger
	AdmissionToken string
	// The bearer session and device binding the request came with: an
	// admission token is bound to both.
	SessionToken string
	DeviceToken  string
	// Client is what the request says about its sender, recorded as fraud
	// signals with the hold (never used to decide it).
	Client ClientSignals
	// Check is the edge's booking check (the solved challenge or SMS code
	// every hold carries, admission.Service.CheckHold), run once the
	// request is valid and the window open, before any seat work: a
	// malformed request spends no challenge. nil: none (the service's own
	// callers: tests, the bench's service phase).
	Check func(context.Context) error
}

// ClientSignals are the request's facts the fraud signals keep.
type ClientSignals struct {
	DeviceID string     // the bound device's id; "" when none
	IP       netip.Addr // zero when unknown
	Attested bool
	SolveMS  int // challenge solve time; <0 when no challenge was solved
}

// FareLine is one part of a fare, in paise.
type FareLine struct {
	Item  string `json:"item"`
	Paise int64  `json:"paise"`
}

// Fare is what a hold costs.
type Fare struct {
	TotalPaise int64      `json:"total_paise"`
	Breakup    []FareLine `json:"breakup"`
}

// BerthInfo is a berth as a passenger sees it.
type BerthInfo struct {
	Coach   string `json:"coach"`
	BerthNo int    `json:"berth"`
	Type    string `json:"berth_type"`
}

// HoldResult answers a hold attempt.
type HoldResult struct {
	HoldID     uuid.UUID
	Status     string // HELD, WAITLIST_OFFERED, SOLD_OUT; a replay: what it became (CONFIRMED, WAITLISTED, CANCELLED, EXPIRED, RELEASED)
	ExpiresAt  time.Time
	Berths     []BerthInfo
	WaitlistNo int
	Fare       Fare
	PNR        string // set on a replay once the hold became a booking
	Replayed   bool
}

// HoldView is the durable state of a hold and its booking, for status pages.
type HoldView struct {
	ID          uuid.UUID
	UserID      int64
	ShardID     int64
	Train       string
	Date        time.Time
	Class       string
	From, To    string
	Kind        string
	State       string
	Reason      string
	ExpiresAt   time.Time
	CreatedAt   time.Time
	Passengers  []Passenger
	Berths      []BerthInfo
	WaitlistNo  int
	Fare        Fare
	PNR         string
	BookingStat string
	CoreState   string // PENDING until the reservation core acknowledges, SYNCED, REJECTED
	RefundDue   int64
	// The shard's chart: OPEN, CHARTING, CHARTED or FAILED; when it was
	// prepared; whether the core has it (PENDING, SENT, FAILED).
	ChartState string
	ChartedAt  time.Time
	ChartCore  string
	// CancelReason says why a cancelled booking was cancelled.
	CancelReason string
}
