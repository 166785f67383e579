package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	dto "github.com/prometheus/client_model/go"

	"tatkal/booking"
	"tatkal/booking/inventory"
	"tatkal/booking/lab/testenv"
	"tatkal/booking/lab/teststack"
	"tatkal/console/alarms"
	"tatkal/console/levers"
)

// count runs a count query.
func count(t *testing.T, s *teststack.Stack, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := s.Pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// ruleMetrics are the tatkal_ metric names the alerting rules read.
func ruleMetrics(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range regexp.MustCompile(`\btatkal_[a-z_]+`).FindAllString(string(b), -1) {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return names
}

// gauge is the value of a gauge's series with label = value.
func gauge(fams map[string]*dto.MetricFamily, name, label, value string) (float64, bool) {
	for _, m := range fams[name].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == label && l.GetValue() == value {
				return m.GetGauge().GetValue(), true
			}
		}
	}
	return 0, false
}

// passAfter waits until the watch has completed a pass that started after
// since (River's row of the job), so a test knows a pass has seen what it
// did.
func passAfter(t *testing.T, s *teststack.Stack, since time.Time, within time.Duration) {
	t.Helper()
	testenv.Eventually(t, within, "a watch pass after "+since.Format(time.TimeOnly), func() error {
		n := count(t, s, `SELECT count(*) FROM river_job WHERE kind = $1 AND state = 'completed' AND attempted_at > $2`,
			alarms.WatchArgs{}.Kind(), since)
		return testenv.Want(n > 0, "no completed pass yet")
	})
}

