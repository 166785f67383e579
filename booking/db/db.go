// Package db opens PostgreSQL, creates the database when it is missing,
// applies tatkal's migrations and River's, and runs transactions.
package db

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"tatkal/migrations"
)

// A transaction whose client went silent (a half-open connection, a
// process stopped in a debugger) keeps its row locks until the server
// notices, which without this can take hours: every hold, payment and job
// touching those rows waits behind it. None of ours idles between its
// statements for more than moments, so the server ends such a transaction
// after a minute. DATABASE_URL may set another
// (?idle_in_transaction_session_timeout=30s; 0 turns it off).
const (
	idleInTransactionParam   = "idle_in_transaction_session_timeout"
	idleInTransactionDefault = "60s"
)

// Open connects to the database named in url, creating it first when the
// server answers that it does not exist.
func Open(ctx context.Context, url string, maxConns int32) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse DATABASE_URL: %w", err)
	}
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	if _, set := cfg.ConnConfig.RuntimeParams[idleInTransactionParam]; !set {
		cfg.ConnConfig.RuntimeParams[idleInTransactionParam] = idleInTransactionDefault
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	err = pool.Ping(ctx)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "3D000" { // invalid_catalog_name
		pool.Close()
		if err := CreateDatabase(ctx, url); err != nil {
			return nil, err
		}
		return Open(ctx, url, maxConns)
	}
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("reach PostgreSQL at %s: %w", redactURL(cfg.ConnConfig), err)
	}
	return pool, nil
}

// CreateDatabase creates the database named in url by connecting to the
// server's "postgres" database. Creating one that exists is not an error.
func CreateDatabase(ctx context.Context, url string) error {
	return CreateDatabaseFrom(ctx, url, "")
}

// CreateDatabaseFrom creates the database named in url as a copy of template
// (empty template means the server default).
func CreateDatabaseFrom(ctx context.Context, url, template string) error {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return fmt.Errorf("parse DATABASE_URL: %w", err)
	}
	name := cfg.Database
	cfg.Database = "postgres"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("reach PostgreSQL at %s to create database %q: %w", redactURL(cfg), name, err)
	}
	defer conn.Close(ctx)
	sql := "CREATE DATABASE " + pgx.Identifier{name}.Sanitize()
	if template != "" {
		sql += " TEMPLATE " + pgx.Identifier{template}.Sanitize()
	}
	_, err = conn.Exec(ctx, sql)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P04" { // duplicate_database
		return nil
	}
	if err != nil {
		return fmt.Errorf("create database %q: %w", name, err)
	}
	slog.Info("created database", "name", name)
	return nil
}

func redactURL(cfg *pgx.ConnConfig) string {
	return fmt.Sprintf("%s:%d/%s", cfg.Host, cfg.Port, cfg.Database)
}

// Migrate applies River's migrations and then every tatkal migration not yet
// recorded in schema_migrations, each in its own transaction. Running it
// again changes nothing. An advisory lock keeps two processes from
// migrating at once.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer conn.Release()
	const lockKey = 7461237 // any constant shared by every tatkal process
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", lockKey); err != nil {
		return fmt.Errorf("migrate: lock: %w", err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", lockKey) //nolint:errcheck

	migrator, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		return fmt.Errorf("migrate river: %w", err)
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("migrate river: %w", err)
	}

	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	files, err := upFiles()
	if err != nil {
		return err
	}
	for _, name := range files {
		version := strings.TrimSuffix(name, ".up.sql")
		var done bool
		if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE version = $1)", version).Scan(&done); err != nil {
			return fmt.Errorf("migrate %s: %w", version, err)
		}
		if done {
			continue
		}
		body, err := fs.ReadFile(migrations.FS, name)
		if err != nil {
			return fmt.Errorf("migrate %s: %w", version, err)
		}
		// Not Transact: a migration that fails stops the run; it is never retried.
		err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, string(body)); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "INSERT INTO schema_migrations (version) VALUES ($1)", version)
			return err
		})
		if err != nil {
			return fmt.Errorf("migrate %s: %w", version, err)
		}
		slog.Info("applied migration", "version", version)
	}
	return nil
}

// Pending lists tatkal migrations not yet applied; /readyz uses it.
func Pending(ctx context.Context, pool *pgxpool.Pool) ([]string, error) {
	files, err := upFiles()
	if err != nil {
		return nil, err
	}
	applied := map[string]bool{}
	rows, err := pool.Query(ctx, "SELECT version FROM schema_migrations")
	if err != nil {
		return nil, fmt.Errorf("read schema_migrations: %w", err)
	}
	versions, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("read schema_migrations: %w", err)
	}
	for _, v := range versions {
		applied[v] = true
	}
	var pending []string
	for _, name := range files {
		if v := strings.TrimSuffix(name, ".up.sql"); !applied[v] {
			pending = append(pending, v)
		}
	}
	return pending, nil
}

func upFiles() ([]string, error) {
	entries, err := fs.ReadDir(migrations.FS, ".")
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	var names []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".up.sql") {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names, nil
}

// Querier is what a pool, a connection and a transaction share: code that
// reads or writes takes one, so it runs alike inside or outside a
// transaction.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Beginner starts transactions: a pool or a connection.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Transact runs fn in a transaction, rolling back on error or panic, and
// retries serialization failures and deadlocks a few times, so fn must be
// safe to run again (no effects outside tx it does not reset). The wait
// between attempts ends early with ctx.
func Transact(ctx context.Context, db Beginner, fn func(pgx.Tx) error) error {
	var err error
	for attempt := 0; attempt < 4; attempt++ {
		err = pgx.BeginFunc(ctx, db, fn)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || (pgErr.Code != "40001" && pgErr.Code != "40P01") {
			return err
		}
		t := time.NewTimer(time.Duration(attempt+1) * 5 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (after %w)", ctx.Err(), err)
		case <-t.C:
		}
	}
	return err
}

// IsUniqueViolation reports whether err is a unique-constraint failure.
func IsUniqueViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505"
}

// WithDatabase replaces the database of a PostgreSQL URL, keeping its query.
func WithDatabase(url, name string) string {
	base, query, _ := strings.Cut(url, "?")
	if i := strings.LastIndex(base, "/"); i > len("postgres://") {
		base = base[:i]
	}
	out := base + "/" + name
	if query != "" {
		out += "?" + query
	}
	return out
}

// DropDatabase removes a scratch database, forcing its connections
// closed; a failure is left for the next run (best effort).
func DropDatabase(url, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, WithDatabase(url, "postgres"))
	if err != nil {
		return
	}
	defer conn.Close(ctx)
	conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)") //nolint:errcheck
}
