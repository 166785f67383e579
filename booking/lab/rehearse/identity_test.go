package rehearse

import (
	"strings"
	"testing"
	"time"
)

// TestEachRunUsesItsOwnPeopleAndAddresses: a rehearsal's runs share a
// database and Redis, each on new accounts, so what a person brings (the
// passengers' names and IDs, the UPI address) is the run's own. Shared
// across runs, the resale check refused passengers from the third run on
// and the instrument check (an address on more than three accounts in 30
// days) refused payments from the fourth: HIGH_DEMAND that was not load.
func TestEachRunUsesItsOwnPeopleAndAddresses(t *testing.T) {
	vpas, bodies := map[string]int{}, map[string]int{}
	for idx := range 10 {
		mr := &modeRun{idx: idx, date: time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)}
		tv := &traveller{profile: profile{Index: 7, Party: 2, From: "MMCT", To: "NDLS"}, run: mr}
		if v, ok := vpas[tv.vpa()]; ok {
			t.Errorf("runs %d and %d pay from one address %s", v, idx, tv.vpa())
		}
		vpas[tv.vpa()] = idx
		if !strings.HasSuffix(tv.vpa(), "@upi") || strings.ContainsAny(tv.vpa(), " |") {
			t.Errorf("run %d: %q is not a UPI address", idx, tv.vpa())
		}
		b := tv.holdBody()
		if v, ok := bodies[b]; ok {
			t.Errorf("runs %d and %d book the same passengers: %s", v, idx, b)
		}
		bodies[b] = idx
	}
}
