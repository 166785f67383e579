package seed

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"tatkal/booking/app"
)

// DevPassword is the demo passengers' password (tatkal dev only).
const DevPassword = "tatkal-demo"

// ForDev seeds tatkal dev's database (app.DevData): the demo trains, their
// windows open a minute ago unless realTimes, and five demo passengers with
// ₹5,000 in their wallets the first time.
func ForDev(ctx context.Context, pool *pgxpool.Pool, realTimes bool) (app.DevDemo, error) {
	opts := DemoOptions{}
	if !realTimes {
		open := -time.Minute
		opts.OpensIn = &open
	}
	res, err := Demo(ctx, pool, opts)
	if err != nil {
		return app.DevDemo{}, err
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM users WHERE login LIKE 'demo%'`).Scan(&n); err != nil {
		return app.DevDemo{}, fmt.Errorf("count demo users: %w", err)
	}
	if n == 0 {
		if _, err := Users(ctx, pool, UsersSpec{Count: 5, Prefix: "demo", Password: DevPassword, WalletRupees: 5000}); err != nil {
			return app.DevDemo{}, err
		}
	}
	return app.DevDemo{Journey: res.JourneyDate, Password: DevPassword, Describe: func(out io.Writer) { PrintDemo(out, res) }}, nil
}
