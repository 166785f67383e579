package recon

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"tatkal/booking"
	"tatkal/booking/audit"
	"tatkal/booking/db"
)

// File versions: every file of a source, gateway and day is a version of
// that day's record; one is current (the one runs read). A newer file
// supersedes the current one as it is ingested; a person may put an
// earlier version back (MakeCurrent), audited, and compare two versions
// line by line (Diff). The same bytes sent again, fetched or uploaded,
// are never made current by that: Ingest says so (FileInfo.Earlier) and
// changes nothing.

// Earlier says an ingest was an earlier version sent again: these exact
// bytes are a file that is no longer the day's current one, which stays
// current.
func (f FileInfo) Earlier() bool { return f.Replayed && f.SupersededBy != nil }

// currentFile is the id of the day's current file of a source and gateway (0: none).
func currentFile(ctx context.Context, q db.Querier, source, gateway string, day time.Time) (int64, error) {
	var id int64
	err := q.QueryRow(ctx, `SELECT id FROM recon_files WHERE source = $1 AND gateway = $2 AND business_date = $3 AND superseded_by IS NULL`,
		source, gateway, pgDate(day)).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("current file: %w", err)
	}
	return id, nil
}

// MakeCurrent makes an earlier version the day's current file, as a
// person's action with their reason, audited: the file current until now
// is superseded by it (both stay), and the next run of the day reads its
// lines. Acceptance is the file's own: an upload nobody else accepted
// stays unaccepted and starts no automatic resolution until a second
// person does (accept.go); and whoever put it back is, like its uploader,
// behind what its lines raise (peopleBehind), so they approve none of it.
func (s *Service) MakeCurrent(ctx context.Context, id int64, actor, note string) (FileInfo, error) {
	if err := checkActor(actor); err != nil {
		return FileInfo{}, err
	}
	if err := checkNote(note, true); err != nil {
		return FileInfo{}, err
	}
	var before int64
	err := db.Transact(ctx, s.pool, func(tx pgx.Tx) error {
		f, err := scanFile(tx.QueryRow(ctx, `SELECT `+fileCols+` FROM recon_files WHERE id = $1`, id))
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return booking.Errorf(booking.ENOTFOUND, "NO_SUCH_FILE", "No file %d.", id)
		case err != nil:
			return fmt.Errorf("make file %d current: %w", id, err)
		}
		// Ingest's lock: no file of the day is ingested meanwhile.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('recon.file|' || $1 || '|' || $2 || '|' || $3, 0))`,
			f.Source, f.Gateway, dateOnly(f.BusinessDate).Format(time.DateOnly)); err != nil {
			return err
		}
		if f, err = scanFile(tx.QueryRow(ctx, `SELECT `+fileCols+` FROM recon_files WHERE id = $1 FOR UPDATE`, id)); err != nil {
			return fmt.Errorf("make file %d current: %w", id, err)
		}
		if f.SupersededBy == nil {
			return booking.Errorf(booking.ECONFLICT, "ALREADY_CURRENT", "File %d is the current version of its day already.", id)
		}
		if *f.SupersededBy == f.ID {
			return booking.Errorf(booking.ECONFLICT, "FILE_LOADING", "File %d is still being ingested.", id)
		}
		err = tx.QueryRow(ctx, `UPDATE recon_files SET superseded_by = $4, superseded_at = now()
			WHERE source = $1 AND gateway = $2 AND business_date = $3 AND superseded_by IS NULL RETURNING id`,
			f.Source, f.Gateway, pgDate(f.BusinessDate), id).Scan(&before)
		switch {
		case err == nil:
			if _, err := tx.Exec(ctx, `UPDATE recon_lines SET current = false WHERE file_id = $1`, before); err != nil {
				return fmt.Errorf("supersede file %d: %w", before, err)
			}
		case !errors.Is(err, pgx.ErrNoRows):
			return fmt.Errorf("supersede: %w", err)
		}
		if _, err := tx.Exec(ctx, `UPDATE recon_files SET superseded_by = NULL, superseded_at = NULL, current_by = $2, current_at = now()
			WHERE id = $1`, id, actor); err != nil {
			return fmt.Errorf("make file %d current: %w", id, err)
		}
		if _, err := tx.Exec(ctx, `UPDATE recon_lines SET current = true WHERE file_id = $1`, id); err != nil {
			return fmt.Errorf("make file %d current: %w", id, err)
		}
		return audit.Write(ctx, tx, actor, "recon.file_make_current", fmt.Sprintf("recon_file:%d", id), map[string]any{
			"source": f.Source, "gateway": f.Gateway, "business_date": dateOnly(f.BusinessDate).Format(time.DateOnly),
			"sha256": f.SHA256, "superseded": before, "origin": f.Origin, "accepted_by": f.AcceptedBy, "note": note})
	})
	if err != nil {
		return FileInfo{}, err
	}
	got, err := s.File(ctx, id)
	if err != nil {
		return FileInfo{}, err
	}
	got.Superseded = before
	s.log.InfoContext(ctx, "recon file made current", "id", id, "superseded", before, "by", actor)
	return got, nil
}

