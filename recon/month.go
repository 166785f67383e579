package recon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/xuri/excelize/v2"

	"tatkal/booking"
	"tatkal/booking/audit"
	"tatkal/booking/db"
	"tatkal/booking/india"
)

// Month end: the period view of a month (in IST, all gateways) and the
// ageing report a controller signs.
//
// The period's figures are read from the exceptions' history, not from
// their state now, since an exception cleared on a rerun can reopen:
// opening is what was unresolved as the month began, found what became
// unresolved in it (detected, or reopened), resolved and written off what
// left unresolved in it, closing what was unresolved as it ended (or now,
// for the month still running). So opening + found − resolved − written
// off = closing, by count and amount, for every kind and owner. An
// exception's amount is its stake, or what was written off for a written-
// off one; its owner is its owning team as it is now.
//
// The ageing report ages what was unresolved at the month's end from its
// detection, in MonthBuckets, by count and amount at stake, per kind. A
// finance lead signs a month once it is over; the report is then frozen as
// signed (recon_month_signoffs, append-only) and the page and the workbook
// show the frozen one, and say whether today's figures for that month
// still agree.

// Flow is a count of exceptions and their amount.
type Flow struct {
	Count int   `json:"count"`
	Paise int64 `json:"paise"`
}

func (f *Flow) add(n int, paise int64) {
	f.Count += n
	f.Paise += int64(n) * paise
}

// PeriodRow is a kind's or an owner's movement over the month.
type PeriodRow struct {
	Key        string `json:"key"`
	Opening    Flow   `json:"opening"`
	Found      Flow   `json:"found"`
	Resolved   Flow   `json:"resolved"`
	WrittenOff Flow   `json:"written_off"`
	Closing    Flow   `json:"closing"`
}

// TiesOut says opening + found − resolved − written off = closing, by
// count and by amount.
func (r PeriodRow) TiesOut() bool {
	return r.Opening.Count+r.Found.Count-r.Resolved.Count-r.WrittenOff.Count == r.Closing.Count &&
		r.Opening.Paise+r.Found.Paise-r.Resolved.Paise-r.WrittenOff.Paise == r.Closing.Paise
}

// MonthBuckets are the ageing report's buckets, by whole days since
// detection: up to MaxDays (the last has none).
var MonthBuckets = []struct {
	Name    string
	MaxDays int
}{{"0-2 d", 2}, {"3-7 d", 7}, {"8-30 d", 30}, {"over 30 d", 0}}

// monthBucket is the index in MonthBuckets of an age.
func monthBucket(age time.Duration) int {
	days := int(age / (24 * time.Hour))
	for i, b := range MonthBuckets {
		if b.MaxDays == 0 || days <= b.MaxDays {
			return i
		}
	}
	return len(MonthBuckets) - 1
}

// AgeingRow is a kind's unresolved exceptions at the month's end by bucket.
type AgeingRow struct {
	Kind    string `json:"kind"`
	Buckets []Flow `json:"buckets"`
	Total   Flow   `json:"total"`
}

// MonthReport is a month's period view and ageing report.
type MonthReport struct {
	Month    time.Time   `json:"month"` // its first day
	From     time.Time   `json:"from"`  // midnight IST of its first day
	To       time.Time   `json:"to"`    // midnight IST of the next month's first
	AsOf     time.Time   `json:"as_of"` // To, or now for the month still running
	Over     bool        `json:"over"`
	ByKind   []PeriodRow `json:"by_kind"`
	ByOwner  []PeriodRow `json:"by_owner"`
	Total    PeriodRow   `json:"total"`
	Ageing   []AgeingRow `json:"ageing"`
	AgeTotal AgeingRow   `json:"ageing_total"`
	// SignedBy and SignedAt: the finance lead who signed the month; the
	// report is then the one they signed. Drift says today's figures for
	// the month differ from the signed ones (a late run, say).
	SignedBy string     `json:"signed_by,omitempty"`
	SignedAt *time.Time `json:"signed_at,omitempty"`
	Drift    bool       `json:"-"`
	// Gateway narrows the figures to one gateway's exceptions (MonthOf);
	// "" is every gateway, the report a lead signs.
	Gateway string `json:"gateway,omitempty"`
}

