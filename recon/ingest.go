package recon

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"tatkal/booking"
	"tatkal/booking/audit"
)

// FileMeta says what a file is and who brings it.
type FileMeta struct {
	Source       string // SourceSettlement, SourceBank or SourceCore
	Gateway      string // required for settlement files
	Format       string // default: the gateway's format, or the bank's or core's
	BusinessDate time.Time
	Name         string
	By           string // a person's login, or job:<name>
	// Fetched: our own job fetched the file from its issuer's API with our
	// key (fetch.go). Anything else was brought by a person and starts no
	// automatic resolution until a second person accepts it (AcceptFile).
	Fetched bool
}

// FileInfo is an ingested file's lineage.
type FileInfo struct {
	ID           int64      `json:"id"`
	Source       string     `json:"source"`
	Gateway      string     `json:"gateway"`
	Format       string     `json:"format"`
	BusinessDate time.Time  `json:"business_date"`
	SHA256       string     `json:"sha256"`
	Rows         int        `json:"rows"`
	Bytes        int64      `json:"bytes"`
	Name         string     `json:"name"`
	IngestedAt   time.Time  `json:"ingested_at"`
	IngestedBy   string     `json:"ingested_by"`
	SupersededBy *int64     `json:"superseded_by,omitempty"`
	SupersededAt *time.Time `json:"superseded_at,omitempty"`
	// Origin is OriginFetched or OriginUpload; AcceptedBy is who accepted
	// an upload ("" until a second person does; a fetched file is
	// accepted as it arrives).
	Origin     string     `json:"origin"`
	AcceptedBy string     `json:"accepted_by,omitempty"`
	AcceptedAt *time.Time `json:"accepted_at,omitempty"`
	// Replayed: these exact bytes were ingested before; nothing changed.
	Replayed bool `json:"replayed"`
	// Superseded is the file this one replaced as the day's current one.
	Superseded int64 `json:"superseded,omitempty"`
	// Current is the day's current file when these bytes were an earlier
	// version sent again (Earlier): it stays current.
	Current int64 `json:"current,omitempty"`
}

// Where a file came from.
const (
	OriginFetched = "FETCHED" // fetched by our job from its issuer's API
	OriginUpload  = "UPLOAD"  // brought by a person
)

// Accepted says whether the file's lines may start automatic resolutions.
func (f FileInfo) Accepted() bool { return f.AcceptedBy != "" }

