package recon

import (
	"context"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"tatkal/booking"
	"tatkal/booking/lab/testenv"
)

// A file with a NUL byte or invalid UTF-8 in any line (PostgreSQL stores
// neither) is refused whole, naming the line, as is such a file name or
// actor (the CLI takes the name from the path): EINVALID, nothing stored.
func TestIngestRefusesBadText(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	svc := New(Config{Pool: env.Pool})
	day := time.Date(2025, 6, 4, 0, 0, 0, 0, booking.IST)
	line := "CAPTURE,pay_1,0197a0c8-0000-7000-8000-000000000001,,,CARD,1234.50,22.22,4.00,1208.28,04/06/2025 12:00:01,05/06/2025,SWP20250604\n"
	meta := FileMeta{Source: SourceSettlement, Gateway: "swiftpay", BusinessDate: day, Name: "f.csv", By: "finance1"}
	named := func(name, by string) FileMeta {
		m := meta
		m.Name, m.By = name, by
		return m
	}
	for _, c := range []struct {
		name   string
		meta   FileMeta
		body   string
		reason string
		want   string
	}{
		{"NUL in a reference", meta, swiftHead + strings.Replace(line, "pay_1", "pay\x00_1", 1), "BAD_FILE", "line 2"},
		{"NUL in the payout", meta, swiftHead + line + strings.Replace(line, "SWP20250604", "SWP\x00", 1), "BAD_FILE", "line 3"},
		{"invalid UTF-8 in a line", meta, swiftHead + line + line + strings.Replace(line, "CARD", "CA\xffRD", 1), "BAD_FILE", "line 4"},
		{"NUL in the header", meta, strings.Replace(swiftHead, "Txn Type", "Txn\x00Type", 1) + line, "BAD_FILE", "line 1"},
		{"Latin-1 in a blank-looking line", meta, swiftHead + line + "\xa0\n", "BAD_FILE", "line 3"},
		{"invalid UTF-8 in the name", named("f\xff.csv", "finance1"), swiftHead + line, "BAD_TEXT", "file name"},
		{"NUL in the actor", named("f.csv", "fin\x00ance1"), swiftHead + line, "BAD_TEXT", "who ingests"},
	} {
		_, err := svc.Ingest(ctx, c.meta, strings.NewReader(c.body))
		if booking.ErrorCode(err) != booking.EINVALID || booking.ErrorReason(err) != c.reason || !strings.Contains(booking.ErrorMessage(err), c.want) {
			t.Errorf("%s: %v, want %s naming %q", c.name, err, c.reason, c.want)
		}
		if msg := booking.ErrorMessage(err); strings.ContainsRune(msg, 0) || !utf8.ValidString(msg) {
			t.Errorf("%s: the refusal itself holds the bad text: %q", c.name, msg)
		}
	}
	var files, lines int
	env.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM recon_files), (SELECT count(*) FROM recon_lines)`).Scan(&files, &lines) //nolint:errcheck
	if files != 0 || lines != 0 {
		t.Fatalf("refused files stored %d files, %d lines", files, lines)
	}
}