// MonthStart is the first day of t's month in IST, as a date.
func MonthStart(t time.Time) time.Time {
	t = t.In(booking.IST)
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
}

// ParseMonth reads "2026-11" as that month's first day.
func ParseMonth(v string) (time.Time, error) {
	m, err := time.Parse("2006-01", v)
	if err != nil {
		return time.Time{}, booking.Errorf(booking.EINVALID, "BAD_MONTH", "Give the month as YYYY-MM, not %q.", v)
	}
	return m, nil
}

// MonthReport is the month's report: the signed one once a lead has
// signed it, else today's figures.
func (s *Service) MonthReport(ctx context.Context, month time.Time) (MonthReport, error) {
	month = MonthStart(month)
	live, err := s.monthReport(ctx, s.pool, month, "")
	if err != nil {
		return MonthReport{}, err
	}
	signed, ok, err := s.signedMonth(ctx, s.pool, month)
	if err != nil || !ok {
		return live, err
	}
	signed.Drift = !sameFigures(signed, live)
	return signed, nil
}

// sameFigures says two reports of a month agree on every figure.
func sameFigures(a, b MonthReport) bool {
	x, _ := json.Marshal([]any{a.ByKind, a.ByOwner, a.Total, a.Ageing, a.AgeTotal})
	y, _ := json.Marshal([]any{b.ByKind, b.ByOwner, b.Total, b.Ageing, b.AgeTotal})
	return string(x) == string(y)
}

func (s *Service) signedMonth(ctx context.Context, q db.Querier, month time.Time) (MonthReport, bool, error) {
	var r MonthReport
	var by string
	var at time.Time
	err := q.QueryRow(ctx, `SELECT signed_by, signed_at, report FROM recon_month_signoffs WHERE month = $1`, pgDate(month)).Scan(&by, &at, &r)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, false, nil
	}
	if err != nil {
		return r, false, fmt.Errorf("month %s sign-off: %w", month.Format("2006-01"), err)
	}
	r.SignedBy, r.SignedAt = by, &at
	return r, true, nil
}

// MonthOf is the month's figures of one gateway's exceptions ("": every
// gateway's, as MonthReport): always today's figures, since a lead signs
// the whole month, whose signature (SignedBy, SignedAt) it carries.
func (s *Service) MonthOf(ctx context.Context, month time.Time, gateway string) (MonthReport, error) {
	if gateway == "" {
		return s.MonthReport(ctx, month)
	}
	month = MonthStart(month)
	live, err := s.monthReport(ctx, s.pool, month, gateway)
	if err != nil {
		return MonthReport{}, err
	}
	signed, ok, err := s.signedMonth(ctx, s.pool, month)
	if err == nil && ok {
		live.SignedBy, live.SignedAt = signed.SignedBy, signed.SignedAt
	}
	return live, err
}

