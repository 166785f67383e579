package console_test

import (
	"context"
	"net/http"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"tatkal/booking/lab/teststack"
)

// scrape reads /metrics from base and parses it with Prometheus's own
// text parser: a malformed exposition fails here.
func scrape(t *testing.T, base string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %d", resp.StatusCode)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	return fams
}

// heldCount is how many hold attempts answered HELD in this process.
func heldCount(t *testing.T, fams map[string]*dto.MetricFamily) uint64 {
	t.Helper()
	f := fams["tatkal_hold_duration_seconds"]
	if f == nil {
		return 0
	}
	if f.GetType() != dto.MetricType_HISTOGRAM {
		t.Fatalf("tatkal_hold_duration_seconds is a %v, want a histogram", f.GetType())
	}
	for _, m := range f.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "outcome" && l.GetValue() == "held" {
				return m.GetHistogram().GetSampleCount()
			}
		}
	}
	return 0
}

// A hold moves this process's hold histogram, and the exposition has the
// per-process counters and the system gauges under their tatkal_ names.
func TestMetricsCountAHold(t *testing.T) {
	t.Parallel()
	s := setup(t, teststack.Options{})
	_, date := s.DemoShard(t, 4, 0)
	u := s.Users(t, "metr", 1)[0]
	before := heldCount(t, scrape(t, s.Metrics.URL))
	if _, err := s.Service.Hold(context.Background(), teststack.Caller(u), holdReq(u, "metr-00001", date)); err != nil {
		t.Fatal(err)
	}
	fams := scrape(t, s.Metrics.URL)
	if after := heldCount(t, fams); after < before+1 {
		t.Fatalf("held holds in the histogram: %d before, %d after a hold", before, after)
	}
	for _, name := range []string{"tatkal_funnel_events_total", "tatkal_payments_unresolved", "tatkal_lever_changes_pending",
		"tatkal_payment_route_success_ratio", "go_goroutines"} {
		if fams[name] == nil {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	for name := range fams {
		if name == "tatkal_funnel_events_last_minute" || name == "tatkal_stage_latency_p95_seconds" {
			t.Errorf("/metrics still reads the funnel's Redis sums per scrape (%s)", name)
		}
	}
}
