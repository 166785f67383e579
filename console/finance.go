package console

// The finance back office: reconciliation runs, exceptions and their
// lifecycle, uploads with lineage, the day's books and the workbook
// downloads. Every change goes through recon's own functions (which write
// the exception's history and the audit log in the same transaction); a
// refused change is audited here and changes nothing.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"tatkal/booking"
	"tatkal/booking/api/reply"
	"tatkal/console/levers"
	"tatkal/recon"
	"tatkal/views"
)

// financeRoutes mounts the finance pages (finance and admin) under /console;
// the exception list, its exports and an exception's page and actions are
// a team member's too, on their own teams' exceptions only (auth.go's
// mayWork, asked by each handler; recon checks it again under the lock).
func (c *Console) financeRoutes(r chi.Router) {
	fin := r.With(c.roles(Finance, Admin))
	work := r.With(c.roles(Finance, Admin, Team))
	work.Get("/finance/exceptions", c.financeExceptions)
	work.Get("/finance/exceptions.csv", c.financeExport)
	work.Get("/finance/exceptions.xlsx", c.financeExport)
	work.Post("/finance/exceptions/bulk", c.financeBulk)
	work.Get("/finance/exceptions/{id}", c.financeException)
	work.Post("/finance/exceptions/{id}/{action}", c.financeAction)
	fin.Get("/finance", c.financeRuns)
	fin.Post("/finance/runs", c.financeRun)
	fin.Get("/finance/runs/{id}", c.financeRunPage)
	fin.Get("/finance/runs/{id}/workbook.xlsx", c.financeDownload)
	fin.Get("/finance/runs/{id}/exceptions.csv", c.financeDownload)
	fin.Get("/finance/files", c.financeFiles)
	fin.Post("/finance/files", c.financeUpload)
	fin.Post("/finance/files/{id}/accept", c.financeAccept)
	fin.Post("/finance/files/{id}/current", c.financeMakeCurrent)
	fin.Get("/finance/files/diff", c.financeDiff)
	fin.Post("/finance/files/previews/{id}/confirm", c.financeUploadConfirm)
	fin.Post("/finance/files/previews/{id}/cancel", c.financeUploadCancel)
	fin.Get("/finance/month", c.financeMonth)
	fin.Post("/finance/month/{month}/sign", c.financeMonthSign)
	fin.Get("/finance/month/{month}/workbook.xlsx", c.financeMonthWorkbook)
	fin.Get("/finance/books", c.financeBooks)
	fin.Post("/finance/messages/read", c.financeMessagesRead)
	c.tdrRoutes(fin) // tdr.go
}

// uploadPath is the console's upload of a reconciliation file.
const uploadPath = "/console/finance/files"

// uploadSlack is what a multipart form adds around the file (boundaries,
// part headers, the other fields).
const uploadSlack = 64 << 10

// uploadLimit refuses an upload larger than recon's file limit before
// anything reads it: a Content-Length past the limit is answered 413 at
// once, and a body that grows past it (sent without a length) stops being
// read. It runs before the csrf check, which parses the form, and checks
// the role first, so only finance and admin get a body read at all
// (upload.go); the refusal shows no finance data and changes nothing.
func (c *Console) uploadLimit(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != uploadPath {
			next.ServeHTTP(w, r)
			return
		}
		c.roles(uploadRoles...)(c.readUpload(next)).ServeHTTP(w, r)
	})
}

func (c *Console) uploadTooLarge(w http.ResponseWriter, r *http.Request, limit int64) {
	c.log.Warn("console upload refused: too large", "path", r.URL.Path, "length", r.ContentLength, "limit", limit)
	w.Header().Set("Connection", "close") // the rest of the body is not read
	w.WriteHeader(http.StatusRequestEntityTooLarge)
	c.render(w, r, "File too large", views.ConsoleMessage(views.ConsoleMessagePage{Title: "File too large", TestID: "file-too-large",
		Message: booking.ErrorMessage(recon.TooLarge(limit))}))
}

// reconAPIRoutes mounts the reconciliation API (personal API tokens, finance and admin).
func (c *Console) reconAPIRoutes(r chi.Router) {
	r.With(c.apiAuth, c.apiRoles(Finance, Admin)).Get("/v1/internal/reconciliation/{psp}/{date}", c.apiReconciliation)
}

// noRecon answers when the console was built without the recon service.
func (c *Console) noRecon(w http.ResponseWriter, r *http.Request) bool {
	if c.cfg.Recon != nil {
		return false
	}
	c.serverError(w, r, fmt.Errorf("console built without the reconciliation service"))
	return true
}

func istDay(t time.Time) string { return t.Format(time.DateOnly) }

func today() time.Time { return time.Now().In(booking.IST) }

// parseDay reads a YYYY-MM-DD date; empty gives def.
func parseDay(v string, def time.Time) (time.Time, error) {
	if v == "" {
		return def, nil
	}
	d, err := time.Parse(time.DateOnly, v)
	if err != nil {
		return def, booking.Errorf(booking.EINVALID, "BAD_DATE", "Give dates as YYYY-MM-DD, not %q.", v)
	}
	return d, nil
}

var rupeeRE = regexp.MustCompile(`^[0-9]{1,11}(\.[0-9]{1,2})?$`)

// parseRupees reads an amount in rupees ("1,234.5") as paise; empty is 0.
func parseRupees(v string) (int64, error) {
	v = strings.ReplaceAll(strings.TrimPrefix(strings.TrimSpace(v), "₹"), ",", "")
	if v == "" {
		return 0, nil
	}
	if !rupeeRE.MatchString(v) {
		return 0, booking.Errorf(booking.EINVALID, "BAD_AMOUNT", "Give amounts in rupees, like 1250 or 1,250.50, not %q.", v)
	}
	whole, frac, _ := strings.Cut(v, ".")
	r, _ := strconv.ParseInt(whole, 10, 64)
	p, _ := strconv.ParseInt((frac + "00")[:2], 10, 64)
	return r*100 + p, nil
}

