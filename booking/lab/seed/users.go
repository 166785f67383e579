package seed

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"tatkal/booking/auth"
	"tatkal/booking/db"
)

// UsersSpec describes a batch of users to create.
type UsersSpec struct {
	// Count users are created, logins Prefix00001, Prefix00002, ... (five
	// digits; the 100,000th is Prefix100000).
	Count  int
	Prefix string
	// Password is hashed once with auth.DefaultParams and the hash shared by
	// the whole batch: argon2id costs tens of milliseconds by design, so
	// hashing per user would take minutes for a load-test population.
	Password string
	// PasswordHash, when set, is used as-is and Password is ignored.
	PasswordHash string
	// WalletRupees is each account's opening wallet balance (a TOPUP entry).
	WalletRupees int
	// Unverified leaves the accounts UNVERIFIED; by default they are
	// VERIFIED (Tatkal needs it since July 2025).
	Unverified bool
	// Agent makes AGENT accounts instead of INDIVIDUAL ones.
	Agent bool
	// CreatedAt defaults to 30 days ago, so the account-age rule passes.
	CreatedAt time.Time
}

// Users creates spec.Count users, each with one validated saved passenger,
// in one transaction, and returns their ids in login order. If any login is
// taken nothing is written and the error wraps ErrLoginExists.
func Users(ctx context.Context, pool *pgxpool.Pool, spec UsersSpec) ([]int64, error) {
	ids, err := createUsers(ctx, pool, spec)
	if err != nil {
		return nil, fmt.Errorf("seed users %s*: %w", spec.Prefix, err)
	}
	return ids, nil
}

