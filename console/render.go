package console

import (
	"net/http"
	"strings"
	"time"

	"github.com/a-h/templ"

	"tatkal/booking"
	"tatkal/views"
)

// nav lists the sections in menu order with the roles that may open them.
var nav = []struct {
	item  views.NavItem
	roles []string
}{
	{views.NavItem{Href: "/console/funnel", Label: "Funnel", Key: "funnel"}, []string{Ops, Admin}},
	{views.NavItem{Href: "/console/levers", Label: "Levers", Key: "levers"}, []string{Ops, Admin}},
	{views.NavItem{Href: "/console/shards", Label: "Shards", Key: "shards"}, []string{Ops, Admin}},
	{views.NavItem{Href: "/console/lab", Label: "Lab", Key: "lab"}, []string{Ops, Admin}},
	{views.NavItem{Href: "/console/windows", Label: "Window fairness", Key: "windows"}, []string{Ops, Admin}},
	{views.NavItem{Href: "/console/reviews", Label: "Window reviews", Key: "reviews"}, []string{Ops, Admin}},
	{views.NavItem{Href: "/console/banners", Label: "Status banners", Key: "banners"}, []string{Ops, Admin}},
	{views.NavItem{Href: "/console/payments", Label: "Stuck payments", Key: "payments"}, []string{Ops, Finance, Admin}},
	{views.NavItem{Href: "/console/alarms", Label: "Alarms", Key: "alarms"}, []string{Ops, Finance, Admin}},
	{views.NavItem{Href: "/console/schedules", Label: "Schedules", Key: "schedules"}, []string{Ops, Finance, Admin}},
	{views.NavItem{Href: "/console/lookup", Label: "Lookup", Key: "lookup"}, []string{Ops, Fraud, Admin}},
	{views.NavItem{Href: "/console/trace", Label: "User trace", Key: "trace"}, []string{Ops, Fraud, Admin}},
	{views.NavItem{Href: "/console/audit", Label: "Audit", Key: "audit"}, []string{Ops, Finance, Fraud, Admin}},
	{views.NavItem{Href: "/console/finance", Label: "Finance", Key: "finance"}, []string{Finance, Admin}},
	{views.NavItem{Href: "/console/finance/exceptions?state=UNRESOLVED", Label: "Team exceptions", Key: "finance"}, []string{Team}},
	{views.NavItem{Href: "/console/fraud", Label: "Fraud", Key: "fraud"}, []string{Fraud, Admin}},
	{views.NavItem{Href: "/console/users", Label: "Users", Key: "users"}, []string{Admin}},
	{views.NavItem{Href: "/console/tokens", Label: "API tokens", Key: "tokens"}, []string{Admin}},
	{views.NavItem{Href: "/console/river/", Label: "Jobs", Key: "river"}, []string{Admin}},
}

func navFor(u User, active string) views.ConsoleNav {
	n := views.ConsoleNav{Login: u.Login, Role: u.Role, CSRF: u.CSRF, Active: active}
	for _, it := range nav {
		if allowedNav(u.Role, it.roles...) {
			n.Items = append(n.Items, it.item)
		}
	}
	return n
}

// firstPage is where a role lands after signing in.
func firstPage(role string) string {
	for _, it := range nav {
		if allowedNav(role, it.roles...) {
			return it.item.Href
		}
	}
	return "/console/login"
}

func (c *Console) render(w http.ResponseWriter, r *http.Request, title string, content templ.Component) {
	u, _ := userFrom(r.Context())
	active := strings.SplitN(strings.TrimPrefix(r.URL.Path, "/console/"), "/", 2)[0]
	n := navFor(u, active)
	n.Notice = c.takeNotice(r)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := views.ConsolePage(title, n, content).Render(r.Context(), w); err != nil {
		c.log.Error("render console page", "path", r.URL.Path, "err", err)
	}
}

func forbiddenView(u User, allowed []string) templ.Component {
	return views.ConsoleMessage(views.ConsoleMessagePage{Title: "Not allowed", TestID: "forbidden",
		Message: "Your role (" + u.Role + ") may not open this page. It is open to: " + strings.Join(allowed, ", ") + "."})
}

func (c *Console) serverError(w http.ResponseWriter, r *http.Request, err error) {
	c.log.Error("console", "path", r.URL.Path, "err", err)
	http.Error(w, "Internal error.", http.StatusInternalServerError)
}

// userError shows err's message if it is one a person may see.
func userError(err error) string { return booking.ErrorMessage(err) }

func ist(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.In(booking.IST).Format("02 Jan 15:04:05")
}
