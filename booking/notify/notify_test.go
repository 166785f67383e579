package notify_test

import (
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"

	"github.com/jackc/pgx/v5"

	"tatkal/booking"
	"tatkal/booking/db"
	"tatkal/booking/i18n"
	"tatkal/booking/lab/testenv"
	"tatkal/booking/lab/teststack"
	"tatkal/booking/notify"
)

func TestMain(m *testing.M) { teststack.Main(m) }

// outbox writes one message of kind for each user, as the booking paths do
// (booking.Notify: an SMS and an e-mail each), and returns how many rows.
func outbox(t *testing.T, s *teststack.Stack, users []int64, kind string) int {
	t.Helper()
	ctx := context.Background()
	err := db.Transact(ctx, s.Pool, func(tx pgx.Tx) error {
		for i, u := range users {
			if err := booking.Notify(ctx, tx, u, kind, fmt.Sprintf("%s-%d", kind, i), "Subject "+kind, fmt.Sprintf("Body %s %d", kind, i)); err != nil {
				return err
			}
		}
		return nil
	})
	teststack.Must(t, err, "write outbox")
	return 2 * len(users)
}

// waitStates waits until no outbox row is in a state other than final.
func waitFinal(t *testing.T, s *teststack.Stack, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		var open int
		teststack.Must(t, s.Pool.QueryRow(context.Background(), `SELECT count(*) FROM notifications
			WHERE state NOT IN ('DELIVERED', 'UNDELIVERED', 'FAILED')`).Scan(&open), "count open")
		if open == 0 {
			return
		}
		if time.Now().After(deadline) {
			rows, _ := s.Pool.Query(context.Background(), `SELECT id, state, attempts, last_error FROM notifications WHERE state NOT IN ('DELIVERED', 'UNDELIVERED', 'FAILED')`)
			var lines []string
			for rows.Next() {
				var id int64
				var st, e string
				var a int
				rows.Scan(&id, &st, &a, &e) //nolint:errcheck
				lines = append(lines, fmt.Sprintf("%d %s attempts %d %s", id, st, a, e))
			}
			rows.Close()
			t.Fatalf("%d messages not delivered after %v:\n%s", open, within, strings.Join(lines, "\n"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkOnce checks every outbox row against what the gateway took: each
// exactly once, under the row's key, with the row's gateway id and sent_at.
func checkOnce(t *testing.T, s *teststack.Stack, want int) {
	t.Helper()
	ctx := context.Background()
	var rows, delivered, unsent, mismatched, twice, strays int
	err := s.Pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE n.state = 'DELIVERED'),
		count(*) FILTER (WHERE n.sent_at IS NULL OR n.delivered_at IS NULL),
		count(*) FILTER (WHERE m.id IS DISTINCT FROM n.gateway_id OR m.idempotency_key IS DISTINCT FROM n.idempotency_key::text)
		FROM notifications n LEFT JOIN msg.messages m ON m.client_ref = 'notification-' || n.id`).Scan(&rows, &delivered, &unsent, &mismatched)
	teststack.Must(t, err, "compare outbox and gateway")
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT count(*) FROM (SELECT client_ref FROM msg.messages GROUP BY client_ref HAVING count(*) > 1) d`).
		Scan(&twice), "count doubles")
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT count(*) FROM msg.messages m WHERE NOT EXISTS (
		SELECT 1 FROM notifications n WHERE m.client_ref = 'notification-' || n.id)`).Scan(&strays), "count strays")
	if rows != want || delivered != want || unsent != 0 || mismatched != 0 || twice != 0 || strays != 0 {
		t.Fatalf("outbox %d rows (want %d), %d delivered, %d without sent_at/delivered_at, %d not matching the gateway, "+
			"%d sent twice, %d the gateway took that we never wrote", rows, want, delivered, unsent, mismatched, twice, strays)
	}
}

// The gateway fails half its calls: a quarter refused outright, a quarter
// taken but answered with an error. Every message is delivered, exactly
// once, and the failures really happened.
func TestNoMessageLostOrSentTwiceWhenHalfTheCallsFail(t *testing.T) {
	t.Parallel()
	s := teststack.New(t, teststack.Options{Work: true, RelayInterval: 100 * time.Millisecond, ReceiptPoll: 100 * time.Millisecond,
		MsgRetryBase: 20 * time.Millisecond,
		MsgFaults:    &notify.Faults{LatencyMs: 2, JitterMs: 10, FailRate: 0.25, LostReplyRate: 0.25, DeliverAfterMs: 100}})
	users := s.Users(t, "msg", 20)
	n := outbox(t, s, users, "REFUND_DONE")
	n += outbox(t, s, users[:10], "OTP")
	waitFinal(t, s, 90*time.Second)
	checkOnce(t, s, n)

	var requests, refused, lost, dups int
	teststack.Must(t, s.Pool.QueryRow(context.Background(), `SELECT count(*), count(*) FILTER (WHERE outcome = 'FAILED'),
		count(*) FILTER (WHERE outcome LIKE '%REPLY_LOST'), count(*) FILTER (WHERE outcome LIKE 'DUPLICATE%') FROM msg.requests`).
		Scan(&requests, &refused, &lost, &dups), "count requests")
	t.Logf("%d messages, %d requests: %d refused, %d taken with the answer lost, %d repeats answered as duplicates",
		n, requests, refused, lost, dups)
	if refused == 0 || lost == 0 || dups == 0 || requests <= n {
		t.Fatalf("the faults never bit: %d requests for %d messages, %d refused, %d lost answers, %d duplicates", requests, n, refused, lost, dups)
	}
	var attempts int
	teststack.Must(t, s.Pool.QueryRow(context.Background(), `SELECT sum(attempts) FROM notifications`).Scan(&attempts), "sum attempts")
	if attempts != requests {
		t.Errorf("outbox counts %d attempts, the gateway %d requests", attempts, requests)
	}
}

// Two sends of one row overlap: the first is held just after the gateway
// took the message, before it records that; the second sends and records.
// The gateway took it once, and the row is delivered once.
func TestOverlappingSendsOfOneMessage(t *testing.T) {
	t.Parallel()
	held := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	pause := func(ctx context.Context, point string) {
		if point != "notify.after-send" {
			return
		}
		first := false
		once.Do(func() { first = true })
		if !first {
			return
		}
		close(held)
		select {
		case <-release:
		case <-ctx.Done():
		}
	}
	s := teststack.New(t, teststack.Options{Pause: pause, ReceiptPoll: 50 * time.Millisecond,
		MsgFaults: &notify.Faults{DeliverAfterMs: 0}})
	users := s.Users(t, "ovl", 1)
	outbox(t, s, users, "OTP")
	ctx := context.Background()
	var id int64
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT min(id) FROM notifications`).Scan(&id), "row")
	firstDone := make(chan error, 1)
	go func() {
		_, err := s.App.Notify.Deliver(ctx, id)
		firstDone <- err
	}()
	<-held
	for range 3 { // the second attempt: sends, records, reads the receipt
		_, err := s.App.Notify.Deliver(ctx, id)
		teststack.Must(t, err, "second send")
	}
	close(release)
	teststack.Must(t, <-firstDone, "first send")
	var state string
	var taken, requests int
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT state FROM notifications WHERE id = $1`, id).Scan(&state), "state")
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM msg.messages WHERE client_ref = $1),
		(SELECT count(*) FROM msg.requests WHERE client_ref = $1)`, fmt.Sprintf("notification-%d", id)).Scan(&taken, &requests), "count")
	if state != notify.StateDelivered || taken != 1 || requests != 2 {
		t.Fatalf("row %s, gateway took %d of %d requests; want DELIVERED, 1 of 2", state, taken, requests)
	}
}