// monthReport works the month's figures out from the exceptions' history,
// of one gateway's exceptions or ("") every gateway's.
func (s *Service) monthReport(ctx context.Context, q db.Querier, month time.Time, gateway string) (MonthReport, error) {
	from := time.Date(month.Year(), month.Month(), 1, 0, 0, 0, 0, booking.IST)
	r := MonthReport{Month: month, From: from, To: from.AddDate(0, 1, 0), Gateway: gateway}
	now := s.cfg.Now()
	r.AsOf, r.Over = r.To, !now.Before(r.To)
	if !r.Over {
		r.AsOf = now
	}
	if r.AsOf.Before(r.From) {
		return r, booking.Errorf(booking.EINVALID, "FUTURE_MONTH", "%s has not begun.", month.Format("January 2006"))
	}
	// Each exception's state as the month began and as it ended, and its
	// moves in between, each event against the state before it.
	rows, err := q.Query(ctx, `WITH ev AS (
			SELECT exception_id, at, id, to_state, lag(to_state) OVER (PARTITION BY exception_id ORDER BY at, id) AS prev
			FROM reconciliation_exception_events WHERE to_state <> '' AND at < $2)
		, per AS (
			SELECT exception_id,
				coalesce((array_agg(to_state ORDER BY at DESC, id DESC) FILTER (WHERE at < $1))[1] IN ('OPEN', 'INVESTIGATING'), false) AS at_start,
				(array_agg(to_state ORDER BY at DESC, id DESC))[1] IN ('OPEN', 'INVESTIGATING') AS at_end,
				count(*) FILTER (WHERE at >= $1 AND to_state IN ('OPEN', 'INVESTIGATING')
				                 AND (prev IS NULL OR prev IN ('RESOLVED', 'WRITTEN_OFF'))) AS found,
				count(*) FILTER (WHERE at >= $1 AND to_state = 'RESOLVED' AND prev IN ('OPEN', 'INVESTIGATING')) AS resolved,
				count(*) FILTER (WHERE at >= $1 AND to_state = 'WRITTEN_OFF' AND prev IN ('OPEN', 'INVESTIGATING')) AS written
			FROM ev GROUP BY exception_id)
		SELECT e.kind, e.owner_team, coalesce(e.written_off_paise, e.stake_paise), e.detected_at, p.at_start, p.at_end,
			p.found, p.resolved, p.written
		FROM per p JOIN reconciliation_exceptions e ON e.id = p.exception_id
		WHERE (p.at_start OR p.at_end OR p.found + p.resolved + p.written > 0) AND ($3 = '' OR e.gateway = $3)`, r.From, r.AsOf, gateway)
	if err != nil {
		return r, fmt.Errorf("month %s: %w", month.Format("2006-01"), err)
	}
	defer rows.Close()
	byKind, byOwner := map[string]*PeriodRow{}, map[string]*PeriodRow{}
	ageing := map[string]*AgeingRow{}
	newAgeing := func(kind string) *AgeingRow { return &AgeingRow{Kind: kind, Buckets: make([]Flow, len(MonthBuckets))} }
	r.AgeTotal = *newAgeing("ALL")
	for rows.Next() {
		var kind, owner string
		var paise int64
		var detected time.Time
		var atStart, atEnd bool
		var found, resolved, written int
		if err := rows.Scan(&kind, &owner, &paise, &detected, &atStart, &atEnd, &found, &resolved, &written); err != nil {
			return r, fmt.Errorf("month %s: %w", month.Format("2006-01"), err)
		}
		for _, m := range []struct {
			rows map[string]*PeriodRow
			key  string
		}{{byKind, kind}, {byOwner, owner}, {nil, ""}} {
			row := &r.Total
			if m.rows != nil {
				if row = m.rows[m.key]; row == nil {
					row = &PeriodRow{Key: m.key}
					m.rows[m.key] = row
				}
			}
			row.Opening.add(b2i(atStart), paise)
			row.Found.add(found, paise)
			row.Resolved.add(resolved, paise)
			row.WrittenOff.add(written, paise)
			row.Closing.add(b2i(atEnd), paise)
		}
		if atEnd {
			a := ageing[kind]
			if a == nil {
				a = newAgeing(kind)
				ageing[kind] = a
			}
			b := monthBucket(r.AsOf.Sub(detected))
			for _, x := range []*AgeingRow{a, &r.AgeTotal} {
				x.Buckets[b].add(1, paise)
				x.Total.add(1, paise)
			}
		}
	}
	if err := rows.Err(); err != nil {
		return r, fmt.Errorf("month %s: %w", month.Format("2006-01"), err)
	}
	r.Total.Key = "ALL"
	// In the kinds table's order; owners as they first appear there.
	for _, k := range kinds {
		if row := byKind[k.Kind]; row != nil {
			r.ByKind = append(r.ByKind, *row)
		}
		if a := ageing[k.Kind]; a != nil {
			r.Ageing = append(r.Ageing, *a)
		}
	}
	seen := map[string]bool{}
	for _, k := range kinds {
		if row := byOwner[k.Owner]; row != nil && !seen[k.Owner] {
			r.ByOwner = append(r.ByOwner, *row)
			seen[k.Owner] = true
		}
	}
	for o, row := range byOwner { // a team no kind owns by default
		if !seen[o] {
			r.ByOwner = append(r.ByOwner, *row)
		}
	}
	return r, nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// SignMonth is a finance lead's signature under a month that is over: its
// report is frozen as it stands, and audited. A month is signed once.
func (s *Service) SignMonth(ctx context.Context, month time.Time, actor string) (MonthReport, error) {
	if err := checkActor(actor); err != nil {
		return MonthReport{}, err
	}
	month = MonthStart(month)
	var r MonthReport
	err := db.Transact(ctx, s.pool, func(tx pgx.Tx) error {
		var lead bool
		err := tx.QueryRow(ctx, `SELECT finance_lead AND role IN ('finance', 'admin') AND NOT disabled FROM console_users WHERE login = $1`,
			actor).Scan(&lead)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("sign month: %w", err)
		}
		if !lead {
			return booking.Errorf(booking.EFORBIDDEN, "NOT_FINANCE_LEAD", "Only a finance lead signs a month's report; %s is not one.", actor)
		}
		if r, err = s.monthReport(ctx, tx, month, ""); err != nil {
			return err
		}
		if !r.Over {
			return booking.Errorf(booking.EINVALID, "MONTH_NOT_OVER", "%s is not over yet: its report is signed once it is.",
				month.Format("January 2006"))
		}
		tag, err := tx.Exec(ctx, `INSERT INTO recon_month_signoffs (month, signed_by, report) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`,
			pgDate(month), actor, r)
		if err != nil {
			return fmt.Errorf("sign month: %w", err)
		}
		if tag.RowsAffected() == 0 {
			prior, _, err := s.signedMonth(ctx, tx, month)
			if err != nil {
				return err
			}
			return booking.Errorf(booking.ECONFLICT, "ALREADY_SIGNED", "%s was signed by %s already.", month.Format("January 2006"), prior.SignedBy)
		}
		return audit.Write(ctx, tx, actor, "recon.month_signoff", "recon_month:"+month.Format("2006-01"), map[string]any{
			"opening": r.Total.Opening.Count, "found": r.Total.Found.Count, "resolved": r.Total.Resolved.Count,
			"written_off": r.Total.WrittenOff.Count, "closing": r.Total.Closing.Count,
			"closing_at_stake": india.Rupees(r.Total.Closing.Paise), "over_30_days": r.AgeTotal.Buckets[len(MonthBuckets)-1].Count})
	})
	if err != nil {
		return MonthReport{}, err
	}
	s.log.InfoContext(ctx, "recon month signed", "month", month.Format("2006-01"), "by", actor)
	return s.MonthReport(ctx, month)
}

