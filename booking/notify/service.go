package notify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"tatkal/booking"
	"tatkal/booking/db"
	"tatkal/booking/eticket"
	"tatkal/booking/i18n"
)

// Delivery states of an outbox row (notifications.state).
const (
	StatePending     = "PENDING"     // written by booking.Notify, no send job yet
	StateQueued      = "QUEUED"      // a send job carries it
	StateSent        = "SENT"        // the gateway took it (sent_at, gateway_id)
	StateDelivered   = "DELIVERED"   // the receipt says delivered (delivered_at)
	StateUndelivered = "UNDELIVERED" // the receipt says it never arrived
	StateFailed      = "FAILED"      // refused for good, or retries exhausted
)

// Config configures the sender.
type Config struct {
	Pool    *pgxpool.Pool
	Client  *Client
	Jobs    booking.JobInserter
	Booking *booking.Service // reads bookings for the e-ticket PDF
	Log     *slog.Logger
	Pause   booking.PauseFunc
	// ReceiptPoll is how often a sent message's receipt is asked for
	// (zero: a second); ReceiptFor how long before we stop asking (zero:
	// ten minutes; the row then stays SENT).
	ReceiptPoll, ReceiptFor time.Duration
	// RetryBase is the unit of the retry backoff (zero: a second).
	RetryBase time.Duration
}

// Service relays the outbox into send jobs and runs them.
type Service struct {
	cfg Config
	log *slog.Logger
}

// New returns the sender.
func New(cfg Config) *Service {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.ReceiptPoll == 0 {
		cfg.ReceiptPoll = time.Second
	}
	if cfg.RetryBase == 0 {
		cfg.RetryBase = time.Second
	}
	if cfg.ReceiptFor == 0 {
		cfg.ReceiptFor = 10 * time.Minute
	}
	return &Service{cfg: cfg, log: cfg.Log.With("component", "notify")}
}

// relayBatch bounds the rows one relay transaction queues.
const relayBatch = 500

// Relay gives every PENDING outbox row a send job, in one transaction per
// batch: the row turns QUEUED with its job, so no row is queued twice and
// none is left behind. It returns how many it queued.
func (s *Service) Relay(ctx context.Context) (int, error) {
	total := 0
	for {
		n := 0
		err := db.Transact(ctx, s.cfg.Pool, func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, `UPDATE notifications SET state = 'QUEUED' WHERE id IN (
				SELECT id FROM notifications WHERE state = 'PENDING' ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED)
				RETURNING id`, relayBatch)
			if err != nil {
				return err
			}
			ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
			if err != nil {
				return err
			}
			n = len(ids)
			if n == 0 {
				return nil
			}
			params := make([]river.InsertManyParams, len(ids))
			for i, id := range ids {
				params[i] = river.InsertManyParams{Args: SendArgs{NotificationID: id}}
			}
			_, err = s.cfg.Jobs.InsertManyFastTx(ctx, tx, params)
			return err
		})
		if err != nil {
			return total, fmt.Errorf("relay outbox: %w", err)
		}
		total += n
		if n < relayBatch {
			return total, nil
		}
	}
}

// outboxRow is one notification as the sender needs it.
type outboxRow struct {
	id                   int64
	userID               int64
	channel, kind, ref   string
	subject, body, state string
	key                  uuid.UUID
	gatewayID, to        string
	attachmentName       string
	attachment           []byte
	sentAt               *time.Time
}

func (s *Service) load(ctx context.Context, id int64) (outboxRow, error) {
	var r outboxRow
	// The recipient: the row's own address (a code to a number being
	// proven, or to one with no account yet), else the account's number or
	// e-mail address, else its login (accounts seeded without either).
	err := s.cfg.Pool.QueryRow(ctx, `SELECT n.id, coalesce(n.user_id, 0), n.channel, n.kind, n.ref, n.subject, n.body, n.state,
		n.idempotency_key, n.gateway_id,
		coalesce(n.address, CASE n.channel WHEN 'SMS' THEN u.phone ELSE u.email END, u.login, ''),
		n.attachment_name, n.attachment, n.sent_at
		FROM notifications n LEFT JOIN users u ON u.id = n.user_id WHERE n.id = $1`, id).
		Scan(&r.id, &r.userID, &r.channel, &r.kind, &r.ref, &r.subject, &r.body, &r.state, &r.key, &r.gatewayID, &r.to,
			&r.attachmentName, &r.attachment, &r.sentAt)
	return r, err
}

