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
}

// DemoUsers are the console logins the dev command seeds: one per role,
// and a second admin so dangerous changes can be approved.
var DemoUsers = []DemoUser{
	{"ops1", "console-demo", Ops},
	{"finance1", "console-demo", Finance},
	{"fraud1", "console-demo", Fraud},
	{"admin1", "console-demo", Admin},
	{"admin2", "console-demo", Admin},
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
		if _, err := pool.Exec(ctx, `INSERT INTO console_users (login, name, role, password_hash) VALUES ($1, $2, $3, $4)
			ON CONFLICT (login) DO NOTHING`, u.Login, u.Login+" ("+u.Role+")", u.Role, hash); err != nil {
			return nil, fmt.Errorf("seed console user %s: %w", u.Login, err)
		}
	}
	return users, nil
}
