package recon

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"tatkal/booking"
)

// Versions of a day's settlement file, as finance meets them: the
// gateway's file (v1), a person's corrected copy (v2: a line dropped, an
// amount changed, a line added) that supersedes it; the diff shows
// exactly those three lines; making v1 current again is what the next run
// reads; v2's bytes sent again say they are an earlier version and change
// nothing; whoever put a version back is behind what it raises.
func TestFileVersions(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	const gw = "swiftpay"
	m := w.make(cleanSet(gw, 4)...)
	w.ingestDay(gw)
	v1, err := w.svc.Files(w.ctx, SourceSettlement, gw, w.day)
	w.must(err)
	real := w.realFile(SourceSettlement, gw, w.day)
	dropped, changed := m[1], m[2]
	var changedLine int
	edited := w.editCSV(real, func(r []string) bool {
		if r[0] != "CAPTURE" {
			return true
		}
		switch r[2] {
		case dropped.ID.String():
			return false
		case changed.ID.String():
			r[6] = rupeesOf(w.paiseOf(r[6]) + 1234)
			r[9] = rupeesOf(w.paiseOf(r[9]) + 1234)
		}
		return true
	}, []string{"CAPTURE", "swp_added_1", "ord-added-1", "", "", "UPI", "777.00", "0.00", "0.00", "777.00",
		w.day.Format("02/01/2006") + " 12:00:00", w.day.AddDate(0, 0, 1).Format("02/01/2006"), "SWP" + w.day.Format("20060102")})
	for i, l := range strings.Split(real, "\n") {
		if strings.Contains(l, changed.ID.String()) && strings.HasPrefix(l, "CAPTURE") {
			changedLine = i + 1
		}
	}
	v2 := w.upload(SourceSettlement, gw, w.day, edited)
	if v2.Superseded != v1[0].ID {
		t.Fatalf("v2 supersedes %d, want v1 %d", v2.Superseded, v1[0].ID)
	}
	first := w.run(gw)
	if !slices.Contains(first.Files, v2.ID) || slices.Contains(first.Files, v1[0].ID) {
		t.Fatalf("the run read files %v, want v2 %d", first.Files, v2.ID)
	}

	// The diff: one removed, one changed, one added, with their amounts.
	d, err := w.svc.Diff(w.ctx, v1[0].ID, v2.ID, 100)
	w.must(err)
	if d.Added != 1 || d.Removed != 1 || d.Changed != 1 || len(d.Lines) != 3 {
		t.Fatalf("diff: %d added, %d removed, %d changed: %+v", d.Added, d.Removed, d.Changed, d.Lines)
	}
	byChange := map[string]DiffLine{}
	for _, l := range d.Lines {
		byChange[l.Change] = l
	}
	if l := byChange[LineRemoved]; l.Ref != dropped.PSPRef || l.OldAmount != dropped.Amount || l.NewAmount != 0 || l.NewRaw != "" {
		t.Errorf("removed %+v, want %s of %d", l, dropped.PSPRef, dropped.Amount)
	}
	if l := byChange[LineChanged]; l.Ref != changed.PSPRef || l.OldAmount != changed.Amount || l.NewAmount != changed.Amount+1234 ||
		l.NewNet-l.OldNet != 1234 || l.OldLineNo != changedLine {
		t.Errorf("changed %+v, want %s from %d to %d at line %d", l, changed.PSPRef, changed.Amount, changed.Amount+1234, changedLine)
	}
	if l := byChange[LineAdded]; l.Ref != "swp_added_1" || l.NewAmount != 77700 || l.OldRaw != "" {
		t.Errorf("added %+v", l)
	}
	if d.NewTotals.All.Amount-d.OldTotals.All.Amount != 77700+1234-dropped.Amount {
		t.Errorf("totals moved by %d", d.NewTotals.All.Amount-d.OldTotals.All.Amount)
	}
	if _, err := w.svc.Diff(w.ctx, v1[0].ID, v1[0].ID, 10); booking.ErrorReason(err) != "SAME_FILE" {
		t.Errorf("a file against itself: %v", err)
	}

	// Bad requests change nothing.
	if _, err := w.svc.MakeCurrent(w.ctx, v2.ID, "finance2", "why not"); booking.ErrorReason(err) != "ALREADY_CURRENT" {
		t.Fatalf("v2 current again: %v", err)
	}
	if _, err := w.svc.MakeCurrent(w.ctx, v1[0].ID, "finance2", " "); booking.ErrorReason(err) != "NOTE_REQUIRED" {
		t.Fatalf("no reason: %v", err)
	}
	// v1 back: the next run reads it, v2's lines are no longer current.
	back, err := w.svc.MakeCurrent(w.ctx, v1[0].ID, "finance2", "the correction was wrong; the gateway's own file stands")
	w.must(err)
	if back.SupersededBy != nil || back.Superseded != v2.ID {
		t.Fatalf("v1 made current: %+v", back)
	}
	if n := w.count(`SELECT count(*) FROM recon_lines WHERE file_id = $1 AND current`, v2.ID); n != 0 {
		t.Fatalf("%d of v2's lines still current", n)
	}
	if n := w.count(`SELECT count(*) FROM recon_lines WHERE file_id = $1 AND current`, v1[0].ID); n != v1[0].Rows {
		t.Fatalf("%d of v1's %d lines current", n, v1[0].Rows)
	}
	if n := w.count(`SELECT count(*) FROM audit_log WHERE actor = 'finance2' AND action = 'recon.file_make_current' AND subject = $1`,
		fmt.Sprintf("recon_file:%d", v1[0].ID)); n != 1 {
		t.Fatalf("%d audit rows for making v1 current", n)
	}
	second := w.run(gw)
	if !slices.Contains(second.Files, v1[0].ID) || slices.Contains(second.Files, v2.ID) || second.Lines != v1[0].Rows {
		t.Fatalf("after making v1 current the run read files %v (%d lines), want v1 %d (%d lines)", second.Files, second.Lines,
			v1[0].ID, v1[0].Rows)
	}
	// v2's orphan line no longer reproduces.
	if n := w.count(`SELECT count(*) FROM reconciliation_exceptions WHERE kind = 'ORPHAN_LINE' AND state = 'OPEN'`); n != 0 {
		t.Fatalf("%d orphan lines open with v1 current", n)
	}

	// v2 sent again, byte for byte, by a person and by the fetch job: an
	// earlier version, said so, and nothing changes.
	state := func() string {
		var s string
		w.must(w.env.Pool.QueryRow(w.ctx, `SELECT string_agg(f.id || ':' || coalesce(f.superseded_by, 0) || ':' ||
			(SELECT count(*) FILTER (WHERE current) FROM recon_lines l WHERE l.file_id = f.id), ',' ORDER BY f.id) FROM recon_files f`).Scan(&s))
		return s
	}
	before := state()
	for _, meta := range []FileMeta{
		{Source: SourceSettlement, Gateway: gw, BusinessDate: w.day, By: "finance3", Name: "again.csv"},
		{Source: SourceSettlement, Gateway: gw, BusinessDate: w.day, By: "job:recon_fetch", Name: "again.csv", Fetched: true},
	} {
		again, err := w.svc.Ingest(w.ctx, meta, strings.NewReader(edited))
		w.must(err)
		if !again.Replayed || !again.Earlier() || again.ID != v2.ID || again.Current != v1[0].ID {
			t.Fatalf("v2 again by %s: %+v, want an earlier version (v2 %d), v1 %d current", meta.By, again, v2.ID, v1[0].ID)
		}
		if after := state(); after != before {
			t.Fatalf("v2 sent again by %s changed the files: %s, was %s", meta.By, after, before)
		}
	}
	if n := w.count(`SELECT count(*) FROM audit_log WHERE action = 'recon.ingest_earlier_version' AND subject = $1`,
		fmt.Sprintf("recon_file:%d", v2.ID)); n != 2 {
		t.Fatalf("%d audit rows of the earlier version sent again, want 2", n)
	}

	// v2 back as current by finance3: an upload still (it was accepted when
	// the job fetched its bytes above), and finance3 is behind what it raises.
	_, err = w.svc.MakeCurrent(w.ctx, v2.ID, "finance3", "the gateway confirmed the correction")
	w.must(err)
	w.run(gw)
	var e Exception
	ex, err := w.svc.Exceptions(w.ctx, Filter{Kind: OrphanLine, State: "UNRESOLVED", Limit: 10})
	w.must(err)
	if len(ex) != 1 {
		t.Fatalf("%d orphan lines with v2 current again", len(ex))
	}
	e = ex[0]
	people, err := peopleBehind(w.ctx, w.env.Pool, e)
	w.must(err)
	if !slices.Contains(people, "finance3") || !slices.Contains(people, "finance1") {
		t.Fatalf("people behind the orphan line: %v, want its uploader and who made its file current", people)
	}
}