// Deliver sends outbox row id to the gateway, once, and follows its
// receipt. It returns a positive duration when the receipt is not final
// yet and the job should look again then. Every attempt sends the row's
// own idempotency key and the same bytes, so the gateway takes the message
// once however often this runs, concurrently or after a crash.
func (s *Service) Deliver(ctx context.Context, id int64) (time.Duration, error) {
	r, err := s.load(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("load notification %d: %w", id, err)
	}
	switch r.state {
	case StateDelivered, StateUndelivered, StateFailed:
		return 0, nil
	case StatePending, StateQueued:
		m, err := s.message(ctx, &r)
		if err != nil {
			return 0, err
		}
		s.cfg.Pause.At(ctx, "notify.before-send")
		rec, err := s.cfg.Client.Send(ctx, r.key.String(), m)
		if err != nil {
			return 0, s.failed(ctx, r.id, err)
		}
		s.cfg.Pause.At(ctx, "notify.after-send")
		if _, err := s.cfg.Pool.Exec(ctx, `UPDATE notifications SET state = 'SENT', sent_at = coalesce(sent_at, now()),
			gateway_id = $2, attempts = attempts + 1, last_error = '' WHERE id = $1 AND state IN ('PENDING', 'QUEUED')`,
			r.id, rec.ID); err != nil {
			return 0, fmt.Errorf("record notification %d sent: %w", r.id, err)
		}
		now := time.Now()
		r.state, r.gatewayID, r.sentAt = StateSent, rec.ID, &now
		if rec.Final() {
			return 0, s.receipt(ctx, r.id, rec)
		}
		return s.cfg.ReceiptPoll, nil
	}
	// SENT: the receipt.
	if r.sentAt != nil && time.Since(*r.sentAt) > s.cfg.ReceiptFor {
		s.log.Warn("no delivery receipt; giving up asking", "notification", r.id, "gateway_id", r.gatewayID)
		return 0, nil
	}
	rec, err := s.cfg.Client.Status(ctx, r.gatewayID)
	if IsPermanent(err) {
		s.log.Warn("receipt refused; giving up asking", "notification", r.id, "err", err)
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if !rec.Final() {
		return s.cfg.ReceiptPoll, nil
	}
	return 0, s.receipt(ctx, r.id, rec)
}

// failed records a failed attempt; a permanent refusal ends the row as
// FAILED (and the job with it), anything else is retried.
func (s *Service) failed(ctx context.Context, id int64, cause error) error {
	state := StateQueued
	if IsPermanent(cause) {
		state = StateFailed
	}
	if _, err := s.cfg.Pool.Exec(ctx, `UPDATE notifications SET attempts = attempts + 1, last_error = $2,
		state = CASE WHEN state IN ('PENDING', 'QUEUED') THEN $3 ELSE state END WHERE id = $1`,
		id, truncateErr(cause), state); err != nil {
		return errors.Join(cause, err)
	}
	if state == StateFailed {
		s.log.Warn("message refused by the gateway", "notification", id, "err", cause)
		return nil
	}
	return cause
}

// GiveUp marks a row whose retries are exhausted as FAILED.
func (s *Service) GiveUp(ctx context.Context, id int64, cause error) error {
	_, err := s.cfg.Pool.Exec(ctx, `UPDATE notifications SET state = 'FAILED', last_error = $2
		WHERE id = $1 AND state IN ('PENDING', 'QUEUED')`, id, truncateErr(cause))
	return err
}

func (s *Service) receipt(ctx context.Context, id int64, rec Receipt) error {
	_, err := s.cfg.Pool.Exec(ctx, `UPDATE notifications SET state = $2, delivered_at = $3, last_error = $4
		WHERE id = $1 AND state = 'SENT'`, id, rec.Status, rec.DeliveredAt, rec.Error)
	if err != nil {
		return fmt.Errorf("record receipt of notification %d: %w", id, err)
	}
	return nil
}

func truncateErr(err error) string {
	s := err.Error()
	if len(s) > 500 {
		s = s[:500]
	}
	return s
}

// ticketKinds are the messages whose e-mail carries the e-ticket PDF (ref
// is the PNR).
var ticketKinds = map[string]bool{"ETICKET": true, "PROMOTED": true}

// message builds what is sent for r. The e-ticket PDF is drawn at the
// first attempt and kept on the row, so that retries send the same bytes.
func (s *Service) message(ctx context.Context, r *outboxRow) (Message, error) {
	m := Message{Channel: r.channel, To: r.to, Subject: r.subject, Body: r.body, ClientRef: fmt.Sprintf("notification-%d", r.id)}
	if r.channel != "EMAIL" || !ticketKinds[r.kind] {
		return m, nil
	}
	if r.attachment == nil {
		name, pdf, err := s.ticketPDF(ctx, r.userID, r.ref)
		if err != nil {
			return m, err
		}
		if pdf == nil {
			return m, nil
		}
		// First writer wins; a concurrent attempt reads the winner's bytes.
		if err := s.cfg.Pool.QueryRow(ctx, `UPDATE notifications SET attachment_name = CASE WHEN attachment IS NULL THEN $2 ELSE attachment_name END,
			attachment = coalesce(attachment, $3) WHERE id = $1 RETURNING attachment_name, attachment`, r.id, name, pdf).
			Scan(&r.attachmentName, &r.attachment); err != nil {
			return m, fmt.Errorf("keep e-ticket of notification %d: %w", r.id, err)
		}
	}
	if len(r.attachment) > 0 {
		m.Attachments = []Attachment{{Name: r.attachmentName, ContentType: "application/pdf", Data: r.attachment}}
	}
	return m, nil
}

// ticketPDF draws the e-ticket of PNR pnr as it stands (nil when there is
// no such booking of the user).
func (s *Service) ticketPDF(ctx context.Context, userID int64, pnr string) (string, []byte, error) {
	var holdID uuid.UUID
	err := s.cfg.Pool.QueryRow(ctx, `SELECT hold_id FROM bookings WHERE pnr = $1 AND user_id = $2`, pnr, userID).Scan(&holdID)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil, nil
	}
	if err != nil {
		return "", nil, fmt.Errorf("e-ticket of %s: %w", pnr, err)
	}
	v, err := s.cfg.Booking.Status(ctx, userID, holdID)
	if err != nil {
		return "", nil, err
	}
	sh, err := s.cfg.Booking.Catalog().ByID(ctx, v.ShardID)
	if err != nil {
		return "", nil, err
	}
	var rules []string
	for _, k := range []string{"rule.1", "rule.2", "rule.3", "rule.4"} {
		rules = append(rules, i18n.Text("en", k))
	}
	t := eticket.FromView(v, sh, i18n.Text("en", "state."+v.BookingStat), rules)
	t.Printed = v.CreatedAt
	pdf, err := eticket.PDF(t)
	if err != nil {
		return "", nil, fmt.Errorf("e-ticket of %s: %w", pnr, err)
	}
	return "tatkal-eticket-" + pnr + ".pdf", pdf, nil
}
