package seed

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"tatkal/booking/india"

	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrUsage marks a mistake in the command's arguments.
var ErrUsage = errors.New("usage")

const seedUsage = `tatkal seed demo  [--date D] [--opens-in DUR]
tatkal seed shard --date D [--train N] [--class C] [--berths K] [--opens-in DUR] [--mode direct|queue]
tatkal seed users --count N --prefix P --password X [--wallet RUPEES]

Example:
  tatkal seed shard --date 2026-12-24 --train 12951 --class 3A --berths 400 --opens-in -1m

Run "tatkal seed <what> --help" for its flags.`

// Command is "tatkal seed": it parses the subcommand's flags, then opens
// the database with open (nothing is opened for help or a usage mistake).
// A mistake in the arguments wraps ErrUsage.
func Command(ctx context.Context, args []string, out io.Writer, open func(context.Context) (*pgxpool.Pool, error)) error {
	if len(args) == 0 || (args[0] != "demo" && args[0] != "shard" && args[0] != "users") {
		if len(args) > 0 && (args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
			fmt.Fprintln(out, seedUsage)
			return flag.ErrHelp
		}
		return fmt.Errorf("%w: seed what?\n%s", ErrUsage, seedUsage)
	}
	date := func(s string) (time.Time, error) {
		d, err := time.ParseInLocation(time.DateOnly, s, india.IST)
		if err != nil {
			return d, fmt.Errorf("%w: --date %q: want YYYY-MM-DD", ErrUsage, s)
		}
		return d, nil
	}
	switch args[0] {
	case "demo":
		fs := flags("seed demo", "Create the three demo trains of DOMAIN.md, their coaches and Tatkal shards for one journey date.",
			"tatkal seed demo --date 2026-12-24 --opens-in 2m", out)
		day := fs.String("date", "", "journey date YYYY-MM-DD (default tomorrow, IST)")
		opensIn := fs.Duration("opens-in", 0, "open every window this long from now (e.g. 2m; negative: already open); default the real opening times")
		if err := parse(fs, args[1:]); err != nil {
			return err
		}
		opts := DemoOptions{}
		if *day != "" {
			d, err := date(*day)
			if err != nil {
				return err
			}
			opts.JourneyDate = d
		}
		if isSet(fs, "opens-in") {
			opts.OpensIn = opensIn
		}
		return demo(ctx, open, opts, out)
	case "shard":
		fs := flags("seed shard", "Create one Tatkal shard with K berths, for tests, benchmarks and rehearsals.",
			"tatkal seed shard --date 2026-12-24 --train 12951 --class 3A --berths 400 --opens-in -1m --mode queue", out)
		train := fs.String("train", "12951", "train number (a demo train; run seed demo first)")
		day := fs.String("date", "", "journey date YYYY-MM-DD (required)")
		class := fs.String("class", "3A", "class")
		berths := fs.Int("berths", 0, "berths to sell (default: the Tatkal quota, 30% of each coach)")
		opensIn := fs.Duration("opens-in", 0, "window opens this long from now (negative: already open); default the real time")
		mode := fs.String("mode", "direct", "direct (no waiting room) or queue")
		wl := fs.Int("waitlist", -1, "TQWL cap (default: 60% of berths AC, 30% non-AC)")
		if err := parse(fs, args[1:]); err != nil {
			return err
		}
		if *mode != "direct" && *mode != "queue" {
			return fmt.Errorf("%w: --mode %q: want direct or queue", ErrUsage, *mode)
		}
		d, err := date(*day)
		if err != nil {
			return err
		}
		spec := ShardSpec{Train: *train, Date: d, Class: *class, Berths: *berths, Mode: *mode}
		if isSet(fs, "opens-in") {
			spec.OpensAt = time.Now().Add(*opensIn)
		}
		if *wl >= 0 {
			spec.WaitlistCap = wl
		}
		return shard(ctx, open, spec, out)
	default: // users
		fs := flags("seed users", "Create identity-verified passenger accounts P00001... each with one saved, validated passenger.",
			"tatkal seed users --count 100 --prefix load --password 'a long one' --wallet 5000", out)
		count := fs.Int("count", 10, "how many")
		prefix := fs.String("prefix", "user", "login prefix")
		password := fs.String("password", "", "password for all of them (required)")
		wallet := fs.Int("wallet", 0, "opening wallet balance in rupees (only on the database of tatkal dev)")
		agent := fs.Bool("agent", false, "create agent accounts")
		if err := parse(fs, args[1:]); err != nil {
			return err
		}
		if *password == "" || *count < 1 || *prefix == "" {
			return fmt.Errorf("%w: seed users needs --password, a positive --count and a --prefix", ErrUsage)
		}
		return users(ctx, open, UsersSpec{Count: *count, Prefix: *prefix, Password: *password, WalletRupees: *wallet, Agent: *agent}, out)
	}
}

