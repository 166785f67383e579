package booking

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/redis/go-redis/v9"
)

// A store that cannot be reached is shown as a 503 to retry, never as an
// internal error; a wrong query stays our fault.
func TestUnreachableStoresAreUnavailable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// Nothing listens on port 1.
	_, pgErr := pgx.Connect(ctx, "postgres://127.0.0.1:1/x?sslmode=disable&connect_timeout=2")
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	defer rdb.Close()
	redisErr := rdb.Ping(ctx).Err()
	for name, err := range map[string]error{
		"postgres refused":  fmt.Errorf("read shard: %w", pgErr),
		"redis refused":     fmt.Errorf("hold script: %w", redisErr),
		"postgres shutdown": &pgconn.PgError{Code: "57P01"},
		"starting up":       &pgconn.PgError{Code: "57P03"},
		"too many clients":  fmt.Errorf("connect: %w", &pgconn.PgError{Code: "53300"}),
		"closed conn":       fmt.Errorf("x: %w", pgconn.ErrConnClosed),
	} {
		if err == nil || ErrorCode(err) != EUNAVAIL || ErrorReason(err) != "UNREACHABLE" {
			t.Errorf("%s: %v is %s (%s), want unavailable", name, err, ErrorCode(err), ErrorReason(err))
		}
	}
	if c := ErrorCode(&pgconn.PgError{Code: "42601"}); c != EINTERNAL {
		t.Errorf("a syntax error is %s, want internal", c)
	}
	if c := ErrorCode(fmt.Errorf("x: %w", Errorf(ECONFLICT, "X", "x"))); c != ECONFLICT {
		t.Errorf("an *Error keeps its code: got %s", c)
	}
}
