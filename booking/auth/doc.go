// Package auth hashes passwords and signs the stateless session tokens that
// let the hot path know who is calling without a database round trip.
// CheckNewPassword holds the rules of a password a person sets (console
// users: tatkal users and /console/users).
//
// # The login guard
//
// One Guard stands in front of /v1/auth/login, the passenger site's sign-in
// and /console/login. Its failure counters are in PostgreSQL, shared by every
// process: per account at one address (5 free), per account (20) and per
// address or IPv6 /64 (50). Past them every sign-in, right password or not, is
// refused with 429 and Retry-After, the wait doubling from 1 s to 15 minutes.
// Each attempt is reserved before hashing, atomically across processes, and
// attempts in flight count like failures, so parallel guesses get no more
// password checks than sequential ones; a reservation left by a crashed
// process expires after a minute. Wrong sign-ins are kept 30 days in
// login_failures (console ones also in the audit log).
//
// When only the account's own lock refuses (an attacker elsewhere spent its
// guesses), a solved proof of work (admission's SHA-256 puzzle, 18 bits,
// issued for that account, single use, 5 minutes) lets one sign-in through to
// the password check (POST /v1/auth/login/challenge, then challenge and nonce
// with the login; the console's form solves it in the browser). It never opens
// an address's lock, so a guesser still gets only its allowance per address,
// and an attacker cannot lock an owner out.
//
// At most 2×GOMAXPROCS passwords are hashed at once per process (2 for the
// console); the rest get 503 and Retry-After at once, which bounds the memory
// argon2id takes under a rush of sign-ins. An unknown login is hashed against
// a dummy hash of the same cost.
//
// # Revocable sessions
//
// Passenger tokens carry a session id and the account's session generation.
// POST /v1/auth/logout revokes one session, POST /v1/auth/logout-everywhere
// raises the generation. Each process keeps revocations in memory and reloads
// them from PostgreSQL about once a second, so the hot path makes no extra
// call: a revoked token stops working at once where it was revoked and within
// 5 s everywhere; past 5 s without a reload, sessions are refused with 503
// (SESSIONS_UNCHECKED) rather than trusted.
package auth
