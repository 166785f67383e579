package pspsim

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"tatkal/booking/db"
)

// ddl creates the simulator's own storage; every statement is idempotent.
// {s} is the schema. The CHECKs hold the money invariants even against a
// bug here: a payment is SUCCESS iff captured, never captured and failed,
// refunds never above the amount.
const ddl = `
CREATE SCHEMA IF NOT EXISTS {s};

CREATE TABLE IF NOT EXISTS {s}.routes (
	gateway    text NOT NULL,
	method     text NOT NULL,
	config     jsonb NOT NULL,
	updated_at timestamptz NOT NULL,
	PRIMARY KEY (gateway, method)
);

CREATE TABLE IF NOT EXISTS {s}.payments (
	psp_ref         text PRIMARY KEY,
	gateway         text NOT NULL,
	merchant_ref    text NOT NULL,
	idempotency_key text NOT NULL,
	request_hash    text NOT NULL,
	method          text NOT NULL CHECK (method IN ('UPI', 'CARD', 'NETBANKING')),
	amount_paise    bigint NOT NULL CHECK (amount_paise > 0),
	currency        text NOT NULL,
	vpa             text NOT NULL DEFAULT '',
	bank            text NOT NULL DEFAULT '',
	callback_url    text NOT NULL,
	return_url      text NOT NULL,
	status          text NOT NULL CHECK (status IN ('CREATED', 'PENDING', 'SUCCESS', 'FAILED')),
	failure_reason  text NOT NULL DEFAULT '',
	bank_ref        text NOT NULL DEFAULT '',
	approve_at      timestamptz,          -- when the simulated customer approves; NULL: only the page decides
	expires_at      timestamptz NOT NULL, -- the customer's deadline
	resolve_at      timestamptz,          -- when a PENDING payment gets the bank's answer
	resolve_status  text NOT NULL DEFAULT '',
	resolve_reason  text NOT NULL DEFAULT '',
	due_at          timestamptz,          -- next time the background loop must look; NULL when final
	fee_bps         integer NOT NULL DEFAULT 0,
	refunded_paise  bigint NOT NULL DEFAULT 0,
	captured_at     timestamptz,
	failed_at       timestamptz,
	created_at      timestamptz NOT NULL,
	updated_at      timestamptz NOT NULL,
	UNIQUE (gateway, idempotency_key),
	UNIQUE (gateway, merchant_ref),
	CHECK ((status = 'SUCCESS') = (captured_at IS NOT NULL)),
	CHECK ((status = 'FAILED') = (failed_at IS NOT NULL)),
	CHECK (refunded_paise >= 0 AND refunded_paise <= amount_paise),
	CHECK (refunded_paise = 0 OR status = 'SUCCESS')
);
CREATE INDEX IF NOT EXISTS payments_due ON {s}.payments (due_at) WHERE due_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS payments_captured ON {s}.payments (gateway, captured_at) WHERE captured_at IS NOT NULL;

CREATE TABLE IF NOT EXISTS {s}.refunds (
	refund_ref      text PRIMARY KEY,
	gateway         text NOT NULL,
	psp_ref         text NOT NULL REFERENCES {s}.payments (psp_ref),
	merchant_ref    text NOT NULL,
	idempotency_key text NOT NULL,
	request_hash    text NOT NULL,
	amount_paise    bigint NOT NULL CHECK (amount_paise > 0),
	reason          text NOT NULL DEFAULT '',
	status          text NOT NULL CHECK (status IN ('PENDING', 'PROCESSED', 'FAILED')),
	process_at      timestamptz NOT NULL,
	processed_at    timestamptz,
	expected_at     timestamptz NOT NULL,
	created_at      timestamptz NOT NULL,
	UNIQUE (gateway, idempotency_key),
	UNIQUE (gateway, merchant_ref),
	CHECK ((status = 'PROCESSED') = (processed_at IS NOT NULL))
);
CREATE INDEX IF NOT EXISTS refunds_payment ON {s}.refunds (psp_ref);
CREATE INDEX IF NOT EXISTS refunds_due ON {s}.refunds (process_at) WHERE status = 'PENDING';
CREATE INDEX IF NOT EXISTS refunds_processed ON {s}.refunds (gateway, processed_at) WHERE processed_at IS NOT NULL;

CREATE TABLE IF NOT EXISTS {s}.webhooks (
	id              bigserial PRIMARY KEY,
	event_id        text NOT NULL,  -- a duplicate delivery repeats it
	psp_ref         text NOT NULL REFERENCES {s}.payments (psp_ref),
	gateway         text NOT NULL,
	method          text NOT NULL,
	status          text NOT NULL,  -- the payment status the event announces
	callback_url    text NOT NULL,
	body            text NOT NULL,  -- exact bytes, so every attempt sends the same
	state           text NOT NULL CHECK (state IN ('PENDING', 'DELIVERED', 'GAVE_UP', 'LOST')),
	attempts        integer NOT NULL DEFAULT 0,
	next_attempt_at timestamptz,
	last_http_status integer NOT NULL DEFAULT 0,
	last_error      text NOT NULL DEFAULT '',
	created_at      timestamptz NOT NULL,
	delivered_at    timestamptz
);
CREATE INDEX IF NOT EXISTS webhooks_due ON {s}.webhooks (next_attempt_at) WHERE state = 'PENDING';
CREATE INDEX IF NOT EXISTS webhooks_payment ON {s}.webhooks (psp_ref);

-- The instrument the customer paid with, set when they approve: a card's
-- fingerprint or a net-banking account's reference (UPI keeps its vpa).
ALTER TABLE {s}.payments ADD COLUMN IF NOT EXISTS instrument text NOT NULL DEFAULT '';

-- The simulator's own keys, made once per schema so a fingerprint stays
-- the same across restarts (a real gateway's never changes).
CREATE TABLE IF NOT EXISTS {s}.keys (
	name  text PRIMARY KEY,
	value text NOT NULL
);
`

