package console

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/term"

	"tatkal/booking"
	"tatkal/booking/auth"
	"tatkal/recon"
)

// ErrUsage marks a mistake in tatkal users' arguments.
var ErrUsage = errors.New("usage")

const usersUsage = `tatkal users: console users from the command line: the first admin of a new
deployment, and the way back in when no admin can sign in.

Usage: tatkal users <subcommand> [flags]

  tatkal users add --login L --role ops|finance|fraud|admin|team [--name N] [--finance-lead] [--team T ...]
  tatkal users disable --login L
  tatkal users enable --login L
  tatkal users reset-password --login L
  tatkal users list

The password is read from the terminal (not shown, typed twice) or, when
standard input is not a terminal, as its first line; never from a flag or
the environment. At least %d characters, not containing the login.
Every change is audited as cli:<operating-system user>. On the console an
admin manages users at /console/users, where making an admin takes two.

A team member (role team) works the reconciliation exceptions of their
teams only (--team, repeated or a comma list: %s).

Example (the first admin, on a migrated database):
  tatkal users add --login asha --role admin --name "Asha Rao"
Example (a treasury and disputes person):
  tatkal users add --login meera --role team --team treasury,disputes --name "Meera Nair"

Run "tatkal users <subcommand> --help" for its flags.
`

var usersExamples = map[string]string{
	"add":            `tatkal users add --login ravi --role finance --finance-lead --name "Ravi Iyer"` + "\n  " + `tatkal users add --login meera --role team --team treasury --team disputes`,
	"disable":        "tatkal users disable --login ravi --reason 'left the team'",
	"enable":         "tatkal users enable --login ravi",
	"reset-password": "printf '%s\\n' \"$NEW_PASSWORD\" | tatkal users reset-password --login ravi",
	"list":           "tatkal users list",
}

var usersHelp = map[string]string{
	"add":            "Add a console user with a role; the password is read from the terminal or standard input.",
	"disable":        "Disable a console user: they cannot sign in, and their console sessions and API tokens end at once.",
	"enable":         "Let a disabled console user sign in again (with their password; their old sessions stay ended).",
	"reset-password": "Set a console user's password (read from the terminal or standard input); their console sessions end.",
	"list":           "List the console users: login, role, state, live sessions.",
}

