package console_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"tatkal/booking/lab/testenv"
	"tatkal/booking/lab/teststack"
)

// TestBrowserUserAdmin drives /console/users in headless Chromium: admin1
// adds an ops user and proposes a new admin, which waits; admin2 approves
// it and disables the ops user. Screenshots go to $TATKAL_SCREENSHOTS.
func TestBrowserUserAdmin(t *testing.T) {
	testenv.Chromium(t)
	s := setup(t, teststack.Options{})
	b := testenv.NewBrowser(t, testenv.BrowserOptions{Width: 1280, Height: 900, Timeout: 60 * time.Second})
	base := s.Server.URL
	set := func(sel, v string) chromedp.Action[chromedp.Void] { return chromedp.SetValue(chromedp.CSS(sel), v) }
	addUser := func(login, name, role, reason string) {
		t.Helper()
		b.Do("open users", chromedp.Navigate(base+"/console/users"), chromedp.WaitVisible(chromedp.CSS(`[data-testid=user-form]`)),
			set(`[data-testid=user-login]`, login), set(`[data-testid=user-name]`, name), set(`[data-testid=user-role]`, role),
			set(`[data-testid=user-password]`, "first-pass-0001"), set(`[data-testid=user-password2]`, "first-pass-0001"))
		if reason != "" {
			b.Do("reason", set(`[data-testid=user-reason]`, reason))
		}
		b.Submit("add "+login, `[data-testid=user-add]`)
	}

	signIn(t, b, base, "admin1")
	addUser("meera", "Meera Nair", "ops", "")
	if got := b.Text(`[data-testid=notice]`); !strings.Contains(got, "meera added (ops)") {
		t.Fatalf("after adding meera: %q", got)
	}
	addUser("vikram", "Vikram Shah", "admin", "second admin for the night shift")
	if got := b.Text(`[data-testid=notice]`); !strings.Contains(got, "waits for a second admin") {
		t.Fatalf("after proposing vikram: %q", got)
	}
	id := grantID(t, s.Pool, "vikram")
	if n := b.Count(fmt.Sprintf(`[data-testid=approve-grant-%d]`, id)); n != 0 {
		t.Fatal("the proposer is offered the approval")
	}
	b.Shot("users-proposed")
	b.Submit("sign out", `[data-testid=logout]`)

	signIn(t, b, base, "admin2")
	b.Do("users as admin2", chromedp.Navigate(base+"/console/users"), chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`[data-testid=approve-grant-%d]`, id))))
	b.Submit("approve", fmt.Sprintf(`[data-testid=approve-grant-%d]`, id))
	if got := b.Text(`[data-testid=notice]`); !strings.Contains(got, "vikram is an active admin, approved by admin2 after admin1 proposed it") {
		t.Fatalf("after approving: %q", got)
	}
	if got := b.Text(`[data-testid=user-role-vikram]`); got != "admin" {
		t.Fatalf("vikram's role on the list: %q", got)
	}
	b.Shot("users-approved")

	b.Do("manage meera", chromedp.Navigate(base+"/console/users"), chromedp.WaitVisible(chromedp.CSS(`[data-testid=manage-meera]`)))
	b.Submit("open meera", `[data-testid=manage-meera]`)
	b.Do("reason", set(`[data-testid=disable-reason]`, "moved to another team"))
	b.Submit("disable meera", `[data-testid=disable]`)
	if got := b.Text(`[data-testid=notice]`); !strings.Contains(got, "meera is disabled") {
		t.Fatalf("after disabling meera: %q", got)
	}
	if got := b.Text(`[data-testid=state]`); got != "disabled" {
		t.Fatalf("meera's state: %q", got)
	}
	b.Shot("user-disabled")
	b.Do("audit", chromedp.Navigate(base+"/console/audit?action=console_user"), chromedp.WaitVisible(chromedp.CSS(`[data-testid=audit-rows]`)))
	if row := b.Text(`[data-action="console_user.admin_grant"]`); !strings.Contains(row, "admin2") || !strings.Contains(row, `"proposed_by": "admin1"`) {
		t.Fatalf("the grant's audit row: %s", row)
	}
	b.Shot("users-audit")
}
