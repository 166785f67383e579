package console_test

import (
	"context"
	"strings"
	"testing"

	"tatkal/booking/lab/teststack"
)

// A rebuild that failed is shown red on the shards page, with its error,
// whether Redis is still at the old epoch or lost: the shard refuses holds
// until a rebuild loads (issue 9, problem 5).
func TestShardsPageShowsAFailedRebuild(t *testing.T) {
	t.Parallel()
	s := setup(t, teststack.Options{})
	shard, _ := s.DemoShard(t, 2, 0)
	ctx := context.Background()
	// A rebuild that bumped the epoch and failed to load, as recorded by
	// inventory.Rebuild.
	if _, err := s.Pool.Exec(ctx, `UPDATE inventory_shards SET epoch = epoch + 1, rebuild_failed_at = now(),
		rebuild_error = 'load shard: injected fault' WHERE id = $1`, shard); err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, s.Server.URL)
	b.login("ops1")
	row := `data-testid="shard-row-` + itoa(shard)
	for _, lost := range []bool{false, true} {
		if lost {
			if err := s.Store.Wipe(ctx, shard); err != nil {
				t.Fatal(err)
			}
		}
		_, body, _ := b.get("/console/shards")
		i := strings.Index(body, row)
		if i < 0 {
			t.Fatalf("no row for shard %d:\n%.2000s", shard, body)
		}
		tr := body[i:]
		tr = tr[:strings.Index(tr, "</tr>")]
		if !strings.Contains(tr, "pill red") || !strings.Contains(tr, "injected fault") {
			t.Fatalf("Redis lost %v: the shard's row does not show the failed rebuild red:\n%s", lost, tr)
		}
	}
}