// The worker is killed (SIGKILL) after the gateway took a message and
// before its answer arrived; a new worker resumes the job with the same
// key, and the gateway delivered the message once.
func TestWorkerKilledMidSendDeliversOnce(t *testing.T) {
	t.Parallel()
	s := teststack.New(t, teststack.Options{MsgFaults: &notify.Faults{ReplyDelayMs: 10_000, DeliverAfterMs: 100}})
	users := s.Users(t, "kill", 1)
	ctx := context.Background()
	teststack.Must(t, db.Transact(ctx, s.Pool, func(tx pgx.Tx) error {
		return booking.Notify(ctx, tx, users[0], "OTP", "kill-1", "Code", "Your code is 123456")
	}), "outbox")
	// One message: keep the SMS only.
	_, err := s.Pool.Exec(ctx, `DELETE FROM notifications WHERE channel = 'EMAIL'`)
	teststack.Must(t, err, "keep one")
	first := s.StartProcess(t, false)
	testenv.Eventually(t, 30*time.Second, "the gateway took the message", func() error {
		var taken int
		teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT count(*) FROM msg.messages`).Scan(&taken), "taken")
		return testenv.Want(taken == 1, "%d messages taken", taken)
	})
	first.Kill()
	var state string
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT state FROM notifications`).Scan(&state), "state")
	if state != notify.StateQueued {
		t.Fatalf("after the kill the row is %s; the crash left nothing to resume", state)
	}
	s.SetMsgFaults(t, notify.Faults{DeliverAfterMs: 100})
	s.StartProcess(t, false)
	waitFinal(t, s, 60*time.Second)
	checkOnce(t, s, 1)
	var requests, dups int
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE outcome = 'DUPLICATE') FROM msg.requests`).
		Scan(&requests, &dups), "requests")
	if requests < 2 || dups < 1 {
		t.Fatalf("%d requests, %d answered as duplicates: the resumed job did not send again", requests, dups)
	}
}

// The e-ticket e-mail carries the ticket's PDF, drawn by the code that
// draws the page's download; the SMS carries none.
func TestETicketMessageCarriesThePDF(t *testing.T) {
	t.Parallel()
	s := teststack.New(t, teststack.Options{Work: true, RelayInterval: 100 * time.Millisecond, ReceiptPoll: 100 * time.Millisecond,
		MsgFaults: &notify.Faults{DeliverAfterMs: 50}})
	_, date := s.DemoShard(t, 8, 4)
	u := s.Users(t, "tkt", 1)[0]
	ctx := context.Background()
	h, err := s.Service.Hold(ctx, teststack.Caller(u), booking.HoldRequest{UserID: u, IdempotencyKey: "tkt-hold-1", Train: "12951", Date: date,
		Class: "3A", From: "MMCT", To: "NDLS", Passengers: []booking.Passenger{{Name: "Asha Verma", Age: 30, Gender: "F", IDType: "PAN", IDRef: "ABCDE1234F"}}})
	teststack.Must(t, err, "hold")
	v, err := s.Service.Confirm(ctx, h.HoldID)
	teststack.Must(t, err, "confirm")
	waitFinal(t, s, 60*time.Second)
	var name string
	var pdf []byte
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT attachment_name, attachment FROM msg.messages WHERE channel = 'EMAIL' AND subject LIKE 'E-ticket%'`).
		Scan(&name, &pdf), "e-ticket e-mail")
	if name != "tatkal-eticket-"+v.PNR+".pdf" || !strings.HasPrefix(string(pdf), "%PDF") {
		t.Fatalf("attachment %q, %d bytes starting %.8q", name, len(pdf), pdf)
	}
	var sms int
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT count(*) FROM msg.messages WHERE channel = 'SMS' AND attachment IS NOT NULL`).Scan(&sms), "sms")
	if sms != 0 {
		t.Fatalf("%d SMS carry an attachment", sms)
	}
	exe, err := exec.LookPath("pdftotext")
	if err != nil {
		t.Skip("pdftotext not installed: the PDF's text is not read back")
	}
	f := filepath.Join(t.TempDir(), "ticket.pdf")
	teststack.Must(t, os.WriteFile(f, pdf, 0o644), "write PDF")
	out, err := exec.Command(exe, "-layout", f, "-").Output()
	teststack.Must(t, err, "pdftotext")
	b := v.Berths[0]
	for _, want := range []string{"PNR " + v.PNR, "Asha Verma", fmt.Sprintf("%s / %d", b.Coach, b.BerthNo)} {
		if !strings.Contains(string(out), want) {
			t.Errorf("PDF text lacks %q:\n%s", want, out)
		}
	}
}

// Messages are written in the passenger's language, from the site's
// catalogue: a passenger who chose Hindi gets their e-ticket message (SMS
// and e-mail, as the messaging gateway delivered them) in Hindi, one who
// did not in English. So does every other message of the catalogue
// (refunds, review, top-up, late success, core rejection, ...), and no
// code outside booking/notify.go writes a message of its own words.
func TestMessagesInThePassengersLanguage(t *testing.T) {
	t.Parallel()
	if calls := notifyCallsOutsideTheCatalogue(t); len(calls) > 0 {
		t.Fatalf("messages written outside the catalogue (use booking.NotifyT with an i18n key):\n%s", strings.Join(calls, "\n"))
	}
	s := teststack.New(t, teststack.Options{Work: true, RelayInterval: 100 * time.Millisecond, ReceiptPoll: 100 * time.Millisecond,
		MsgFaults: &notify.Faults{DeliverAfterMs: 50}})
	_, date := s.DemoShard(t, 8, 0)
	users := s.Users(t, "lang", 2)
	ctx := context.Background()
	teststack.Must(t, s.Service.SetLanguage(ctx, users[1], "hi"), "choose Hindi")
	for i, u := range users {
		h, err := s.Service.Hold(ctx, teststack.Caller(u), booking.HoldRequest{UserID: u, IdempotencyKey: fmt.Sprintf("lang-hold-%d", i), Train: "12951",
			Date: date, Class: "3A", From: "MMCT", To: "NDLS", Passengers: []booking.Passenger{{Name: "Asha Verma", Age: 30, Gender: "F",
				IDType: "PAN", IDRef: "ABCDE1234F"}}})
		teststack.Must(t, err, "hold")
		_, err = s.Service.Confirm(ctx, h.HoldID)
		teststack.Must(t, err, "confirm")
	}
	waitFinal(t, s, 60*time.Second)
	for i, u := range users {
		rows, err := s.Pool.Query(ctx, `SELECT m.channel, m.subject, m.body FROM msg.messages m
			JOIN notifications n ON m.client_ref = 'notification-' || n.id WHERE n.user_id = $1 AND n.kind = 'ETICKET' ORDER BY m.channel`, u)
		teststack.Must(t, err, "delivered messages")
		var got []string
		for rows.Next() {
			var ch, subject, body string
			teststack.Must(t, rows.Scan(&ch, &subject, &body), "scan")
			got = append(got, ch)
			hindi := strings.Contains(body, "कन्फ़र्म") && strings.Contains(subject, "ई-टिकट")
			english := strings.Contains(body, " confirmed: ") && strings.HasPrefix(subject, "E-ticket PNR ")
			if i == 1 && (!hindi || english) {
				t.Errorf("Hindi passenger's %s: %q / %q, want Hindi", ch, subject, body)
			}
			if i == 0 && (!english || hindi) {
				t.Errorf("English passenger's %s: %q / %q, want English", ch, subject, body)
			}
		}
		teststack.Must(t, rows.Err(), "rows")
		if strings.Join(got, ",") != "EMAIL,SMS" {
			t.Fatalf("passenger %d's e-ticket was delivered as %v, want EMAIL and SMS", i, got)
		}
	}

	// Every message of the catalogue, sent to both through the gateway.
	keys := i18n.Messages()
	if len(keys) < 20 {
		t.Fatalf("the catalogue has %d messages: %v", len(keys), keys)
	}
	teststack.Must(t, db.Transact(ctx, s.Pool, func(tx pgx.Tx) error {
		for _, u := range users {
			for _, k := range keys {
				if err := booking.NotifyT(ctx, tx, u, "LANG", fmt.Sprintf("%s-%d", k, u), k, sampleArgs(k)...); err != nil {
					return err
				}
			}
		}
		return nil
	}), "send every message")
	waitFinal(t, s, 60*time.Second)
	for i, u := range users {
		rows, err := s.Pool.Query(ctx, `SELECT n.ref, m.channel, m.subject, m.body FROM msg.messages m
			JOIN notifications n ON m.client_ref = 'notification-' || n.id WHERE n.user_id = $1 AND n.kind = 'LANG'`, u)
		teststack.Must(t, err, "delivered messages")
		seen := 0
		for rows.Next() {
			var ref, ch, subject, body string
			teststack.Must(t, rows.Scan(&ref, &ch, &subject, &body), "scan")
			seen++
			k := strings.TrimSuffix(ref, fmt.Sprintf("-%d", u))
			en := i18n.Format("en", k+".subject", sampleArgs(k)...) + " / " + i18n.Format("en", k+".body", sampleArgs(k)...)
			got := subject + " / " + body
			switch {
			case strings.Contains(got, "%!"):
				t.Errorf("%s %s is badly formatted: %q", k, ch, got)
			case i == 1 && (!devanagari(subject) || !devanagari(body) || got == en):
				t.Errorf("Hindi passenger's %s %s went out as %q, want Hindi", k, ch, got)
			case i == 0 && got != en:
				t.Errorf("English passenger's %s %s went out as %q, want %q", k, ch, got, en)
			}
		}
		teststack.Must(t, rows.Err(), "rows")
		if seen != 2*len(keys) {
			t.Errorf("passenger %d got %d of the %d messages", i, seen, 2*len(keys))
		}
	}
}

var verbRE = regexp.MustCompile(`%\[(\d+)\]([a-z])`)

// sampleArgs are arguments for message key k of the kinds its English
// text asks for: a number for %d, a word for the rest.
func sampleArgs(k string) []any {
	var args []any
	for _, m := range verbRE.FindAllStringSubmatch(i18n.Text("en", k+".subject")+i18n.Text("en", k+".body"), -1) {
		n, _ := strconv.Atoi(m[1])
		for len(args) < n {
			args = append(args, "X4Q9")
		}
		if m[2] == "d" {
			args[n-1] = 7
		}
	}
	return args
}

func devanagari(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool { return unicode.Is(unicode.Devanagari, r) })
}

// notifyCallsOutsideTheCatalogue are the calls of booking.Notify (a
// message in words given by the caller) anywhere but booking/notify.go,
// where NotifyT calls it with the catalogue's words: each such call is a
// message that would go out in English to a Hindi reader.
func notifyCallsOutsideTheCatalogue(t *testing.T) []string {
	t.Helper()
	root := filepath.Join("..", "..")
	var calls []string
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == "testdata" || n == "node_modules" || (strings.HasPrefix(n, ".") && path != root) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || path == filepath.Join(root, "booking", "notify.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		inBooking := f.Name.Name == "booking"
		ast.Inspect(f, func(n ast.Node) bool {
			c, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			switch fn := c.Fun.(type) {
			case *ast.SelectorExpr:
				if x, ok := fn.X.(*ast.Ident); ok && x.Name == "booking" && fn.Sel.Name == "Notify" {
					calls = append(calls, fset.Position(c.Pos()).String())
				}
			case *ast.Ident:
				if inBooking && fn.Name == "Notify" {
					calls = append(calls, fset.Position(c.Pos()).String())
				}
			}
			return true
		})
		return nil
	})
	teststack.Must(t, err, "read the source")
	return calls
}
