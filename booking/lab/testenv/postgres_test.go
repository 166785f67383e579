package testenv_test

import (
	"context"
	"testing"

	"tatkal/booking/lab/testenv"
)

// A private PostgreSQL carries the migrated schema and comes back after a
// restart with its data.
func TestStartPostgresRestarts(t *testing.T) {
	if testing.Short() {
		t.Skip("initialises a PostgreSQL cluster")
	}
	pg := testenv.StartPostgres(t)
	env := testenv.NewOnPostgres(t, pg, testenv.RedisURL(), 4)
	ctx := context.Background()
	var migrations int
	if err := env.Pool.QueryRow(ctx, `SELECT count(*) FROM schema_migrations`).Scan(&migrations); err != nil || migrations == 0 {
		t.Fatalf("migrations on the private server: %d, %v", migrations, err)
	}
	if err := pg.Restart(); err != nil {
		t.Fatal(err)
	}
	// The pool's connections died with the server; a new one is made.
	var n int
	for range 3 {
		if err := env.Pool.QueryRow(ctx, `SELECT count(*) FROM schema_migrations`).Scan(&n); err == nil {
			break
		}
	}
	if n != migrations {
		t.Fatalf("after the restart: %d migrations, want %d", n, migrations)
	}
}
