package recon

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/xuri/excelize/v2"

	"tatkal/booking"
	"tatkal/booking/lab/testenv"
)

// tatkal recon ingest, run and export against a database; mistakes in the
// arguments are usage errors that touch nothing.
func TestCommand(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	dir := t.TempDir()
	file := filepath.Join(dir, "swiftpay-2025-06-04.csv")
	// A line for a payment we never made: one orphan exception.
	body := swiftHead + "CAPTURE,pay_X,not-ours,,,UPI,500.00,0.00,0.00,500.00,04/06/2025 12:00:01,05/06/2025,SWP20250604\n"
	if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	var limit int64
	opened := 0
	// The service as booking/app opens it: the env's pool, an insert-only client.
	open := func(context.Context) (*Service, func(), error) {
		opened++
		rc, err := river.NewClient(riverpgxv5.New(env.Pool), &river.Config{})
		if err != nil {
			return nil, nil, err
		}
		return New(Config{Pool: env.Pool, Jobs: rc, MaxFileBytes: limit}), func() {}, nil
	}
	cmd := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := Command(ctx, open, Limits{MaxFileBytes: limit}, args, &out)
		return out.String(), err
	}
	for _, bad := range [][]string{
		{}, {"frobnicate"}, {"ingest", "--date", "2025-06-04"}, {"ingest", "--file", file, "--date", "04/06/2025"},
		{"run", "--gateway", "swiftpay"}, {"export", "--gateway", "swiftpay", "--date", "2025-06-04", "--out", "x.pdf"},
		{"run", "--gateway", "swiftpay", "--date", "2025-06-04", "extra"},
		{"ingest", "--source", "ledger", "--gateway", "swiftpay", "--date", "2025-06-04", "--file", file},
	} {
		if _, err := cmd(bad...); !errors.Is(err, ErrUsage) {
			t.Errorf("%q: %v, want a usage error", bad, err)
		}
	}
	var files int
	env.Pool.QueryRow(ctx, `SELECT count(*) FROM recon_files`).Scan(&files) //nolint:errcheck
	if files != 0 || opened != 0 {
		t.Fatalf("a refused command stored a file (%d) or opened the service (%d times)", files, opened)
	}

	// A file past the size limit is refused before the database is touched.
	limit = int64(len(body)) - 1
	if _, err := cmd("ingest", "--gateway", "swiftpay", "--date", "2025-06-04", "--file", file); booking.ErrorReason(err) != ReasonFileTooLarge ||
		!strings.Contains(err.Error(), "larger than the limit") {
		t.Fatalf("a file past the limit: %v", err)
	}
	env.Pool.QueryRow(ctx, `SELECT count(*) FROM recon_files`).Scan(&files) //nolint:errcheck
	if files != 0 || opened != 0 {
		t.Fatal("a file past the limit was stored, or the service opened for it")
	}
	limit = 0

	out, err := cmd("ingest", "--gateway", "swiftpay", "--date", "2025-06-04", "--file", file, "--by", "finance1")
	if err != nil || !strings.Contains(out, "ingested: SETTLEMENT swiftpay 2025-06-04, 1 rows") {
		t.Fatalf("ingest: %v\n%s", err, out)
	}
	out, err = cmd("ingest", "--gateway", "swiftpay", "--date", "2025-06-04", "--file", file)
	if err != nil || !strings.Contains(out, "already ingested") {
		t.Fatalf("ingest again: %v\n%s", err, out)
	}
	out, err = cmd("run", "--gateway", "swiftpay", "--date", "2025-06-04", "--as-of", "2025-06-06T12:00:00+05:30")
	if err != nil || !strings.Contains(out, "1 exceptions (1 new, 0 cleared)") {
		t.Fatalf("run: %v\n%s", err, out)
	}
	xlsx := filepath.Join(dir, "run.xlsx")
	if out, err = cmd("export", "--gateway", "swiftpay", "--date", "2025-06-04", "--out", xlsx); err != nil {
		t.Fatalf("export: %v\n%s", err, out)
	}
	f, err := excelize.OpenFile(xlsx)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if sheets := f.GetSheetList(); len(sheets) != 4 || sheets[1] != TiesOutSheet || sheets[2] != OrphanLine {
		t.Fatalf("sheets %v", sheets)
	}
	csvOut := filepath.Join(dir, "run.csv")
	if _, err = cmd("export", "--gateway", "swiftpay", "--date", "2025-06-04", "--out", csvOut); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(csvOut); !strings.Contains(string(b), "swiftpay|CAPTURE|pay_X") {
		t.Fatalf("csv:\n%s", b)
	}
	if _, err := cmd("export", "--gateway", "bharatpg", "--date", "2025-06-04", "--out", xlsx); err == nil || !strings.Contains(err.Error(), "not been reconciled") {
		t.Fatalf("export of a day never run: %v", err)
	}
}
