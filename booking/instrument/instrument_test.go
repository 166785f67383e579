package instrument_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"tatkal/booking/instrument"
	"tatkal/booking/lab/testenv"
	"tatkal/booking/redisx"
)

// Checking counts nothing; captures count, once per account, whatever the
// address's case, and keep the set for the window; a fourth account is
// refused, a counted one is not. On a node and on a cluster (the captures
// of one call fall in several slots).
func TestAllowedCountsOnlyRecorded(t *testing.T) {
	testenv.EachRedis(t, func(t *testing.T, redisURL string) {
		ctx := context.Background()
		rdb, err := redisx.Open(redisURL, "", 4)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rdb.Close() })
		prefix := testenv.RedisPrefix(t, rdb)
		shared := instrument.UPI("Tout@OKBank")
		for user := int64(1); user <= 10; user++ {
			if ok, err := instrument.Allowed(ctx, rdb, prefix, shared, user, instrument.MaxAccounts); err != nil || !ok {
				t.Fatalf("account %d before any capture: %v %v", user, ok, err)
			}
		}
		var uses []instrument.Use
		for user := int64(1); user <= 3; user++ {
			uses = append(uses, instrument.Use{UserID: user, Instrument: instrument.UPI("tout@okbank")},
				instrument.Use{UserID: user, Instrument: instrument.UPI(fmt.Sprintf("own%d@okbank", user))}, instrument.Use{UserID: user})
		}
		if err := instrument.Record(ctx, rdb, prefix, uses...); err != nil {
			t.Fatal(err)
		}
		if err := instrument.Record(ctx, rdb, prefix, uses[0]); err != nil { // a second capture counts the account once
			t.Fatal(err)
		}
		for user, want := range map[int64]bool{1: true, 3: true, 4: false, 9: false} {
			if ok, err := instrument.Allowed(ctx, rdb, prefix, shared, user, instrument.MaxAccounts); err != nil || ok != want {
				t.Errorf("account %d after three captures: %v %v, want %v", user, ok, err, want)
			}
		}
		keys := testenv.Keys(t, rdb, prefix)
		if len(keys) != 4 {
			t.Fatalf("%d sets for 4 addresses: %v", len(keys), keys)
		}
		for _, k := range keys {
			if ttl := rdb.TTL(ctx, k).Val(); ttl < instrument.Window-time.Minute || ttl > instrument.Window {
				t.Errorf("%s expires in %s, want %s", k, ttl, instrument.Window)
			}
		}
	})
}

// BenchmarkRecord: what counting a captured UPI payment adds to its
// callback, after the COMMIT: one pipelined round trip.
func BenchmarkRecord(b *testing.B) {
	ctx := context.Background()
	rdb, err := redisx.Open(testenv.RedisURL(), "", 4)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { rdb.Close() })
	prefix := testenv.RedisPrefix(b, rdb)
	for i := 0; b.Loop(); i++ {
		u := instrument.Use{UserID: int64(i % 5000), Instrument: instrument.UPI("bench.payer@okaxis")}
		if err := instrument.Record(ctx, rdb, prefix, u); err != nil {
			b.Fatal(err)
		}
	}
}
