package console

// The exception list as a clerk works it at month end: sorted by a column,
// their own queue, the gateway's transaction id and the PNR on every row,
// bulk actions on the selected rows and the export of the filtered list.
// One function (exceptionAction) carries out an action on one exception,
// for the exception's page and for every row of a bulk action alike, so
// the rules (four eyes, the approval limit, nobody approving their own)
// are the same however many rows are selected. A team member (role team)
// sees and works their own teams' exceptions only: the list, its exports
// and every action are scoped by User.workTeams, and an action on another
// team's exception is refused (403 NOT_YOUR_TEAM), single or in bulk.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"tatkal/booking"
	"tatkal/console/levers"
	"tatkal/recon"
	"tatkal/views"
)

// errNoSuchAction: the path names no action on an exception.
var errNoSuchAction = errors.New("no such exception action")

// exceptionAction carries out one action on one exception as u, through
// recon's lifecycle (which writes the history and the audit log), and says
// what it did. The form carries the action's fields: assignee, team, code,
// note, and approve=1 or withdraw=1 for a write-off or a refund.
func (c *Console) exceptionAction(ctx context.Context, u User, id uuid.UUID, action string, form url.Values) (string, error) {
	if _, ok := exceptionActions[action]; !ok {
		return "", errNoSuchAction
	}
	e, err := c.cfg.Recon.Exception(ctx, id)
	if err != nil {
		return "", err
	}
	if !u.mayWork(e.Owner) {
		return "", notYourTeam(u, e.Owner)
	}
	// recon asks again under the exception's lock: handed to another team
	// meanwhile, it is refused, not changed.
	ctx = recon.ForTeams(ctx, u.workTeams())
	// A team member takes, works and proposes; the second pair of eyes on
	// money written off, refunded or moved above the limit is finance's, as
	// recon's four-eyes rule says.
	if u.Role == Team && (action == "approve" || form.Get("approve") == "1") {
		return "", booking.Errorf(booking.EFORBIDDEN, "FINANCE_APPROVES", "A finance person approves what writes off, refunds or moves money; your proposal waits for them.")
	}
	note := strings.TrimSpace(form.Get("note"))
	switch action {
	case "assign":
		who := strings.TrimSpace(form.Get("assignee"))
		if who == "" {
			who = u.Login
		}
		if u.Role == Team && who != u.Login {
			return "", booking.Errorf(booking.EFORBIDDEN, "ASSIGN_SELF", "A team member takes an exception themselves; finance assigns it to others.")
		}
		var ok bool
		if err := c.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM console_users WHERE login = $1 AND NOT disabled
			AND (role IN ('finance', 'admin') OR (role = 'team' AND $2 = ANY(teams))))`, who, e.Owner).Scan(&ok); err != nil {
			return "", fmt.Errorf("assign: %w", err)
		}
		if !ok {
			return "", booking.Errorf(booking.EINVALID, "NO_SUCH_PERSON", "%q is not a finance person of the console nor of the team %s.", who, e.Owner)
		}
		return "Assigned to " + who + ".", c.cfg.Recon.Assign(ctx, id, u.Login, who)
	case "team":
		team := form.Get("team")
		return "Handed to " + team + ".", c.cfg.Recon.HandTo(ctx, id, u.Login, team, note)
	case "note":
		return "Note added.", c.cfg.Recon.AddNote(ctx, id, u.Login, note)
	case "resolve":
		code := form.Get("code")
		return "Resolved as " + code + ".", c.cfg.Recon.ResolveManually(ctx, id, u.Login, code, note, c.reconPayments())
	case "writeoff":
		switch {
		case form.Get("withdraw") == "1":
			return "Write-off proposal withdrawn.", c.cfg.Recon.WithdrawWriteOff(ctx, id, u.Login, note)
		case form.Get("approve") == "1":
			return "Written off.", c.cfg.Recon.ApproveWriteOff(ctx, id, u.Login, note)
		}
		return "Write-off proposed; a second person approves it.", c.cfg.Recon.ProposeWriteOff(ctx, id, u.Login, note)
	case "approve":
		if c.cfg.River == nil {
			return "", booking.Errorf(booking.EUNAVAIL, "NO_JOBS", "This process cannot enqueue jobs.")
		}
		return "Approved; the automatic resolution runs now.", c.cfg.Recon.ApproveAutomatic(ctx, id, u.Login, c.cfg.River)
	case "ask":
		said, err := c.cfg.Recon.AskGatewayNow(ctx, id, u.Login, c.reconPayments(), c.cfg.Booking)
		return said, err
	case "refund":
		switch {
		case form.Get("withdraw") == "1":
			return "Refund proposal withdrawn.", c.cfg.Recon.WithdrawRefund(ctx, id, u.Login, note)
		case form.Get("approve") == "1":
			return "Refunded: the refund is on its way through the payment's refund path.", c.cfg.Recon.ApproveRefund(ctx, id, u.Login, note, c.reconPayments())
		}
		return "Refund proposed; a second person approves it.", c.cfg.Recon.ProposeRefund(ctx, id, u.Login, note)
	}
	return "", errNoSuchAction
}

// exceptionActions are the actions exceptionAction knows.
var exceptionActions = map[string]bool{"assign": true, "team": true, "note": true, "resolve": true, "writeoff": true, "approve": true,
	"ask": true, "refund": true}

// bulkActions are the bulk form's actions, as exceptionAction's action and
// the form fields it adds.
var bulkActions = map[string]struct {
	action string
	extra  url.Values
}{
	"assign":           {"assign", nil},
	"team":             {"team", nil},
	"resolve":          {"resolve", nil},
	"writeoff":         {"writeoff", nil},
	"approve-writeoff": {"writeoff", url.Values{"approve": {"1"}}},
	"approve":          {"approve", nil},
	"ask":              {"ask", nil},
}

// financeBulk carries out one action on each selected exception, each on
// its own through exceptionAction, and shows the list again with every
// row's outcome: which were done and which refused, and why. A refused row
// is unchanged and audited as refused; the others go ahead.
func (c *Console) financeBulk(w http.ResponseWriter, r *http.Request) {
	if c.noRecon(w, r) {
		return
	}
	ctx := r.Context()
	u, _ := userFrom(ctx)
	back, _ := url.ParseQuery(r.PostFormValue("back"))
	var res views.Worklist
	ba, known := bulkActions[r.PostFormValue("action")]
	var ids []uuid.UUID
	var err error
	for _, v := range r.PostForm["id"] {
		id, perr := uuid.Parse(v)
		if perr != nil {
			err = booking.Errorf(booking.EINVALID, "BAD_ID", "%q is not an exception id.", v)
			break
		}
		ids = append(ids, id)
	}
	if !known && err == nil {
		err = booking.Errorf(booking.EINVALID, "BAD_ACTION", "Choose what to do with the selected rows.")
	}
	var outcomes []recon.Outcome
	if err == nil {
		form := url.Values{}
		for _, k := range []string{"assignee", "team", "code", "note"} {
			form.Set(k, r.PostFormValue(k))
		}
		for k, v := range ba.extra {
			form[k] = v
		}
		outcomes, err = recon.Bulk(ctx, ids, func(ctx context.Context, id uuid.UUID) error {
			_, err := c.exceptionAction(ctx, u, id, ba.action, form)
			return err
		})
	}
	status := http.StatusOK
	if err != nil {
		if booking.ErrorCode(err) == booking.EINTERNAL {
			c.serverError(w, r, err)
			return
		}
		status = http.StatusBadRequest
	}
	refs, rerr := c.workRefs(ctx, u, outcomes)
	if rerr != nil {
		c.serverError(w, r, rerr)
		return
	}
	for _, o := range outcomes {
		row := views.BulkOutcome{ID: o.ID.String(), OK: o.Err == nil, Result: "done"}
		if x, ok := refs[o.ID]; ok {
			row.Kind, row.Ref, row.GatewayRef, row.PNR = x.Kind, x.Ref, x.GatewayRef, x.BookingPNR
		}
		subject := "recon_exception:" + o.ID.String()
		if o.Err != nil {
			if booking.ErrorCode(o.Err) == booking.EINTERNAL {
				c.log.Error("bulk exception action", "action", ba.action, "exception", o.ID, "err", o.Err)
			}
			row.Result = userError(o.Err)
			res.Refused++
			if aerr := levers.Audit(ctx, c.pool, u.Login, "recon."+ba.action, subject,
				map[string]any{"bulk": true, "refused": booking.ErrorMessage(o.Err)}); aerr != nil {
				c.serverError(w, r, aerr)
				return
			}
		} else {
			res.Done++
		}
		res.Outcomes = append(res.Outcomes, row)
	}
	c.log.Info("bulk exception action", "by", u.Login, "action", r.PostFormValue("action"), "rows", len(outcomes), "done", res.Done, "refused", res.Refused)
	msg := ""
	if err != nil {
		msg = booking.ErrorMessage(err)
	}
	c.renderExceptions(w, r, back, res, msg, status)
}

// workRefs are the outcomes' exceptions as the list shows them (the
// gateway's transaction id and the PNR), those u may see only: a team
// member's refused row of another team names no more than its id.
func (c *Console) workRefs(ctx context.Context, u User, outcomes []recon.Outcome) (map[uuid.UUID]recon.WorkRow, error) {
	out := map[uuid.UUID]recon.WorkRow{}
	if len(outcomes) == 0 {
		return out, nil
	}
	ids := make([]uuid.UUID, len(outcomes))
	for i, o := range outcomes {
		ids[i] = o.ID
	}
	rows, err := c.cfg.Recon.WorkRows(ctx, recon.Filter{IDs: ids, Teams: u.workTeams(), Limit: len(ids)}, "")
	if err != nil {
		return nil, err
	}
	for _, x := range rows {
		out[x.ID] = x
	}
	return out, nil
}

// financeExceptions lists exceptions with filters, sorted, 50 a page.
func (c *Console) financeExceptions(w http.ResponseWriter, r *http.Request) {
	if c.noRecon(w, r) {
		return
	}
	c.renderExceptions(w, r, r.URL.Query(), views.Worklist{}, "", http.StatusOK)
}

// worklistFilter reads the list's filter, sort and "mine" as u sees it:
// a team member's list is their teams' exceptions whatever it asks.
func worklistFilter(q url.Values, u User) (views.ExceptionFilter, recon.Filter, string, error) {
	v, f, err := exceptionFilter(q)
	v.Sort = q.Get("sort")
	if m := q.Get("mine"); m != "" && m != "0" {
		v.Mine, v.Assignee, f.Assignee = "1", "", u.Login
	}
	f.Teams = u.workTeams()
	if err == nil && v.Owner != "" && !u.mayWork(v.Owner) {
		err = notYourTeam(u, v.Owner)
	}
	return v, f, v.Sort, err
}

func (c *Console) renderExceptions(w http.ResponseWriter, r *http.Request, q url.Values, wl views.Worklist, errMsg string, status int) {
	ctx := r.Context()
	u, _ := userFrom(ctx)
	v, f, sort, err := worklistFilter(q, u)
	p := views.FinanceExceptionsPage{Filter: v, States: []string{"UNRESOLVED", recon.StateOpen, recon.StateInvestigating, recon.StateResolved,
		recon.StateWrittenOff}, Worklist: wl, Error: errMsg}
	p.Me, p.CSRF, p.Teams, p.Owners, p.MyTeams = u.Login, u.CSRF, recon.Teams(), recon.Teams(), u.workTeams()
	if p.MyTeams != nil {
		p.Owners = p.MyTeams
	}
	p.MyQueue = "/console/finance/exceptions?" + views.ExceptionFilter{Mine: "1", State: "UNRESOLVED"}.Query(0)
	p.Export = "/console/finance/exceptions.csv?" + v.Query(0)
	p.ExportXLSX = "/console/finance/exceptions.xlsx?" + v.Query(0)
	seen := map[string]bool{}
	for _, k := range recon.Kinds() {
		p.Kinds = append(p.Kinds, k.Kind)
		for _, res := range recon.CodesFor(k.Kind) {
			if !seen[res.Code] {
				seen[res.Code] = true
				p.Codes = append(p.Codes, views.Resolution{Code: res.Code, Meaning: res.Meaning})
			}
		}
	}
	slices.SortFunc(p.Codes, func(a, b views.Resolution) int { return strings.Compare(a.Code, b.Code) })
	for _, b := range recon.AgeBuckets {
		p.Buckets = append(p.Buckets, b.Name)
	}
	var rows []recon.WorkRow
	var total int
	var paise int64
	if err == nil {
		if total, paise, err = c.cfg.Recon.CountExceptions(ctx, f); err == nil {
			rows, err = c.cfg.Recon.WorkRows(ctx, f, sort)
		}
	}
	if err != nil {
		if booking.ErrorCode(err) == booking.EINTERNAL {
			c.serverError(w, r, err)
			return
		}
		p.Error, status = booking.ErrorMessage(err), http.StatusBadRequest
	}
	now := time.Now()
	for _, e := range rows {
		row := exceptionRow(e.Exception, now)
		row.GatewayRef, row.PNR, row.TxnAt, row.TxnAge = e.GatewayRef, e.BookingPNR, ist(e.TxnAt), age(e.TxnAge(now))
		if e.State == recon.StateOpen || e.State == recon.StateInvestigating {
			row.WriteOffBy = e.WriteOffBy
		}
		p.Rows = append(p.Rows, row)
	}
	p.Total, p.TotalAmount = total, views.INR(paise)
	if len(rows) > 0 {
		p.From, p.To = f.Offset+1, f.Offset+len(rows)
	}
	if f.Offset > 0 {
		p.Prev = v.Query(max(0, f.Offset-f.Limit))
	}
	if f.Offset+len(rows) < total {
		p.Next = v.Query(f.Offset + f.Limit)
	}
	if p.Gateways, err = c.gateways(r); err != nil {
		c.serverError(w, r, err)
		return
	}
	if p.People, err = c.assignable(ctx, u, ""); err != nil {
		c.serverError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	c.render(w, r, "Exceptions", views.ConsoleFinanceExceptions(p))
}

// assignable are the people u may assign an exception of team owner to
// (any team: ""): a team member takes it themselves; finance assigns it
// to finance, admins, and the team members of its owning team (of any
// team in the bulk form: each row is checked against its own team).
func (c *Console) assignable(ctx context.Context, u User, owner string) ([]string, error) {
	if u.Role == Team {
		return []string{u.Login}, nil
	}
	rows, err := c.pool.Query(ctx, `SELECT login FROM console_users WHERE NOT disabled
		AND (role IN ('finance', 'admin') OR (role = 'team' AND ($1 = '' OR $1 = ANY(teams)))) ORDER BY role = 'team', login`, owner)
	if err != nil {
		return nil, fmt.Errorf("assignable people: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var l string
		if err := rows.Scan(&l); err != nil {
			return nil, fmt.Errorf("assignable people: %w", err)
		}
		out = append(out, l)
	}
	return out, rows.Err()
}

// financeExport downloads the filtered list, sorted as shown, as CSV that
// is safe to open in a spreadsheet, or as a workbook (.xlsx). Audited: it
// carries customers' payment references. A team member's is their teams'.
func (c *Console) financeExport(w http.ResponseWriter, r *http.Request) {
	if c.noRecon(w, r) {
		return
	}
	ctx := r.Context()
	u, _ := userFrom(ctx)
	v, f, sort, err := worklistFilter(r.URL.Query(), u)
	if err == nil {
		// A bad filter or sort is refused before the download starts.
		probe := f
		probe.Limit, probe.Offset = 1, 0
		_, err = c.cfg.Recon.WorkRows(ctx, probe, sort)
	}
	if err != nil {
		if booking.ErrorCode(err) == booking.EINTERNAL {
			c.serverError(w, r, err)
			return
		}
		c.renderExceptions(w, r, r.URL.Query(), views.Worklist{}, booking.ErrorMessage(err), http.StatusBadRequest)
		return
	}
	format := "csv"
	if strings.HasSuffix(r.URL.Path, ".xlsx") {
		format = "xlsx"
	}
	if err := levers.Audit(ctx, c.pool, u.Login, "recon.export", "recon_exceptions", map[string]any{"format": format, "filter": v.Query(0),
		"teams": f.Teams}); err != nil {
		c.serverError(w, r, err)
		return
	}
	name := "exceptions-" + time.Now().In(booking.IST).Format("20060102-1504") + "." + format
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s"`, name))
	var err2 error
	if format == "xlsx" {
		w.Header().Set("Content-Type", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet")
		err2 = c.cfg.Recon.WriteWorklistXLSX(ctx, f, sort, w)
	} else {
		w.Header().Set("Content-Type", "text/csv; charset=utf-8")
		err2 = c.cfg.Recon.WriteWorklistCSV(ctx, f, sort, w)
	}
	if err2 != nil {
		// Headers are gone; the log says why the file is short.
		c.log.Error("exceptions export", "by", u.Login, "format", format, "err", err2)
	}
}