func quoteIdent(name string) string { return pgx.Identifier{name}.Sanitize() }

// q puts the schema into a query.
func (s *Server) q(sql string) string { return strings.ReplaceAll(sql, "{s}", s.schema) }

// migrate creates the schema; a lock keeps two servers starting together
// from racing on CREATE SCHEMA.
func (s *Server) migrate(ctx context.Context) error {
	err := db.Transact(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtextextended($1, 7461239))", s.cfg.Schema); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, s.q(ddl)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, s.q(`INSERT INTO {s}.keys (name, value) VALUES ('fingerprint', $1) ON CONFLICT DO NOTHING`), randomHex(32)); err != nil {
			return err
		}
		var key string
		if err := tx.QueryRow(ctx, s.q(`SELECT value FROM {s}.keys WHERE name = 'fingerprint'`)).Scan(&key); err != nil {
			return err
		}
		s.fpKey = []byte(key)
		return nil
	})
	if err != nil {
		return fmt.Errorf("pspsim: create schema %s: %w", s.schema, err)
	}
	return nil
}

// transact runs fn in a transaction, retrying serialization failures and
// deadlocks a few times.
func (s *Server) transact(ctx context.Context, fn func(pgx.Tx) error) error {
	return db.Transact(ctx, s.pool, fn)
}

// payment is a row of payments.
type payment struct {
	PSPRef        string     `db:"psp_ref"`
	Gateway       string     `db:"gateway"`
	MerchantRef   string     `db:"merchant_ref"`
	IdemKey       string     `db:"idempotency_key"`
	RequestHash   string     `db:"request_hash"`
	Method        string     `db:"method"`
	AmountPaise   int64      `db:"amount_paise"`
	Currency      string     `db:"currency"`
	VPA           string     `db:"vpa"`
	Bank          string     `db:"bank"`
	CallbackURL   string     `db:"callback_url"`
	ReturnURL     string     `db:"return_url"`
	Status        string     `db:"status"`
	FailureReason string     `db:"failure_reason"`
	BankRef       string     `db:"bank_ref"`
	ApproveAt     *time.Time `db:"approve_at"`
	ExpiresAt     time.Time  `db:"expires_at"`
	ResolveAt     *time.Time `db:"resolve_at"`
	ResolveStatus string     `db:"resolve_status"`
	ResolveReason string     `db:"resolve_reason"`
	DueAt         *time.Time `db:"due_at"`
	FeeBps        int        `db:"fee_bps"`
	RefundedPaise int64      `db:"refunded_paise"`
	CapturedAt    *time.Time `db:"captured_at"`
	FailedAt      *time.Time `db:"failed_at"`
	CreatedAt     time.Time  `db:"created_at"`
	UpdatedAt     time.Time  `db:"updated_at"`
	// Instrument is what the customer paid with, once they approved: a
	// card's fingerprint or a net-banking account's reference ("" for UPI
	// and before approval).
	Instrument string `db:"instrument"`
}

