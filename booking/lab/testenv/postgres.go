package testenv

import (
	"errors"
	"testing"

	"tatkal/booking/lab/localsrv"
)

// Postgres is a private PostgreSQL cluster of one test, which the test may
// stop, restart and kill: the shared server of the suite cannot be.
type Postgres = localsrv.Postgres

// StartPostgres starts a private cluster (localsrv.StartPostgres) for the
// test and stops and removes it when the test ends. It skips the test
// where no PostgreSQL binaries are installed.
func StartPostgres(t testing.TB) *Postgres {
	t.Helper()
	pg, err := localsrv.StartPostgres()
	if errors.Is(err, localsrv.ErrNotInstalled) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pg.Close)
	return pg
}
