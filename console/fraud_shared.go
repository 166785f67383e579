package console

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"tatkal/views"
)

// sharedThing is one device, payment instrument, network or passenger that
// two or more of a case's members used in its window.
type sharedThing struct {
	kind, what string
	members    []int64
}

// maxShared bounds the things a case lists, most shared first.
const maxShared = 200

// sharedThings reads what the members of a case share in its window, from
// the signals recorded on the live path and the payments of their holds:
// what an analyst must see to judge a link, masked so the page and the
// workbook carry no card, address or passenger in full.
func (c *Console) sharedThings(ctx context.Context, members []int64, window time.Time) ([]sharedThing, error) {
	rows, err := c.pool.Query(ctx, `
		WITH sig AS (SELECT hold_id, user_id, device_id, ip_net24 FROM fraud_signals WHERE window_opens_at = $2 AND user_id = ANY($1)),
		items AS (
			SELECT 'device' AS kind, device_id AS key, user_id FROM sig WHERE device_id <> ''
			UNION SELECT 'network', ip_net24::text, user_id FROM sig WHERE ip_net24 IS NOT NULL
			UNION SELECT CASE WHEN p.vpa <> '' THEN 'upi' ELSE split_part(p.instrument_ref, ':', 1) END,
			             CASE WHEN p.vpa <> '' THEN lower(p.vpa) ELSE p.instrument_ref END, s.user_id
			      FROM sig s JOIN payments p ON p.hold_id = s.hold_id WHERE p.vpa <> '' OR p.instrument_ref <> ''
			UNION SELECT 'passenger', sp.name_norm || '|' || sp.age, s.user_id FROM sig s JOIN fraud_signal_passengers sp ON sp.hold_id = s.hold_id
			UNION SELECT 'passenger_id', sp.id_hash, s.user_id FROM sig s JOIN fraud_signal_passengers sp ON sp.hold_id = s.hold_id WHERE sp.id_hash <> '')
		SELECT kind, key, array_agg(DISTINCT user_id ORDER BY user_id) FROM items
		GROUP BY kind, key HAVING count(DISTINCT user_id) >= 2
		ORDER BY count(DISTINCT user_id) DESC, kind, key LIMIT $3`, members, window, maxShared)
	if err != nil {
		return nil, fmt.Errorf("shared by members: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (sharedThing, error) {
		var t sharedThing
		var key string
		err := r.Scan(&t.kind, &key, &t.members)
		t.kind, t.what = maskShared(t.kind, key)
		return t, err
	})
	if err != nil {
		return nil, fmt.Errorf("shared by members: %w", err)
	}
	return out, nil
}

// maskShared names a shared thing's kind and shows enough of it to tell
// one from another and no more: a UPI address's bank handle, a card's or
// bank account's last four characters of the gateway's fingerprint (the
// gateway reports no card digits), a device's last four, the /24 an
// address is in, a passenger's initials and age. A passenger's ID number
// is never shown: only that the same one recurs.
func maskShared(kind, key string) (string, string) {
	last4 := func(s string) string {
		if len(s) <= 4 {
			return "••" + s
		}
		return "••" + s[len(s)-4:]
	}
	switch kind {
	case "upi":
		if _, bank, ok := strings.Cut(key, "@"); ok {
			return "UPI address", "••@" + bank
		}
		return "UPI address", last4(key)
	case "card":
		return "card", "card " + last4(strings.TrimPrefix(key, "card:"))
	case "nb":
		return "bank account", "account " + last4(strings.TrimPrefix(key, "nb:"))
	case "device":
		return "device", "device " + last4(key)
	case "network":
		return "network (/24)", key
	case "passenger":
		name, age, _ := strings.Cut(key, "|")
		var initials []string
		for _, w := range strings.Fields(name) {
			initials = append(initials, strings.ToUpper(string([]rune(w)[:1]))+".")
		}
		return "passenger", strings.Join(initials, " ") + ", " + age
	case "passenger_id":
		return "passenger ID document", "the same ID number (hashed, not shown)"
	}
	return kind, last4(key)
}

// sharedRows are the case's shared things for the page and the workbook.
func (ci *clusterInfo) sharedRows() []views.FraudSharedRow {
	out := make([]views.FraudSharedRow, 0, len(ci.shared))
	for _, t := range ci.shared {
		names := make([]string, len(t.members))
		for i, m := range t.members {
			names[i] = ci.name(m)
		}
		out = append(out, views.FraudSharedRow{Kind: t.kind, What: t.what, Accounts: fmt.Sprint(len(t.members)), Members: strings.Join(names, ", ")})
	}
	return out
}
