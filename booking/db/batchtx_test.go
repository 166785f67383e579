package db

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// scratchPool is a pool on a database of its own, dropped after the test.
func scratchPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	base := os.Getenv("TATKAL_TEST_DATABASE_URL")
	if base == "" {
		base = "postgres://127.0.0.1:5432/postgres?sslmode=disable"
	}
	name := fmt.Sprintf("tatkal_dbtest_%d", time.Now().UnixNano())
	pool, err := Open(context.Background(), WithDatabase(base, name), 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		pool.Close()
		DropDatabase(base, name)
	})
	if _, err := pool.Exec(context.Background(), `CREATE TABLE t (id int PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	return pool
}

func ids(t *testing.T, pool *pgxpool.Pool) []int {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT id FROM t ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func insert(ids ...int) *pgx.Batch {
	b := &pgx.Batch{}
	for _, id := range ids {
		b.Queue(`INSERT INTO t VALUES ($1)`, id)
	}
	return b
}

// A BatchTx is one transaction from the BEGIN in front of its first batch
// to the COMMIT behind its last, with ordinary statements between; any
// failure, in the first batch, between or in the last, leaves nothing, and
// the connection goes back to the pool usable.
func TestBatchTxIsOneTransaction(t *testing.T) {
	ctx := context.Background()
	pool := scratchPool(t)

	tx, err := BeginBatch(ctx, pool, insert(1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO t VALUES (2)`); err != nil {
		t.Fatal(err)
	}
	// Another connection sees nothing before COMMIT.
	if got := ids(t, pool); len(got) != 0 {
		t.Fatalf("before COMMIT another connection sees %v", got)
	}
	if err := tx.CommitBatch(ctx, insert(3)); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Errorf("rollback after commit: %v, want nothing done", err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO t VALUES (4)`); !errors.Is(err, pgx.ErrTxClosed) {
		t.Errorf("a statement after commit: %v, want pgx.ErrTxClosed", err)
	}
	var xmins int
	if err := pool.QueryRow(ctx, `SELECT count(DISTINCT xmin::text) FROM t`).Scan(&xmins); err != nil || xmins != 1 {
		t.Errorf("the rows were written by %d transactions (err %v), want 1", xmins, err)
	}

	for name, run := range map[string]func() error{
		"first batch fails": func() error {
			_, err := BeginBatch(ctx, pool, insert(10, 1))
			return err
		},
		"last batch fails": func() error {
			tx, err := BeginBatch(ctx, pool, insert(20))
			if err != nil {
				return nil // not the failure under test
			}
			return tx.CommitBatch(ctx, insert(21, 2))
		},
		"rolled back": func() error {
			tx, err := BeginBatch(ctx, pool, insert(30))
			if err != nil {
				return nil
			}
			if err := tx.Rollback(ctx); err != nil {
				return nil
			}
			return fmt.Errorf("rolled back")
		},
		"failed between": func() error {
			tx, err := BeginBatch(ctx, pool, insert(40))
			if err != nil {
				return nil
			}
			if _, err := tx.Exec(ctx, `INSERT INTO t VALUES (3)`); err == nil {
				return nil
			}
			return tx.Commit(ctx) // COMMIT of an aborted transaction answers ROLLBACK
		},
	} {
		if err := run(); err == nil {
			t.Errorf("%s: no error", name)
		}
		if got := ids(t, pool); !slices.Equal(got, []int{1, 2, 3}) {
			t.Errorf("%s: rows %v, want [1 2 3]", name, got)
		}
		if n := pool.Stat().AcquiredConns(); n != 0 {
			t.Errorf("%s: %d connections still taken from the pool", name, n)
		}
	}
	// The pool's connections are all usable afterwards.
	for i := range 4 {
		if err := pool.QueryRow(ctx, `SELECT 1`).Scan(new(int)); err != nil {
			t.Errorf("query %d after the failures: %v", i, err)
		}
	}
}
