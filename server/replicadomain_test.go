package server

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/cairn-db/cairn/sql/rowenc"
)

// TestReplicasSpreadPerDomain: five nodes at replication factor 3 and a
// table hash-sharded into 10 buckets. Split off one tablet, every bucket
// starts on the same three nodes; the CREATE places them itself
// (TestBucketsPlacedAtCreation), and were it to fall short the replicate
// queue would spread the buckets' 30 replicas six to a node and the
// lease balancer their 10 leases two to a node (membership's
// TestRebalanceByDomain tables the queue's domain rule), though the
// nodes' totals (the system tablets too) never asked for it. Then a further 40 scans of the queue on every
// node move none of the replicas and none of the bucket leases: balanced
// placement stays put.
func TestReplicasSpreadPerDomain(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a five-node cluster")
	}
	c := newMemberCluster(t, 60*time.Second)
	n1 := c.start(nil, "")
	join := []string{c.addrs[1]}
	for range 4 {
		c.start(join, "")
	}
	c.waitPlacement("three voters", 60*time.Second, func(v, l []uint64) bool { return len(v) == 3 && len(l) == 0 })
	execSQL(t, n1, "CREATE TABLE sh (k INT PRIMARY KEY USING HASH WITH (bucket_count = 10), v INT)")
	// The buckets' tablets are the ten of one domain (the only table's);
	// cairn_catalog.tablets lists what node 1's directory knows, which
	// with five nodes need not be every bucket.
	var ids []uint64
	waitFor(t, "a tablet per bucket", 60*time.Second, func() (bool, string) {
		byDomain := map[string]map[uint64]bool{}
		c.mu.Lock()
		for _, s := range c.nodes {
			for _, d := range s.store.Tablets() {
				if dom := rowenc.LeaseDomain(d.StartKey, d.EndKey); dom != "" {
					if byDomain[dom] == nil {
						byDomain[dom] = map[uint64]bool{}
					}
					byDomain[dom][uint64(d.TabletID)] = true
				}
			}
		}
		c.mu.Unlock()
		ids = nil
		for _, tablets := range byDomain {
			if len(tablets) == 10 {
				ids = slices.Sorted(maps.Keys(tablets))
			}
		}
		return ids != nil, fmt.Sprintf("tablets per domain %v", byDomain)
	})

	// spread counts the buckets' voters and leases per node (nodes 1..5,
	// none left out), false while a bucket is not at three voters.
	spread := func() (reps, leases [6]int, placed map[uint64][]uint64, ok bool) {
		p := c.placement()
		placed = map[uint64][]uint64{}
		ok = true
		for _, id := range ids {
			vl, led := p[id]
			if !led || len(vl[0]) != 3 || len(vl[1]) != 0 {
				ok = false
				continue
			}
			placed[id] = vl[0]
			for _, n := range vl[0] {
				reps[n]++
			}
		}
		for _, l := range c.leaders(ids) {
			leases[l]++
		}
		return reps, leases, placed, ok && leases[0] == 0
	}
	even := func(counts [6]int, want int) bool {
		for _, n := range counts[1:] {
			if n != want {
				return false
			}
		}
		return true
	}
	var settled map[uint64][]uint64
	waitFor(t, "six bucket replicas and two bucket leases on every node", 180*time.Second, func() (bool, string) {
		reps, leases, placed, ok := spread()
		settled = placed
		return ok && even(reps, 6) && even(leases, 2), fmt.Sprintf("replicas per node %v, leases %v", reps[1:], leases[1:])
	})
	t.Logf("spread: %v", settled)
	// The bucket leases' holders once settled: an idle cluster moves
	// none of them after (each new holder would wait out the maximum
	// clock offset before serving). Counting every node's leases from
	// its own replicas, each node saw itself the fullest and they moved
	// every few seconds (bench/README.md, "Five nodes").
	holders := c.leaders(ids)

	before := map[uint64]uint64{}
	c.mu.Lock()
	for id, s := range c.nodes {
		before[id] = s.repl.member.Scans()
	}
	c.mu.Unlock()
	waitFor(t, "40 more scans on every node", 120*time.Second, func() (bool, string) {
		for id, vl := range c.placement() {
			want, ok := settled[id]
			if ok && (!slices.Equal(vl[0], want) || len(vl[1]) > 0) {
				t.Fatalf("bucket %d moved after settling: voters %v, then voters %v and learners %v", id, want, vl[0], vl[1])
			}
		}
		for id, l := range c.leaders(ids) {
			if l != 0 && l != holders[id] {
				t.Fatalf("bucket %d's lease moved after settling: from node %d to %d (holders then %v)", id, holders[id], l, holders)
			}
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		least := uint64(1 << 62)
		for id, s := range c.nodes {
			least = min(least, s.repl.member.Scans()-before[id])
		}
		return least >= 40, fmt.Sprintf("%d scans", least)
	})
	reps, leases, _, ok := spread()
	if !ok || !even(reps, 6) {
		t.Fatalf("after the scans: replicas per node %v, leases %v", reps[1:], leases[1:])
	}
	t.Logf("after 40 more scans: replicas per node %v, leases %v", reps[1:], leases[1:])
}