func runRow(r recon.RunSummary) views.FinanceRunRow {
	return views.FinanceRunRow{ID: r.ID, Date: istDay(r.BusinessDate), Gateway: r.Gateway, RunBy: r.RunBy, FinishedAt: ist(r.FinishedAt),
		AsOf: ist(r.AsOf), OurItems: r.OurItems, Lines: r.Lines, Matched: r.Matched, Exceptions: r.Exceptions, New: r.NewExceptions,
		Cleared: r.Cleared, MatchRate: fmt.Sprintf("%.2f%%", r.MatchRate()*100), MatchedAmt: views.INR(r.AmountMatched),
		UnmatchedAmt: views.INR(r.AmountUnmatched), Fees: views.INR(r.Fees), Tax: views.INR(r.Tax), Net: views.INR(r.Net),
		Pay: views.INR(r.Payouts)}
}

// fileRow is a file as the viewer me sees it: an upload not theirs waits
// for them to accept it.
func fileRow(f recon.FileInfo, me string) views.FinanceFile {
	v := views.FinanceFile{ID: f.ID, Source: f.Source, Gateway: f.Gateway, Format: f.Format, Date: istDay(f.BusinessDate), Name: f.Name,
		SHA: f.SHA256, Rows: f.Rows, Bytes: f.Bytes, IngestedAt: ist(f.IngestedAt), IngestedBy: f.IngestedBy, Replayed: f.Replayed,
		Origin: f.Origin, AcceptedBy: f.AcceptedBy, CanAccept: !f.Accepted() && f.IngestedBy != me}
	if f.SupersededBy != nil {
		v.SupersededBy = fmt.Sprint(*f.SupersededBy)
	}
	if f.SupersededAt != nil {
		v.SupersededAt = ist(*f.SupersededAt)
	}
	if f.Superseded != 0 && v.SupersededBy == "" {
		// The upload's answer: the file it replaced.
		v.SupersededBy = fmt.Sprint(f.Superseded)
	}
	return v
}

func ageRows(rows []recon.AgeRow) ([]views.AgeRow, int64) {
	out := make([]views.AgeRow, len(rows))
	var total int64
	for i, a := range rows {
		out[i] = views.AgeRow{Bucket: a.Bucket, Count: a.Count, Amount: views.INR(a.Paise), Escalated: a.Escalated}
		total += a.Paise
	}
	return out, total
}

// financeRuns lists the newest run of each gateway and day (default: the last 14 days).
func (c *Console) financeRuns(w http.ResponseWriter, r *http.Request) {
	if c.noRecon(w, r) {
		return
	}
	c.renderRuns(w, r, "", http.StatusOK)
}

