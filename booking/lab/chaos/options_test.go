package chaos_test

import (
	"strings"
	"testing"
	"time"

	"tatkal/booking/lab/chaos"
)

// Every fault the command names passes the option check, the store faults
// included; bad input is refused with the flag it is about.
func TestOptionsCheck(t *testing.T) {
	for _, f := range chaos.FaultNames {
		o := chaos.DefaultOptions()
		o.Fault, o.Users, o.Serves = f, 100, 2
		if err := o.Check(); err != nil {
			t.Errorf("--fault %s --users 100 --serves 2: %v", f, err)
		}
	}
	for _, c := range []struct {
		change func(*chaos.Options)
		want   string
	}{
		{func(o *chaos.Options) { o.Fault = "postgres-stop" }, `--fault "postgres-stop": one of serve-kill, worker-kill, redis-wipe, postgres-restart, redis-failover`},
		{func(o *chaos.Options) { o.Fault = "" }, `--fault ""`},
		{func(o *chaos.Options) { o.Users = 5 }, "--users: 10..10000"},
		{func(o *chaos.Options) { o.Berths = 0 }, "--berths: 1..5000"},
		{func(o *chaos.Options) { o.Serves = 1 }, "--serves: 2..8"},
		{func(o *chaos.Options) { o.Workers = 9 }, "--workers: 2..8"},
		{func(o *chaos.Options) { o.Drain = time.Second }, "--drain at least 30s"},
	} {
		o := chaos.DefaultOptions()
		o.Fault = chaos.FaultRedisFailover
		c.change(&o)
		err := o.Check()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want an error saying %q", o, err, c.want)
		}
	}
}
