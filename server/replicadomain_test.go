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

// TestBucketLeasesStayAfterCreation (issue 16): five nodes at
// replication factor 3 with the default heartbeat and queue intervals,
// holding a plain table. Three tables hash-sharded into 10 buckets are
// created one after another (each CREATE moves the nodes' lease totals
// and the domains the balancers know), and from the moment each CREATE
// returns no lease of its buckets may move, up to twenty passes of every
// node's lease balancer after the last (past the placement's hold, so
// the balancers then judge on reports and domains from after it): a
// bucket lease moved after the CREATE makes the index's first readers
// wait for the transfer (bench/README.md, "Five-node reads: where the
// 0.93× went": four of ten moved in a 10 s read run). A lease is
// compared by holder and term, so a move and a move back between two
// looks still counts. Before store.placedHold, three of seven runs of
// one table moved one to three of its bucket leases: a bucket 0 balanced
// with its cached pre-split domain, and domain moves on reports from
// before the placement.
func TestBucketLeasesStayAfterCreation(t *testing.T) {
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
	execSQL(t, n1, "CREATE TABLE u (k INT PRIMARY KEY, v INT)")
	type created struct {
		table string
		ids   []uint64
		at    map[uint64]heldLease
	}
	var tables []created
	for _, tb := range []string{"s1", "s2", "s3"} {
		old := c.domains()
		execSQL(t, n1, fmt.Sprintf("CREATE TABLE %s (k INT PRIMARY KEY USING HASH WITH (bucket_count = 10), v INT)", tb))
		all := c.leases(nil)
		var ids []uint64
		for dom, tablets := range c.domains() {
			if _, ok := old[dom]; !ok && len(tablets) == 10 {
				ids = tablets
			}
		}
		if ids == nil {
			t.Fatalf("%s: no new domain of 10 tablets: %v", tb, c.domains())
		}
		at := map[uint64]heldLease{}
		perNode := map[uint64]int{}
		for _, id := range ids {
			at[id] = all[id]
			perNode[all[id].leader]++
		}
		t.Logf("%s's bucket leases per node when its CREATE returned: %v; all leases per node %v", tb, perNode, countLeases(all))
		tables = append(tables, created{tb, ids, at})
	}
	passes := c.balancerPasses()
	waitFor(t, "twenty lease balancer passes on every node", 120*time.Second, func() (bool, string) {
		least := int64(1 << 62)
		for id, n := range c.balancerPasses() {
			least = min(least, n-passes[id])
		}
		return least >= 20, fmt.Sprintf("%d passes", least)
	})
	now := c.leases(nil)
	var moved []string
	for _, tb := range tables {
		for _, id := range tb.ids {
			if now[id] != tb.at[id] {
				moved = append(moved, fmt.Sprintf("%s tablet %d: node %d term %d → node %d term %d", tb.table, id, tb.at[id].leader, tb.at[id].term, now[id].leader, now[id].term))
			}
		}
	}
	if len(moved) > 0 {
		t.Fatalf("%d bucket leases moved after their CREATE returned: %v; all leases per node now %v", len(moved), moved, countLeases(now))
	}
	t.Logf("no bucket lease moved; all leases per node after the passes: %v", countLeases(now))
}

// heldLease is a tablet's leaseholder and its lease's term.
type heldLease struct{ leader, term uint64 }

// leases returns the holder and term of each tablet's lease (nil ids:
// every tablet some node leads).
func (c *memberCluster) leases(ids []uint64) map[uint64]heldLease {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[uint64]heldLease{}
	for nid, s := range c.nodes {
		tablets := ids
		if tablets == nil {
			tablets = s.repl.raft.Tablets()
		}
		for _, id := range tablets {
			if rep := s.repl.raft.Replica(id); rep != nil {
				if term, _ := rep.Lease(); term != 0 {
					out[id] = heldLease{nid, term}
				}
			}
		}
	}
	return out
}

func countLeases(ls map[uint64]heldLease) map[uint64]int {
	out := map[uint64]int{}
	for _, l := range ls {
		out[l.leader]++
	}
	return out
}

// domains returns the tablets of each lease domain (rowenc.LeaseDomain)
// some node holds a replica of, sorted.
func (c *memberCluster) domains() map[string][]uint64 {
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
	out := map[string][]uint64{}
	for dom, tablets := range byDomain {
		out[dom] = slices.Sorted(maps.Keys(tablets))
	}
	return out
}

// balancerPasses returns how many passes each node's lease balancer has
// made.
func (c *memberCluster) balancerPasses() map[uint64]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[uint64]int64{}
	for id, s := range c.nodes {
		out[id] = s.repl.balancer.Passes()
	}
	return out
}