const paymentCols = `psp_ref, gateway, merchant_ref, idempotency_key, request_hash, method, amount_paise,
	currency, vpa, bank, callback_url, return_url, status, failure_reason, bank_ref, approve_at, expires_at,
	resolve_at, resolve_status, resolve_reason, due_at, fee_bps, refunded_paise, captured_at, failed_at,
	created_at, updated_at, instrument`

// errNoRow is the not-found of the store; handlers turn it into a 404.
var errNoRow = pgx.ErrNoRows

// paymentWhere returns the one payment matching cond (with args), or
// errNoRow. suffix may add FOR UPDATE.
func (s *Server) paymentWhere(ctx context.Context, q db.Querier, cond, suffix string, args ...any) (*payment, error) {
	rows, err := q.Query(ctx, s.q("SELECT "+paymentCols+" FROM {s}.payments WHERE "+cond+" "+suffix), args...)
	if err != nil {
		return nil, fmt.Errorf("read payment: %w", err)
	}
	p, err := pgx.CollectExactlyOneRow(rows, pgx.RowToAddrOfStructByName[payment])
	if err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, errNoRow
		}
		return nil, fmt.Errorf("read payment: %w", err)
	}
	return p, nil
}

func (s *Server) paymentByRef(ctx context.Context, q db.Querier, gw, pspRef string) (*payment, error) {
	return s.paymentWhere(ctx, q, "gateway = $1 AND psp_ref = $2", "", gw, pspRef)
}

func (s *Server) paymentByMerchantRef(ctx context.Context, q db.Querier, gw, merchantRef string) (*payment, error) {
	return s.paymentWhere(ctx, q, "gateway = $1 AND merchant_ref = $2", "", gw, merchantRef)
}

func (s *Server) paymentByIdemKey(ctx context.Context, q db.Querier, gw, key string) (*payment, error) {
	return s.paymentWhere(ctx, q, "gateway = $1 AND idempotency_key = $2", "", gw, key)
}

// lockPayment reads a payment and locks it for the transaction.
func (s *Server) lockPayment(ctx context.Context, tx pgx.Tx, gw, pspRef string) (*payment, error) {
	return s.paymentWhere(ctx, tx, "gateway = $1 AND psp_ref = $2", "FOR UPDATE", gw, pspRef)
}

// insertPayment stores a new payment; false means a payment with the same
// Idempotency-Key or merchant_ref exists already.
func (s *Server) insertPayment(ctx context.Context, q db.Querier, p *payment) (bool, error) {
	tag, err := q.Exec(ctx, s.q(`INSERT INTO {s}.payments (`+paymentCols+`) VALUES
		($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28)
		ON CONFLICT DO NOTHING`),
		p.PSPRef, p.Gateway, p.MerchantRef, p.IdemKey, p.RequestHash, p.Method, p.AmountPaise,
		p.Currency, p.VPA, p.Bank, p.CallbackURL, p.ReturnURL, p.Status, p.FailureReason, p.BankRef, p.ApproveAt, p.ExpiresAt,
		p.ResolveAt, p.ResolveStatus, p.ResolveReason, p.DueAt, p.FeeBps, p.RefundedPaise, p.CapturedAt, p.FailedAt,
		p.CreatedAt, p.UpdatedAt, p.Instrument)
	if err != nil {
		return false, fmt.Errorf("insert payment %s: %w", p.MerchantRef, err)
	}
	return tag.RowsAffected() == 1, nil
}

// errStale means the payment moved on under us; the compare-and-set in
// savePayment is what keeps a payment from being decided twice.
var errStale = errors.New("payment changed concurrently")

// savePayment writes p's lifecycle fields if the row still has status from.
func (s *Server) savePayment(ctx context.Context, q db.Querier, p *payment, from string) error {
	tag, err := q.Exec(ctx, s.q(`UPDATE {s}.payments SET status = $3, failure_reason = $4, bank_ref = $5,
		resolve_at = $6, resolve_status = $7, resolve_reason = $8, due_at = $9, fee_bps = $10,
		captured_at = $11, failed_at = $12, updated_at = $13, instrument = $14
		WHERE psp_ref = $1 AND status = $2`),
		p.PSPRef, from, p.Status, p.FailureReason, p.BankRef,
		p.ResolveAt, p.ResolveStatus, p.ResolveReason, p.DueAt, p.FeeBps,
		p.CapturedAt, p.FailedAt, p.UpdatedAt, p.Instrument)
	if err != nil {
		return fmt.Errorf("save payment %s: %w", p.PSPRef, err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("save payment %s from %s: %w", p.PSPRef, from, errStale)
	}
	return nil
}
