package auth

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// PassengerLogin checks a passenger's password through the login guard
// (backoff per account and address, bounded hashing, an unknown login
// costing a hash like a wrong one) and returns the session to sign, without
// its ID and expiry. The JSON API and the passenger pages both sign in
// through it, so one guard and one rule apply to both.
func PassengerLogin(ctx context.Context, pool *pgxpool.Pool, g *Guard, login, password, ip string, proof Proof) (Session, error) {
	var s Session
	err := g.Attempt(ctx, login, ip, proof, func(ctx context.Context) (bool, error) {
		var hash, userType, verification string
		err := pool.QueryRow(ctx, `SELECT id, password_hash, user_type, id_verification_status, created_at, session_generation
			FROM users WHERE login = $1`, login).Scan(&s.UserID, &hash, &userType, &verification, &s.CreatedAt, &s.Generation)
		if errors.Is(err, pgx.ErrNoRows) {
			hash = "" // checked against the guard's dummy hash: same cost as a wrong password
		} else if err != nil {
			return false, fmt.Errorf("login: read user: %w", err)
		}
		s.Verified, s.Agent = verification == "VERIFIED", userType == "AGENT"
		return g.VerifyPassword(hash, password)
	})
	return s, err
}
