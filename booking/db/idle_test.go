package db

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// A transaction whose client goes silent is ended by the server, so its
// locks do not outlive it: Open asks for a minute unless DATABASE_URL says
// otherwise. With a second asked for, a transaction left idle with a row
// locked loses it: another connection takes the row at once after the
// timeout, and the silent one's COMMIT fails, its insert gone.
func TestSilentTransactionIsEnded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := scratchPool(t)
	var got string
	if err := pool.QueryRow(ctx, `SHOW idle_in_transaction_session_timeout`).Scan(&got); err != nil || got != "1min" {
		t.Fatalf("default idle_in_transaction_session_timeout %q %v, want 1min", got, err)
	}

	base := os.Getenv("TATKAL_TEST_DATABASE_URL")
	if base == "" {
		base = "postgres://127.0.0.1:5432/postgres?sslmode=disable"
	}
	name := fmt.Sprintf("tatkal_dbidle_%d", time.Now().UnixNano())
	url := WithDatabase(base, name)
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	short, err := Open(ctx, url+sep+idleInTransactionParam+"=1s", 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		short.Close()
		DropDatabase(base, name)
	})
	if _, err := short.Exec(ctx, `CREATE TABLE t (id int PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	tx, err := short.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if _, err := tx.Exec(ctx, `INSERT INTO t VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // the client goes silent
	other, err := short.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Release()
	lockCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := other.Exec(lockCtx, `INSERT INTO t VALUES (1)`); err != nil {
		t.Fatalf("the silent transaction still holds its row: %v", err)
	}
	if err := tx.Commit(ctx); err == nil {
		t.Fatal("the silent transaction committed after the server ended it")
	}
}
