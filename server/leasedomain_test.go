package server

import (
	"fmt"
	"testing"
	"time"
)

// TestLeaseBalancerRespreadsBuckets (issue 16): on three nodes, three
// tables with nine-bucket hash-sharded keys have every bucket lease of
// table i moved onto node i. Each node then holds the same total as
// before, so balancing totals alone would leave every table's writes on
// one node; the periodic lease balancer (defaults: no preferences, 3 s
// hold) balances each index's leases first and spreads every table's
// buckets back to three per node. The test waits on the leases' places,
// read from every node's replicas.
func TestLeaseBalancerRespreadsBuckets(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node cluster")
	}
	c := newMemberCluster(t, 60*time.Second)
	n1 := c.start(nil, "")
	join := []string{c.addrs[1]}
	c.start(join, "")
	c.start(join, "")
	c.waitPlacement("three voters", 30*time.Second, sameNodes(1, 2, 3))
	tables := []string{"sa", "sb", "sc"}
	ids := map[string][]uint64{}
	for _, tb := range tables {
		execSQL(t, n1, fmt.Sprintf("CREATE TABLE %s (k int PRIMARY KEY USING HASH WITH (bucket_count = 9), v int)", tb))
		// cairn_catalog.tablets lists node 1's tablet directory, which
		// learns of the buckets' splits when it next sends them a
		// request: a scan of the table through node 1 does.
		waitFor(t, tb+"'s nine bucket tablets in node 1's directory", 30*time.Second, func() (bool, string) {
			execSQL(t, n1, "SELECT count(*) FROM "+tb)
			ids[tb] = zoneTablets(t, n1, "postgres", tb)
			return len(ids[tb]) == 9, fmt.Sprintf("%d tablets %v", len(ids[tb]), ids[tb])
		})
	}
	c.waitPlacement("three voters after the splits", 30*time.Second, sameNodes(1, 2, 3))

	// perNode counts table tb's leases per node (0: a tablet without one).
	perNode := func(tb string) map[uint64]int {
		out := map[uint64]int{}
		for _, l := range c.leaders(ids[tb]) {
			out[l]++
		}
		return out
	}
	waitFor(t, "every bucket lease of table i on node i", 30*time.Second, func() (bool, string) {
		done := true
		for i, tb := range tables {
			to := uint64(i + 1)
			for id, l := range c.leaders(ids[tb]) {
				if l == to {
					continue
				}
				done = false
				if l != 0 {
					c.mu.Lock()
					s := c.nodes[l]
					c.mu.Unlock()
					_ = s.repl.raft.TransferLeader(id, to) // refused (not drained): asked again
				}
			}
		}
		return done, fmt.Sprintf("sa %v, sb %v, sc %v", perNode("sa"), perNode("sb"), perNode("sc"))
	})
	t.Logf("gathered: sa %v, sb %v, sc %v", perNode("sa"), perNode("sb"), perNode("sc"))

	waitFor(t, "every table's bucket leases three per node", 60*time.Second, func() (bool, string) {
		ok := true
		for _, tb := range tables {
			got := perNode(tb)
			ok = ok && got[0] == 0 && got[1] == 3 && got[2] == 3 && got[3] == 3
		}
		return ok, fmt.Sprintf("sa %v, sb %v, sc %v", perNode("sa"), perNode("sb"), perNode("sc"))
	})
	t.Logf("spread: sa %v, sb %v, sc %v", perNode("sa"), perNode("sb"), perNode("sc"))
}
