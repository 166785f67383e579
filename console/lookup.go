package console

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/google/uuid"

	"tatkal/booking/india"
	"tatkal/views"
)

var pnrRE = regexp.MustCompile(`^[1-9][0-9]{9}$`)

const lookupSQL = `SELECT h.id::text, u.login, s.train_number || ' ' || s.class || ' ' || s.journey_date::text, h.kind, h.state, h.state_reason,
	h.created_at, h.expires_at, h.fare_paise, coalesce(b.pnr, ''), coalesce(b.status, ''),
	s.chart_state, s.charted_at, s.chart_core_state, s.chart_core_ref, s.chart_error
	FROM holds h JOIN users u ON u.id = h.user_id JOIN inventory_shards s ON s.id = h.shard_id
	LEFT JOIN bookings b ON b.hold_id = h.id `

// lookupPage finds holds and bookings by hold id, PNR or passenger login.
func (c *Console) lookupPage(w http.ResponseWriter, r *http.Request) {
	q := strings.TrimSpace(r.URL.Query().Get("q"))
	p := views.LookupPage{Query: q}
	if q != "" {
		var err error
		p.Rows, err = c.lookup(r.Context(), q)
		if err != nil {
			c.serverError(w, r, err)
			return
		}
	}
	c.render(w, r, "Lookup", views.ConsoleLookup(p))
}

func (c *Console) lookup(ctx context.Context, q string) ([]views.LookupRow, error) {
	where, arg := `WHERE u.login = $1`, any(q)
	if id, err := uuid.Parse(q); err == nil {
		where, arg = `WHERE h.id = $1`, id
	} else if pnrRE.MatchString(q) {
		where = `WHERE b.pnr = $1`
	}
	rows, err := c.pool.Query(ctx, lookupSQL+where+` ORDER BY h.created_at DESC LIMIT 100`, arg)
	if err != nil {
		return nil, fmt.Errorf("lookup %q: %w", q, err)
	}
	defer rows.Close()
	var out []views.LookupRow
	for rows.Next() {
		var row views.LookupRow
		var created, expires time.Time
		var fare int64
		var chart, core, coreRef, chartErr string
		var charted *time.Time
		if err := rows.Scan(&row.HoldID, &row.Login, &row.Shard, &row.Kind, &row.State, &row.Reason, &created, &expires, &fare,
			&row.PNR, &row.BookingStatus, &chart, &charted, &core, &coreRef, &chartErr); err != nil {
			return nil, fmt.Errorf("lookup %q: %w", q, err)
		}
		row.Chart = chartWords(chart, charted, core, coreRef, chartErr)
		row.Created, row.Expires, row.Fare = ist(created), ist(expires), india.Decimal(fare)
		out = append(out, row)
	}
	return out, rows.Err()
}

// chartWords is a shard's chart in one line for the lookup.
func chartWords(state string, at *time.Time, core, coreRef, why string) string {
	switch {
	case state == "FAILED":
		return "chart FAILED: " + why
	case state != "CHARTED" || at == nil:
		return strings.ToLower(state)
	case core == "SENT":
		return "charted " + ist(*at) + ", at the core " + coreRef
	case core == "FAILED":
		return "charted " + ist(*at) + ", NOT at the core: " + why
	}
	return "charted " + ist(*at) + ", sending to the core"
}
