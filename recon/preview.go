package recon

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"tatkal/booking"
	"tatkal/booking/db"
)

// An upload is previewed before it is committed: its lines parsed and
// totalled by the parsers Ingest uses, its bytes kept aside
// (recon_upload_previews, nowhere near the files and lines), and only the
// clerk's confirmation ingests them. Cancelling deletes them: nothing of
// the upload stays. Bytes that are a version of the day's file already
// (current or earlier) are said so at once and not kept at all.

// Preview is an upload's totals awaiting its clerk's word.
type Preview struct {
	ID        uuid.UUID `json:"id"`
	Meta      FileMeta  `json:"meta"`
	SHA256    string    `json:"sha256"`
	Bytes     int64     `json:"bytes"`
	Totals    Totals    `json:"totals"`
	CreatedAt time.Time `json:"created_at"`
	// Identical: these bytes are an ingested file already (Same); nothing
	// was kept, and confirming is not offered.
	Identical bool     `json:"identical"`
	Same      FileInfo `json:"same"`
	// Current is the day's current file, if any, with its totals, to
	// compare with.
	Current       *FileInfo `json:"current,omitempty"`
	CurrentTotals Totals    `json:"current_totals"`
}

// previewTTL is how long an unconfirmed preview's bytes are kept.
const previewTTL = 24 * time.Hour

// chunkBytes is the size of a kept upload's rows.
const chunkBytes = 1 << 20

