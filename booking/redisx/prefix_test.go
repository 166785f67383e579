package redisx_test

import (
	"context"
	"fmt"
	"testing"

	"tatkal/booking/lab/testenv"
	"tatkal/booking/redisx"
)

// DeletePrefix removes a scratch deployment's keys on every node, in
// every slot, and nothing of another prefix.
func TestDeletePrefixEverywhere(t *testing.T) {
	testenv.EachRedis(t, func(t *testing.T, redisURL string) {
		ctx := context.Background()
		rdb, err := redisx.Open(redisURL, "", 4)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rdb.Close() })
		scratch, kept := testenv.RedisPrefix(t, rdb), testenv.RedisPrefix(t, rdb)
		for i := range 200 { // hash tags spread the keys over the slots
			for _, p := range []string{scratch, kept} {
				if err := rdb.Set(ctx, fmt.Sprintf("%s:{s%d}:x", p, i), "1", 0).Err(); err != nil {
					t.Fatal(err)
				}
			}
		}
		redisx.DeletePrefix(rdb, scratch)
		left, err := redisx.ScanKeys(ctx, rdb, scratch+":*")
		if err != nil || len(left) != 0 {
			t.Fatalf("%d keys of the scratch prefix left (%v)", len(left), err)
		}
		if others, err := redisx.ScanKeys(ctx, rdb, kept+":*"); err != nil || len(others) != 200 {
			t.Fatalf("%d keys of another prefix left (%v), want 200", len(others), err)
		}
	})
}
