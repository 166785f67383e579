package testenv

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Postgres is a private PostgreSQL cluster of one test, which the test may
// stop, restart and kill: the shared server of the suite cannot be.
type Postgres struct {
	// BaseURL names the cluster's postgres database; NewOnPostgres makes
	// a test database on it.
	BaseURL string
	Port    int
	dir     string // the data directory
	bin     string // where initdb and pg_ctl are
}

// StartPostgres initialises a cluster in a temporary directory (as the
// postgres OS user: initdb refuses root), starts it on a free loopback
// port with trust authentication, and stops and removes it when the test
// ends. It skips the test where no PostgreSQL binaries are installed.
func StartPostgres(t testing.TB) *Postgres {
	t.Helper()
	bin := postgresBin()
	if bin == "" {
		t.Skip("no PostgreSQL binaries under /usr/lib/postgresql/*/bin")
	}
	root, err := os.MkdirTemp("", "tatkal-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	pg := &Postgres{Port: freePort(t), dir: filepath.Join(root, "data"), bin: bin}
	// The postgres user must reach its own data directory.
	if err := os.Chmod(root, 0o777); err != nil {
		t.Fatal(err)
	}
	if out, err := pg.asPostgres("initdb", "-D", pg.dir, "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8").CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	// A short checkpoint and no fsync: the cluster lives for one test. Its
	// socket goes in the data directory, not /var/run/postgresql.
	conf := fmt.Sprintf("\nport = %d\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '%s'\nfsync = off\n"+
		"synchronous_commit = off\nfull_page_writes = off\nmax_connections = 200\nshared_buffers = 64MB\n", pg.Port, pg.dir)
	f, err := os.OpenFile(filepath.Join(pg.dir, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err == nil {
		_, err = f.WriteString(conf)
		f.Close()
	}
	if err != nil {
		t.Fatalf("configure the private PostgreSQL: %v", err)
	}
	pg.BaseURL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", pg.Port)
	t.Cleanup(func() {
		pg.asPostgres("pg_ctl", "-D", pg.dir, "-m", "immediate", "-w", "stop").Run() //nolint:errcheck // it may be down already
	})
	if err := pg.Start(); err != nil {
		t.Fatal(err)
	}
	return pg
}

// Start starts the cluster and waits until it accepts connections.
func (pg *Postgres) Start() error {
	if err := pg.ctl("start", "-l", pg.logFile()); err != nil {
		return err
	}
	return pg.waitReady()
}

// Stop stops the cluster with a fast shutdown: open transactions are
// rolled back and every client is disconnected.
func (pg *Postgres) Stop() error { return pg.ctl("stop", "-m", "fast") }

// Restart is Stop and Start in one.
func (pg *Postgres) Restart() error {
	if err := pg.ctl("restart", "-m", "fast", "-l", pg.logFile()); err != nil {
		return err
	}
	return pg.waitReady()
}

func (pg *Postgres) logFile() string { return filepath.Join(filepath.Dir(pg.dir), "log") }

// ctl runs pg_ctl on the cluster, waiting for the action to complete.
func (pg *Postgres) ctl(args ...string) error {
	args = append([]string{"-D", pg.dir, "-w", "-t", "60"}, args...)
	if out, err := pg.asPostgres("pg_ctl", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("pg_ctl %v: %w\n%s", args, err, out)
	}
	return nil
}

// waitReady waits until the cluster answers on TCP (pg_ctl -w may look at
// the socket only).
func (pg *Postgres) waitReady() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		conn, err := pgx.Connect(ctx, pg.BaseURL)
		if err == nil {
			return conn.Close(ctx)
		}
		if ctx.Err() != nil {
			return fmt.Errorf("private PostgreSQL on port %d: %w", pg.Port, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// asPostgres runs one of the cluster's binaries as the postgres OS user
// when we are root (initdb and postgres refuse to run as root).
func (pg *Postgres) asPostgres(name string, args ...string) *exec.Cmd {
	path := filepath.Join(pg.bin, name)
	if os.Geteuid() != 0 {
		return exec.Command(path, args...)
	}
	return exec.Command("runuser", append([]string{"-u", "postgres", "--", path}, args...)...)
}

// postgresBin is the newest /usr/lib/postgresql/*/bin with pg_ctl.
func postgresBin() string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "pg_ctl")); err == nil {
			return d
		}
	}
	return ""
}

func version(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

// freePort is a loopback TCP port nobody listens on now.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