// TestInvariantWatchFreezesTheShard: the running workers' watch (River,
// on its schedule) raises an alarm for a hold's record deleted from Redis
// behind the product's back, and, once a berth PostgreSQL holds is freed
// in Redis (which would sell it again), freezes the shard within its
// interval as the system (audited), still one alarm however many passes
// see it. Holds and
// payment starts on the shard are then refused with SHARD_FROZEN. A
// person's thaw while the alarm is open needs a second admin; once the
// shard is rebuilt from PostgreSQL the next pass clears the alarm, ops
// acknowledge it on the alarms page (audited), thaw the shard alone and
// it sells again.
func TestInvariantWatchFreezesTheShard(t *testing.T) {
	t.Parallel()
	const every = 2 * time.Second
	s := setup(t, teststack.Options{Work: true, WatchInterval: every, Routes: teststack.QuietRoutes()})
	ctx := context.Background()
	shard, date := s.DemoShard(t, 4, 0)
	scope := fmt.Sprintf("shard:%d", shard)
	users := s.Users(t, "watch", 4)
	res, err := s.Service.Hold(ctx, teststack.Caller(users[0]), holdReq(users[0], "watch-00001", date))
	if err != nil || res.Status != "HELD" {
		t.Fatalf("hold: %+v %v", res, err)
	}
	other, err := s.Service.Hold(ctx, teststack.Caller(users[3]), holdReq(users[3], "watch-00005", date))
	if err != nil || other.Status != "HELD" {
		t.Fatalf("hold: %+v %v", other, err)
	}
	// A pass over the shard as it should be raises nothing.
	passAfter(t, s, time.Now(), 20*time.Second)
	if n := count(t, s, `SELECT count(*) FROM alarms`); n != 0 || s.Levers.ShardFrozen(shard) {
		t.Fatalf("a sound shard: %d alarms, frozen %v", n, s.Levers.ShardFrozen(shard))
	}

	// Behind the product's back, a hold's record is deleted from Redis; its
	// berth stays taken in the leg bitmaps Redis allots from, so nothing
	// can sell twice: an alarm, no freeze.
	holds := strings.TrimSuffix(s.Store.MetaKey(shard), "meta") + "holds"
	if n, err := s.Store.Redis().HDel(ctx, holds, other.HoldID.String()).Result(); err != nil || n != 1 {
		t.Fatalf("delete the hold's record: %d %v", n, err)
	}
	testenv.Eventually(t, every+10*time.Second, "the seat alarm", func() error {
		return testenv.Want(count(t, s, `SELECT count(*) FROM alarms WHERE kind = $1`, alarms.KindSeats) == 1, "no seat alarm")
	})
	passAfter(t, s, time.Now(), 20*time.Second)
	if s.Levers.ShardFrozen(shard) {
		t.Fatal("a record lost with its berth still taken froze the shard: nothing could sell twice")
	}

	// Then a release PostgreSQL never made frees the other hold's berth in
	// Redis, which would sell it again: the watch freezes the shard.
	if st, err := s.Store.Release(ctx, shard, res.HoldID.String(), inventory.ReleaseHold, users[0], "watch-00001"); err != nil || st != "RELEASED" {
		t.Fatalf("release behind PostgreSQL's back: %s %v", st, err)
	}
	broken := time.Now()
	testenv.Eventually(t, every+10*time.Second, "the watch freezes the shard", func() error {
		return testenv.Want(s.Levers.ShardFrozen(shard), "%s not frozen", scope)
	})
	t.Logf("frozen %v after the berth was freed in Redis (the watch runs every %v)", time.Since(broken).Round(100*time.Millisecond), every)

	var alarmID, changeID int64
	var detail string
	if err := s.Pool.QueryRow(ctx, `SELECT id, lever_change_id, detail FROM alarms WHERE kind = $1 AND scope = $2 AND resolved_at IS NULL`,
		alarms.KindSeats, scope).Scan(&alarmID, &changeID, &detail); err != nil {
		t.Fatalf("the seat alarm: %v", err)
	}
	if !strings.Contains(detail, res.HoldID.String()) || !strings.Contains(detail, "Redis could sell it again") {
		t.Fatalf("the alarm does not say what is wrong: %s", detail)
	}
	if n := count(t, s, `SELECT count(*) FROM lever_changes WHERE id = $1 AND name = 'shard_frozen' AND scope = $2 AND new_value = 'on'
		AND state = 'APPLIED' AND proposed_by = $3 AND proposed_by_id IS NULL`, changeID, scope, alarms.Actor); n != 1 {
		t.Fatalf("the freeze is not the system's applied change %d", changeID)
	}
	// /metrics says so, under every name the alerting rules read.
	fams := scrape(t, s.Metrics.URL)
	for _, name := range ruleMetrics(t) {
		if fams[name] == nil {
			t.Errorf("/metrics lacks %s, which console/prometheus/alerts.yml reads", name)
		}
	}
	if v, ok := gauge(fams, "tatkal_shard_frozen", "shard", fmt.Sprint(shard)); !ok || v != 1 {
		t.Errorf("tatkal_shard_frozen{shard=%d} = %v %v, want 1", shard, v, ok)
	}
	if v, ok := gauge(fams, "tatkal_alarms_open", "kind", alarms.KindSeats); !ok || v != 1 {
		t.Errorf("tatkal_alarms_open{kind=%s} = %v %v, want 1", alarms.KindSeats, v, ok)
	}
	for _, action := range []string{"alarm.raise", "lever.propose", "lever.change"} {
		if n := count(t, s, `SELECT count(*) FROM audit_log WHERE actor = $1 AND action = $2`, alarms.Actor, action); n != 1 {
			t.Fatalf("audit %s by %s: %d records", action, alarms.Actor, n)
		}
	}

	// Frozen: a new hold and a payment start are refused, with the reason.
	_, err = s.Service.Hold(ctx, teststack.Caller(users[1]), holdReq(users[1], "watch-00002", date))
	if booking.ErrorReason(err) != booking.ReasonShardFrozen || booking.ErrorCode(err) != booking.EUNAVAIL {
		t.Fatalf("a hold on the frozen shard: %v, want %s", err, booking.ReasonShardFrozen)
	}
	if _, err := s.Payments.Initiate(ctx, teststack.Caller(users[0]), paymentReq(res.HoldID.String(), "UPI")); booking.ErrorReason(err) != booking.ReasonShardFrozen {
		t.Fatalf("a payment on the frozen shard: %v, want %s", err, booking.ReasonShardFrozen)
	}
	// Over HTTP too, as a passenger is told.
	tok := s.Token(users[2])
	r := testenv.Call(t, testenv.Request{Method: "POST", URL: s.Server.URL + "/v1/bookings/hold", Token: tok,
		Header: map[string]string{"Idempotency-Key": "watch-00003", "X-Device-Token": s.DeviceBinding(users[2])},
		Body: map[string]any{"train_no": "12951", "journey_date": date.Format(time.DateOnly), "class": "3A", "from": "MMCT", "to": "NDLS",
			"passengers": []map[string]any{{"name": "Asha Rao", "age": 34, "gender": "F", "id_type": "PAN", "id_ref": "ABCDE1234F"}},
			"challenge":  teststack.ChallengeObject(t, s.Server.URL, tok, "watch-00003", nil)}})
	if r.Status != http.StatusServiceUnavailable || !strings.Contains(string(r.Raw), booking.ReasonShardFrozen) {
		t.Fatalf("hold over HTTP on the frozen shard: %d %s", r.Status, r.Raw)
	}

	// Later passes see the same disagreement: still one alarm, one freeze.
	passAfter(t, s, time.Now(), 20*time.Second)
	if n := count(t, s, `SELECT count(*) FROM alarms`); n != 1 {
		t.Fatalf("%d alarms after another pass, want the one", n)
	}
	if n := count(t, s, `SELECT count(*) FROM lever_changes WHERE proposed_by = $1`, alarms.Actor); n != 1 {
		t.Fatalf("%d freezes by the system, want 1", n)
	}

	// Thawing while the seats still disagree takes a second admin.
	ops := actor(t, s, "ops1")
	ch, err := s.Console.Levers().Propose(ctx, ops, propose(levers.ShardFrozen, scope, "off"))
	if err != nil || ch.State != "PENDING" || !ch.Dangerous {
		t.Fatalf("thaw with the alarm open: %+v %v, want PENDING for a second admin", ch, err)
	}
	if _, err := s.Console.Levers().Reject(ctx, ops, ch.ID, "rebuild first"); err != nil {
		t.Fatal(err)
	}

	// Ops put the seats right (a rebuild from PostgreSQL, on the console);
	// the next pass clears the alarm but leaves the shard frozen.
	b := newBrowser(t, s.Server.URL)
	b.login("ops1")
	if code, body, _ := b.post(fmt.Sprintf("/console/shards/%d/rebuild", shard), url.Values{"confirm": {fmt.Sprintf("rebuild %d", shard)}}); code != http.StatusSeeOther {
		t.Fatalf("rebuild: %d %.2000s", code, body)
	}
	testenv.Eventually(t, every+20*time.Second, "the alarm clears", func() error {
		n := count(t, s, `SELECT count(*) FROM alarms WHERE id = $1 AND resolved_at IS NOT NULL`, alarmID)
		return testenv.Want(n == 1, "alarm %d still open", alarmID)
	})
	if !s.Levers.ShardFrozen(shard) {
		t.Fatal("the watch thawed the shard: only a person does")
	}

	// The alarms page shows it cleared and frozen; ops acknowledge it.
	code, body, _ := b.get("/console/alarms")
	row := fmt.Sprintf(`data-testid="alarm-%d"`, alarmID)
	if code != http.StatusOK || !strings.Contains(body, row) || !strings.Contains(body, `data-testid="frozen"`) || !strings.Contains(body, "cleared") {
		t.Fatalf("alarms page: %d\n%.4000s", code, body)
	}
	if code, body, _ := b.post(fmt.Sprintf("/console/alarms/%d/acknowledge", alarmID), url.Values{"note": {"rebuilt from PostgreSQL"}}); code != http.StatusSeeOther {
		t.Fatalf("acknowledge: %d %.2000s", code, body)
	}
	if n := count(t, s, `SELECT count(*) FROM alarms WHERE id = $1 AND acknowledged_by = 'ops1' AND acknowledged_by_id IS NOT NULL`, alarmID); n != 1 {
		t.Fatal("the acknowledgement is not recorded")
	}
	if n := count(t, s, `SELECT count(*) FROM audit_log WHERE actor = 'ops1' AND action = 'alarm.acknowledge' AND detail->>'note' = 'rebuilt from PostgreSQL'`); n != 1 {
		t.Fatal("the acknowledgement is not audited")
	}
	_, body, _ = b.get("/console/alarms")
	if !strings.Contains(body, `data-testid="alarms-none"`) || !strings.Contains(body, "by ops1") {
		t.Fatalf("alarms page after the acknowledgement:\n%.4000s", body)
	}
	b.post(fmt.Sprintf("/console/alarms/%d/acknowledge", alarmID), nil)
	if _, body, _ = b.get("/console/alarms"); !strings.Contains(body, "acknowledged already") {
		t.Fatalf("a second acknowledgement is not refused:\n%.3000s", body)
	}
	if n := count(t, s, `SELECT count(*) FROM audit_log WHERE action = 'alarm.acknowledge'`); n != 1 {
		t.Fatalf("%d acknowledgements audited, want 1", n)
	}

	// With the alarm cleared, one person thaws the shard and it sells again.
	ch, err = s.Console.Levers().Propose(ctx, ops, propose(levers.ShardFrozen, scope, "off"))
	if err != nil || ch.State != "APPLIED" {
		t.Fatalf("thaw: %+v %v", ch, err)
	}
	testenv.Eventually(t, 5*time.Second, "a hold after the thaw", func() error {
		res, err := s.Service.Hold(ctx, teststack.Caller(users[1]), holdReq(users[1], "watch-00004", date))
		return testenv.Want(err == nil && res.Status == "HELD", "%+v %v", res, err)
	})
}

