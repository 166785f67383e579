package payment

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Preference is how a passenger chose to pay, saved before the window so
// the pay step at 10:00 is one tap (seeds/000 section 4.2).
type Preference struct {
	Method string // "" (none), WALLET, UPI, CARD or NB
	VPA    string // UPI
	Bank   string // net banking
}

// Banks are the net-banking banks the gateways serve, sorted.
func Banks() []string {
	out := make([]string, 0, len(banks))
	for b := range banks {
		out = append(out, b)
	}
	slices.Sort(out)
	return out
}

// SavePreference validates and stores a passenger's payment preference
// with the same rules as paying with it.
func (s *Service) SavePreference(ctx context.Context, userID int64, p Preference) (Preference, error) {
	p.VPA, p.Bank = strings.TrimSpace(p.VPA), strings.ToUpper(strings.TrimSpace(p.Bank))
	switch p.Method {
	case UPI:
		p.Bank = ""
	case NetBanking:
		p.VPA = ""
	default:
		p.VPA, p.Bank = "", ""
	}
	if p.Method != "" {
		// The key is a placeholder: validate checks it, the preference has none.
		if err := validate(order{method: p.Method, vpa: p.VPA, bank: p.Bank, key: "preference"}); err != nil {
			return Preference{}, err
		}
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO user_prefs (user_id, pay_method, vpa, bank) VALUES ($1, $2, $3, $4)
		ON CONFLICT (user_id) DO UPDATE SET pay_method = $2, vpa = $3, bank = $4, updated_at = now()`,
		userID, p.Method, p.VPA, p.Bank); err != nil {
		return Preference{}, fmt.Errorf("save payment preference of %d: %w", userID, err)
	}
	return p, nil
}

// PreferenceOf is the passenger's saved payment preference (empty if none).
func (s *Service) PreferenceOf(ctx context.Context, userID int64) (Preference, error) {
	var p Preference
	err := s.pool.QueryRow(ctx, `SELECT pay_method, vpa, bank FROM user_prefs WHERE user_id = $1`, userID).Scan(&p.Method, &p.VPA, &p.Bank)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return Preference{}, fmt.Errorf("payment preference of %d: %w", userID, err)
	}
	return p, nil
}