// WriteMonthXLSX writes the month's workbook to w: the report's heading
// (the month, as of when, who signed), the period by kind and by owner and
// the ageing by kind, each an Excel table with its total in the row under
// it, amounts as numbers in rupees. A signed month's workbook is the
// signed report.
func (s *Service) WriteMonthXLSX(ctx context.Context, month time.Time, w io.Writer) error {
	r, err := s.MonthReport(ctx, month)
	if err != nil {
		return err
	}
	f := excelize.NewFile()
	defer f.Close()
	st, err := newStyles(f)
	if err != nil {
		return fmt.Errorf("workbook styles: %w", err)
	}
	if err := f.SetSheetName("Sheet1", "Month"); err != nil {
		return err
	}
	label := func(s string) excelize.Cell { return excelize.Cell{StyleID: st.label, Value: s} }
	signed, signedAt := "not signed", any(nil)
	if r.SignedBy != "" {
		signed, signedAt = r.SignedBy, excelize.Cell{StyleID: st.datetime, Value: excelTime(*r.SignedAt)}
	}
	status := "the month is running: figures as of now"
	switch {
	case r.SignedBy != "" && r.Drift:
		status = "signed; today's figures for the month differ from the signed ones"
	case r.SignedBy != "":
		status = "signed"
	case r.Over:
		status = "over, awaiting a finance lead's signature"
	}
	head := [][]any{
		{label("Month"), r.Month.Format("January 2006")},
		{label("From (IST)"), excelize.Cell{StyleID: st.datetime, Value: excelTime(r.From)}},
		{label("To (IST)"), excelize.Cell{StyleID: st.datetime, Value: excelTime(r.To)}},
		{label("As of (IST)"), excelize.Cell{StyleID: st.datetime, Value: excelTime(r.AsOf)}},
		{label("Status"), status},
		{label("Signed by"), signed},
		{label("Signed at (IST)"), signedAt},
		{label("Ties out"), fmt.Sprint(r.Total.TiesOut())},
	}
	if err := writeTables(f, "Month", st, []column{{"Figure", 22}, {"Value", 40}}, []table{{Name: "MonthHeading", Head: []string{"Figure", "Value"}, Rows: head}}); err != nil {
		return fmt.Errorf("month sheet: %w", err)
	}
	money := st.rupeeCell
	flows := func(row PeriodRow) []any {
		out := []any{row.Key}
		for _, fl := range []Flow{row.Opening, row.Found, row.Resolved, row.WrittenOff, row.Closing} {
			out = append(out, fl.Count, money(fl.Paise))
		}
		return out
	}
	periodHead := func(first string) []string {
		return []string{first, "Opening", "Opening (₹)", "Found", "Found (₹)", "Resolved", "Resolved (₹)", "Written off",
			"Written off (₹)", "Closing", "Closing (₹)"}
	}
	var kindRows, ownerRows [][]any
	for _, row := range r.ByKind {
		kindRows = append(kindRows, flows(row))
	}
	for _, row := range r.ByOwner {
		ownerRows = append(ownerRows, flows(row))
	}
	total := flows(r.Total)
	total[0] = label("All")
	cols := []column{{"", 24}}
	for range 5 {
		cols = append(cols, column{"", 11}, column{"", 16})
	}
	if err := writeTables(f, "Period", st, cols, []table{
		{Name: "PeriodByKind", Head: periodHead("Kind"), Rows: kindRows, After: total},
		{Name: "PeriodByOwner", Head: periodHead("Owner"), Rows: ownerRows, After: total},
	}); err != nil {
		return fmt.Errorf("period sheet: %w", err)
	}
	ageHead := []string{"Kind"}
	for _, b := range MonthBuckets {
		ageHead = append(ageHead, b.Name, b.Name+" (₹)")
	}
	ageHead = append(ageHead, "Unresolved", "Unresolved (₹)")
	ageRow := func(a AgeingRow) []any {
		out := []any{a.Kind}
		for _, b := range a.Buckets {
			out = append(out, b.Count, money(b.Paise))
		}
		return append(out, a.Total.Count, money(a.Total.Paise))
	}
	var ageRows [][]any
	for _, a := range r.Ageing {
		ageRows = append(ageRows, ageRow(a))
	}
	ageTotal := ageRow(r.AgeTotal)
	ageTotal[0] = label("All")
	cols = []column{{"", 24}}
	for range len(MonthBuckets) + 1 {
		cols = append(cols, column{"", 11}, column{"", 16})
	}
	if err := writeTables(f, "Ageing", st, cols, []table{{Name: "AgeingByKind", Head: ageHead, Rows: ageRows, After: ageTotal}}); err != nil {
		return fmt.Errorf("ageing sheet: %w", err)
	}
	if _, err := f.WriteTo(w); err != nil {
		return fmt.Errorf("write month workbook: %w", err)
	}
	return nil
}
