package console

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"tatkal/booking"
	"tatkal/recon"
	"tatkal/views"
)

// File versions on the files page: an upload is previewed by its totals
// and committed only on its clerk's confirmation (cancelling keeps
// nothing); an earlier version is made current by a person with a reason
// (audited by recon); two versions compare line by line.

func totalRows(t recon.Totals) []views.TotalRow {
	var out []views.TotalRow
	for _, k := range append(t.Kinds, t.All) {
		out = append(out, views.TotalRow{Kind: k.Kind, Count: k.Count, Amount: views.INR(k.Amount), Fee: views.INR(k.Fee),
			Tax: views.INR(k.Tax), Net: views.INR(k.Net)})
	}
	return out
}

// renderPreview shows an upload's totals with its confirm and cancel forms.
func (c *Console) renderPreview(w http.ResponseWriter, r *http.Request, p recon.Preview) {
	u, _ := userFrom(r.Context())
	v := views.FinancePreviewPage{ID: p.ID.String(), Source: p.Meta.Source, Gateway: p.Meta.Gateway, Date: istDay(p.Meta.BusinessDate),
		Name: p.Meta.Name, SHA: p.SHA256, Bytes: p.Bytes, Totals: totalRows(p.Totals), Identical: p.Identical, CSRF: u.CSRF}
	if p.Identical {
		same := fileRow(p.Same, u.Login)
		v.Same = &same
	}
	if p.Current != nil {
		cur := fileRow(*p.Current, u.Login)
		v.Current, v.CurrentTotals = &cur, totalRows(p.CurrentTotals)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	c.render(w, r, "Check the upload", views.ConsoleFinancePreview(v))
}

func previewParam(r *http.Request) (uuid.UUID, bool) {
	id, err := uuid.Parse(chi.URLParam(r, "id"))
	return id, err == nil
}

// financeUploadConfirm commits a previewed upload as its uploader: recon
// ingests and audits it; a refusal is audited here.
func (c *Console) financeUploadConfirm(w http.ResponseWriter, r *http.Request) {
	if c.noRecon(w, r) {
		return
	}
	id, ok := previewParam(r)
	if !ok {
		http.NotFound(w, r)
		return
	}
	u, _ := userFrom(r.Context())
	info, err := c.cfg.Recon.ConfirmUpload(r.Context(), id, u.Login)
	if c.refuse(w, r, "recon.ingest", "recon_preview:"+id.String(), nil, err) {
		return
	}
	p := views.FinanceFilesPage{Date: istDay(today().AddDate(0, 0, -1))}
	if err != nil {
		p.Error = booking.ErrorMessage(err)
		c.renderFiles(w, r, p, statusOf(err))
		return
	}
	res := fileRow(info, u.Login)
	res.Earlier = info.Earlier()
	if info.Current != 0 {
		res.Current = fmt.Sprint(info.Current)
	}
	p.Result = &res
	c.renderFiles(w, r, p, http.StatusCreated)
}

// financeUploadCancel drops a previewed upload: nothing of it stays.
func (c *Console) financeUploadCancel(w http.ResponseWriter, r *http.Request) {
	if c.noRecon(w, r) {
		return
	}
	id, ok := previewParam(r)
	if !ok {
		http.NotFound(w, r)
		return
	}
	u, _ := userFrom(r.Context())
	err := c.cfg.Recon.CancelUpload(r.Context(), id, u.Login)
	if c.refuse(w, r, "recon.upload_cancel", "recon_preview:"+id.String(), nil, err) {
		return
	}
	if err != nil {
		c.renderFiles(w, r, views.FinanceFilesPage{Date: istDay(today().AddDate(0, 0, -1)), Error: booking.ErrorMessage(err)}, statusOf(err))
		return
	}
	c.redirectNotice(w, r, "/console/finance/files", "Upload cancelled; nothing was stored.")
}

// financeMakeCurrent makes an earlier version of a day's file current, as
// the signed-in person with their reason. Audited by recon, refusals here.
func (c *Console) financeMakeCurrent(w http.ResponseWriter, r *http.Request) {
	if c.noRecon(w, r) {
		return
	}
	id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	u, _ := userFrom(r.Context())
	note := r.PostFormValue("note")
	f, err := c.cfg.Recon.MakeCurrent(r.Context(), id, u.Login, note)
	if c.refuse(w, r, "recon.file_make_current", fmt.Sprintf("recon_file:%d", id), map[string]any{"note": note}, err) {
		return
	}
	if err != nil {
		c.renderFiles(w, r, views.FinanceFilesPage{Date: istDay(today().AddDate(0, 0, -1)), Error: booking.ErrorMessage(err)}, statusOf(err))
		return
	}
	msg := fmt.Sprintf("File %d is the current version of %s %s %s again", f.ID, f.Source, f.Gateway, istDay(f.BusinessDate))
	if f.Superseded != 0 {
		msg += fmt.Sprintf(", superseding #%d", f.Superseded)
	}
	msg += "; run the day again to reconcile against it."
	if !f.Accepted() {
		msg += " It is an upload no second person has accepted yet: its lines start no automatic resolution until one does."
	}
	c.redirectNotice(w, r, "/console/finance/files", msg)
}

// financeDiff compares two versions of a day's file line by line.
func (c *Console) financeDiff(w http.ResponseWriter, r *http.Request) {
	if c.noRecon(w, r) {
		return
	}
	q := r.URL.Query()
	oldID, err1 := strconv.ParseInt(q.Get("old"), 10, 64)
	newID, err2 := strconv.ParseInt(q.Get("new"), 10, 64)
	if err1 != nil || err2 != nil {
		c.renderFiles(w, r, views.FinanceFilesPage{Date: istDay(today().AddDate(0, 0, -1)),
			Error: "Name the two files to compare (old and new, by number)."}, http.StatusBadRequest)
		return
	}
	const limit = 500
	u, _ := userFrom(r.Context())
	d, err := c.cfg.Recon.Diff(r.Context(), oldID, newID, limit)
	if err != nil {
		if booking.ErrorCode(err) == booking.EINTERNAL {
			c.serverError(w, r, err)
			return
		}
		c.renderFiles(w, r, views.FinanceFilesPage{Date: istDay(today().AddDate(0, 0, -1)), Error: booking.ErrorMessage(err)}, statusOf(err))
		return
	}
	p := views.FinanceDiffPage{Old: fileRow(d.Old, u.Login), New: fileRow(d.New, u.Login), OldTotals: totalRows(d.OldTotals),
		NewTotals: totalRows(d.NewTotals), Added: d.Added, Removed: d.Removed, Changed: d.Changed,
		More: d.Added + d.Removed + d.Changed - len(d.Lines)}
	no := func(n int) string {
		if n == 0 {
			return "–"
		}
		return strconv.Itoa(n)
	}
	for _, l := range d.Lines {
		row := views.DiffRow{Change: l.Change, Kind: l.Kind, Ref: l.Ref, OldLine: no(l.OldLineNo), NewLine: no(l.NewLineNo),
			OldRaw: l.OldRaw, NewRaw: l.NewRaw}
		if l.Change != recon.LineAdded {
			row.OldAmount, row.OldNet = views.INR(l.OldAmount), views.INR(l.OldNet)
		}
		if l.Change != recon.LineRemoved {
			row.NewAmount, row.NewNet = views.INR(l.NewAmount), views.INR(l.NewNet)
		}
		p.Lines = append(p.Lines, row)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	c.render(w, r, fmt.Sprintf("Files %d and %d", oldID, newID), views.ConsoleFinanceDiff(p))
}