// UsersCommand is "tatkal users ARGS". It parses the arguments, then opens
// the database with open (nothing is opened for help or a usage mistake),
// and reads a password from stdin where one is needed. A mistake in the
// arguments wraps ErrUsage; a refused change (an unknown role, a login
// taken, a weak password, an unknown login) changes nothing.
func UsersCommand(ctx context.Context, args []string, stdin io.Reader, out io.Writer, open func(context.Context) (*pgxpool.Pool, error)) error {
	if len(args) == 0 || usersHelp[args[0]] == "" {
		fmt.Fprintf(out, usersUsage, auth.MinPasswordRunes, strings.Join(recon.Teams(), ", "))
		switch {
		case len(args) == 0:
			return fmt.Errorf("%w: name a subcommand: add, disable, enable, reset-password or list", ErrUsage)
		case args[0] == "help" || args[0] == "-h" || args[0] == "--help" || args[0] == "-help":
			return flag.ErrHelp
		}
		return fmt.Errorf("%w: unknown subcommand %q", ErrUsage, args[0])
	}
	sub := args[0]
	fs := flag.NewFlagSet("tatkal users "+sub, flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() {
		fmt.Fprintf(out, "%s\n\nUsage: tatkal users %s [flags]\n", usersHelp[sub], sub)
		fs.PrintDefaults()
		fmt.Fprintf(out, "\nExample:\n  %s\n", usersExamples[sub])
	}
	var login, role, name, reason *string
	var lead *bool
	var teams teamList
	if sub != "list" {
		login = fs.String("login", "", "the console login (3-40 characters: a-z 0-9 . _ -)")
	}
	switch sub {
	case "add":
		role = fs.String("role", "", "ops, finance, fraud or admin")
		name = fs.String("name", "", "the person's name as the console shows it (default: the login)")
		lead = fs.Bool("finance-lead", false, "the finance lead: escalations go to them (finance only)")
		fs.Var(&teams, "team", "role team: a team whose reconciliation exceptions they work, repeated or a comma list ("+strings.Join(recon.Teams(), ", ")+")")
	case "disable", "enable":
		reason = fs.String("reason", "", "why, for the audit log")
	}
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments: %s (the password is never an argument)", ErrUsage, strings.Join(fs.Args(), " "))
	}
	// What can be checked before the database.
	var l string
	if login != nil {
		var err error
		if l, err = CleanLogin(*login); err != nil {
			return fmt.Errorf("%w: --login: %s", ErrUsage, booking.ErrorMessage(err))
		}
	}
	if role != nil {
		if err := CheckRole(*role); err != nil {
			return fmt.Errorf("%w: --role: %s", ErrUsage, booking.ErrorMessage(err))
		}
		if err := checkLead(*role, *lead); err != nil {
			return fmt.Errorf("%w: --finance-lead: %s", ErrUsage, booking.ErrorMessage(err))
		}
		if _, err := CleanTeams(*role, teams); err != nil {
			return fmt.Errorf("%w: --team: %s", ErrUsage, booking.ErrorMessage(err))
		}
	}

	pool, err := open(ctx)
	if err != nil {
		return err
	}
	defer pool.Close()
	users, by := NewUsers(pool, auth.DefaultParams), CLIOperator()
	// A refusal is said as the person's message: the rule broken, and
	// that nothing changed.
	say := func(err error) error {
		if err == nil || booking.ErrorCode(err) == booking.EINTERNAL {
			return err
		}
		return fmt.Errorf("users %s: %s; nothing changed", sub, strings.TrimSuffix(booking.ErrorMessage(err), "."))
	}
	switch sub {
	case "list":
		us, err := users.List(ctx)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(out, 2, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "LOGIN\tROLE\tSTATE\tSESSIONS\tCREATED\tNAME")
		for _, u := range us {
			state := "active"
			if u.Disabled {
				state = "disabled"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", u.Login, teamsText(roleText(u.Role, u.FinanceLead), u.Teams), state, u.Sessions, ist(u.CreatedAt), u.Name)
		}
		if len(us) == 0 {
			fmt.Fprintln(tw, "(none: add the first admin with tatkal users add --role admin)")
		}
		return tw.Flush()
	case "disable":
		if err := say(users.Disable(ctx, by, l, *reason)); err != nil {
			return err
		}
		fmt.Fprintf(out, "%s is disabled; their console sessions and API tokens ended (audited as %s).\n", l, by.Login)
		return nil
	case "enable":
		if err := say(users.Enable(ctx, by, l, *reason)); err != nil {
			return err
		}
		fmt.Fprintf(out, "%s is enabled (audited as %s).\n", l, by.Login)
		return nil
	}
	// add and reset-password take a password: ask only once the login is
	// known to be free (add) or there (reset-password).
	taken, err := users.Exists(ctx, l)
	if err != nil {
		return err
	}
	if sub == "add" && taken {
		return say(loginTaken(l))
	}
	if sub == "reset-password" && !taken {
		return say(noSuchUser(l))
	}
	pw, err := readPassword(stdin, out, l)
	if err != nil {
		return fmt.Errorf("users %s: %w; nothing changed", sub, err)
	}
	if sub == "reset-password" {
		if err := say(users.ResetPassword(ctx, by, l, pw)); err != nil {
			return err
		}
		fmt.Fprintf(out, "the password of %s is set; their console sessions ended (audited as %s).\n", l, by.Login)
		return nil
	}
	u, err := users.Add(ctx, by, NewUser{Login: l, Name: *name, Role: *role, FinanceLead: *lead, Teams: teams, Password: pw})
	if err := say(err); err != nil {
		return err
	}
	fmt.Fprintf(out, "console user %s added: %s (audited as %s). Sign in at /console/login.\n", u.Login,
		teamsText(roleText(u.Role, u.FinanceLead), u.Teams), by.Login)
	return nil
}

// teamList is --team: repeated, or a comma list, or both.
type teamList []string

func (t *teamList) String() string { return strings.Join(*t, ",") }

func (t *teamList) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*t = append(*t, s)
		}
	}
	return nil
}

// readPassword reads the new password of login: from a terminal without
// echo, typed twice; else the first line of in (its line ending removed).
func readPassword(in io.Reader, out io.Writer, login string) (string, error) {
	if f, ok := in.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fmt.Fprintf(out, "New password for %s (not shown): ", login)
		first, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(out)
		if err != nil {
			return "", fmt.Errorf("read the password: %w", err)
		}
		fmt.Fprint(out, "Again: ")
		again, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(out)
		if err != nil {
			return "", fmt.Errorf("read the password: %w", err)
		}
		if string(first) != string(again) {
			return "", errors.New("the two passwords differ")
		}
		return checkTyped(login, string(first))
	}
	// Bounded: a password is at most auth.MaxPasswordBytes; a longer
	// line is refused, not cut.
	line, err := bufio.NewReader(io.LimitReader(in, 4*auth.MaxPasswordBytes)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("read the password from standard input: %w", err)
	}
	if errors.Is(err, io.EOF) && line == "" {
		return "", errors.New("no password on standard input (send it as one line, or run this on a terminal)")
	}
	line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
	return checkTyped(login, line)
}

// checkTyped checks a typed password against the rules before anything
// is opened for writing.
func checkTyped(login, pw string) (string, error) {
	if err := auth.CheckNewPassword(login, pw); err != nil {
		return "", fmt.Errorf("%w (at least %d characters, at most %d bytes, not containing the login)", err, auth.MinPasswordRunes, auth.MaxPasswordBytes)
	}
	return pw, nil
}