var gatewayID = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,31}$`)

func (m *FileMeta) validate() error {
	if m.Format == "" {
		switch m.Source {
		case SourceSettlement:
			m.Format = FormatFor(m.Gateway)
		case SourceBank:
			m.Format = FormatBank
		case SourceCore:
			m.Format = FormatCoreCSV
		}
	}
	switch {
	case formatSource[m.Format] == "":
		return booking.Errorf(booking.EINVALID, "UNKNOWN_FORMAT", "Unknown file format %q.", m.Format)
	case formatSource[m.Format] != m.Source:
		return booking.Errorf(booking.EINVALID, "WRONG_FORMAT", "A %s file cannot be in format %s.", m.Source, m.Format)
	case m.Source == SourceSettlement && !gatewayID.MatchString(m.Gateway):
		return booking.Errorf(booking.EINVALID, "NO_GATEWAY", "A settlement file needs its gateway (lower-case id), not %q.", m.Gateway)
	case m.Source != SourceSettlement && m.Gateway != "":
		return booking.Errorf(booking.EINVALID, "NO_GATEWAY", "A %s file belongs to no gateway.", m.Source)
	case m.BusinessDate.IsZero():
		return booking.Errorf(booking.EINVALID, "NO_DATE", "The file needs its business date.")
	case m.By == "" || len(m.By) > 100:
		return booking.Errorf(booking.EINVALID, "NO_ACTOR", "Say who (or which job) ingests the file.")
	case len(m.Name) > 200:
		return booking.Errorf(booking.EINVALID, "NAME_TOO_LONG", "File names are at most 200 characters.")
	case !text(m.Name) || !text(m.By):
		return booking.Errorf(booking.EINVALID, "BAD_TEXT", "The file name and who ingests it must be UTF-8 text without NUL bytes.")
	}
	return nil
}

// text reports whether PostgreSQL can store s: valid UTF-8 without NUL.
func text(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }

// Ingest stores a file and its lines with their lineage, in one
// transaction: a file that fails to parse changes nothing. The same bytes
// for the same source, gateway and day are a no-op (Replayed); different
// bytes supersede the day's current file, and both stay. Memory stays
// bounded: lines stream into COPY while the hash is computed.
func (s *Service) Ingest(ctx context.Context, meta FileMeta, body io.Reader) (FileInfo, error) {
	if err := meta.validate(); err != nil {
		return FileInfo{}, err
	}
	day := dateOnly(meta.BusinessDate)
	var info FileInfo
	errReplay := errors.New("replayed")
	// Not retried: the body streams once.
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('recon.file|' || $1 || '|' || $2 || '|' || $3, 0))`,
			meta.Source, meta.Gateway, day.Format(time.DateOnly)); err != nil {
			return err
		}
		var id int64
		if err := tx.QueryRow(ctx, `SELECT nextval('recon_files_id_seq')`).Scan(&id); err != nil {
			return err
		}
		// The new file points at itself until it is complete, so it is not
		// the day's current file while its lines load.
		if _, err := tx.Exec(ctx, `INSERT INTO recon_files (id, source, gateway, format, business_date, sha256, row_count, byte_count, name,
			ingested_by, superseded_by) VALUES ($1, $2, $3, $4, $5, repeat('0', 64), 0, 0, $6, $7, $1)`,
			id, meta.Source, meta.Gateway, meta.Format, pgDate(day), meta.Name, meta.By); err != nil {
			return fmt.Errorf("record file: %w", err)
		}
		h := sha256.New()
		counter := &countingReader{r: io.TeeReader(body, h), limit: s.cfg.MaxFileBytes}
		p, err := newParser(meta.Format, counter)
		if counter.over {
			return s.tooLarge()
		}
		if err != nil {
			return booking.Errorf(booking.EINVALID, "BAD_FILE", "%s file: %v", meta.Format, err)
		}
		src := &lineSource{p: p, file: id, meta: meta, day: day}
		n, err := tx.CopyFrom(ctx, pgx.Identifier{"recon_lines"}, lineColumns, src)
		if counter.over {
			return s.tooLarge()
		}
		if src.err != nil {
			return booking.Errorf(booking.EINVALID, "BAD_FILE", "%s file: %v", meta.Format, src.err)
		}
		if err != nil {
			return fmt.Errorf("store lines: %w", err)
		}
		io.Copy(h, counter) //nolint:errcheck // the hash covers any trailing bytes too
		if counter.over {
			return s.tooLarge()
		}
		sum := hex.EncodeToString(h.Sum(nil))

		var prior int64
		err = tx.QueryRow(ctx, `SELECT id FROM recon_files WHERE source = $1 AND gateway = $2 AND business_date = $3 AND sha256 = $4`,
			meta.Source, meta.Gateway, pgDate(day), sum).Scan(&prior)
		if err == nil {
			info.ID = prior
			if meta.Fetched {
				// The issuer's own API sent the very bytes a person uploaded:
				// the upload is what the issuer says, accepted.
				if err := s.acceptFetched(ctx, tx, prior, meta.By); err != nil {
					return err
				}
			}
			return errReplay
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		var old int64
		err = tx.QueryRow(ctx, `UPDATE recon_files SET superseded_by = $4, superseded_at = now()
			WHERE source = $1 AND gateway = $2 AND business_date = $3 AND superseded_by IS NULL RETURNING id`,
			meta.Source, meta.Gateway, pgDate(day), id).Scan(&old)
		switch {
		case err == nil:
			if _, err := tx.Exec(ctx, `UPDATE recon_lines SET current = false WHERE file_id = $1`, old); err != nil {
				return fmt.Errorf("supersede file %d: %w", old, err)
			}
			info.Superseded = old
		case !errors.Is(err, pgx.ErrNoRows):
			return fmt.Errorf("supersede: %w", err)
		}
		if _, err := tx.Exec(ctx, `UPDATE recon_files SET sha256 = $2, row_count = $3, byte_count = $4, superseded_by = NULL,
				origin = CASE WHEN $5 THEN 'FETCHED' ELSE 'UPLOAD' END,
				accepted_by = CASE WHEN $5 THEN ingested_by END, accepted_at = CASE WHEN $5 THEN now() END WHERE id = $1`,
			id, sum, n, counter.n, meta.Fetched); err != nil {
			return fmt.Errorf("record file: %w", err)
		}
		if err := audit.Write(ctx, tx, meta.By, "recon.ingest", fmt.Sprintf("recon_file:%d", id), map[string]any{
			"source": meta.Source, "gateway": meta.Gateway, "business_date": day.Format(time.DateOnly), "sha256": sum,
			"rows": n, "superseded": old, "name": meta.Name, "fetched": meta.Fetched}); err != nil {
			return err
		}
		info.ID = id
		return nil
	})
	replayed := errors.Is(err, errReplay)
	if err != nil && !replayed {
		return FileInfo{}, fmt.Errorf("ingest %s %s %s: %w", meta.Source, meta.Gateway, day.Format(time.DateOnly), err)
	}
	got, err := s.File(ctx, info.ID)
	if err != nil {
		return FileInfo{}, err
	}
	got.Replayed, got.Superseded = replayed, info.Superseded
	if got.Earlier() {
		// Never made current by being sent again: a person decides that
		// (MakeCurrent). Said loudly, since a job's resend has no one to tell.
		if got.Current, err = currentFile(ctx, s.pool, got.Source, got.Gateway, day); err != nil {
			return FileInfo{}, err
		}
		s.log.WarnContext(ctx, "recon file is an earlier version sent again; the current version stays", "id", got.ID,
			"source", got.Source, "gateway", got.Gateway, "date", day.Format(time.DateOnly), "current", got.Current, "by", meta.By)
		// On the audit page too: a job's resend has nobody watching its log.
		if err := audit.Write(ctx, s.pool, meta.By, "recon.ingest_earlier_version", fmt.Sprintf("recon_file:%d", got.ID), map[string]any{
			"current": got.Current, "name": meta.Name, "fetched": meta.Fetched}); err != nil {
			return FileInfo{}, err
		}
	}
	if !replayed && got.Rows >= analyzeRows {
		// A day's file can be most of the table: without fresh statistics
		// the run would plan a million index probes for "a few" lines. Only
		// the columns runs join and filter on: the raw line is the widest.
		if _, err := s.pool.Exec(ctx, `ANALYZE recon_lines (file_id, source, gateway, business_date, kind, ext_ref, parent_ref,
			merchant_uuid, payout_id, current)`); err != nil {
			s.log.WarnContext(ctx, "recon lines not analyzed", "file", got.ID, "err", err)
		}
	}
	s.log.InfoContext(ctx, "recon file ingested", "id", got.ID, "source", got.Source, "gateway", got.Gateway,
		"date", day.Format(time.DateOnly), "rows", got.Rows, "replayed", replayed, "superseded", info.Superseded, "by", meta.By)
	return got, nil
}

