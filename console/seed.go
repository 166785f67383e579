package console

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"tatkal/booking/auth"
)

// DemoUser is a seeded console login.
type DemoUser struct {
	Login, Password, Role string
	FinanceLead           bool // escalations go to the finance leads
}

// DemoUsers are the console logins the dev command seeds: one per role,
// a second admin so dangerous changes can be approved, and a second finance
// person (approvals, write-offs) beside the finance lead.
var DemoUsers = []DemoUser{
	{"ops1", "console-demo", Ops, false},
	{"finance1", "console-demo", Finance, true},
	{"finance2", "console-demo", Finance, false},
	{"fraud1", "console-demo", Fraud, false},
	{"admin1", "console-demo", Admin, false},
	{"admin2", "console-demo", Admin, false},
}

// SeedDemoUsers creates the demo console users that do not exist yet.
func SeedDemoUsers(ctx context.Context, pool *pgxpool.Pool) ([]DemoUser, error) {
	return SeedUsers(ctx, pool, DemoUsers, auth.DefaultParams)
}

// SeedUsers creates console users (existing logins are left alone).
func SeedUsers(ctx context.Context, pool *pgxpool.Pool, users []DemoUser, p auth.Argon2Params) ([]DemoUser, error) {
	for _, u := range users {
		hash, err := auth.HashPassword(u.Password, p)
		if err != nil {
			return nil, err
		}
		if _, err := pool.Exec(ctx, `INSERT INTO console_users (login, name, role, password_hash, finance_lead) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (login) DO NOTHING`, u.Login, u.Login+" ("+u.Role+")", u.Role, hash, u.FinanceLead); err != nil {
			return nil, fmt.Errorf("seed console user %s: %w", u.Login, err)
		}
	}
	return users, nil
}
