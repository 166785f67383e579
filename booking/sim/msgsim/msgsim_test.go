package msgsim_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"go.uber.org/goleak"

	"tatkal/booking/lab/testenv"
	"tatkal/booking/notify"
	"tatkal/booking/sim/msgsim"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testenv.LeakOptions()...) }

func start(t *testing.T, f notify.Faults) (*testenv.Env, *notify.Client, *msgsim.Server) {
	t.Helper()
	env := testenv.New(t)
	sim, err := msgsim.New(context.Background(), msgsim.Config{Pool: env.Pool, APIKey: "msg-test-key-0123456789", AdminToken: "admin-test-token-0123456789", Faults: &f, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(srv.Close)
	return env, notify.NewClient(srv.URL, "msg-test-key-0123456789", srv.Client()), sim
}

// One key, one message: a repeat is answered as a duplicate with the same
// id; the key with another message is refused; the receipt turns final.
func TestOnceperKeyAndReceipts(t *testing.T) {
	t.Parallel()
	// Delivery comes long after the checks below, however slow the machine,
	// so the first receipt is never final yet.
	env, c, _ := start(t, notify.Faults{DeliverAfterMs: 5000})
	ctx := context.Background()
	m := notify.Message{Channel: "EMAIL", To: "asha", Subject: "Hi", Body: "Your ticket", ClientRef: "n-1",
		Attachments: []notify.Attachment{{Name: "t.pdf", ContentType: "application/pdf", Data: []byte("%PDF-1.3 x")}}}
	a, err := c.Send(ctx, "key-1", m)
	if err != nil || a.Duplicate || a.Status != notify.Accepted {
		t.Fatalf("first send: %+v %v", a, err)
	}
	b, err := c.Send(ctx, "key-1", m)
	if err != nil || !b.Duplicate || b.ID != a.ID {
		t.Fatalf("repeat: %+v %v, want duplicate of %s", b, err, a.ID)
	}
	m2 := m
	m2.Body = "another"
	if _, err := c.Send(ctx, "key-1", m2); !notify.IsPermanent(err) {
		t.Fatalf("key reused for another message: %v, want a permanent refusal", err)
	}
	if _, err := notify.NewClient("http://127.0.0.1:1", "x", nil).Send(ctx, "k", m); err == nil || notify.IsPermanent(err) {
		t.Fatalf("unreachable gateway: %v, want a retryable error", err)
	}
	var n int
	if err := env.Pool.QueryRow(ctx, `SELECT count(*) FROM msg.messages`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("gateway holds %d messages (%v), want 1", n, err)
	}
	r, err := c.Status(ctx, a.ID)
	if err != nil || r.Final() {
		t.Fatalf("receipt at once: %+v %v, want not final", r, err)
	}
	testenv.Eventually(t, 15*time.Second, "a final receipt", func() error {
		if r, err = c.Status(ctx, a.ID); err != nil {
			t.Fatalf("receipt: %v", err)
		}
		return testenv.Want(r.Final(), "%+v", r)
	})
	if err != nil || r.Status != notify.Delivered || r.DeliveredAt == nil {
		t.Fatalf("receipt later: %+v %v, want DELIVERED", r, err)
	}
	if _, err := c.Status(ctx, "msg_nope"); !notify.IsPermanent(err) {
		t.Fatalf("unknown message: %v", err)
	}
	bad := notify.NewClient(c.BaseURL(), "wrong-key-0123456789", nil)
	var pe *notify.PermanentError
	if _, err := bad.Send(ctx, "key-2", m); !errors.As(err, &pe) || pe.Status != 401 {
		t.Fatalf("wrong key: %v, want 401", err)
	}
	if _, err := c.Send(ctx, "key-3", notify.Message{Channel: "SMS", To: "x", Body: "b", Attachments: m.Attachments}); !notify.IsPermanent(err) {
		t.Fatalf("SMS with attachment: %v, want refused", err)
	}
}

// With every call failing the gateway takes nothing; with every answer
// lost it takes the message once however often it is asked.
func TestFailuresAndLostAnswers(t *testing.T) {
	t.Parallel()
	env, c, sim := start(t, notify.Faults{FailRate: 1})
	ctx := context.Background()
	m := notify.Message{Channel: "SMS", To: "asha", Body: "code 1", ClientRef: "n-1"}
	if _, err := c.Send(ctx, "k-1", m); err == nil || notify.IsPermanent(err) {
		t.Fatalf("failing gateway: %v, want a retryable error", err)
	}
	if err := sim.SetFaults(notify.Faults{LostReplyRate: 1}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := c.Send(ctx, "k-1", m); err == nil || notify.IsPermanent(err) {
			t.Fatalf("lost answer: %v, want a retryable error", err)
		}
	}
	var n, reqs int
	if err := env.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM msg.messages), (SELECT count(*) FROM msg.requests)`).Scan(&n, &reqs); err != nil {
		t.Fatal(err)
	}
	if n != 1 || reqs != 4 {
		t.Fatalf("%d messages from %d requests, want 1 from 4", n, reqs)
	}
	if err := sim.SetFaults(notify.Faults{FailRate: 0.7, LostReplyRate: 0.7}); err == nil {
		t.Fatal("rates adding up past 1 accepted")
	}
}