// An upload is previewed first: totals by kind, nothing ingested;
// cancelling leaves nothing behind; confirming (by its uploader only)
// ingests exactly the previewed bytes; bytes that are a version already
// are said so at once and kept nowhere.
func TestUploadPreview(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	const gw = "swiftpay"
	m := w.make(cleanSet(gw, 5)...)
	w.ingestDay(gw)
	current, err := w.svc.Files(w.ctx, SourceSettlement, gw, w.day)
	w.must(err)
	// A corrected file past a chunk's size: many lines the gateway added.
	payout := "SWP" + w.day.Format("20060102")
	var more [][]string
	for i := range 12000 {
		more = append(more, []string{"CAPTURE", fmt.Sprintf("swp_extra_%d", i), fmt.Sprintf("ord-extra-%d", i), "", "", "UPI", "10.00",
			"0.00", "0.00", "10.00", w.day.Format("02/01/2006") + " 12:00:00", w.day.AddDate(0, 0, 1).Format("02/01/2006"), payout})
	}
	body := w.editCSV(w.realFile(SourceSettlement, gw, w.day), nil, more...)
	if len(body) <= chunkBytes {
		t.Fatalf("the file is %d bytes, want more than a chunk", len(body))
	}
	var captures, refunds int
	var capAmount, refAmount int64
	for _, s := range m {
		captures++
		capAmount += s.Amount
		if s.Refund > 0 {
			refunds++
			refAmount += s.Refund
		}
	}
	captures, capAmount = captures+12000, capAmount+12000*1000
	counts := func() string {
		var s string
		w.must(w.env.Pool.QueryRow(w.ctx, `SELECT (SELECT count(*) FROM recon_files) || '/' || (SELECT count(*) FROM recon_lines) || '/' ||
			(SELECT count(*) FROM recon_upload_previews) || '/' || (SELECT count(*) FROM recon_upload_chunks) || '/' ||
			(SELECT count(*) FROM audit_log)`).Scan(&s))
		return s
	}
	before := counts()
	meta := FileMeta{Source: SourceSettlement, Gateway: gw, BusinessDate: w.day, By: "finance1", Name: "corrected.csv"}
	p, err := w.svc.PreviewUpload(w.ctx, meta, strings.NewReader(body))
	w.must(err)
	kind := func(t Totals, k string) KindTotal {
		for _, x := range t.Kinds {
			if x.Kind == k {
				return x
			}
		}
		return KindTotal{}
	}
	if c, r := kind(p.Totals, LineCapture), kind(p.Totals, LineRefund); p.Identical || c.Count != captures || c.Amount != capAmount ||
		r.Count != refunds || r.Amount != refAmount || p.Totals.Lines != captures+refunds || p.Bytes != int64(len(body)) {
		t.Fatalf("preview %+v, want %d captures of %d and %d refunds of %d", p.Totals, captures, capAmount, refunds, refAmount)
	}
	if p.Current == nil || p.Current.ID != current[0].ID || kind(p.CurrentTotals, LineCapture).Count != len(m) {
		t.Fatalf("preview's current version %+v %+v", p.Current, p.CurrentTotals)
	}
	if n := w.count(`SELECT count(*) FROM recon_upload_chunks WHERE preview_id = $1`, p.ID); n != 2 {
		t.Fatalf("%d chunks kept, want 2", n)
	}
	// Cancelled: only its uploader may; then nothing of it stays.
	if err := w.svc.CancelUpload(w.ctx, p.ID, "finance2"); booking.ErrorReason(err) != "NOT_YOUR_UPLOAD" {
		t.Fatalf("cancelled by another: %v", err)
	}
	w.must(w.svc.CancelUpload(w.ctx, p.ID, "finance1"))
	if after := counts(); after != before {
		t.Fatalf("a cancelled upload left %s, was %s", after, before)
	}
	if _, err := w.svc.ConfirmUpload(w.ctx, p.ID, "finance1"); booking.ErrorReason(err) != "NO_SUCH_PREVIEW" {
		t.Fatalf("confirmed after cancelling: %v", err)
	}

	// Confirmed: exactly the previewed bytes, an upload awaiting a second person.
	p, err = w.svc.PreviewUpload(w.ctx, meta, strings.NewReader(body))
	w.must(err)
	if _, err := w.svc.ConfirmUpload(w.ctx, p.ID, "finance2"); booking.ErrorReason(err) != "NOT_YOUR_UPLOAD" {
		t.Fatalf("confirmed by another: %v", err)
	}
	f, err := w.svc.ConfirmUpload(w.ctx, p.ID, "finance1")
	w.must(err)
	if f.SHA256 != p.SHA256 || f.Rows != p.Totals.Lines || f.Superseded != current[0].ID || f.Origin != OriginUpload || f.Accepted() {
		t.Fatalf("confirmed %+v, previewed %s of %d lines", f, p.SHA256, p.Totals.Lines)
	}
	if n := w.count(`SELECT count(*) FROM recon_upload_previews`); n != 0 {
		t.Fatalf("%d previews kept after confirming", n)
	}
	tot, err := w.svc.FileTotals(w.ctx, f.ID)
	w.must(err)
	if fmt.Sprint(tot) != fmt.Sprint(p.Totals) {
		t.Fatalf("ingested totals %+v, previewed %+v", tot, p.Totals)
	}

	// The gateway's own file again: an earlier version, said at the
	// preview, nothing kept.
	before = counts()
	again, err := w.svc.PreviewUpload(w.ctx, meta, strings.NewReader(w.realFile(SourceSettlement, gw, w.day)))
	w.must(err)
	if !again.Identical || again.Same.ID != current[0].ID || again.Same.SupersededBy == nil || again.Current.ID != f.ID {
		t.Fatalf("the earlier version previewed: %+v", again)
	}
	if after := counts(); after != before {
		t.Fatalf("previewing an earlier version left %s, was %s", after, before)
	}
	// A file that does not parse is refused as Ingest refuses it; nothing kept.
	if _, err := w.svc.PreviewUpload(w.ctx, meta, strings.NewReader("not,a,header\n")); booking.ErrorReason(err) != "BAD_FILE" {
		t.Fatalf("bad file: %v", err)
	}
	if after := counts(); after != before {
		t.Fatalf("a refused preview left %s, was %s", after, before)
	}
}
