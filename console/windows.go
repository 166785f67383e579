package console

import (
	"encoding/json"
	"fmt"
	"net/http"

	"tatkal/booking/admission"
	"tatkal/views"
)

// windowsPage shows the fairness figures the window_fairness job stored
// after each window (real windows and rehearsals' sandbox windows alike),
// newest first: success by client type, account age and arrival second,
// Spearman's rho of arrival against queue place, and the verify result.
func (c *Console) windowsPage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	var p views.WindowsPage
	rows, err := c.pool.Query(ctx, `SELECT f.shard_id, s.train_number || ' ' || s.class || ' ' || s.journey_date::text || ' ' || s.quota,
		s.sandbox, f.figures FROM window_fairness f JOIN inventory_shards s ON s.id = f.shard_id
		ORDER BY f.computed_at DESC, f.shard_id DESC LIMIT 50`)
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	defer rows.Close()
	for rows.Next() {
		var fw views.FairnessWindow
		var raw []byte
		if err := rows.Scan(&fw.ShardID, &fw.Label, &fw.Sandbox, &raw); err != nil {
			c.serverError(w, r, err)
			return
		}
		var f admission.Figures
		if err := json.Unmarshal(raw, &f); err != nil {
			p.Errors = append(p.Errors, fmt.Sprintf("Window %d: its figures could not be read: %v", fw.ShardID, err))
			continue
		}
		fw.ComputedAt, fw.Entrants, fw.WithArrival = ist(f.ComputedAt), f.Entrants, f.WithArrival
		fw.Rho = "— (fewer than 3 arrivals)"
		if f.SpearmanRho != nil {
			fw.Rho = fmt.Sprintf("%.3f", *f.SpearmanRho)
			fw.RhoOK = *f.SpearmanRho > -0.05 && *f.SpearmanRho < 0.05
		}
		fw.Verified, fw.VerifyNote, fw.DrawsReopened = f.Verified, f.VerifyNote, f.DrawsReopened
		for _, g := range []struct {
			title string
			rates []admission.Rate
		}{{"by client type", f.ByClient}, {"by account age", f.ByAge}, {"by arrival second", f.BySecond}} {
			fg := views.FairnessGroup{Title: g.title}
			var all admission.Rate
			for _, rt := range g.rates {
				all.Entrants, all.Booked = all.Entrants+rt.Entrants, all.Booked+rt.Booked
			}
			for _, rt := range g.rates {
				row := views.FairnessRate{Group: rt.Group, Entrants: rt.Entrants, Booked: rt.Booked, Rate: fmt.Sprintf("%.1f %%", 100*rt.Rate), Chance: "—"}
				rest := admission.Rate{Entrants: all.Entrants - rt.Entrants, Booked: all.Booked - rt.Booked}
				if rt.Above(rest) {
					p := admission.ByChance(rt, rest)
					row.Chance, row.BeyondChance = admission.ChancePercent(p), p < 0.01
				}
				fg.Rows = append(fg.Rows, row)
			}
			fw.Groups = append(fw.Groups, fg)
		}
		fw.Method = f.Method
		p.Windows = append(p.Windows, fw)
	}
	if err := rows.Err(); err != nil {
		c.serverError(w, r, err)
		return
	}
	c.render(w, r, "Window fairness", views.ConsoleWindows(p))
}