// TestBucketsPlacedAtCreation: five nodes at replication factor 3, with
// the default queue and heartbeat intervals (at which the replicate
// queue alone spread a new index's buckets some 85-95 s after its
// CREATE). The CREATE TABLE of a table hash-sharded into 10 buckets
// places them itself (membership.Member.Place through the DDL's
// SpreadLeaseRequests): when it returns, every bucket has three voters
// and no learner, each node holds six of the 30 replicas and leads two
// of the 10 buckets (within one of even), before any row is written.
func TestBucketsPlacedAtCreation(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a five-node cluster")
	}
	c := newMemberCluster(t, 60*time.Second)
	c.slowQueue = true
	n1 := c.start(nil, "")
	join := []string{c.addrs[1]}
	for range 4 {
		c.start(join, "")
	}
	c.waitPlacement("three voters", 120*time.Second, func(v, l []uint64) bool { return len(v) == 3 && len(l) == 0 })
	start := time.Now()
	execSQL(t, n1, "CREATE TABLE sh (k INT PRIMARY KEY USING HASH WITH (bucket_count = 10), v INT)")
	took := time.Since(start)
	// Read at once, without waiting: what the first write would meet.
	byDomain := map[string]map[uint64]bool{}
	c.mu.Lock()
	for _, s := range c.nodes {
		for _, d := range s.store.Tablets() {
			if dom := rowenc.LeaseDomain(d.StartKey, d.EndKey); dom != "" {
				if byDomain[dom] == nil {
					byDomain[dom] = map[uint64]bool{}
				}
				byDomain[dom][uint64(d.TabletID)] = true
			}
		}
	}
	c.mu.Unlock()
	p := c.placement()
	var ids []uint64
	for _, tablets := range byDomain {
		if len(tablets) == 10 {
			ids = slices.Sorted(maps.Keys(tablets))
		}
	}
	if ids == nil {
		t.Fatalf("no domain of 10 tablets: %v", byDomain)
	}
	var reps, leases [6]int
	for _, id := range ids {
		vl, led := p[id]
		if !led || len(vl[0]) != 3 || len(vl[1]) != 0 {
			t.Fatalf("bucket tablet %d: led %v, voters %v, learners %v", id, led, vl[0], vl[1])
		}
		for _, n := range vl[0] {
			reps[n]++
		}
	}
	for id, l := range c.leaders(ids) {
		if l == 0 {
			t.Fatalf("bucket tablet %d has no leaseholder", id)
		}
		leases[l]++
	}
	t.Logf("CREATE TABLE took %v; replicas per node %v, leases %v", took, reps[1:], leases[1:])
	for n := 1; n <= 5; n++ {
		if reps[n] < 5 || reps[n] > 7 || leases[n] < 1 || leases[n] > 3 {
			t.Fatalf("right after the CREATE: replicas per node %v (want 6 each, within one), leases %v (want 2 each, within one)", reps[1:], leases[1:])
		}
	}
}