func demo(ctx context.Context, open func(context.Context) (*pgxpool.Pool, error), opts DemoOptions, out io.Writer) error {
	pool, err := open(ctx)
	if err != nil {
		return err
	}
	defer pool.Close()
	res, err := Demo(ctx, pool, opts)
	if err != nil {
		return err
	}
	PrintDemo(out, res)
	return nil
}

func shard(ctx context.Context, open func(context.Context) (*pgxpool.Pool, error), spec ShardSpec, out io.Writer) error {
	pool, err := open(ctx)
	if err != nil {
		return err
	}
	defer pool.Close()
	id, err := Shard(ctx, pool, spec)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "shard %d: train %s %s %s TQ\n", id, spec.Train, spec.Date.Format(time.DateOnly), spec.Class)
	return nil
}

func users(ctx context.Context, open func(context.Context) (*pgxpool.Pool, error), spec UsersSpec, out io.Writer) error {
	pool, err := open(ctx)
	if err != nil {
		return err
	}
	defer pool.Close()
	if spec.WalletRupees != 0 {
		// An opening balance is money that never arrived: only the database
		// of tatkal dev (which keeps its session key in settings; a real
		// deployment keeps it in the environment) may have it.
		var dev bool
		if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM settings WHERE key = 'session_key')`).Scan(&dev); err != nil {
			return fmt.Errorf("seed users: %w", err)
		}
		if !dev {
			return fmt.Errorf("seed users --wallet credits wallets with money that never arrived: allowed only on the database of tatkal dev")
		}
	}
	ids, err := Users(ctx, pool, spec)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "created %d users %s%05d..%s%05d (ids %d..%d)\n", len(ids), spec.Prefix, 1, spec.Prefix, len(ids), ids[0], ids[len(ids)-1])
	return nil
}

// PrintDemo lists the demo's shards.
func PrintDemo(out io.Writer, res DemoResult) {
	fmt.Fprintf(out, "journey date %s\n", res.JourneyDate.Format(time.DateOnly))
	for _, s := range res.Shards {
		fmt.Fprintf(out, "  shard %-3d %s %-3s %4d berths, %2d legs, TQWL cap %3d, window %s - %s IST\n", s.ID, s.Train, s.Class, s.Berths, s.Legs,
			s.WaitlistCap, s.OpensAt.In(india.IST).Format("Jan 2 15:04"), s.ClosesAt.In(india.IST).Format("Jan 2 15:04"))
	}
}

func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// flags returns a subcommand's flag set; its usage is the help text.
func flags(name, help, example string, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("tatkal "+name, flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "%s\n\nUsage: tatkal %s [flags]\n", help, name)
		fs.PrintDefaults()
		fmt.Fprintf(fs.Output(), "\nExample:\n  %s\n", example)
	}
	return fs
}

func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments: %s", ErrUsage, strings.Join(fs.Args(), " "))
	}
	return nil
}
