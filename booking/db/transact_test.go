package db

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// beginner hands out transactions that only count: the retry loop is what
// is under test, and a serialization failure on demand is fn's to return.
type beginner struct{}

type countingTx struct{ pgx.Tx }

func (countingTx) Commit(context.Context) error   { return nil }
func (countingTx) Rollback(context.Context) error { return nil }

func (beginner) Begin(context.Context) (pgx.Tx, error) { return countingTx{}, nil }

func serializationFailure() error { return &pgconn.PgError{Code: "40001"} }

// A cancelled ctx ends the wait between attempts: Transact returns at once
// with ctx's error instead of running fn again.
func TestTransactBackoffStopsOnCancelledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	calls := 0
	err := Transact(ctx, beginner{}, func(pgx.Tx) error {
		calls++
		cancel()
		return serializationFailure()
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "40001" {
		t.Errorf("err = %v, want it to carry the serialization failure too", err)
	}
	if calls != 1 {
		t.Errorf("fn ran %d times after ctx was cancelled, want 1", calls)
	}
}

// Serialization failures are retried until fn succeeds, a few times at most.
func TestTransactRetriesSerializationFailures(t *testing.T) {
	calls := 0
	err := Transact(context.Background(), beginner{}, func(pgx.Tx) error {
		calls++
		if calls < 3 {
			return serializationFailure()
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Errorf("err = %v after %d calls, want nil after 3", err, calls)
	}
	calls = 0
	err = Transact(context.Background(), beginner{}, func(pgx.Tx) error { calls++; return serializationFailure() })
	if err == nil || calls != 4 {
		t.Errorf("err = %v after %d calls, want the failure after 4", err, calls)
	}
	calls = 0
	other := errors.New("not a conflict")
	if err := Transact(context.Background(), beginner{}, func(pgx.Tx) error { calls++; return other }); !errors.Is(err, other) || calls != 1 {
		t.Errorf("err = %v after %d calls, want the error at once", err, calls)
	}
}
