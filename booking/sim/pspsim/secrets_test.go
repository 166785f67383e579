package pspsim

import (
	"net/http"
	"testing"

	"tatkal/booking/payment/pspapi"
)

// During a rotation a gateway holds the new and the old API key: either
// is accepted, anything else (the key once compiled into the source
// among them) is refused.
func TestAPIKeyRotationAcceptsEveryLiveKey(t *testing.T) {
	t.Parallel()
	gws := NewGateways()
	gws[0].APIKeys = append(gws[0].APIKeys, "sk_old_"+randomHex(16))
	b := setup(t, opts{gws: gws, noRun: true})
	path := "/gw/" + gws[0].ID + "/v1/payments?merchant_ref=00000000-0000-0000-0000-000000000000"
	for _, key := range gws[0].APIKeys {
		if r := b.must(t, "GET", path, key, "", nil); r.status == http.StatusUnauthorized {
			t.Fatalf("live key %q refused: %s", key, r.body)
		}
	}
	for _, key := range []string{"sk_dev_swiftpay", gws[1].APIKeys[0], ""} {
		b.must(t, "GET", path, key, "", nil).wantError(t, http.StatusUnauthorized, pspapi.CodeUnauthorized)
	}
}