// KindTotal is one kind of line's count and sums in a file.
type KindTotal struct {
	Kind   string `json:"kind"`
	Count  int    `json:"count"`
	Amount int64  `json:"amount_paise"`
	Fee    int64  `json:"fee_paise"`
	Tax    int64  `json:"tax_paise"`
	Net    int64  `json:"net_paise"`
}

// Totals are a file's lines summed by kind (captures, refunds, …), in
// the order lineKinds lists them, and over all.
type Totals struct {
	Lines int         `json:"lines"`
	Kinds []KindTotal `json:"kinds"`
	All   KindTotal   `json:"all"`
}

// lineKinds is the order totals list the kinds of line in.
var lineKinds = []string{LineCapture, LineRefund, LineChargeback, LinePayout, LineBooking}

func (t *Totals) add(l Line) {
	t.Lines++
	i := -1
	for j, k := range t.Kinds {
		if k.Kind == l.Kind {
			i = j
		}
	}
	if i < 0 {
		t.Kinds = append(t.Kinds, KindTotal{Kind: l.Kind})
		i = len(t.Kinds) - 1
	}
	for _, k := range []*KindTotal{&t.Kinds[i], &t.All} {
		k.Count++
		k.Amount += l.Amount
		k.Fee += l.Fee
		k.Tax += l.Tax
		k.Net += l.Net
	}
}

// sort puts the kinds in lineKinds' order.
func (t *Totals) sort() {
	out := make([]KindTotal, 0, len(t.Kinds))
	for _, k := range lineKinds {
		for _, x := range t.Kinds {
			if x.Kind == k {
				out = append(out, x)
			}
		}
	}
	t.Kinds = out
	t.All.Kind = "ALL"
}

// FileTotals sums an ingested file's lines by kind.
func (s *Service) FileTotals(ctx context.Context, id int64) (Totals, error) {
	rows, err := s.pool.Query(ctx, `SELECT kind, count(*), sum(amount_paise)::bigint, sum(fee_paise)::bigint, sum(tax_paise)::bigint,
		sum(net_paise)::bigint FROM recon_lines WHERE file_id = $1 GROUP BY kind`, id)
	if err != nil {
		return Totals{}, fmt.Errorf("file %d totals: %w", id, err)
	}
	var t Totals
	ks, err := pgx.CollectRows(rows, pgx.RowToStructByPos[KindTotal])
	if err != nil {
		return Totals{}, fmt.Errorf("file %d totals: %w", id, err)
	}
	for _, k := range ks {
		t.Kinds = append(t.Kinds, k)
		t.Lines += k.Count
		t.All.Count += k.Count
		t.All.Amount += k.Amount
		t.All.Fee += k.Fee
		t.All.Tax += k.Tax
		t.All.Net += k.Net
	}
	t.sort()
	return t, nil
}

// Line changes of a diff.
const (
	LineAdded   = "added"
	LineRemoved = "removed"
	LineChanged = "changed"
)

// DiffLine is one line that differs between two versions: added (only in
// the newer), removed (only in the older) or changed (the same kind and
// reference, other content), with both sides' amounts.
type DiffLine struct {
	Change               string `json:"change"`
	Kind                 string `json:"kind"`
	Ref                  string `json:"ref"`
	OldLineNo, NewLineNo int    `json:"-"`
	OldAmount, NewAmount int64  `json:"-"`
	OldFee, NewFee       int64  `json:"-"`
	OldTax, NewTax       int64  `json:"-"`
	OldNet, NewNet       int64  `json:"-"`
	OldRaw, NewRaw       string `json:"-"`
}

