package testcluster

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/rpc"
	"github.com/cairn-db/cairn/store"
)

// TestLeaseTransferUnderWrites moves tablet 1's lease around the three
// nodes eight times while writers on every gateway write unique keys and
// readers read them back: each transfer ends with the target holding the
// lease, no write fails (not even as ambiguous), every acknowledged write
// is there afterwards on every node, and no reader ever misses a write
// acknowledged before its read began.
func TestLeaseTransferUnderWrites(t *testing.T) {
	c := StartCluster(t, ClusterOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c.WaitLeader(1, 10*time.Second)

	var mu sync.Mutex
	acked := map[string]string{}
	var writes, stale atomic.Int64
	var wg sync.WaitGroup
	for _, n := range c.Nodes {
		for w := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ctx.Err() == nil; i++ {
					k, v := fmt.Sprintf("\x03n%dw%d-%05d", n.ID, w, i), fmt.Sprintf("v%d", i)
					err := n.DB.Put(ctx, []byte(k), []byte(v))
					if err != nil {
						// Ambiguous results included: a planned
						// transfer drains the leaseholder first.
						if ctx.Err() == nil {
							t.Errorf("put %q through node %d: %v", k, n.ID, err)
						}
						continue
					}
					mu.Lock()
					acked[k] = v
					mu.Unlock()
					writes.Add(1)
					// Read it back through another gateway: it was
					// acknowledged before this read began.
					other := c.Nodes[(int(n.ID)+w)%len(c.Nodes)]
					got, ok, err := other.DB.Get(ctx, []byte(k))
					if err == nil && (!ok || string(got) != v) {
						stale.Add(1)
						t.Errorf("read of %q through node %d after its put was acknowledged: %q, %v", k, other.ID, got, ok)
					}
				}
			}()
		}
	}

	for i := range 8 {
		from := c.WaitLeader(1, 10*time.Second)
		to := from%3 + 1
		time.Sleep(100 * time.Millisecond) // writes under each lease
		start := writes.Load()
		if err := c.Nodes[from-1].Raft.TransferLeader(1, to); err != nil {
			t.Fatalf("transfer %d: %v", i, err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for c.Leader(1) != to {
			if time.Now().After(deadline) {
				t.Fatalf("transfer %d from node %d: node %d never took up the lease (leader now %d)", i, from, to, c.Leader(1))
			}
			time.Sleep(5 * time.Millisecond)
		}
		// The new leaseholder serves writes.
		for writes.Load() < start+10 {
			if time.Now().After(deadline) {
				t.Fatalf("no writes after transfer %d to node %d", i, to)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	cancel()
	wg.Wait()
	if len(acked) == 0 {
		t.Fatal("no write was acknowledged")
	}
	// A follower applies the last entries once it hears the commit index,
	// a heartbeat later: each node gets a while to show every write.
	for _, n := range c.Nodes {
		deadline := time.Now().Add(10 * time.Second)
		for {
			got := engineRows(t, n, "\x03", "\x04")
			missing := ""
			for k, v := range acked {
				if got[k] != v {
					missing = fmt.Sprintf("%q = %q (has %q)", k, v, got[k])
					break
				}
			}
			if missing == "" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d lost acknowledged write %s", n.ID, missing)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	t.Logf("%d writes acknowledged across 8 transfers, %d stale reads", len(acked), stale.Load())
}

// TestTransferLeaderRefusals: only the leaseholder transfers, and only
// to another voter.
func TestTransferLeaderRefusals(t *testing.T) {
	c := StartCluster(t, ClusterOptions{})
	l := c.WaitLeader(1, 10*time.Second)
	follower := l%3 + 1
	if err := c.Nodes[follower-1].Raft.TransferLeader(1, l); err == nil {
		t.Error("a follower transferred leadership")
	}
	if err := c.Nodes[l-1].Raft.TransferLeader(1, l); err == nil {
		t.Error("the leader transferred leadership to itself")
	}
	if err := c.Nodes[l-1].Raft.TransferLeader(1, 9); err == nil {
		t.Error("the leader transferred leadership to a node outside the group")
	}
	if c.Leader(1) != l {
		t.Errorf("a refused transfer moved the lease from %d to %d", l, c.Leader(1))
	}
}

// TestTransferToStoppedNode: a transfer to a node that is down does not
// leave the tablet without a leaseholder: the old leader hands leadership
// to the replica that is up.
func TestTransferToStoppedNode(t *testing.T) {
	c := StartCluster(t, ClusterOptions{})
	l := c.WaitLeader(1, 10*time.Second)
	down := l%3 + 1
	if err := c.Nodes[down-1].Stop(); err != nil {
		t.Fatal(err)
	}
	if err := c.Nodes[l-1].Raft.TransferLeader(1, down); err != nil {
		t.Fatal(err)
	}
	other := 6 - l - down
	deadline := time.Now().Add(20 * time.Second)
	for c.Leader(1) != other {
		if time.Now().After(deadline) {
			t.Fatalf("after a transfer to stopped node %d, leader is %d, want %d", down, c.Leader(1), other)
		}
		time.Sleep(10 * time.Millisecond)
	}
	putRetry(t, c.Nodes[l-1].DB, "\x03after", "x")
}

// splitKeys makes tablets to balance: splits at \x03a..\x03e through
// node 1.
func splitKeys(t *testing.T, c *Cluster) {
	t.Helper()
	for _, k := range []string{"\x03a", "\x03b", "\x03c", "\x03d", "\x03e"} {
		ba := &kvpb.BatchRequest{}
		ba.Add(&kvpb.SplitRequest{SplitKey: []byte(k)})
		if _, err := c.Nodes[0].DB.Send(context.Background(), ba); err != nil {
			t.Fatalf("split at %q: %v", k, err)
		}
	}
}

// leaseCounts is how many leases each node holds, and how many tablets
// have one.
func leaseCounts(c *Cluster) (map[uint64]int, int) {
	counts := map[uint64]int{}
	total := 0
	for _, n := range c.Nodes {
		for _, g := range n.Raft.Groups() {
			if g.Lease != 0 {
				counts[n.ID]++
				total++
			}
		}
	}
	return counts, total
}

// TestLeasePreferencesConverge: with leases preferred in eu (node 3) every
// tablet's lease ends up there; with spread, the nodes' lease counts end
// up within one of each other. Writes go on meanwhile. The round trips
// are the seed's scaled down five times, as is the raft tick against
// cairn start's 50 ms, so elections and leases see the seed's proportions
// (a 29 ms round trip against a 100 ms election timeout) in a fifth of
// the time.
func TestLeasePreferencesConverge(t *testing.T) {
	lat, err := rpc.ParseLatencyMap("us-west:us-east=12ms,us-east:eu=17ms,eu:us-west=29ms")
	if err != nil {
		t.Fatal(err)
	}
	geo := func(prefs string) *GeoOptions {
		p, err := store.ParseLeasePreferences(prefs)
		if err != nil {
			t.Fatal(err)
		}
		return &GeoOptions{
			Localities:    []string{"region=us-west", "region=us-east", "region=eu"},
			Latency:       lat,
			Leases:        p,
			LeaseBalancer: store.LeaseBalancerConfig{Interval: 50 * time.Millisecond, MinHold: 600 * time.Millisecond},
		}
	}
	for _, tc := range []struct {
		prefs string
		ok    func(counts map[uint64]int, total int) bool
	}{
		{"region=eu,region=us-east", func(counts map[uint64]int, total int) bool { return counts[3] == total }},
		{"spread", func(counts map[uint64]int, total int) bool {
			lo, hi := total, 0
			for id := uint64(1); id <= 3; id++ {
				lo, hi = min(lo, counts[id]), max(hi, counts[id])
			}
			return hi-lo <= 1
		}},
	} {
		t.Run(tc.prefs, func(t *testing.T) {
			c := StartCluster(t, ClusterOptions{Tick: 10 * time.Millisecond, Geo: geo(tc.prefs)})
			start := time.Now()
			c.WaitLeader(1, 10*time.Second)
			splitKeys(t, c)
			split := time.Now()
			for i := range 20 {
				putRetry(t, c.Nodes[i%3].DB, fmt.Sprintf("\x03%c%d", 'a'+i%6, i), "v")
			}
			t.Logf("leader and splits %v, puts %v", split.Sub(start).Round(time.Millisecond), time.Since(split).Round(time.Millisecond))
			deadline := time.Now().Add(30 * time.Second)
			for {
				counts, total := leaseCounts(c)
				if total == 6 && tc.ok(counts, total) {
					t.Logf("leases per node: %v", counts)
					break
				}
				if time.Now().After(deadline) {
					for _, n := range c.Nodes {
						for _, g := range n.Raft.Groups() {
							t.Logf("node %d tablet %d: lease %d leader %d %+v", n.ID, g.TabletID, g.Lease, g.Leader, n.Raft.Replica(g.TabletID).Status())
						}
					}
					t.Fatalf("leases per node %v (of %d tablets with a lease) did not converge to %s", counts, total, tc.prefs)
				}
				time.Sleep(20 * time.Millisecond)
			}
			// The tablets still serve.
			putRetry(t, c.Nodes[0].DB, "\x03e-after", "v")
			if v, ok, err := c.Nodes[1].DB.Get(context.Background(), []byte("\x03e-after")); err != nil || !ok || string(v) != "v" {
				t.Fatalf("read after convergence: %q %v %v", v, ok, err)
			}
		})
	}
}
