package recon

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"tatkal/booking"
	"tatkal/booking/audit"
)

const cliUsage = `tatkal recon: reconciliation from the command line.

  tatkal recon ingest --source settlement|bank|core [--gateway G] --date YYYY-MM-DD --file F [--by NAME]
  tatkal recon run    --gateway G --date YYYY-MM-DD [--as-of RFC3339] [--by NAME]
  tatkal recon export --gateway G --date YYYY-MM-DD --out F.xlsx|F.csv

ingest stores a file with its lineage (the same file again changes nothing;
a different one for the same day supersedes it); run reconciles a
gateway's business date (--gateway wallet: wallet payments; --gateway core
with a journey date: the core's export as a whole, for PNRs we never
booked; --gateway bank with a statement date: the bank's lines no
settlement file announces); export writes the latest run's workbook or CSV.

Example:
  tatkal recon run --gateway swiftpay --date 2026-12-01 --by finance1

Run "tatkal recon <subcommand> --help" for its flags.
`

var cliExamples = map[string]string{
	"ingest": "tatkal recon ingest --source settlement --gateway swiftpay --date 2026-12-01 --file settlement.csv --by finance1",
	"run":    "tatkal recon run --gateway swiftpay --date 2026-12-01 --by finance1",
	"export": "tatkal recon export --gateway swiftpay --date 2026-12-01 --out recon.xlsx",
}

// Limits are what the command line checks before it opens the service.
type Limits struct {
	// MaxFileBytes is the largest file ingest takes (0: DefaultMaxFileBytes);
	// a larger one is refused before the database is touched.
	MaxFileBytes int64
}

// Opener opens the service the command works with, and close releases it.
// booking/app builds it as it builds the process's (its pool, an
// insert-only River client, the configured limits), so that the command
// line refuses and approves as the console and the jobs do.
type Opener func(ctx context.Context) (svc *Service, close func(), err error)