// TestThresholdAlarmsRaisedOnceAndCleared: an UNKNOWN payment older than
// the threshold, a payment past its deadline and a refund backlog each
// raise one alarm however many passes see them (audited once), and each is
// resolved by the first pass that no longer does. None freezes anything.
func TestThresholdAlarmsRaisedOnceAndCleared(t *testing.T) {
	t.Parallel()
	s := setup(t, teststack.Options{Routes: teststack.QuietRoutes()})
	ctx := context.Background()
	shard, date := s.DemoShard(t, 4, 0)
	users := s.Users(t, "thr", 1)
	res, err := s.Service.Hold(ctx, teststack.Caller(users[0]), holdReq(users[0], "thr-00001", date))
	if err != nil {
		t.Fatal(err)
	}
	pay, err := s.Payments.Initiate(ctx, teststack.Caller(users[0]), paymentReq(res.HoldID.String(), "UPI"))
	if err != nil {
		t.Fatal(err)
	}
	w := alarms.New(alarms.Config{Pool: s.Pool, Store: s.Store, Levers: s.Console.Levers(), HoldWindow: s.Service.Rules().HoldWindow,
		Thresholds: alarms.Thresholds{UnknownAfter: time.Minute, RefundAfter: time.Hour, RefundBacklog: 1, QueueDepth: 1000,
			RouteErrorPct: 25, RouteMinCalls: 20},
		QueueDepth: s.Admission.Depth, Routes: s.Payments.Healths})
	watch := func() alarms.Pass {
		t.Helper()
		p, err := w.Watch(ctx)
		if err != nil {
			t.Fatalf("watch: %v", err)
		}
		return p
	}
	open := func(kind string) int {
		return count(t, s, `SELECT count(*) FROM alarms WHERE kind = $1 AND resolved_at IS NULL`, kind)
	}
	if p := watch(); len(p.Raised) != 0 || len(p.Shards) == 0 {
		t.Fatalf("a sound stack: %+v", p)
	}

	// Behind the product's back: the payment UNKNOWN for ten minutes and
	// past its deadline, and a refund pending.
	if _, err := s.Pool.Exec(ctx, `UPDATE payments SET state = 'UNKNOWN', initiated_at = now() - interval '10 minutes',
		deadline = now() - interval '1 minute' WHERE id = $1`, pay.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool.Exec(ctx, `INSERT INTO refunds (id, payment_id, reason, amount_paise, state) VALUES (gen_random_uuid(), $1, 'SYSTEM', 100, 'PENDING')`,
		pay.ID); err != nil {
		t.Fatal(err)
	}
	kinds := []string{alarms.KindUnknown, alarms.KindMoney, alarms.KindRefunds}
	p := watch()
	if len(p.Raised) != len(kinds) || len(p.Frozen) != 0 {
		t.Fatalf("raised %+v frozen %v, want one alarm each of %v", p.Raised, p.Frozen, kinds)
	}
	for i := 0; i < 2; i++ {
		if p := watch(); len(p.Raised) != 0 {
			t.Fatalf("raised again: %+v", p.Raised)
		}
	}
	for _, k := range kinds {
		if open(k) != 1 || count(t, s, `SELECT count(*) FROM alarms WHERE kind = $1`, k) != 1 {
			t.Fatalf("%s: want one alarm row, open", k)
		}
		if n := count(t, s, `SELECT count(*) FROM audit_log WHERE actor = $1 AND action = 'alarm.raise' AND subject LIKE $2`, alarms.Actor, k+"%"); n != 1 {
			t.Fatalf("%s: raised %d times in the audit log", k, n)
		}
	}
	if s.Levers.ShardFrozen(shard) {
		t.Fatal("a money alarm froze the shard")
	}

	// The conditions end: the payment fails, the refund is processed.
	if _, err := s.Pool.Exec(ctx, `UPDATE payments SET state = 'FAILED' WHERE id = $1`, pay.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool.Exec(ctx, `UPDATE refunds SET state = 'PROCESSED', completed_at = now() WHERE payment_id = $1`, pay.ID); err != nil {
		t.Fatal(err)
	}
	if p := watch(); p.Resolved != len(kinds) {
		t.Fatalf("resolved %d, want %d", p.Resolved, len(kinds))
	}
	for _, k := range kinds {
		if open(k) != 0 {
			t.Fatalf("%s still open", k)
		}
	}
	if n := count(t, s, `SELECT count(*) FROM audit_log WHERE actor = $1 AND action = 'alarm.resolve'`, alarms.Actor); n != len(kinds) {
		t.Fatalf("%d resolutions audited, want %d", n, len(kinds))
	}
	if p := watch(); len(p.Raised) != 0 || p.Resolved != 0 {
		t.Fatalf("a quiet pass: %+v", p)
	}
}

// TestBrowserAlarms: ops open the alarms page in Chromium, see an alarm of
// the console's own watch (an UNKNOWN payment past the default threshold),
// acknowledge it with a note and see it move to the acknowledged list. The
// page passes axe-core. Screenshots go to $TATKAL_SCREENSHOTS when set.
func TestBrowserAlarms(t *testing.T) {
	testenv.Chromium(t)
	s := setup(t, teststack.Options{Routes: teststack.QuietRoutes()})
	ctx := context.Background()
	_, date := s.DemoShard(t, 4, 0)
	users := s.Users(t, "balarm", 1)
	res, err := s.Service.Hold(ctx, teststack.Caller(users[0]), holdReq(users[0], "balarm-0001", date))
	if err != nil {
		t.Fatal(err)
	}
	pay, err := s.Payments.Initiate(ctx, teststack.Caller(users[0]), paymentReq(res.HoldID.String(), "UPI"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool.Exec(ctx, `UPDATE payments SET state = 'UNKNOWN', initiated_at = now() - interval '10 minutes' WHERE id = $1`, pay.ID); err != nil {
		t.Fatal(err)
	}
	p, err := s.Console.Alarms().Watch(ctx)
	if err != nil || len(p.Raised) != 1 || p.Raised[0].Kind != alarms.KindUnknown {
		t.Fatalf("watch: %+v %v", p.Raised, err)
	}
	id := p.Raised[0].ID

	b := testenv.NewBrowser(t, testenv.BrowserOptions{Width: 1440, Height: 900, Timeout: 45 * time.Second})
	base := s.Server.URL
	signIn(t, b, base, "ops1")
	row := fmt.Sprintf(`[data-testid="alarm-%d"]`, id)
	b.Do("open alarms", chromedp.Navigate(base+"/console/alarms"), chromedp.WaitVisible(chromedp.CSS(row)))
	if got := b.Text(row + ` [data-testid=state]`); !strings.Contains(got, "open") {
		t.Errorf("the alarm's state: %q", got)
	}
	if got := b.Text(row); !strings.Contains(got, "UNKNOWN payment") {
		t.Errorf("the alarm says %q", got)
	}
	b.Accessible("alarms")
	b.Shot("alarms-open")
	b.Do("note", chromedp.SetValue(chromedp.CSS(row+` input[name=note]`), "gateway asked by phone"))
	b.Submit("acknowledge", fmt.Sprintf(`[data-testid="ack-%d"]`, id))
	b.Do("acknowledged", chromedp.WaitVisible(chromedp.CSS(`[data-testid=alarms-none]`)))
	if got := b.Text(row); !strings.Contains(got, "by ops1") {
		t.Errorf("the acknowledged alarm says %q", got)
	}
	b.Shot("alarms-acknowledged")
	if n := count(t, s, `SELECT count(*) FROM audit_log WHERE actor = 'ops1' AND action = 'alarm.acknowledge' AND detail->>'note' = 'gateway asked by phone'`); n != 1 {
		t.Fatal("the acknowledgement is not audited")
	}
}
