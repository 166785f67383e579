package web_test

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"tatkal/booking/lab/teststack"
)

var (
	paxOptionRE = regexp.MustCompile(`data-pax-name="([^"]+)"[^>]*>\s*<input type="checkbox" name="pax" id="[^"]+" value="(\d+)"( checked)?`)
	keyRE       = regexp.MustCompile(`name="key" value="([^"]+)"`)
)

// paxOption is one saved passenger offered on the hold form.
type paxOption struct {
	name, id string
	checked  bool
}

func paxOptions(t *testing.T, page string) []paxOption {
	t.Helper()
	var out []paxOption
	for _, m := range paxOptionRE.FindAllStringSubmatch(page, -1) {
		out = append(out, paxOption{name: html.UnescapeString(m[1]), id: m[2], checked: m[3] != ""})
	}
	return out
}

// The hold form offers every saved passenger with none ticked; the
// passenger ticks any two and the hold carries
// exactly those two, in the page and in the database. Five ticked are
// refused with a clear error, the ticks kept, nothing held; a passenger
// who is not on the account's list is refused too. All without
// JavaScript: plain form posts.
func TestHoldForTwoChosenPassengers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := teststack.New(t, teststack.Options{})
	_, date := s.DemoShard(t, 8, 0)
	users := s.Users(t, "cp", 2) // each with one saved passenger
	b := newBrowser(t, s)
	b.signIn("cp00001", "pw-cp")
	for _, p := range []url.Values{
		{"name": {"Asha Verma"}, "age": {"61"}, "gender": {"F"}, "berth_pref": {"LB"}, "id_type": {"PAN"}, "id_ref": {"ABCDE1234F"}},
		{"name": {"Ravi Verma"}, "age": {"64"}, "gender": {"M"}},
		{"name": {"Nisha Verma"}, "age": {"30"}, "gender": {"F"}},
		{"name": {"Dev Verma"}, "age": {"8"}, "gender": {"M"}},
	} {
		if status, _, page := b.post("/passengers", "/passengers", p); status != http.StatusSeeOther {
			t.Fatalf("save %s: %d %.1500s", p.Get("name"), status, page)
		}
	}
	window := "/book?train=12951&date=" + date.Format(time.DateOnly) + "&class=3A&from=MMCT&to=NDLS"
	_, _, page := b.get(window)
	opts := paxOptions(t, page)
	if len(opts) != 5 || slices.ContainsFunc(opts, func(o paxOption) bool { return o.checked }) {
		t.Fatalf("the hold form offers %+v, want the 5 saved passengers, none ticked:\n%.3000s", opts, page)
	}
	if !strings.Contains(page, `data-pax-none hidden`) {
		t.Fatalf("the fresh hold form shows its nobody-chosen message:\n%.3000s", page)
	}
	if !strings.Contains(page, `data-pax-max="4"`) || !strings.Contains(page, "Tick 1 to 4") {
		t.Fatalf("the hold form does not say at most 4:\n%.3000s", page)
	}
	hold := func(ids ...string) (int, string, string) {
		t.Helper()
		_, _, page := b.get(window)
		m := keyRE.FindStringSubmatch(page)
		if m == nil {
			t.Fatalf("no attempt key on the window page:\n%.2000s", page)
		}
		return b.post(window, "/book", with(url.Values{"train": {"12951"}, "date": {date.Format(time.DateOnly)}, "class": {"3A"},
			"from": {"MMCT"}, "to": {"NDLS"}, "key": {m[1]}, "pax": ids}, b.solveCheck(window, m[1])))
	}
	holds := func() int {
		var n int
		teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT count(*) FROM holds WHERE user_id = $1`, users[0]).Scan(&n), "holds")
		return n
	}

	// Five ticked: refused, clearly, with the five still ticked.
	all := []string{opts[0].id, opts[1].id, opts[2].id, opts[3].id, opts[4].id}
	status, _, page := hold(all...)
	if status != http.StatusConflict || !strings.Contains(page, "at most 4 passengers; you chose 5") {
		t.Fatalf("five passengers: %d, want 409 saying at most 4:\n%.3000s", status, page)
	}
	if again := paxOptions(t, page); len(again) != 5 || slices.ContainsFunc(again, func(o paxOption) bool { return !o.checked }) {
		t.Fatalf("after the refusal the form shows %+v, want the five still ticked", again)
	}
	// Someone else's saved passenger: refused.
	var stranger string
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT id::text FROM passenger_master WHERE user_id = $1`, users[1]).Scan(&stranger), "stranger")
	if status, _, page := hold(opts[1].id, stranger); status != http.StatusConflict || !strings.Contains(page, "from your saved list") {
		t.Fatalf("a stranger's passenger: %d:\n%.2000s", status, page)
	}
	// Nobody ticked: refused, said at the top and beside the choice.
	if status, _, page := hold(); status != http.StatusConflict || strings.Count(page, "Choose at least one passenger: tick who travels") != 2 ||
		strings.Contains(page, `data-pax-none hidden`) {
		t.Fatalf("nobody ticked: %d, want 409 saying so at the top and at the choice:\n%.4000s", status, page)
	}
	if n := holds(); n != 0 {
		t.Fatalf("%d holds after refused forms, want none", n)
	}

	// Two chosen, neither of them the first.
	chosen := []paxOption{opts[1], opts[3]} // Asha carries the photo ID the ticket needs
	status, loc, page := hold(chosen[0].id, chosen[1].id)
	if status != http.StatusSeeOther || !strings.HasPrefix(loc, "/bookings/") {
		t.Fatalf("hold for %s and %s: %d %s\n%.2000s", chosen[0].name, chosen[1].name, status, loc, page)
	}
	_, _, page = b.get(loc)
	for _, o := range opts {
		want := o == chosen[0] || o == chosen[1]
		if got := strings.Contains(page, "<td>"+o.name+" ("); got != want { // a row of the passengers table
			t.Errorf("booking page shows %s: %v, want %v", o.name, got, want)
		}
	}
	rows, err := s.Pool.Query(ctx, `SELECT e.p->>'name' FROM holds h, jsonb_array_elements(h.passengers) WITH ORDINALITY AS e(p, n)
		WHERE h.id = $1 ORDER BY e.n`,
		strings.TrimPrefix(loc, "/bookings/"))
	teststack.Must(t, err, "hold passengers")
	var names []string
	for rows.Next() {
		var n string
		teststack.Must(t, rows.Scan(&n), "scan")
		names = append(names, n)
	}
	teststack.Must(t, rows.Err(), "rows")
	if want := []string{chosen[0].name, chosen[1].name}; !slices.Equal(names, want) {
		t.Fatalf("the hold carries %v, want exactly %v", names, want)
	}
}

