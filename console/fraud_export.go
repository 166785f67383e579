package console

import (
	"fmt"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/xuri/excelize/v2"

	"tatkal/booking/audit"
)

// fraudExport writes a cluster's evidence as an XLSX workbook (Summary,
// Members, Bookings, Evidence, what the members share, masked, and the
// decisions with their labels), for a police complaint. Audited: the
// workbook carries personal data.
func (c *Console) fraudExport(w http.ResponseWriter, r *http.Request) {
	u, _ := userFrom(r.Context())
	id, ok := pathID(r)
	if !ok {
		http.NotFound(w, r)
		return
	}
	ci, err := c.loadCluster(r.Context(), id)
	if err == pgx.ErrNoRows {
		http.NotFound(w, r)
		return
	}
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	f := excelize.NewFile()
	defer f.Close()
	sheets := []struct {
		name string
		rows [][]any
	}{
		{"Summary", [][]any{{"cluster", id}, {"window (IST)", ist(ci.window)}, {"score", ci.score}, {"status", ci.status},
			{"accounts", len(ci.ids)}, {"exported by", u.Login}, {"exported at (UTC)", time.Now().UTC().Format(time.RFC3339)}}},
		{"Members", [][]any{{"user id", "login", "account age (days)", "verification", "devices in window", "holds in window", "bookings in window"}}},
		{"Bookings", [][]any{{"PNR", "login", "journey", "status", "fare (Rs)", "booked (IST)"}}},
		{"Evidence", [][]any{{"account", "account", "link", "weight", "detail"}}},
		{"Shared", [][]any{{"kind", "what (masked)", "accounts sharing it", "which"}}},
		{"Decisions", [][]any{{"decision", "outcome", "label", "reason", "members", "analyst", "decided (IST)", "approved by", "enforced (IST)"}}},
	}
	for _, why := range ci.evidence.Why {
		sheets[0].rows = append(sheets[0].rows, []any{"flagged because", why})
	}
	for _, m := range ci.members {
		sheets[1].rows = append(sheets[1].rows, []any{m.UserID, m.Login, m.Age, m.Verified, m.Devices, m.Holds, m.Bookings})
	}
	for _, b := range ci.bookings {
		sheets[2].rows = append(sheets[2].rows, []any{b.PNR, b.Login, b.Journey, b.Status, b.Fare, b.BookedAt})
	}
	for _, e := range ci.evidenceRows() {
		sheets[3].rows = append(sheets[3].rows, []any{e.A, e.B, e.Kind, e.Weight, e.Detail})
	}
	for _, sh := range ci.sharedRows() {
		sheets[4].rows = append(sheets[4].rows, []any{sh.Kind, sh.What, sh.Accounts, sh.Members})
	}
	logins, err := c.consoleLogins(r.Context())
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	cp, err := c.clusterPage(r.Context(), u.ID, ci, logins)
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	for _, d := range cp.Decisions {
		sheets[5].rows = append(sheets[5].rows, []any{d.ID, d.Outcome, d.Label, d.Reason, d.Members, d.Analyst, d.DecidedAt, d.ApprovedBy, d.EnforcedAt})
	}
	for i, s := range sheets {
		if i == 0 {
			if err := f.SetSheetName("Sheet1", s.name); err != nil {
				c.serverError(w, r, err)
				return
			}
		} else if _, err := f.NewSheet(s.name); err != nil {
			c.serverError(w, r, err)
			return
		}
		for j, row := range s.rows {
			cell, _ := excelize.CoordinatesToCellName(1, j+1)
			if err := f.SetSheetRow(s.name, cell, &row); err != nil {
				c.serverError(w, r, err)
				return
			}
		}
	}
	if err := audit.Write(r.Context(), c.pool, u.Login, "fraud.export", fmt.Sprintf("cluster:%d", id),
		map[string]any{"members": len(ci.ids), "bookings": len(ci.bookings)}); err != nil {
		c.serverError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="cluster-%d-evidence.xlsx"`, id))
	if err := f.Write(w); err != nil {
		c.log.Error("write fraud evidence workbook", "cluster", id, "err", err)
	}
}