// analyzeRows is the size of file after which ingest refreshes the lines'
// statistics.
const analyzeRows = 10_000

const fileCols = `id, source, gateway, format, business_date, sha256, row_count, byte_count, name, ingested_at, ingested_by,
	superseded_by, superseded_at, origin, coalesce(accepted_by, ''), accepted_at`

func scanFile(row pgx.Row) (FileInfo, error) {
	var f FileInfo
	err := row.Scan(&f.ID, &f.Source, &f.Gateway, &f.Format, &f.BusinessDate, &f.SHA256, &f.Rows, &f.Bytes, &f.Name,
		&f.IngestedAt, &f.IngestedBy, &f.SupersededBy, &f.SupersededAt, &f.Origin, &f.AcceptedBy, &f.AcceptedAt)
	return f, err
}

// File returns one ingested file's lineage.
func (s *Service) File(ctx context.Context, id int64) (FileInfo, error) {
	f, err := scanFile(s.pool.QueryRow(ctx, `SELECT `+fileCols+` FROM recon_files WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return f, booking.Errorf(booking.ENOTFOUND, "NO_SUCH_FILE", "No file %d.", id)
	}
	if err != nil {
		return f, fmt.Errorf("read file %d: %w", id, err)
	}
	return f, nil
}

// Files lists every file of a source, gateway and day, current first.
func (s *Service) Files(ctx context.Context, source, gateway string, day time.Time) ([]FileInfo, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+fileCols+` FROM recon_files WHERE source = $1 AND gateway = $2 AND business_date = $3
		ORDER BY superseded_by IS NOT NULL, id DESC`, source, gateway, pgDate(day))
	if err != nil {
		return nil, fmt.Errorf("list files: %w", err)
	}
	defer rows.Close()
	var out []FileInfo
	for rows.Next() {
		f, err := scanFile(rows)
		if err != nil {
			return nil, fmt.Errorf("list files: %w", err)
		}
		out = append(out, f)
	}
	return out, rows.Err()
}

var lineColumns = []string{"file_id", "line_no", "source", "gateway", "business_date", "kind", "ext_ref", "merchant_ref",
	"parent_ref", "method", "amount_paise", "fee_paise", "tax_paise", "net_paise", "event_at", "value_date", "payout_id",
	"status", "passengers", "raw", "merchant_uuid"}

// lineSource feeds parsed lines to COPY one at a time.
type lineSource struct {
	p    parser
	file int64
	meta FileMeta
	day  time.Time
	cur  Line
	err  error
}

func (l *lineSource) Next() bool {
	line, err := l.p.next()
	if errors.Is(err, io.EOF) {
		return false
	}
	if err != nil {
		l.err = err
		return false
	}
	l.cur = line
	return true
}

func (l *lineSource) Values() ([]any, error) {
	c := l.cur
	gw := l.meta.Gateway
	if c.Gateway != "" {
		gw = c.Gateway
	}
	var value pgtype.Date
	if c.ValueDate != nil {
		value = pgDate(*c.ValueDate)
	}
	return []any{l.file, c.LineNo, l.meta.Source, gw, pgDate(l.day), c.Kind, c.ExtRef, c.MerchantRef, c.ParentRef, c.Method,
		c.Amount, c.Fee, c.Tax, c.Net, c.EventAt, value, c.PayoutID, c.Status, c.Passengers, c.Raw, merchantUUID(c.MerchantRef)}, nil
}

// merchantUUID is a merchant reference as our uuid, or NULL when it is not
// one in its canonical 8-4-4-4-12 form (recon_uuid's rule, which uuid.Parse
// alone is laxer than).
func merchantUUID(ref string) pgtype.UUID {
	if len(ref) != 36 || ref[8] != '-' || ref[13] != '-' || ref[18] != '-' || ref[23] != '-' {
		return pgtype.UUID{}
	}
	u, err := uuid.Parse(ref)
	if err != nil {
		return pgtype.UUID{}
	}
	return pgtype.UUID{Bytes: u, Valid: true}
}

func (l *lineSource) Err() error { return l.err }

// countingReader counts what it reads and refuses to read past limit
// bytes (over says it tried).
type countingReader struct {
	r     io.Reader
	n     int64
	limit int64
	over  bool
}

func (c *countingReader) Read(p []byte) (int, error) {
	if c.over {
		return 0, errFileTooLarge
	}
	if c.limit > 0 && int64(len(p)) > c.limit-c.n+1 {
		// One byte past the limit is enough to know.
		p = p[:c.limit-c.n+1]
	}
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.limit > 0 && c.n > c.limit {
		c.over = true
		return n, errFileTooLarge
	}
	return n, err
}

var errFileTooLarge = errors.New("file too large")

// tooLarge is the refusal of a file past the size limit.
func (s *Service) tooLarge() error {
	return TooLarge(s.cfg.MaxFileBytes)
}

// TooLarge is the refusal of a file larger than limit bytes; the console
// answers it before reading the upload when its size is known.
func TooLarge(limit int64) error {
	return booking.Errorf(booking.EINVALID, ReasonFileTooLarge, "The file is larger than the limit of %s; nothing was stored. "+
		"Split it by business date or ask an administrator.", sizeText(limit))
}

// ReasonFileTooLarge is the reason of a file refused for its size.
const ReasonFileTooLarge = "FILE_TOO_LARGE"

// sizeText is a byte count for people: "512 MB", "1.5 KB".
func sizeText(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MB", n>>20)
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

// pgDate is t's calendar day as a PostgreSQL date, whatever the session's zone.
func pgDate(t time.Time) pgtype.Date { return pgtype.Date{Time: dateOnly(t), Valid: true} }

// dateOnly is t's calendar day in its own location, as a UTC midnight
// for a PostgreSQL date.
func dateOnly(t time.Time) time.Time {
	y, m, d := t.Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}
