package notify

import (
	"time"

	"github.com/riverqueue/river"
)

// QueueMessages carries the sending of messages, apart from the seat and
// money queues: a slow gateway never delays a seat or a refund.
const QueueMessages = "messages"

// RelayArgs queues the outbox's PENDING rows as send jobs (periodic).
type RelayArgs struct{}

func (RelayArgs) Kind() string { return "notify_relay" }
func (RelayArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueMessages, MaxAttempts: 3}
}

// SendArgs sends one outbox row and follows its receipt.
type SendArgs struct {
	NotificationID int64 `json:"notification_id"`
}

func (SendArgs) Kind() string { return "notify_send" }
func (SendArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueMessages, MaxAttempts: 25}
}

// Backoff is the wait before retry attempt n of a send: quadratic in
// units of base (a second unless set), at most five minutes (25 attempts
// span about an hour and a half).
func (s *Service) Backoff(attempt int) time.Duration {
	base := s.cfg.RetryBase
	return min(time.Duration(attempt*attempt)*base+base, 5*time.Minute)
}