func createUsers(ctx context.Context, pool *pgxpool.Pool, spec UsersSpec) ([]int64, error) {
	switch {
	case spec.Count < 1:
		return nil, fmt.Errorf("count %d: need at least one user", spec.Count)
	case spec.Prefix == "":
		return nil, errors.New("no login prefix given")
	case spec.PasswordHash == "" && spec.Password == "":
		return nil, errors.New("no password or password hash given")
	}
	logins := make([]string, spec.Count)
	for i := range logins {
		logins[i] = fmt.Sprintf("%s%05d", spec.Prefix, i+1)
	}
	hash := spec.PasswordHash
	if hash == "" {
		var err error
		if hash, err = auth.HashPassword(spec.Password, auth.DefaultParams); err != nil {
			return nil, fmt.Errorf("hash password: %w", err)
		}
	}
	userType, status := "INDIVIDUAL", "VERIFIED"
	if spec.Agent {
		userType = "AGENT"
	}
	if spec.Unverified {
		status = "UNVERIFIED"
	}
	created := spec.CreatedAt
	if created.IsZero() {
		created = time.Now().AddDate(0, 0, -30)
	}

	var ids []int64
	err := db.Transact(ctx, pool, func(tx pgx.Tx) error {
		// A clear error before COPY; the UNIQUE constraint still guards a
		// concurrent creator (COPY then fails and the transaction rolls back).
		var taken []string
		if err := tx.QueryRow(ctx, `SELECT coalesce(array_agg(login ORDER BY login), '{}') FROM
			(SELECT login FROM users WHERE login = ANY($1) ORDER BY login LIMIT 5) t`, logins).Scan(&taken); err != nil {
			return fmt.Errorf("check logins: %w", err)
		}
		if len(taken) > 0 {
			return fmt.Errorf("%s: %w", strings.Join(taken, ", "), ErrLoginExists)
		}
		// COPY cannot return generated ids, so take them from the sequence
		// first and write them explicitly.
		rows, err := tx.Query(ctx, `SELECT nextval(pg_get_serial_sequence('users', 'id')) FROM generate_series(1, $1)`, spec.Count)
		if err != nil {
			return fmt.Errorf("allocate ids: %w", err)
		}
		ids, err = pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return fmt.Errorf("allocate ids: %w", err)
		}
		slices.Sort(ids)
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"users"},
			[]string{"id", "login", "password_hash", "user_type", "id_verification_status", "created_at"},
			pgx.CopyFromSlice(len(ids), func(i int) ([]any, error) {
				return []any{ids[i], logins[i], hash, userType, status, created}, nil
			})); err != nil {
			return fmt.Errorf("copy users: %w", err)
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"passenger_master"},
			[]string{"user_id", "name", "age", "gender", "berth_pref", "id_type", "id_ref", "validated", "created_at"},
			pgx.CopyFromSlice(len(ids), func(i int) ([]any, error) {
				p := passengerFor(i)
				return []any{ids[i], p.name, int32(p.age), p.gender, "", p.idType, p.idRef, true, created}, nil
			})); err != nil {
			return fmt.Errorf("copy passengers: %w", err)
		}
		if spec.WalletRupees <= 0 {
			return nil
		}
		// The opening balance goes through the ledger like any top-up, so
		// the balance always equals the sum of its entries.
		paise := int64(spec.WalletRupees) * 100
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"wallet_accounts"}, []string{"user_id", "balance_paise"},
			pgx.CopyFromSlice(len(ids), func(i int) ([]any, error) { return []any{ids[i], paise}, nil })); err != nil {
			return fmt.Errorf("copy wallets: %w", err)
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"wallet_entries"}, []string{"user_id", "kind", "ref", "amount_paise", "balance_after"},
			pgx.CopyFromSlice(len(ids), func(i int) ([]any, error) {
				return []any{ids[i], "TOPUP", fmt.Sprintf("seed:%d", ids[i]), paise, paise}, nil
			})); err != nil {
			return fmt.Errorf("copy wallet entries: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return ids, nil
}

type passenger struct {
	name   string
	age    int
	gender string
	idType string
	idRef  string
}

// mix is splitmix64: a cheap, deterministic scramble so neighbouring users
// get unrelated names, ages and ids.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// passengerFor is the saved passenger of the i-th user of a batch: the
// same i always gives the same person. Ages run 18-70, about a fifth over
// 60 (lower-berth priority).
func passengerFor(i int) passenger {
	male := []string{"Aarav", "Vivaan", "Aditya", "Arjun", "Rohan", "Rahul", "Sanjay", "Vikram", "Manoj", "Suresh",
		"Ramesh", "Anil", "Prakash", "Karthik", "Harish", "Imran", "Gurpreet", "Abhishek", "Deepak", "Nikhil"}
	female := []string{"Priya", "Ananya", "Diya", "Kavya", "Sneha", "Pooja", "Lakshmi", "Meena", "Sunita", "Anjali",
		"Fatima", "Harpreet", "Divya", "Neha", "Shreya", "Rekha", "Geeta", "Aishwarya", "Nandini", "Swati"}
	surnames := []string{"Sharma", "Verma", "Patel", "Iyer", "Nair", "Reddy", "Gupta", "Singh", "Kumar", "Das",
		"Banerjee", "Mukherjee", "Joshi", "Kulkarni", "Deshpande", "Menon", "Pillai", "Rao", "Khan", "Chatterjee",
		"Agarwal", "Mehta", "Shah", "Bose", "Yadav"}
	h := mix(uint64(i))
	p := passenger{gender: "M", age: 18 + int(h>>8%53)}
	first := male[h>>16%uint64(len(male))]
	if h&1 == 1 {
		p.gender = "F"
		first = female[h>>16%uint64(len(female))]
	}
	last := surnames[h>>24%uint64(len(surnames))]
	p.name = first + " " + last

	d := mix(h) // digits for the id reference
	switch h >> 40 % 3 {
	case 0:
		// PAN: AAAPL1234C, 4th letter P for a person, 5th the surname's initial.
		p.idType = "PAN"
		p.idRef = fmt.Sprintf("%c%c%cP%c%04d%c", 'A'+d%26, 'A'+d>>5%26, 'A'+d>>10%26, last[0], d>>15%10000, 'A'+d>>30%26)
	case 1:
		// Aadhaar: 12 digits, never starting with 0 or 1.
		p.idType = "AADHAAR"
		p.idRef = fmt.Sprintf("%d%011d", 2+d%8, d>>4%100_000_000_000)
	default:
		// Passport: a letter and seven digits.
		p.idType = "PASSPORT"
		p.idRef = fmt.Sprintf("%c%07d", "ABCDEFGHJKLMNPRSTUVW"[d%20], d>>5%10_000_000)
	}
	return p
}

// DemoUsers makes the five demo passengers (demo00001 .. demo00005) with
// password and ₹5,000 in their wallets, unless they exist already.
func DemoUsers(ctx context.Context, pool *pgxpool.Pool, password string) (bool, error) {
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM users WHERE login LIKE 'demo%'`).Scan(&n); err != nil {
		return false, fmt.Errorf("count demo users: %w", err)
	}
	if n > 0 {
		return false, nil
	}
	_, err := Users(ctx, pool, UsersSpec{Count: 5, Prefix: "demo", Password: password, WalletRupees: 5000})
	return err == nil, err
}