// The site's language switch, used signed in or before signing in, is the
// account's language for the messages sent to it (booking.NotifyT).
func TestLanguageSwitchIsTheAccounts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := teststack.New(t, teststack.Options{})
	users := s.Users(t, "lg", 2)
	lang := func(u int64) string {
		var l string
		teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT lang FROM users WHERE id = $1`, u).Scan(&l), "lang")
		return l
	}
	a := newBrowser(t, s)
	a.signIn("lg00001", "pw-lg")
	if status, _, page := a.post("/passengers", "/lang", url.Values{"lang": {"hi"}, "back": {"/passengers"}}); status != http.StatusSeeOther {
		t.Fatalf("switch to Hindi: %d %.1000s", status, page)
	}
	b := newBrowser(t, s)
	if status, _, _ := b.post("/signin", "/lang", url.Values{"lang": {"hi"}, "back": {"/"}}); status != http.StatusSeeOther {
		t.Fatalf("switch before signing in: %d", status)
	}
	if got := lang(users[1]); got != "en" {
		t.Fatalf("before signing in the account's language is %q", got)
	}
	b.signIn("lg00002", "pw-lg")
	if a, b := lang(users[0]), lang(users[1]); a != "hi" || b != "hi" {
		t.Fatalf("languages %q and %q, want hi for both", a, b)
	}
	a.post("/passengers", "/lang", url.Values{"lang": {"en"}, "back": {"/passengers"}})
	if got := lang(users[0]); got != "en" {
		t.Fatalf("back to English: %q", got)
	}
}