// exceptionMoney is what the exception's page offers on its team and money.
func (c *Console) exceptionMoney(ctx context.Context, e recon.Exception) (views.ExceptionMoney, error) {
	m := views.ExceptionMoney{CanAsk: recon.CanAskGateway(e) && c.cfg.Payments != nil, CanRefund: recon.CanRefund(e) && c.cfg.Payments != nil}
	for _, t := range recon.Teams() {
		if t != e.Owner {
			m.Teams = append(m.Teams, t)
		}
	}
	switch e.Path {
	case recon.PathAuto:
		m.AskLabel = "Runs the automatic resolution now: the gateway is asked and only its answer moves money (a ticket, or the money back)."
		if e.NeedsApproval && e.ApprovedBy == "" {
			m.AskLabel += " It is above the limit for one person: a second person approves it first."
		}
	case recon.PathInquiry:
		m.AskLabel = "Asks the gateway how the payment stands and applies its answer to our record, as the inquiry job does; the answer goes into the history."
	}
	if m.CanRefund {
		p, ok, err := c.cfg.Recon.RefundProposalOf(ctx, e.ID)
		if err != nil {
			return m, err
		}
		if ok {
			m.RefundBy, m.RefundNote = p.By, p.Note
		}
	}
	return m, nil
}

// notYours answers a team member's request about another team's
// exception: 403, audited as refused, and nothing of the exception shown
// but its owning team.
func (c *Console) notYours(w http.ResponseWriter, r *http.Request, action string, e recon.Exception, u User) {
	err := notYourTeam(u, e.Owner)
	if aerr := levers.Audit(r.Context(), c.pool, u.Login, action, "recon_exception:"+e.ID.String(),
		map[string]any{"refused": booking.ErrorMessage(err), "owner_team": e.Owner}); aerr != nil {
		c.serverError(w, r, aerr)
		return
	}
	c.log.Warn("exception of another team refused", "by", u.Login, "action", action, "exception", e.ID, "owner", e.Owner)
	w.WriteHeader(http.StatusForbidden)
	c.render(w, r, "Not your team's", views.ConsoleMessage(views.ConsoleMessagePage{Title: "Not your team's exception", TestID: "not-your-team",
		Message: booking.ErrorMessage(err)}))
}
