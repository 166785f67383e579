package payment

import (
	"context"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// ForgetSeenEvents empties s's memory of the events it recorded, as a
// restarted process or another one has it, so a duplicate is looked up in
// PostgreSQL.
func ForgetSeenEvents(s *Service) {
	s.seen.mu.Lock()
	defer s.seen.mu.Unlock()
	clear(s.seen.set)
	clear(s.seen.ring)
	s.seen.next = 0
}

// InGroup runs body in a confirmation group's transaction, where a
// payment's body runs.
func InGroup(ctx context.Context, s *Service, key uuid.UUID, body func(ctx context.Context, tx pgx.Tx) error) error {
	return s.group.run(ctx, s.pool, s.booking, key, func(ctx context.Context, tx pgx.Tx, _ *confirmations) error { return body(ctx, tx) })
}