// PreviewUpload parses and totals an upload, keeping its bytes for
// ConfirmUpload. A file that does not parse is refused as Ingest refuses
// it, and nothing is kept.
func (s *Service) PreviewUpload(ctx context.Context, meta FileMeta, body io.Reader) (Preview, error) {
	if err := meta.validate(); err != nil {
		return Preview{}, err
	}
	meta.Fetched = false // an upload, whatever the caller says
	meta.BusinessDate = dateOnly(meta.BusinessDate)
	p := Preview{ID: uuid.New(), Meta: meta}
	if _, err := s.pool.Exec(ctx, `DELETE FROM recon_upload_previews WHERE created_at < now() - make_interval(secs => $1)`,
		previewTTL.Seconds()); err != nil {
		return p, fmt.Errorf("purge previews: %w", err)
	}
	errSame := errors.New("identical")
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO recon_upload_previews (id, uploaded_by, source, gateway, format, business_date, name,
			sha256, byte_count, totals) VALUES ($1, $2, $3, $4, $5, $6, $7, '', 0, '{}')`,
			p.ID, meta.By, meta.Source, meta.Gateway, meta.Format, pgDate(meta.BusinessDate), meta.Name); err != nil {
			return fmt.Errorf("keep preview: %w", err)
		}
		h := sha256.New()
		counter := &countingReader{r: body, limit: s.cfg.MaxFileBytes}
		keep := &chunkWriter{ctx: ctx, tx: tx, id: p.ID}
		in := io.TeeReader(io.TeeReader(counter, h), keep)
		parser, err := newParser(meta.Format, in)
		if counter.over {
			return s.tooLarge()
		}
		if keep.err != nil {
			return keep.err
		}
		if err != nil {
			return booking.Errorf(booking.EINVALID, "BAD_FILE", "%s file: %v", meta.Format, err)
		}
		for {
			l, err := parser.next()
			if errors.Is(err, io.EOF) {
				break
			}
			if counter.over {
				return s.tooLarge()
			}
			if keep.err != nil {
				return keep.err
			}
			if err != nil {
				return booking.Errorf(booking.EINVALID, "BAD_FILE", "%s file: %v", meta.Format, err)
			}
			p.Totals.add(l)
		}
		io.Copy(io.Discard, in) //nolint:errcheck // the hash and the kept bytes cover any trailing bytes too
		if counter.over {
			return s.tooLarge()
		}
		if err := keep.flush(); err != nil {
			return err
		}
		p.Totals.sort()
		p.SHA256, p.Bytes = hex.EncodeToString(h.Sum(nil)), counter.n
		same, err := scanFile(tx.QueryRow(ctx, `SELECT `+fileCols+` FROM recon_files WHERE source = $1 AND gateway = $2
			AND business_date = $3 AND sha256 = $4`, meta.Source, meta.Gateway, pgDate(meta.BusinessDate), p.SHA256))
		switch {
		case err == nil:
			p.Identical, p.Same = true, same
			return errSame // nothing kept
		case !errors.Is(err, pgx.ErrNoRows):
			return fmt.Errorf("earlier versions: %w", err)
		}
		_, err = tx.Exec(ctx, `UPDATE recon_upload_previews SET sha256 = $2, byte_count = $3, totals = $4 WHERE id = $1`,
			p.ID, p.SHA256, p.Bytes, p.Totals)
		return err
	})
	if err != nil && !errors.Is(err, errSame) {
		return Preview{}, fmt.Errorf("preview %s %s %s: %w", meta.Source, meta.Gateway, meta.BusinessDate.Format(time.DateOnly), err)
	}
	if err := s.previewCurrent(ctx, &p); err != nil {
		return Preview{}, err
	}
	p.CreatedAt = s.cfg.Now()
	s.log.InfoContext(ctx, "recon upload previewed", "preview", p.ID, "source", meta.Source, "gateway", meta.Gateway,
		"date", meta.BusinessDate.Format(time.DateOnly), "lines", p.Totals.Lines, "identical", p.Identical, "by", meta.By)
	return p, nil
}

// previewCurrent fills in the day's current file and its totals.
func (s *Service) previewCurrent(ctx context.Context, p *Preview) error {
	cur, err := currentFile(ctx, s.pool, p.Meta.Source, p.Meta.Gateway, p.Meta.BusinessDate)
	if err != nil || cur == 0 {
		return err
	}
	f, err := s.File(ctx, cur)
	if err != nil {
		return err
	}
	p.Current = &f
	p.CurrentTotals, err = s.FileTotals(ctx, cur)
	return err
}

// UploadPreview reads back a kept preview (ENOTFOUND once confirmed,
// cancelled or purged).
func (s *Service) UploadPreview(ctx context.Context, id uuid.UUID) (Preview, error) {
	p := Preview{ID: id}
	var day time.Time
	err := s.pool.QueryRow(ctx, `SELECT uploaded_by, source, gateway, format, business_date, name, sha256, byte_count, totals, created_at
		FROM recon_upload_previews WHERE id = $1`, id).Scan(&p.Meta.By, &p.Meta.Source, &p.Meta.Gateway, &p.Meta.Format, &day,
		&p.Meta.Name, &p.SHA256, &p.Bytes, &p.Totals, &p.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return p, booking.Errorf(booking.ENOTFOUND, "NO_SUCH_PREVIEW", "No upload %s waits for confirmation: it was confirmed, cancelled "+
			"or left over a day. Upload the file again.", id)
	}
	if err != nil {
		return p, fmt.Errorf("read preview %s: %w", id, err)
	}
	p.Meta.BusinessDate = day
	return p, s.previewCurrent(ctx, &p)
}

// ConfirmUpload ingests a previewed upload as its uploader (only they
// confirm it) and drops the kept bytes. Ingest's rules hold: the file is
// an upload, which a second person accepts before its lines start any
// automatic resolution.
func (s *Service) ConfirmUpload(ctx context.Context, id uuid.UUID, actor string) (FileInfo, error) {
	p, err := s.UploadPreview(ctx, id)
	if err != nil {
		return FileInfo{}, err
	}
	if p.Meta.By != actor {
		return FileInfo{}, booking.Errorf(booking.EFORBIDDEN, "NOT_YOUR_UPLOAD", "%s uploaded this file; only they confirm or cancel it.", p.Meta.By)
	}
	f, err := s.Ingest(ctx, p.Meta, &chunkReader{ctx: ctx, q: s.pool, id: id})
	if err != nil && booking.ErrorCode(err) == booking.EINTERNAL {
		return FileInfo{}, err
	}
	if _, derr := s.pool.Exec(ctx, `DELETE FROM recon_upload_previews WHERE id = $1`, id); derr != nil {
		return FileInfo{}, fmt.Errorf("drop preview %s: %w", id, derr)
	}
	if err == nil && f.SHA256 != p.SHA256 {
		return f, fmt.Errorf("preview %s: ingested %s, previewed %s", id, f.SHA256, p.SHA256)
	}
	return f, err
}

// CancelUpload drops a previewed upload's bytes: nothing of it stays.
func (s *Service) CancelUpload(ctx context.Context, id uuid.UUID, actor string) error {
	return db.Transact(ctx, s.pool, func(tx pgx.Tx) error {
		var by string
		err := tx.QueryRow(ctx, `SELECT uploaded_by FROM recon_upload_previews WHERE id = $1 FOR UPDATE`, id).Scan(&by)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return booking.Errorf(booking.ENOTFOUND, "NO_SUCH_PREVIEW", "No upload %s waits for confirmation.", id)
		case err != nil:
			return fmt.Errorf("cancel preview %s: %w", id, err)
		case by != actor:
			return booking.Errorf(booking.EFORBIDDEN, "NOT_YOUR_UPLOAD", "%s uploaded this file; only they confirm or cancel it.", by)
		}
		_, err = tx.Exec(ctx, `DELETE FROM recon_upload_previews WHERE id = $1`, id)
		return err
	})
}

// chunkWriter keeps an upload's bytes in rows of chunkBytes.
type chunkWriter struct {
	ctx context.Context
	tx  pgx.Tx
	id  uuid.UUID
	buf []byte
	seq int
	err error
}

func (c *chunkWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	c.buf = append(c.buf, p...)
	for len(c.buf) >= chunkBytes && c.err == nil {
		c.err = c.put(c.buf[:chunkBytes])
		c.buf = append(c.buf[:0], c.buf[chunkBytes:]...)
	}
	return len(p), c.err
}

func (c *chunkWriter) flush() error {
	if c.err == nil && len(c.buf) > 0 {
		c.err = c.put(c.buf)
		c.buf = c.buf[:0]
	}
	return c.err
}

func (c *chunkWriter) put(b []byte) error {
	c.seq++
	if _, err := c.tx.Exec(c.ctx, `INSERT INTO recon_upload_chunks (preview_id, seq, data) VALUES ($1, $2, $3)`, c.id, c.seq, b); err != nil {
		return fmt.Errorf("keep upload: %w", err)
	}
	return nil
}

// chunkReader reads a kept upload back, a chunk at a time.
type chunkReader struct {
	ctx context.Context
	q   db.Querier
	id  uuid.UUID
	seq int
	buf []byte
	eof bool
}

func (c *chunkReader) Read(p []byte) (int, error) {
	for len(c.buf) == 0 {
		if c.eof {
			return 0, io.EOF
		}
		c.seq++
		err := c.q.QueryRow(c.ctx, `SELECT data FROM recon_upload_chunks WHERE preview_id = $1 AND seq = $2`, c.id, c.seq).Scan(&c.buf)
		if errors.Is(err, pgx.ErrNoRows) {
			c.eof = true
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("read kept upload: %w", err)
		}
	}
	n := copy(p, c.buf)
	c.buf = c.buf[n:]
	return n, nil
}
