package recon

import (
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/xuri/excelize/v2"

	"tatkal/booking"
)

// Exception kinds.
const (
	PaidNotBooked       = "PAID_NOT_BOOKED"
	StatusMismatch      = "STATUS_MISMATCH"
	BookedNotPaid       = "BOOKED_NOT_PAID"
	DuplicateCharge     = "DUPLICATE_CHARGE"
	AmountMismatch      = "AMOUNT_MISMATCH"
	FeeMismatch         = "FEE_MISMATCH"
	MissingInSettlement = "MISSING_IN_SETTLEMENT"
	RefundNotSettled    = "REFUND_NOT_SETTLED"
	RefundMismatch      = "REFUND_MISMATCH"
	PayoutMismatch      = "PAYOUT_MISMATCH"
	CoreMissing         = "CORE_MISSING"
	CoreOrphan          = "CORE_ORPHAN"
	CoreMismatch        = "CORE_MISMATCH"
	OrphanLine          = "ORPHAN_LINE"
	DuplicateLine       = "DUPLICATE_LINE"
	Chargeback          = "CHARGEBACK"
	UnexplainedCredit   = "UNEXPLAINED_CREDIT"
	UnexplainedDebit    = "UNEXPLAINED_DEBIT"
)

// Resolution paths.
const (
	PathAuto    = "AUTO"    // a River job resolves it through the payment or booking code
	PathInquiry = "INQUIRY" // ask the gateway, then a person
	PathResync  = "RESYNC"  // send the booking to the core once more, then a person
	PathManual  = "MANUAL"
)

// KindInfo is what every exception of a kind shares.
type KindInfo struct {
	Kind    string
	Owner   string        // the team that answers for it
	SLA     time.Duration // from detection to resolution, before escalation
	Path    string        // the usual path (a row may differ: a FAILED status mismatch is manual)
	Meaning string
}

// Kinds is the table of exception kinds, in the order the workbook shows them.
var kinds = []KindInfo{
	{PaidNotBooked, "payments-ops", 4 * time.Hour, PathAuto, "the gateway settled a capture; we have no booking and no refund for it"},
	{StatusMismatch, "payments-ops", 8 * time.Hour, PathAuto, "we say FAILED or unresolved, the file says captured"},
	{BookedNotPaid, "payments-ops", 24 * time.Hour, PathInquiry, "a confirmed booking with no settled capture and no wallet debit after T+2"},
	{DuplicateCharge, "payments-ops", 4 * time.Hour, PathAuto, "two settled captures for one hold, one not refunded"},
	{AmountMismatch, "finance-settlement", 48 * time.Hour, PathManual, "the file's amount differs from ours beyond a paisa"},
	{FeeMismatch, "finance-settlement", 72 * time.Hour, PathManual, "the fee or its GST differs from the contracted rate beyond a paisa"},
	{MissingInSettlement, "finance-settlement", 24 * time.Hour, PathInquiry, "our SUCCESS is in no file by T+3"},
	{RefundNotSettled, "refunds", 24 * time.Hour, PathInquiry, "a refund we processed is in no file by T+3"},
	{RefundMismatch, "refunds", 48 * time.Hour, PathInquiry, "a refund's amount in the file differs from ours, or refunds exceed the capture"},
	{PayoutMismatch, "treasury", 24 * time.Hour, PathManual, "a bank credit differs from its lines' net sum, or is missing"},
	{CoreMissing, "reservations", 4 * time.Hour, PathResync, "booked here but not in the core's export"},
	{CoreOrphan, "reservations", 24 * time.Hour, PathManual, "in the core's export but not booked here"},
	{CoreMismatch, "reservations", 24 * time.Hour, PathResync, "fare, passengers or status differ between us and the core"},
	{OrphanLine, "finance-settlement", 72 * time.Hour, PathManual, "a settlement line with a reference we never issued"},
	{DuplicateLine, "finance-settlement", 72 * time.Hour, PathManual, "the same settlement line more than once"},
	{Chargeback, "disputes", 7 * 24 * time.Hour, PathManual, "the customer's bank took a capture back"},
	{UnexplainedCredit, "treasury", 24 * time.Hour, PathManual, "a credit on the bank statement that no settlement file announces as a payout"},
	{UnexplainedDebit, "treasury", 24 * time.Hour, PathManual, "a debit on the bank statement that no settlement file announces as a payout"},
}

// Kinds returns the table of exception kinds.
func Kinds() []KindInfo { return append([]KindInfo(nil), kinds...) }

// KindOf returns the kind's row.
func KindOf(kind string) (KindInfo, bool) {
	for _, k := range kinds {
		if k.Kind == kind {
			return k, true
		}
	}
	return KindInfo{}, false
}

// DefaultContracts are the fees (basis points of the amount, by our payment
// method) agreed with each dev gateway; GST of 18% is due on the fee.
func DefaultContracts() map[string]map[string]int {
	return map[string]map[string]int{
		"swiftpay": {"UPI": 0, "CARD": 180, "NB": 150},
		"bharatpg": {"UPI": 30, "CARD": 195, "NB": 160},
	}
}

// DefaultMaxFileBytes is the default size limit of an ingested file: a
// gateway's day of a million lines is about 150 MB in either format.
const DefaultMaxFileBytes = 512 << 20

// Config wires the service.
type Config struct {
	Pool *pgxpool.Pool
	// Jobs inserts the automatic resolutions in the run's transaction.
	Jobs booking.JobInserter
	Log  *slog.Logger
	// Contracts: fee basis points per gateway and our payment method;
	// default DefaultContracts. A method without a contract is not checked.
	Contracts map[string]map[string]int
	// ApprovalLimitPaise: an automatic money move above it waits for a
	// second finance person (default ₹10,000).
	ApprovalLimitPaise int64
	// MaxFileBytes is the largest file Ingest takes (default
	// DefaultMaxFileBytes); a larger one is refused whole (FILE_TOO_LARGE)
	// and changes nothing. The console's upload and the CLI share it.
	MaxFileBytes int64
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Pause is a test hook between the steps of a resolution or a run; nil
	// in production.
	Pause booking.PauseFunc
}

// MaxFileBytes is the largest file Ingest takes.
func (s *Service) MaxFileBytes() int64 { return s.cfg.MaxFileBytes }

// Service ingests, runs and keeps exceptions.
type Service struct {
	cfg  Config
	pool *pgxpool.Pool
	log  *slog.Logger
	// explain logs each run step's plan (EXPLAIN ANALYZE); the benchmark sets it.
	explain bool
	// stepCPU reads a PostgreSQL backend's CPU time, to log each run step's
	// (parallel workers not included); the benchmark sets it.
	stepCPU func(pid int) time.Duration
	// sheetRows is how many data rows a workbook sheet holds under its
	// header (Excel's limit; a test makes it small).
	sheetRows int
}

// New returns the service.
func New(cfg Config) *Service {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Contracts == nil {
		cfg.Contracts = DefaultContracts()
	}
	if cfg.ApprovalLimitPaise == 0 {
		cfg.ApprovalLimitPaise = 10_000_00
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxFileBytes <= 0 {
		cfg.MaxFileBytes = DefaultMaxFileBytes
	}
	return &Service{cfg: cfg, pool: cfg.Pool, log: cfg.Log.With("component", "recon"), sheetRows: excelize.TotalRows - 1}
}
