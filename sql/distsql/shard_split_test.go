package distsql_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cairn-db/cairn/server"
)

// TestGrownShardsSplit: a shard of a distributed table that outgrows the
// tablet split size is split by the split queue (Citus #1303: Citus
// shards never split), while the table keeps its shard count, its rows
// and its answers. The split falls between buckets, so a table colocated
// with it (in its group) is split with it and their join still runs
// tablet by tablet.
func TestGrownShardsSplit(t *testing.T) {
	servers := startServersWith(t, func(c *server.Config) { c.TabletSplitSize = 64 << 10 })
	c := connect(t, servers[0])
	mustExec(t, c, "CREATE TABLE grown (tenant INT, id INT, pad TEXT, PRIMARY KEY (tenant, id))")
	mustExec(t, c, "SELECT create_distributed_table('grown', 'tenant', shard_count => 2)")
	mustExec(t, c, "CREATE TABLE grown_items (tenant INT, id INT, PRIMARY KEY (tenant, id))")
	mustExec(t, c, "SELECT create_distributed_table('grown_items', 'tenant', colocate_with => 'grown')")
	mustExec(t, c, "INSERT INTO grown_items SELECT i % 4, i FROM generate_series(1, 4000) AS i")
	tablets := func() string {
		return rows(t, c, "SELECT count(*) FROM cairn_catalog.tablets WHERE table_name = 'grown'")[0]
	}
	if got := tablets(); got != "2" {
		t.Fatalf("a new distributed table of 2 shards has %s tablets", got)
	}
	mustExec(t, c, "INSERT INTO grown SELECT i % 4, i, repeat('x', 200) FROM generate_series(1, 4000) AS i")
	ctx := context.Background()
	deadline := time.Now().Add(60 * time.Second)
	for {
		// The split queue estimates sizes from flushed data.
		for _, s := range servers {
			if err := s.CompactStore(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if got := tablets(); got != "2" {
			t.Logf("grown has %s tablets", got)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the shards of grown (about 900 kB, split size 64 kB) did not split within 60 s")
		}
		time.Sleep(500 * time.Millisecond)
	}
	if got := strings.Join(rows(t, c, "SELECT shard_count FROM citus_tables WHERE table_name = 'grown'::regclass"), ","); got != "2" {
		t.Errorf("shard_count after the split: %s, want 2", got)
	}
	if got := strings.Join(rows(t, c, "SELECT count(*), count(DISTINCT tenant), sum(id) FROM grown"), ","); got != "4000 4 8002000" {
		t.Errorf("rows after the split: %s", got)
	}
	tabletsOf := func(table string) string {
		return strings.Join(rows(t, c, "SELECT tablet_id FROM cairn_catalog.tablets WHERE table_name = '"+table+"' AND index_name IS NULL ORDER BY 1"), ",")
	}
	if g, i := tabletsOf("grown"), tabletsOf("grown_items"); g != i {
		t.Errorf("after the split grown is in tablets %s, grown_items in %s", g, i)
	}
	join := "SELECT count(*), sum(g.id) FROM grown g JOIN grown_items i ON g.tenant = i.tenant AND g.id = i.id"
	if got := strings.Join(rows(t, c, join), ","); got != "4000 8002000" {
		t.Errorf("join after the split: %s", got)
	}
	// Statistics, as the automatic collection may have made them or not
	// by now: the plan must not depend on which.
	mustExec(t, c, "ANALYZE grown")
	mustExec(t, c, "ANALYZE grown_items")
	mustExec(t, c, "SET distsql = on")
	if plan := strings.Join(rows(t, c, "EXPLAIN "+join), "\n"); !strings.Contains(plan, "Join: colocated") {
		t.Errorf("the join of colocated tables after the split is not colocated:\n%s", plan)
	}
}
