package console

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"tatkal/booking/auth"
	"tatkal/recon"
)

// DemoUser is a seeded console login.
type DemoUser struct {
	Login, Password, Role string
	FinanceLead           bool     // escalations go to the finance leads
	Teams                 []string // role team: the owning teams they work
}

// DemoUsers are the console logins the dev command seeds: one per role,
// a second admin so dangerous changes can be approved, a second finance
// person (approvals, write-offs) beside the finance lead, and one team
// member per owning team of reconciliation exceptions (team-treasury,
// team-reservations, ...: recon.Teams).
var DemoUsers = append([]DemoUser{
	{Login: "ops1", Password: demoPassword, Role: Ops},
	{Login: "finance1", Password: demoPassword, Role: Finance, FinanceLead: true},
	{Login: "finance2", Password: demoPassword, Role: Finance},
	{Login: "fraud1", Password: demoPassword, Role: Fraud},
	{Login: "admin1", Password: demoPassword, Role: Admin},
	{Login: "admin2", Password: demoPassword, Role: Admin},
}, teamDemoUsers()...)

// demoPassword is every demo console user's password (tatkal dev only).
const demoPassword = "console-demo"

func teamDemoUsers() []DemoUser {
	var out []DemoUser
	for _, t := range recon.Teams() {
		out = append(out, DemoUser{Login: "team-" + t, Password: demoPassword, Role: Team, Teams: []string{t}})
	}
	return out
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
		teams := u.Teams
		if teams == nil {
			teams = []string{}
		}
		if _, err := pool.Exec(ctx, `INSERT INTO console_users (login, name, role, password_hash, finance_lead, teams) VALUES ($1, $2, $3, $4, $5, $6)
			ON CONFLICT (login) DO NOTHING`, u.Login, u.Login+" ("+u.Role+")", u.Role, hash, u.FinanceLead, teams); err != nil {
			return nil, fmt.Errorf("seed console user %s: %w", u.Login, err)
		}
	}
	return users, nil
}
