// Package localsrv starts servers of our own on this machine, which a
// caller may stop, restart and kill: a private PostgreSQL cluster and a
// private Redis Cluster with replicas. The shared servers of the test
// suite and of a developer's machine cannot be broken like that. The
// chaos tests (through testenv) and tatkal chaos both use it.
package localsrv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrNotInstalled is returned where the server's binaries are missing:
// a test skips, a command says what to install.
var ErrNotInstalled = errors.New("not installed")

// Postgres is a private PostgreSQL cluster in a temporary directory.
type Postgres struct {
	// BaseURL names the cluster's postgres database.
	BaseURL string
	Port    int
	root    string // the temporary directory: data directory and log
	dir     string // the data directory
	bin     string // where initdb and pg_ctl are
}

// StartPostgres initialises a cluster in a temporary directory (as the
// postgres OS user: initdb refuses root) and starts it on a free loopback
// port with trust authentication. Close stops and removes it. It returns
// an error wrapping ErrNotInstalled where no PostgreSQL binaries are.
func StartPostgres() (*Postgres, error) {
	bin := postgresBin()
	if bin == "" {
		return nil, fmt.Errorf("private PostgreSQL: no binaries under /usr/lib/postgresql/*/bin: %w", ErrNotInstalled)
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	root, err := os.MkdirTemp("", "tatkal-pg-")
	if err != nil {
		return nil, fmt.Errorf("private PostgreSQL: %w", err)
	}
	pg := &Postgres{Port: port, root: root, dir: filepath.Join(root, "data"), bin: bin,
		BaseURL: fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)}
	if err := pg.init(); err != nil {
		pg.Close()
		return nil, err
	}
	if err := pg.Start(); err != nil {
		pg.Close()
		return nil, err
	}
	return pg, nil
}

func (pg *Postgres) init() error {
	// The postgres user must reach its own data directory.
	if err := os.Chmod(pg.root, 0o777); err != nil {
		return fmt.Errorf("private PostgreSQL: %w", err)
	}
	if out, err := pg.asPostgres("initdb", "-D", pg.dir, "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8").CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %w\n%s", err, out)
	}
	// A short checkpoint and no fsync: the cluster lives for one run. Its
	// socket goes in the data directory, not /var/run/postgresql.
	conf := fmt.Sprintf("\nport = %d\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '%s'\nfsync = off\n"+
		"synchronous_commit = off\nfull_page_writes = off\nmax_connections = 200\nshared_buffers = 64MB\n", pg.Port, pg.dir)
	f, err := os.OpenFile(filepath.Join(pg.dir, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err == nil {
		_, err = f.WriteString(conf)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return fmt.Errorf("configure the private PostgreSQL: %w", err)
	}
	return nil
}

// Close stops the cluster at once (it may be down already) and removes
// its directory.
func (pg *Postgres) Close() {
	if _, err := os.Stat(filepath.Join(pg.dir, "postmaster.pid")); err == nil {
		pg.asPostgres("pg_ctl", "-D", pg.dir, "-m", "immediate", "-w", "stop").Run() //nolint:errcheck // it may be down already
	}
	os.RemoveAll(pg.root) //nolint:errcheck // a temporary directory
}

// Start starts the cluster and waits until it accepts connections.
func (pg *Postgres) Start() error {
	if err := pg.ctl("start", "-l", pg.LogFile()); err != nil {
		return err
	}
	return pg.waitReady()
}

// Stop stops the cluster with a fast shutdown: open transactions are
// rolled back and every client is disconnected.
func (pg *Postgres) Stop() error { return pg.ctl("stop", "-m", "fast") }

// Restart is Stop and Start in one.
func (pg *Postgres) Restart() error {
	if err := pg.ctl("restart", "-m", "fast", "-l", pg.LogFile()); err != nil {
		return err
	}
	return pg.waitReady()
}

// LogFile is the server's log.
func (pg *Postgres) LogFile() string { return filepath.Join(pg.root, "log") }

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

// FreePort is a loopback TCP port nobody listens on now.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
