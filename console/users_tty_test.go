package console_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sys/unix"

	"tatkal/booking/db"
	"tatkal/booking/lab/testenv"
	"tatkal/console"
)

// On a terminal, tatkal users asks for the password twice and the
// terminal shows neither: the test is the terminal (a pseudo-terminal's
// master side) and types only once echo is off.
func TestUsersCommandReadsThePasswordFromATerminalWithoutEcho(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	defer master.Close()
	// Through SyscallConn, not Fd, which would make reads of the master
	// blocking and so deaf to the read deadline below.
	raw, err := master.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if cerr := raw.Control(func(fd uintptr) {
		if err = unix.IoctlSetPointerInt(int(fd), unix.TIOCSPTLCK, 0); err == nil {
			n, err = unix.IoctlGetInt(int(fd), unix.TIOCGPTN)
		}
	}); cerr != nil || err != nil {
		t.Fatal(cerr, err)
	}
	tty, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer tty.Close()

	var mu sync.Mutex
	var out bytes.Buffer
	done := make(chan error, 1)
	go func() {
		done <- console.UsersCommand(context.Background(), []string{"add", "--login", "ravi", "--role", "finance"}, tty,
			&lockedBuffer{mu: &mu, b: &out}, func(ctx context.Context) (*pgxpool.Pool, error) { return db.Open(ctx, env.DatabaseURL, 2) })
	}()
	const pw = "typed on a terminal"
	for _, prompt := range []string{"New password for ravi (not shown): ", "Again: "} {
		// Type once the prompt is out and the terminal echoes nothing.
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			mu.Lock()
			shown := strings.Contains(out.String(), prompt)
			mu.Unlock()
			tio, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS)
			if err != nil {
				t.Fatal(err)
			}
			if shown && tio.Lflag&unix.ECHO == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no prompt %q with echo off within 10s: %q", prompt, out.String())
			}
		}
		if _, err := master.WriteString(pw + "\r"); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		t.Fatalf("users add on a terminal: %v\n%s", err, out.String())
	}
	// What the terminal showed: nothing of the password.
	master.SetReadDeadline(time.Now().Add(300 * time.Millisecond)) //nolint:errcheck
	var seen bytes.Buffer
	buf := make([]byte, 1024)
	for {
		k, err := master.Read(buf)
		seen.Write(buf[:k])
		if err != nil {
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Logf("reading the terminal: %v", err)
			}
			break
		}
	}
	if strings.Contains(seen.String(), "typed") {
		t.Fatalf("the terminal echoed the password: %q", seen.String())
	}
	var hash string
	if err := env.Pool.QueryRow(context.Background(), `SELECT password_hash FROM console_users WHERE login = 'ravi'`).Scan(&hash); err != nil {
		t.Fatalf("ravi was not added: %v\n%s", err, out.String())
	}
}

type lockedBuffer struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