// Diff is what changed from one version of a day's file to another.
type Diff struct {
	Old, New                FileInfo
	OldTotals, NewTotals    Totals
	Added, Removed, Changed int
	Lines                   []DiffLine // the first limit, in the newer file's order
}

// Diff compares two versions of the same day's file line by line. Lines
// pair up by kind and reference (the n-th line of a reference with the
// n-th, so a duplicated line shows as added); a pair whose raw line
// differs is changed, whatever moved in the file around it. At most limit
// lines are listed; the counts are all of them.
func (s *Service) Diff(ctx context.Context, oldID, newID int64, limit int) (Diff, error) {
	var d Diff
	var err error
	if d.Old, err = s.File(ctx, oldID); err != nil {
		return d, err
	}
	if d.New, err = s.File(ctx, newID); err != nil {
		return d, err
	}
	if d.Old.Source != d.New.Source || d.Old.Gateway != d.New.Gateway || !dateOnly(d.Old.BusinessDate).Equal(dateOnly(d.New.BusinessDate)) {
		return d, booking.Errorf(booking.EINVALID, "NOT_VERSIONS", "Files %d and %d are not versions of the same day's file.", oldID, newID)
	}
	if oldID == newID {
		return d, booking.Errorf(booking.EINVALID, "SAME_FILE", "Pick two different versions to compare.")
	}
	if d.OldTotals, err = s.FileTotals(ctx, oldID); err != nil {
		return d, err
	}
	if d.NewTotals, err = s.FileTotals(ctx, newID); err != nil {
		return d, err
	}
	const pairs = `WITH a AS (SELECT *, row_number() OVER (PARTITION BY kind, ext_ref ORDER BY line_no) AS n FROM recon_lines WHERE file_id = $1)
		, b AS (SELECT *, row_number() OVER (PARTITION BY kind, ext_ref ORDER BY line_no) AS n FROM recon_lines WHERE file_id = $2)
		, d AS (SELECT CASE WHEN a.id IS NULL THEN 'added' WHEN b.id IS NULL THEN 'removed' ELSE 'changed' END AS change,
				coalesce(b.kind, a.kind) AS kind, coalesce(b.ext_ref, a.ext_ref) AS ref,
				coalesce(a.line_no, 0) AS old_no, coalesce(b.line_no, 0) AS new_no,
				coalesce(a.amount_paise, 0) AS old_amount, coalesce(b.amount_paise, 0) AS new_amount,
				coalesce(a.fee_paise, 0) AS old_fee, coalesce(b.fee_paise, 0) AS new_fee,
				coalesce(a.tax_paise, 0) AS old_tax, coalesce(b.tax_paise, 0) AS new_tax,
				coalesce(a.net_paise, 0) AS old_net, coalesce(b.net_paise, 0) AS new_net,
				coalesce(a.raw, '') AS old_raw, coalesce(b.raw, '') AS new_raw
			FROM a FULL JOIN b ON a.kind = b.kind AND a.ext_ref = b.ext_ref AND a.n = b.n
			WHERE a.raw IS DISTINCT FROM b.raw)`
	if err := s.pool.QueryRow(ctx, pairs+` SELECT count(*) FILTER (WHERE change = 'added'), count(*) FILTER (WHERE change = 'removed'),
		count(*) FILTER (WHERE change = 'changed') FROM d`, oldID, newID).Scan(&d.Added, &d.Removed, &d.Changed); err != nil {
		return d, fmt.Errorf("diff files %d and %d: %w", oldID, newID, err)
	}
	rows, err := s.pool.Query(ctx, pairs+` SELECT * FROM d ORDER BY CASE WHEN new_no > 0 THEN new_no ELSE old_no END, old_no LIMIT $3`,
		oldID, newID, limit)
	if err != nil {
		return d, fmt.Errorf("diff files %d and %d: %w", oldID, newID, err)
	}
	d.Lines, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (DiffLine, error) {
		var l DiffLine
		err := r.Scan(&l.Change, &l.Kind, &l.Ref, &l.OldLineNo, &l.NewLineNo, &l.OldAmount, &l.NewAmount, &l.OldFee, &l.NewFee,
			&l.OldTax, &l.NewTax, &l.OldNet, &l.NewNet, &l.OldRaw, &l.NewRaw)
		return l, err
	})
	if err != nil {
		return d, fmt.Errorf("diff files %d and %d: %w", oldID, newID, err)
	}
	return d, nil
}
