package levers

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"tatkal/booking/audit"
)

// Audit writes one audit record outside a lever change (logins, rebuilds, inquiries).
func Audit(ctx context.Context, pool *pgxpool.Pool, actor, action, subject string, detail map[string]any) error {
	return audit.Write(ctx, pool, actor, action, subject, detail)
}

// AuditTx writes one audit record inside the caller's transaction, so the
// record commits with the change it describes.
func AuditTx(ctx context.Context, tx pgx.Tx, actor, action, subject string, detail map[string]any) error {
	return audit.Write(ctx, tx, actor, action, subject, detail)
}