func (c *Console) renderRuns(w http.ResponseWriter, r *http.Request, errMsg string, status int) {
	ctx := r.Context()
	u, _ := userFrom(ctx)
	q := r.URL.Query()
	now := today()
	p := views.FinanceRunsPage{Gateway: q.Get("gateway"), Today: istDay(now.AddDate(0, 0, -1)), Error: errMsg}
	// By default the fortnight up to the newest day reconciled.
	def := now
	if d, ok, err := c.cfg.Recon.LatestDay(ctx); err != nil {
		c.serverError(w, r, err)
		return
	} else if ok {
		def = d
	}
	to, err := parseDay(q.Get("to"), def)
	if err == nil {
		var from time.Time
		if from, err = parseDay(q.Get("from"), to.AddDate(0, 0, -13)); err == nil {
			p.From, p.To = istDay(from), istDay(to)
			var runs []recon.RunRow
			if runs, err = c.cfg.Recon.Runs(ctx, p.Gateway, from, to); err == nil {
				for _, run := range runs {
					row := runRow(run.RunSummary)
					row.Runs, row.Unresolved, row.UnresolvedAmount = run.Runs, run.Unresolved, views.INR(run.UnresolvedPaise)
					p.Runs = append(p.Runs, row)
				}
			}
		}
	}
	if err != nil {
		if booking.ErrorCode(err) == booking.EINTERNAL {
			c.serverError(w, r, err)
			return
		}
		p.Error, status = userError(err), http.StatusBadRequest
	}
	if p.Gateways, err = c.gateways(r); err != nil {
		c.serverError(w, r, err)
		return
	}
	p.RunScopes = slices.Clone(p.Gateways)
	for _, scope := range []string{recon.Wallet, recon.Core, recon.Bank} {
		if !slices.Contains(p.RunScopes, scope) {
			p.RunScopes = append(p.RunScopes, scope)
		}
	}
	ageing, err := c.cfg.Recon.Ageing(ctx)
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	p.Ageing, _ = ageRows(ageing)
	if err := c.overdue(r, u, &p); err != nil {
		c.serverError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	c.render(w, r, "Reconciliation", views.ConsoleFinanceRuns(p, u.CSRF))
}

// overdue heads the finance home with the exceptions past their SLA and the
// escalation job's messages to this user.
func (c *Console) overdue(r *http.Request, u User, p *views.FinanceRunsPage) error {
	ctx := r.Context()
	o, ok, err := c.cfg.Recon.Overdue(ctx)
	if err != nil {
		return err
	}
	if ok {
		now := time.Now()
		p.Overdue = &views.OverdueSummary{Count: o.Count, Amount: views.INR(o.Paise), Link: recon.OverdueLink,
			OldestID: o.Oldest.ID.String(), OldestKind: o.Oldest.Kind, OldestRef: o.Oldest.Ref,
			OldestAge: age(o.Oldest.Age(now)), OldestDue: ist(o.Oldest.DueAt)}
	}
	msgs, err := c.cfg.Recon.Messages(ctx, u.ID, 5)
	if err != nil {
		return err
	}
	for _, m := range msgs {
		p.Messages = append(p.Messages, views.FinanceMessage{At: ist(m.At), Body: m.Body, Link: m.Link, Unread: !m.Read})
		p.NewestMessage = max(p.NewestMessage, m.ID)
	}
	p.Unread, err = c.cfg.Recon.UnreadMessages(ctx, u.ID)
	return err
}

// financeMessagesRead marks the user's messages read, up to the newest the
// page showed.
func (c *Console) financeMessagesRead(w http.ResponseWriter, r *http.Request) {
	if c.noRecon(w, r) {
		return
	}
	u, _ := userFrom(r.Context())
	upTo, err := strconv.ParseInt(r.PostFormValue("up_to"), 10, 64)
	if err != nil || upTo <= 0 {
		c.renderRuns(w, r, "Say up to which message to mark read.", http.StatusBadRequest)
		return
	}
	n, err := c.cfg.Recon.MarkMessagesRead(r.Context(), u.ID, upTo)
	if err != nil {
		c.renderRuns(w, r, userError(err), http.StatusInternalServerError)
		return
	}
	c.redirectNotice(w, r, "/console/finance", fmt.Sprintf("%d message(s) marked read.", n))
}

// gateways are the gateways finance can pick: those configured and those seen.
func (c *Console) gateways(r *http.Request) ([]string, error) {
	seen, err := c.cfg.Recon.Gateways(r.Context())
	if err != nil {
		return nil, err
	}
	out := append([]string(nil), c.cfg.ReconGateways...)
	for _, g := range seen {
		if !slices.Contains(out, g) {
			out = append(out, g)
		}
	}
	slices.Sort(out)
	return out, nil
}

// refuse audits a refused finance action and shows why; nothing changed.
func (c *Console) refuse(w http.ResponseWriter, r *http.Request, action, subject string, detail map[string]any, err error) bool {
	if err == nil {
		return false
	}
	if booking.ErrorCode(err) == booking.EINTERNAL {
		c.serverError(w, r, err)
		return true
	}
	u, _ := userFrom(r.Context())
	if detail == nil {
		detail = map[string]any{}
	}
	detail["refused"] = booking.ErrorMessage(err)
	if aerr := levers.Audit(r.Context(), c.pool, u.Login, action, subject, detail); aerr != nil {
		c.serverError(w, r, aerr)
		return true
	}
	return false
}

func statusOf(err error) int {
	switch booking.ErrorCode(err) {
	case booking.ENOTFOUND:
		return http.StatusNotFound
	case booking.ECONFLICT:
		return http.StatusConflict
	case booking.EFORBIDDEN:
		return http.StatusForbidden
	case booking.EUNAVAIL:
		return http.StatusServiceUnavailable
	}
	return http.StatusBadRequest
}

// financeRun reconciles a gateway's day now, as the signed-in person. Audited.
func (c *Console) financeRun(w http.ResponseWriter, r *http.Request) {
	if c.noRecon(w, r) {
		return
	}
	u, _ := userFrom(r.Context())
	gateway := r.PostFormValue("gateway")
	day, err := parseDay(r.PostFormValue("date"), time.Time{})
	if err == nil && day.IsZero() {
		err = booking.Errorf(booking.EINVALID, "NO_DATE", "Name the business date to reconcile.")
	}
	if err == nil && day.After(today()) {
		err = booking.Errorf(booking.EINVALID, "FUTURE_DATE", "%s has not happened yet.", istDay(day))
	}
	var sum recon.RunSummary
	if err == nil {
		sum, err = c.cfg.Recon.Run(r.Context(), recon.RunRequest{Gateway: gateway, Date: day, By: u.Login})
	}
	detail := map[string]any{"gateway": gateway, "date": r.PostFormValue("date")}
	if c.refuse(w, r, "recon.run", "recon_run", detail, err) {
		return
	}
	if err != nil {
		c.renderRuns(w, r, booking.ErrorMessage(err), statusOf(err))
		return
	}
	detail["run"], detail["exceptions"], detail["new"], detail["cleared"] = sum.ID, sum.Exceptions, sum.NewExceptions, sum.Cleared
	if err := levers.Audit(r.Context(), c.pool, u.Login, "recon.run", fmt.Sprintf("recon_run:%d", sum.ID), detail); err != nil {
		c.serverError(w, r, err)
		return
	}
	c.redirectNotice(w, r, fmt.Sprintf("/console/finance/runs/%d", sum.ID), fmt.Sprintf("Reconciled %s %s: %d lines, %d matched, %d exceptions (%d new, %d cleared).",
		sum.Gateway, istDay(sum.BusinessDate), sum.Lines, sum.Matched, sum.Exceptions, sum.NewExceptions, sum.Cleared))
}

func (c *Console) runParam(w http.ResponseWriter, r *http.Request) (recon.RunSummary, bool) {
	id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
	if err != nil {
		http.NotFound(w, r)
		return recon.RunSummary{}, false
	}
	run, err := c.cfg.Recon.RunByID(r.Context(), id)
	if booking.ErrorCode(err) == booking.ENOTFOUND {
		http.NotFound(w, r)
		return run, false
	}
	if err != nil {
		c.serverError(w, r, err)
		return run, false
	}
	return run, true
}

// financeRunPage shows one run: figures, open exceptions by kind, files and the day's other runs.
func (c *Console) financeRunPage(w http.ResponseWriter, r *http.Request) {
	if c.noRecon(w, r) {
		return
	}
	run, ok := c.runParam(w, r)
	if !ok {
		return
	}
	ctx := r.Context()
	u, _ := userFrom(ctx)
	p := views.FinanceRunPage{Run: runRow(run), CSRF: u.CSRF}
	f := recon.Filter{Gateway: run.Gateway, BusinessDate: run.BusinessDate, State: "UNRESOLVED"}
	n, paise, err := c.cfg.Recon.CountExceptions(ctx, f)
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	p.Run.Unresolved, p.Run.UnresolvedAmount = n, views.INR(paise)
	for _, k := range recon.Kinds() {
		f.Kind = k.Kind
		n, paise, err := c.cfg.Recon.CountExceptions(ctx, f)
		if err != nil {
			c.serverError(w, r, err)
			return
		}
		if n > 0 {
			p.ByKind = append(p.ByKind, views.KindCount{Kind: k.Kind, Owner: k.Owner, Path: k.Path, Count: n, Amount: views.INR(paise),
				Link: "/console/finance/exceptions?" + views.ExceptionFilter{Kind: k.Kind, State: "UNRESOLVED", Gateway: run.Gateway,
					Date: istDay(run.BusinessDate)}.Query(0)})
		}
	}
	files, err := c.cfg.Recon.RunFiles(ctx, run)
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	for _, f := range files {
		p.Files = append(p.Files, fileRow(f, u.Login))
	}
	hist, err := c.cfg.Recon.RunHistory(ctx, run.Gateway, run.BusinessDate)
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	for _, h := range hist {
		p.History = append(p.History, runRow(h))
	}
	c.render(w, r, fmt.Sprintf("Run %s %s", run.Gateway, istDay(run.BusinessDate)), views.ConsoleFinanceRun(p))
}

// financeDownload streams a run's workbook or CSV. Audited: it carries
// customers' payment references.
func (c *Console) financeDownload(w http.ResponseWriter, r *http.Request) {
	if c.noRecon(w, r) {
		return
	}
	run, ok := c.runParam(w, r)
	if !ok {
		return
	}
	u, _ := userFrom(r.Context())
	xlsx := strings.HasSuffix(r.URL.Path, ".xlsx")
	name := fmt.Sprintf("recon-%s-%s-run%d", run.Gateway, istDay(run.BusinessDate), run.ID)
	format := "csv"
	if xlsx {
		format = "xlsx"
	}
	if err := levers.Audit(r.Context(), c.pool, u.Login, "recon.export", fmt.Sprintf("recon_run:%d", run.ID), map[string]any{"format": format}); err != nil {
		c.serverError(w, r, err)
		return
	}
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s.%s"`, name, format))
	var err error
	if xlsx {
		w.Header().Set("Content-Type", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet")
		err = c.cfg.Recon.WriteXLSX(r.Context(), run.ID, w)
	} else {
		w.Header().Set("Content-Type", "text/csv; charset=utf-8")
		err = c.cfg.Recon.WriteCSV(r.Context(), run.ID, w)
	}
	if err != nil {
		// Headers are gone; the truncated download fails to open, and the log says why.
		c.log.Error("recon export", "run", run.ID, "format", format, "err", err)
	}
}

// exceptionFilter reads the filter form.
func exceptionFilter(q url.Values) (views.ExceptionFilter, recon.Filter, error) {
	v := views.ExceptionFilter{Kind: q.Get("kind"), Age: q.Get("age"), Owner: q.Get("owner"), Assignee: strings.TrimSpace(q.Get("assignee")),
		State: q.Get("state"), Gateway: q.Get("gateway"), Date: q.Get("date"), Min: q.Get("min"), Max: q.Get("max")}
	f := recon.Filter{Kind: v.Kind, Owner: v.Owner, Assignee: v.Assignee, State: v.State, Gateway: v.Gateway, Limit: 50}
	if o := q.Get("overdue"); o != "" && o != "0" {
		v.Overdue, f.Overdue = "1", true
	}
	if o := q.Get("offset"); o != "" {
		n, err := strconv.Atoi(o)
		if err != nil || n < 0 {
			return v, f, booking.Errorf(booking.EINVALID, "BAD_PAGE", "The page offset is a number from 0.")
		}
		v.Offset, f.Offset = n, n
	}
	var err error
	if f.BusinessDate, err = parseDay(v.Date, time.Time{}); err != nil {
		return v, f, err
	}
	if v.Age != "" {
		if err := f.SetAgeBucket(v.Age); err != nil {
			return v, f, err
		}
	}
	if f.MinPaise, err = parseRupees(v.Min); err != nil {
		return v, f, err
	}
	if f.MaxPaise, err = parseRupees(v.Max); err != nil {
		return v, f, err
	}
	return v, f, nil
}

// age says how long, as a clerk reads it: "2 d 4 h", "3 h 5 min", "under a minute".
func age(d time.Duration) string {
	switch {
	case d >= 24*time.Hour:
		return fmt.Sprintf("%d d %d h", d/(24*time.Hour), d%(24*time.Hour)/time.Hour)
	case d >= time.Hour:
		return fmt.Sprintf("%d h %d min", d/time.Hour, d%time.Hour/time.Minute)
	case d >= time.Minute:
		return fmt.Sprintf("%d min", d/time.Minute)
	}
	return "under a minute"
}

func exceptionRow(e recon.Exception, now time.Time) views.ExceptionRow {
	row := views.ExceptionRow{ID: e.ID.String(), Kind: e.Kind, Ref: e.Ref, Gateway: e.Gateway, Date: istDay(e.BusinessDate), Owner: e.Owner,
		Path: e.Path, State: e.State, Assignee: e.Assignee, Stake: views.INR(e.StakePaise), Amount: views.INR(e.AmountPaise),
		Age: age(e.Age(now)), Diff: "–",
		Bucket: recon.AgeBucket(e.Age(now)), Due: ist(e.DueAt), Resolution: e.Resolution, Escalated: e.EscalatedAt != nil,
		NeedsApproval: e.NeedsApproval && e.ApprovedBy == ""}
	if e.DiffPaise != 0 {
		row.Diff = views.INR(e.DiffPaise)
	}
	open := e.State == recon.StateOpen || e.State == recon.StateInvestigating
	row.Overdue = open && now.After(e.DueAt)
	return row
}

func (c *Console) exceptionParam(w http.ResponseWriter, r *http.Request) (recon.Exception, bool) {
	id, err := uuid.Parse(chi.URLParam(r, "id"))
	if err != nil {
		http.NotFound(w, r)
		return recon.Exception{}, false
	}
	e, err := c.cfg.Recon.Exception(r.Context(), id)
	if booking.ErrorCode(err) == booking.ENOTFOUND {
		http.NotFound(w, r)
		return e, false
	}
	if err != nil {
		c.serverError(w, r, err)
		return e, false
	}
	return e, true
}

// financeException shows one exception: its legs side by side, history and actions.
func (c *Console) financeException(w http.ResponseWriter, r *http.Request) {
	if c.noRecon(w, r) {
		return
	}
	e, ok := c.exceptionParam(w, r)
	if !ok {
		return
	}
	if u, _ := userFrom(r.Context()); !u.mayWork(e.Owner) {
		c.notYours(w, r, "recon.view", e, u)
		return
	}
	c.renderException(w, r, e, "", http.StatusOK)
}

func (c *Console) renderException(w http.ResponseWriter, r *http.Request, e recon.Exception, errMsg string, status int) {
	ctx := r.Context()
	u, _ := userFrom(ctx)
	k, _ := recon.KindOf(e.Kind)
	p := views.FinanceExceptionPage{E: exceptionRow(e, time.Now()), Meaning: k.Meaning, PNR: e.PNR, PSPRef: e.PSPRef, PayoutID: e.PayoutID,
		WriteOffBy: e.WriteOffBy, ApprovedBy: e.ApprovedBy, ResolvedBy: e.ResolvedBy, Me: u.Login, Codes: resolutionCodes(e.Kind),
		Open: e.State == recon.StateOpen || e.State == recon.StateInvestigating, Error: errMsg, CSRF: u.CSRF}
	var ev any
	if json.Unmarshal(e.Evidence, &ev) == nil {
		b, _ := json.MarshalIndent(ev, "", "  ")
		p.Evidence = string(b)
	}
	legs, err := c.cfg.Recon.Legs(ctx, e)
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	p.Legs = legViews(legs)
	if p.Money, err = c.exceptionMoney(ctx, e); err != nil {
		c.serverError(w, r, err)
		return
	}
	hist, err := c.cfg.Recon.History(ctx, e.ID)
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	for _, h := range hist {
		p.History = append(p.History, views.ExceptionHistoryRow{At: ist(h.At), Actor: h.Actor, Action: h.Action, From: h.FromState, To: h.ToState, Note: h.Note})
	}
	if p.People, err = c.assignable(ctx, u, e.Owner); err != nil {
		c.serverError(w, r, err)
		return
	}
	p.MyTeams = u.workTeams()
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	c.render(w, r, e.Kind+" "+e.Ref, views.ConsoleFinanceException(p))
}

func legViews(l recon.Legs) views.ExceptionLegs {
	var v views.ExceptionLegs
	if p := l.Payment; p != nil {
		v.Ours = append(v.Ours, views.KV{K: "payment", V: p.ID.String()}, views.KV{K: "state", V: p.State},
			views.KV{K: "amount", V: views.INR(p.AmountPaise)}, views.KV{K: "method · gateway", V: p.Method + " · " + p.PSP},
			views.KV{K: "gateway ref", V: p.PSPRef}, views.KV{K: "initiated", V: ist(p.InitiatedAt)}, views.KV{K: "payer", V: p.Login})
		if p.ResolvedAt != nil {
			v.Ours = append(v.Ours, views.KV{K: "resolved", V: ist(*p.ResolvedAt)})
		}
	}
	if rf := l.Refund; rf != nil {
		v.Ours = append(v.Ours, views.KV{K: "refund", V: views.INR(rf.AmountPaise) + " " + rf.State + " (" + rf.Reason + ")"},
			views.KV{K: "refund gateway ref", V: rf.GatewayRef})
	}
	if b := l.Booking; b != nil {
		v.Ours = append(v.Ours, views.KV{K: "PNR", V: b.PNR}, views.KV{K: "booking", V: b.Status}, views.KV{K: "fare", V: views.INR(b.FarePaise)},
			views.KV{K: "passengers", V: fmt.Sprint(b.Passengers)}, views.KV{K: "sent to core", V: b.CoreState})
	}
	for _, rv := range l.Reviews {
		state := "closed"
		if rv.Open {
			state = "OPEN"
		}
		v.Ours = append(v.Ours, views.KV{K: "payment review", V: fmt.Sprintf("#%d %s, %s", rv.ID, rv.Kind, state)})
	}
	conv := func(ls []recon.LineLeg) []views.LegLine {
		var out []views.LegLine
		for _, x := range ls {
			ll := views.LegLine{FileID: fmt.Sprint(x.FileID), LineNo: fmt.Sprint(x.LineNo), Kind: x.Kind, Day: istDay(x.FileDay), Ref: x.ExtRef,
				Amount: views.INR(x.AmountPaise), PayoutID: x.PayoutID, Current: x.Current, Raw: x.Raw}
			if x.Source == recon.SourceSettlement {
				ll.Fee, ll.Tax, ll.Net = views.INR(x.FeePaise), views.INR(x.TaxPaise), views.INR(x.NetPaise)
			}
			out = append(out, ll)
		}
		return out
	}
	v.Settlement, v.Bank, v.Core = conv(l.Settlement), conv(l.Bank), conv(l.Core)
	return v
}

// financeAction changes an exception through recon's lifecycle
// (exceptionAction: assign, team, note, resolve, writeoff, approve, ask,
// refund). recon writes the history and the audit log; a refusal is
// audited here.
func (c *Console) financeAction(w http.ResponseWriter, r *http.Request) {
	if c.noRecon(w, r) {
		return
	}
	e, ok := c.exceptionParam(w, r)
	if !ok {
		return
	}
	ctx := r.Context()
	u, _ := userFrom(ctx)
	action := chi.URLParam(r, "action")
	if !u.mayWork(e.Owner) {
		c.notYours(w, r, "recon."+action, e, u)
		return
	}
	note := strings.TrimSpace(r.PostFormValue("note"))
	done, err := c.exceptionAction(ctx, u, e.ID, action, r.PostForm)
	if errors.Is(err, errNoSuchAction) {
		http.NotFound(w, r)
		return
	}
	if c.refuse(w, r, "recon."+action, "recon_exception:"+e.ID.String(), map[string]any{"note": note}, err) {
		return
	}
	if booking.ErrorReason(err) == "NOT_YOUR_TEAM" {
		// Handed to another team between the page and the click: the
		// refusal is audited (refuse), the exception is no longer shown.
		w.WriteHeader(http.StatusForbidden)
		c.render(w, r, "Not your team's", views.ConsoleMessage(views.ConsoleMessagePage{Title: "Not your team's exception", TestID: "not-your-team",
			Message: booking.ErrorMessage(err)}))
		return
	}
	if err != nil {
		if fresh, ferr := c.cfg.Recon.Exception(ctx, e.ID); ferr == nil {
			e = fresh
		}
		c.renderException(w, r, e, booking.ErrorMessage(err), statusOf(err))
		return
	}
	c.redirectNotice(w, r, "/console/finance/exceptions/"+e.ID.String(), done)
}

// financeFiles shows the upload form and the newest files with their lineage.
func (c *Console) financeFiles(w http.ResponseWriter, r *http.Request) {
	if c.noRecon(w, r) {
		return
	}
	c.renderFiles(w, r, views.FinanceFilesPage{Date: istDay(today().AddDate(0, 0, -1))}, http.StatusOK)
}

func (c *Console) renderFiles(w http.ResponseWriter, r *http.Request, p views.FinanceFilesPage, status int) {
	u, _ := userFrom(r.Context())
	p.CSRF = u.CSRF
	var err error
	if p.Gateways, err = c.gateways(r); err != nil {
		c.serverError(w, r, err)
		return
	}
	files, err := c.cfg.Recon.RecentFiles(r.Context(), 100)
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	for _, f := range files {
		p.Files = append(p.Files, fileRow(f, u.Login))
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	c.render(w, r, "Files", views.ConsoleFinanceFiles(p))
}

// financeUpload previews an uploaded file (finance_versions.go): its
// totals by kind, parsed as recon's ingestion parses it, and nothing
// ingested until the signed-in person confirms; bytes that are a version
// already are said so and kept nowhere. A refusal is audited here.
func (c *Console) financeUpload(w http.ResponseWriter, r *http.Request) {
	if c.noRecon(w, r) {
		return
	}
	u, _ := userFrom(r.Context())
	p := views.FinanceFilesPage{}
	// The csrf middleware has parsed the form already (multipart spills to
	// temporary files past 32 MB, so memory stays bounded).
	p.Source, p.Gateway, p.Date = r.FormValue("source"), r.FormValue("gateway"), r.FormValue("date")
	day, err := parseDay(p.Date, time.Time{})
	var pv recon.Preview
	if err == nil {
		file, hdr, ferr := r.FormFile("file")
		switch {
		case ferr != nil:
			err = booking.Errorf(booking.EINVALID, "NO_FILE", "Choose the file to upload.")
		case hdr.Size > c.cfg.Recon.MaxFileBytes():
			file.Close()
			err = recon.TooLarge(c.cfg.Recon.MaxFileBytes())
		default:
			defer file.Close()
			gateway := p.Gateway
			if p.Source != recon.SourceSettlement {
				gateway = ""
			}
			pv, err = c.cfg.Recon.PreviewUpload(r.Context(), recon.FileMeta{Source: p.Source, Gateway: gateway, BusinessDate: day, Name: hdr.Filename, By: u.Login}, file)
		}
	}
	if err != nil {
		// Parse errors come back wrapped but carry their code.
		if booking.ErrorCode(err) == booking.EINTERNAL {
			c.serverError(w, r, err)
			return
		}
		if c.refuse(w, r, "recon.ingest", "recon_file", map[string]any{"source": p.Source, "gateway": p.Gateway, "date": p.Date}, err) {
			return
		}
		p.Error = booking.ErrorMessage(err)
		status := http.StatusBadRequest
		if booking.ErrorReason(err) == recon.ReasonFileTooLarge {
			status = http.StatusRequestEntityTooLarge
		}
		c.renderFiles(w, r, p, status)
		return
	}
	c.renderPreview(w, r, pv)
}

// financeBooks shows a day's books: collected = tickets + refunds +
// pending, to the paisa, each term a link to its payments.
func (c *Console) financeBooks(w http.ResponseWriter, r *http.Request) {
	if c.noRecon(w, r) {
		return
	}
	ctx := r.Context()
	q := r.URL.Query()
	p := views.FinanceBooksPage{Gateway: q.Get("gateway"), Term: q.Get("term")}
	status := http.StatusOK
	day, err := parseDay(q.Get("date"), today().AddDate(0, 0, -1))
	p.Date = istDay(day)
	offset := 0
	if o := q.Get("offset"); o != "" && err == nil {
		if offset, err = strconv.Atoi(o); err != nil || offset < 0 {
			err = booking.Errorf(booking.EINVALID, "BAD_PAGE", "The page offset is a number from 0.")
		}
	}
	var bk recon.Books
	if err == nil {
		bk, err = c.cfg.Recon.Books(ctx, day, p.Gateway)
	}
	labels := map[string]string{recon.TermCollected: "collected", recon.TermTickets: "tickets sold", recon.TermRefunds: "refunds",
		recon.TermPending: "pending"}
	link := func(term string, offset int) string {
		v := url.Values{"date": {p.Date}, "term": {term}}
		if p.Gateway != "" {
			v.Set("gateway", p.Gateway)
		}
		if offset > 0 {
			v.Set("offset", strconv.Itoa(offset))
		}
		return "/console/finance/books?" + v.Encode()
	}
	if err == nil {
		for _, t := range recon.BookTerms {
			p.Terms = append(p.Terms, views.BookTerm{Term: t, Label: labels[t], Amount: views.INR(bk.Paise[t]), Count: bk.Count[t], Link: link(t, 0)})
		}
		p.Difference, p.Balanced = views.INR(bk.Difference), bk.Difference == 0
		if p.Term != "" {
			const page = 100
			var lines []recon.BookLine
			lines, err = c.cfg.Recon.BookLines(ctx, day, p.Gateway, p.Term, page, offset)
			for _, l := range lines {
				p.Lines = append(p.Lines, views.BookLineRow{PaymentID: l.PaymentID.String(), Login: l.Login, Method: l.Method + " " + l.PSP,
					State: l.State, Amount: views.INR(l.AmountPaise), Part: views.INR(l.PartPaise), At: ist(l.InitiatedAt), PNR: l.PNR,
					Booking: l.BookingStatus, Refunded: views.INR(l.RefundedPaise), RefundState: l.RefundState})
			}
			if offset > 0 {
				p.Prev = link(p.Term, max(0, offset-page))
			}
			if len(lines) == page {
				p.Next = link(p.Term, offset+page)
			}
		}
	}
	if err != nil {
		if booking.ErrorCode(err) == booking.EINTERNAL {
			c.serverError(w, r, err)
			return
		}
		p.Error, status = booking.ErrorMessage(err), http.StatusBadRequest
	}
	gws, gerr := c.gateways(r)
	if gerr != nil {
		c.serverError(w, r, gerr)
		return
	}
	p.Gateways = append(gws, recon.Wallet)
	if p.Error == "" {
		if p.TieOuts, err = c.tieOuts(ctx, day, p.Gateway, gws); err != nil {
			c.serverError(w, r, err)
			return
		}
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	c.render(w, r, "Books "+p.Date, views.ConsoleFinanceBooks(p))
}

// tieOuts are the day's statements that hold to the paisa: the settlement
// statement of each gateway shown (one, or all), and the wallets'
// roll-forward (the wallet's books, or all). Each term links to what is
// behind it: the gateway's run of the day (its files and lines), the
// exceptions that explain a difference, the wallet payments.
func (c *Console) tieOuts(ctx context.Context, day time.Time, gateway string, gateways []string) ([]views.TieOut, error) {
	inr := views.INR
	diff := func(d int64) (string, bool) { return inr(d), d != 0 }
	exceptions := func(gw, kind string) string {
		return "/console/finance/exceptions?" + views.ExceptionFilter{Kind: kind, Gateway: gw, Date: istDay(day), State: "UNRESOLVED"}.Query(0)
	}
	var out []views.TieOut
	for _, gw := range gateways {
		if gw == recon.Core || gw == recon.Bank || gw == recon.Wallet || (gateway != "" && gw != gateway) {
			continue
		}
		st, err := c.cfg.Recon.Settlement(ctx, gw, day)
		if err != nil {
			return nil, err
		}
		if st.FileID == 0 && gateway == "" {
			continue // no file of this gateway's day
		}
		run := "/console/finance/runs?" + url.Values{"gateway": {gw}, "from": {istDay(day)}, "to": {istDay(day)}}.Encode()
		if r, err := c.cfg.Recon.LatestRun(ctx, gw, day); err == nil {
			run = fmt.Sprintf("/console/finance/runs/%d", r.ID)
		} else if booking.ErrorCode(err) != booking.ENOTFOUND {
			return nil, err
		}
		payoutDiff, payoutOff := diff(st.PayoutDifference())
		bankDiff, bankOff := diff(st.BankDifference())
		out = append(out, views.TieOut{ID: gw, Title: "Settlement statement · " + gw, TiesOut: st.TiesOut(), Rows: []views.TieOutRow{
			{Term: "captures", Amount: inr(st.Captures), Link: run, Note: fmt.Sprintf("%d lines in the file", st.Lines)},
			{Op: "−", Term: "refunds", Amount: inr(st.Refunds), Link: exceptions(gw, recon.RefundMismatch)},
			{Op: "−", Term: "chargebacks", Amount: inr(st.Chargebacks), Link: exceptions(gw, recon.Chargeback)},
			{Op: "−", Term: "fees", Amount: inr(st.Fees), Link: exceptions(gw, recon.FeeMismatch)},
			{Op: "−", Term: "GST", Amount: inr(st.GST), Link: exceptions(gw, recon.FeeMismatch)},
			{Op: "=", Term: "net", Amount: inr(st.Net()), Total: true},
			{Term: "payout", Amount: inr(st.Payout), Against: inr(st.Net()), Difference: payoutDiff, Off: payoutOff, Link: run,
				Note: "the lines' own net, " + strings.Join(st.Payouts, ", ")},
			{Term: "bank credit", Amount: inr(st.Bank), Against: inr(st.Payout), Difference: bankDiff, Off: bankOff,
				Link: exceptions(gw, recon.PayoutMismatch), Note: "credited less debited for the payout"},
		}})
	}
	if gateway != "" && gateway != recon.Wallet {
		return out, nil
	}
	rf, err := c.cfg.Recon.WalletRollForward(ctx, day)
	if err != nil {
		return nil, err
	}
	spends := "/console/finance/books?" + url.Values{"date": {istDay(day)}, "gateway": {recon.Wallet}, "term": {recon.TermCollected}}.Encode()
	row := func(op, term string, ledger, ours int64, n int, link, note string) views.TieOutRow {
		d, off := diff(ledger - ours)
		return views.TieOutRow{Op: op, Term: term, Amount: inr(ledger), Against: inr(ours), Difference: d, Off: off, Link: link,
			Note: fmt.Sprintf("%d entries; against %s", n, note)}
	}
	closing, off := diff(rf.ClosingDifference())
	out = append(out, views.TieOut{ID: recon.Wallet, Title: "Wallet roll-forward", TiesOut: rf.TiesOut(), Rows: []views.TieOutRow{
		{Term: "opening", Amount: inr(rf.Opening), Note: "the ledger's balances at the day's start"},
		row("+", "top-ups", rf.TopUps, rf.OurTopUps, rf.Count[recon.TermTopUps], "", "top-up payments that succeeded"),
		row("+", "refunds in", rf.RefundsIn, rf.OurRefundsIn, rf.Count[recon.TermRefundsIn], "", "refunds of wallet payments processed"),
		row("−", "spends", rf.Spends, rf.OurSpends, rf.Count[recon.TermSpends], spends, "wallet payments made"),
		{Op: "−", Term: "withdrawals", Amount: inr(rf.Withdrawals), Note: fmt.Sprintf("%d entries", rf.Count[recon.TermWithdrawals])},
		{Op: "=", Term: "closing", Amount: inr(rf.Closing()), Against: inr(rf.LedgerClosing), Difference: closing, Off: off, Total: true,
			Note: "against the ledger's balances at the day's end"},
	}})
	return out, nil
}

// ReconPage is the reconciliation API's answer: the newest run of a
// gateway's day and a page of its exceptions.
type ReconPage struct {
	Run        recon.RunSummary  `json:"run"`
	MatchRate  float64           `json:"match_rate"`
	Unresolved int               `json:"unresolved"`
	Total      int               `json:"total"`
	Limit      int               `json:"limit"`
	Offset     int               `json:"offset"`
	Exceptions []recon.Exception `json:"exceptions"`
	Next       string            `json:"next,omitempty"`
}

// apiReconciliation answers GET /v1/internal/reconciliation/{psp}/{date}
// (?state=&kind=&limit=&offset=): the newest run and its exceptions.
func (c *Console) apiReconciliation(w http.ResponseWriter, r *http.Request) {
	if c.cfg.Recon == nil {
		problem(w, r, c, fmt.Errorf("console built without the reconciliation service"))
		return
	}
	ctx := r.Context()
	psp := chi.URLParam(r, "psp")
	day, err := parseDay(chi.URLParam(r, "date"), time.Time{})
	if err != nil {
		problem(w, r, c, err)
		return
	}
	q := r.URL.Query()
	f := recon.Filter{Gateway: psp, BusinessDate: day, Kind: q.Get("kind"), State: q.Get("state"), Limit: 100}
	for name, dst := range map[string]*int{"limit": &f.Limit, "offset": &f.Offset} {
		if v := q.Get(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || (name == "limit" && (n == 0 || n > 1000)) {
				problem(w, r, c, booking.Errorf(booking.EINVALID, "BAD_PAGE", "limit is 1-1000 and offset a number from 0."))
				return
			}
			*dst = n
		}
	}
	run, err := c.cfg.Recon.LatestRun(ctx, psp, day)
	if err != nil {
		problem(w, r, c, err)
		return
	}
	page := ReconPage{Run: run, MatchRate: run.MatchRate(), Limit: f.Limit, Offset: f.Offset}
	if page.Total, _, err = c.cfg.Recon.CountExceptions(ctx, f); err != nil {
		problem(w, r, c, err)
		return
	}
	if page.Exceptions, err = c.cfg.Recon.Exceptions(ctx, f); err != nil {
		problem(w, r, c, err)
		return
	}
	if page.Unresolved, _, err = c.cfg.Recon.CountExceptions(ctx, recon.Filter{Gateway: psp, BusinessDate: day, State: "UNRESOLVED"}); err != nil {
		problem(w, r, c, err)
		return
	}
	if f.Offset+len(page.Exceptions) < page.Total {
		nq := url.Values{}
		for k, v := range q {
			nq[k] = v
		}
		nq.Set("offset", strconv.Itoa(f.Offset+f.Limit))
		nq.Set("limit", strconv.Itoa(f.Limit))
		page.Next = r.URL.Path + "?" + nq.Encode()
	}
	reply.JSON(w, http.StatusOK, page)
}

// problem answers a /v1 error with the /v1 problem writer.
func problem(w http.ResponseWriter, r *http.Request, c *Console, err error) {
	reply.Error(w, r, c.log, err)
}
