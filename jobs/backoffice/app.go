package backoffice

import (
	"net/http"
	"time"

	"github.com/riverqueue/river"

	"tatkal/booking/app"
	"tatkal/booking/fraud"
	"tatkal/booking/fraud/review"
	"tatkal/recon"
)

// Office is the back office of one process built by booking/app
// (app.Options.BackOffice).
type Office struct{ svc Services }

// New returns the back office for app.Options.BackOffice.
func New() *Office { return &Office{} }

// Jobs registers the back office's workers and periodic jobs.
func (o *Office) Jobs(w *river.Workers) []*river.PeriodicJob { return Jobs(&o.svc)(w) }

// Use hands the process's services to the workers, before they run.
func (o *Office) Use(a *app.App) {
	cfg := a.Config
	keys := map[string]string{}
	for _, g := range cfg.Gateways() {
		keys[g.ID] = g.APIKey
	}
	o.svc = Services{Booking: a.Booking, Payments: a.Payments,
		Recon:         a.Recon,
		Fraud:         &fraud.Service{Pool: a.Pool, Clusterer: fraud.Clusterer{Config: fraud.DefaultConfig()}},
		FraudEnforcer: &review.Enforcer{Review: review.New(a.Pool), Booking: a.Booking, Log: a.Log},
		// Where reconciliation fetches the outside legs: each gateway's
		// settlement file, the bank statement, the core's export.
		Sources: recon.Sources{HTTP: &http.Client{Timeout: time.Minute}, PSPURL: cfg.PSPURL, GatewayKeys: keys,
			BankToken: cfg.SimAdminToken, CoreURL: cfg.PRSURL, CoreKey: cfg.PRSKey}}
}