// Command runs "tatkal recon ARGS" on the service open opens, once the
// arguments are checked. A mistake in the arguments wraps ErrUsage and
// changes nothing.
func Command(ctx context.Context, open Opener, limits Limits, args []string, stdout io.Writer) error {
	maxFileBytes := limits.MaxFileBytes
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(stdout, cliUsage)
		if len(args) == 0 {
			return usage("name a subcommand: ingest, run or export")
		}
		return nil
	}
	fs := flag.NewFlagSet("tatkal recon "+args[0], flag.ContinueOnError)
	fs.SetOutput(stdout)
	fs.Usage = func() {
		fmt.Fprintf(stdout, "Usage: tatkal recon %s [flags]\n", args[0])
		fs.PrintDefaults()
		fmt.Fprintf(stdout, "\nExample:\n  %s\n", cliExamples[args[0]])
	}
	gateway := fs.String("gateway", "", "gateway id, e.g. swiftpay")
	date := fs.String("date", "", "business date (journey date for a core export), YYYY-MM-DD")
	by := fs.String("by", defaultActor(), "who ingests or runs (a login, or job:NAME)")
	var source, file, out, asOf *string
	switch args[0] {
	case "ingest":
		source = fs.String("source", "settlement", "settlement, bank or core")
		file = fs.String("file", "", "the file to ingest")
	case "run":
		asOf = fs.String("as-of", "", "judge ageing rules at this time (RFC 3339); default now")
	case "export":
		out = fs.String("out", "", "where to write: .xlsx for the workbook, .csv for the exceptions")
	default:
		fmt.Fprint(stdout, cliUsage)
		return usage("unknown subcommand %q", args[0])
	}
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return usage("%v", err)
	}
	if fs.NArg() > 0 {
		return usage("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	day, err := time.ParseInLocation(time.DateOnly, *date, booking.IST)
	if err != nil {
		return usage("--date %q is not YYYY-MM-DD", *date)
	}
	// Check what can be checked before touching the database.
	switch args[0] {
	case "ingest":
		if sources[strings.ToLower(*source)] == "" {
			return usage("--source must be settlement, bank or core, not %q", *source)
		}
		if *file == "" {
			return usage("--file is required")
		}
		st, err := os.Stat(*file)
		if err != nil {
			return err
		}
		if maxFileBytes <= 0 {
			maxFileBytes = DefaultMaxFileBytes
		}
		if st.Size() > maxFileBytes {
			return fmt.Errorf("%s: %w", *file, TooLarge(maxFileBytes))
		}
	case "export":
		if ext := filepath.Ext(*out); ext != ".xlsx" && ext != ".csv" {
			return usage("--out must end in .xlsx or .csv, not %q", *out)
		}
	}
	var when time.Time
	if asOf != nil && *asOf != "" {
		if when, err = time.Parse(time.RFC3339, *asOf); err != nil {
			return usage("--as-of %q is not RFC 3339", *asOf)
		}
	}

	svc, closeSvc, err := open(ctx)
	if err != nil {
		return err
	}
	defer closeSvc()

	switch args[0] {
	case "ingest":
		src := sources[strings.ToLower(*source)]
		f, err := os.Open(*file)
		if err != nil {
			return err
		}
		defer f.Close()
		info, err := svc.Ingest(ctx, FileMeta{Source: src, Gateway: *gateway, BusinessDate: day, Name: filepath.Base(*file), By: *by}, f)
		if err != nil {
			return err
		}
		verb := "ingested"
		switch {
		case info.Earlier():
			verb = fmt.Sprintf("is an earlier version of the day's file, not made current (file %d stays current; nothing changed)", info.Current)
		case info.Replayed:
			verb = "already ingested (nothing changed)"
		}
		fmt.Fprintf(stdout, "file %d %s: %s %s %s, %d rows, sha256 %s\n", info.ID, verb, info.Source, info.Gateway,
			info.BusinessDate.Format(time.DateOnly), info.Rows, info.SHA256)
		if info.Superseded != 0 {
			fmt.Fprintf(stdout, "supersedes file %d\n", info.Superseded)
		}
	case "run":
		sum, err := svc.Run(ctx, RunRequest{Gateway: *gateway, Date: day, AsOf: when, By: *by})
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "run %d: %s %s: %d of our items, %d lines, %d matched (%.2f%%), %d exceptions (%d new, %d cleared)\n",
			sum.ID, sum.Gateway, sum.BusinessDate.Format(time.DateOnly), sum.OurItems, sum.Lines, sum.Matched, 100*sum.MatchRate(),
			sum.Exceptions, sum.NewExceptions, sum.Cleared)
		fmt.Fprintf(stdout, "matched ₹%s, unmatched ₹%s, fees ₹%s + GST ₹%s, net ₹%s, paid out ₹%s\n", rupeeText(sum.AmountMatched),
			rupeeText(sum.AmountUnmatched), rupeeText(sum.Fees), rupeeText(sum.Tax), rupeeText(sum.Net), rupeeText(sum.Payouts))
	case "export":
		sum, err := svc.LatestRun(ctx, *gateway, day)
		if err != nil {
			return err
		}
		// Written beside the target and renamed, so a failure never leaves
		// half a workbook under the name asked for.
		tmp, err := os.CreateTemp(filepath.Dir(*out), ".recon-*"+filepath.Ext(*out))
		if err != nil {
			return err
		}
		defer os.Remove(tmp.Name()) //nolint:errcheck // gone after the rename
		write := svc.WriteXLSX
		if filepath.Ext(*out) == ".csv" {
			write = svc.WriteCSV
		}
		if err := write(ctx, sum.ID, tmp); err != nil {
			tmp.Close()
			return err
		}
		if err := tmp.Close(); err != nil {
			return err
		}
		if err := os.Rename(tmp.Name(), *out); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "run %d written to %s\n", sum.ID, *out)
	}
	return nil
}

// sources are ingest's --source values.
var sources = map[string]string{"settlement": SourceSettlement, "bank": SourceBank, "core": SourceCore}

// ErrUsage marks a mistake in the command's arguments.
var ErrUsage = errors.New("usage")

func usage(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrUsage, fmt.Sprintf(format, args...))
}

func defaultActor() string { return audit.CLIActor() }
