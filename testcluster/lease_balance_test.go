package testcluster

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/store"
)

// splitAt splits the keyspace at \x03<c> for each c of cs through node
// id, whose leader campaigns for every right side: the new tablets are
// led where tablet 1 is.
func splitAt(t *testing.T, c *Cluster, id uint64, cs string) {
	t.Helper()
	for _, ch := range cs {
		ba := &kvpb.BatchRequest{}
		ba.Add(&kvpb.SplitRequest{SplitKey: []byte{3, byte(ch)}})
		if _, err := c.Nodes[id-1].DB.Send(context.Background(), ba); err != nil {
			t.Fatalf("split at %q: %v", ch, err)
		}
	}
}

// withinOne reports whether every running node's lease count is within
// one of every other's, and every one of total tablets has a lease.
func withinOne(c *Cluster, total int) (map[uint64]int, bool) {
	counts, held := runningLeases(c)
	lo, hi := total, 0
	for _, n := range c.Nodes {
		if n.Running() {
			lo, hi = min(lo, counts[n.ID]), max(hi, counts[n.ID])
		}
	}
	return counts, held == total && hi-lo <= 1
}

// runningLeases is leaseCounts over the running nodes (a stopped node's
// replicas still say what they held).
func runningLeases(c *Cluster) (map[uint64]int, int) {
	counts := map[uint64]int{}
	total := 0
	for _, n := range c.Nodes {
		if !n.Running() {
			continue
		}
		for _, g := range n.Raft.Groups() {
			if g.Lease != 0 {
				counts[n.ID]++
				total++
			}
		}
	}
	return counts, total
}

// gatherLeases moves every lease to node to (as after a cluster start,
// or a node restart, where elections put them all on one node).
func gatherLeases(t *testing.T, c *Cluster, to uint64, tablets int) {
	t.Helper()
	waitLeases(t, c, fmt.Sprintf("every lease on node %d", to), func() (map[uint64]int, bool) {
		for _, n := range c.Nodes {
			for _, g := range n.Raft.Groups() {
				if g.Lease != 0 && n.ID != to {
					_ = n.Raft.TransferLeader(g.TabletID, to)
				}
			}
		}
		counts, held := runningLeases(c)
		return counts, held == tablets && counts[to] == tablets
	})
}

// waitLeases waits up to 30 s for ok and returns how long it took.
func waitLeases(t *testing.T, c *Cluster, what string, ok func() (map[uint64]int, bool)) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		counts, done := ok()
		if done {
			t.Logf("%s after %v: leases per node %v", what, time.Since(start).Round(10*time.Millisecond), counts)
			return time.Since(start)
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("%s: not within 30 s; leases per node %v", what, counts)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestLeasesBalancedByDefault: the default placement (no preference:
// store.LeaseBalancer with its default interval and hold) spreads the
// leases of ten tablets, all led by one node after their splits, to
// within one per node; a node stopped loses its leases to the others
// (elections), and restarted gets its share back; writes through every
// gateway still go through.
func TestLeasesBalancedByDefault(t *testing.T) {
	c := StartCluster(t, ClusterOptions{})
	l := c.WaitLeader(1, 10*time.Second)
	splitAt(t, c, l, "abcdefghi")
	const tablets = 10
	gatherLeases(t, c, l, tablets)
	var logs syncBuffer
	c.RunLeaseBalancers(store.LeaseBalancerConfig{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	defer func() {
		if t.Failed() {
			t.Logf("balancers' moves:\n%s", logs.grep("lease balancer move", "transfer failed", "ended late"))
		}
	}()
	waitLeases(t, c, "balanced", func() (map[uint64]int, bool) { return withinOne(c, tablets) })

	down := c.Nodes[l%3]
	if err := down.Stop(); err != nil {
		t.Fatal(err)
	}
	waitLeases(t, c, fmt.Sprintf("node %d stopped, balanced over the others", down.ID), func() (map[uint64]int, bool) { return withinOne(c, tablets) })
	if err := down.Restart(); err != nil {
		t.Fatal(err)
	}
	waitLeases(t, c, fmt.Sprintf("node %d back", down.ID), func() (map[uint64]int, bool) {
		counts, ok := withinOne(c, tablets)
		return counts, ok && counts[down.ID] > 0
	})
	// Balanced, nothing moves any more (hysteresis): no balancer starts
	// a transfer over the next five passes of each (past MinHold, 3 s,
	// of the leases taken last) while the leases stay within one. Judged
	// by the transfers the balancers start, not by who holds a lease at
	// two instants: on a loaded machine a lease lapses, or an election
	// moves it, with no balancer's decision (with the test's process
	// starved at load 16-22 every lease lapsed for 0.4 s and came back
	// to the same holders). A move after an election unbalanced the
	// leases is the balancer doing its work, and is allowed.
	type mark struct{ passes, transfers int64 }
	marks := map[uint64]mark{}
	for _, n := range c.Nodes {
		marks[n.ID] = mark{n.Balancer.Passes(), n.Balancer.Transfers()}
	}
	before := holders(c)
	t.Logf("balanced at %s: holders %v", time.Now().Format("15:04:05.000"), before)
	unbalanced := ""
	last := before
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		if h := holders(c); fmt.Sprint(h) != fmt.Sprint(last) {
			t.Logf("holders changed at %s: %v", time.Now().Format("15:04:05.000"), h)
			last = h
			if counts, ok := heldWithinOne(c, h); !ok && unbalanced == "" {
				unbalanced = fmt.Sprintf("leases per node %v at %s", counts, time.Now().Format("15:04:05.000"))
			}
		}
		done := true
		for _, n := range c.Nodes {
			done = done && n.Balancer.Passes() >= marks[n.ID].passes+5
		}
		if done {
			break
		}
		if time.Since(start) > time.Minute {
			t.Fatalf("the balancers made fewer than five passes in a minute")
		}
	}
	var moved []string
	for _, n := range c.Nodes {
		if d := n.Balancer.Transfers() - marks[n.ID].transfers; d > 0 {
			moved = append(moved, fmt.Sprintf("node %d started %d", n.ID, d))
		}
	}
	switch {
	case len(moved) > 0 && unbalanced == "":
		t.Errorf("leases moved once balanced: %v, the leases within one throughout (holders %v, then %v)", moved, before, holders(c))
	case len(moved) > 0:
		t.Logf("transfers %v after the balance was lost (%s: an election or a lapse)", moved, unbalanced)
	}
	for i, n := range c.Nodes {
		putRetry(t, n.DB, fmt.Sprintf("\x03%c-after", 'a'+i*3), "v")
	}
}

// heldWithinOne reports whether the leases of h (tablet → holder; a
// lapsed lease is in none) are within one of each other over the
// running nodes.
func heldWithinOne(c *Cluster, h map[uint64]uint64) (map[uint64]int, bool) {
	counts := map[uint64]int{}
	for _, n := range h {
		counts[n]++
	}
	lo, hi := len(h), 0
	for _, n := range c.Nodes {
		if n.Running() {
			lo, hi = min(lo, counts[n.ID]), max(hi, counts[n.ID])
		}
	}
	return counts, hi-lo <= 1
}

// holders maps each tablet to the running node holding its lease.
func holders(c *Cluster) map[uint64]uint64 {
	out := map[uint64]uint64{}
	for _, n := range c.Nodes {
		if n.Running() {
			for _, g := range n.Raft.Groups() {
				if g.Lease != 0 {
					out[g.TabletID] = n.ID
				}
			}
		}
	}
	return out
}

// TestLeasePreferencesWinOverBalance: tablets whose zone prefers eu
// (node 3, the only voter there: pinned) keep their leases there, and
// the balancer spreads the others around them: node 3's count is what
// the preference gives it, the rest balanced over nodes 1 and 2.
func TestLeasePreferencesWinOverBalance(t *testing.T) {
	c := StartCluster(t, ClusterOptions{
		Geo: &GeoOptions{Localities: []string{"region=us-west", "region=us-east", "region=eu"}},
	})
	l := c.WaitLeader(1, 10*time.Second)
	splitAt(t, c, l, "abcdefghi")
	const tablets = 10
	gatherLeases(t, c, 1, tablets)
	// The four lowest tablet IDs prefer eu; the rest have no preference.
	// Taken from the tablets that exist, not assumed to be 1..4: a split
	// retried under load consumes an ID from the counter, and the test
	// then had only three preferred tablets and waited for a fourth.
	var ids []uint64
	for _, g := range c.Nodes[0].Raft.Groups() {
		ids = append(ids, g.TabletID)
	}
	slices.Sort(ids)
	if len(ids) != tablets {
		t.Fatalf("node 1 has %d tablets, want %d", len(ids), tablets)
	}
	preferred := map[uint64]bool{}
	for _, id := range ids[:4] {
		preferred[id] = true
	}
	t.Logf("tablets %v; preferring eu: %v", ids, ids[:4])
	// Written before the balancers start and only read after.
	prefs := func(id uint64) (store.LeasePreferences, bool) {
		if preferred[id] {
			return store.LeasePreferences{Regions: []string{"eu"}}, true
		}
		return store.LeasePreferences{}, false
	}
	c.RunLeaseBalancers(store.LeaseBalancerConfig{ZonePrefs: prefs})
	waitLeases(t, c, "preferences and balance", func() (map[uint64]int, bool) {
		counts, held := runningLeases(c)
		if held != tablets {
			return counts, false
		}
		for _, g := range c.Nodes[2].Raft.Groups() {
			if preferred[g.TabletID] && g.Lease == 0 {
				return counts, false // a preferred lease not in eu
			}
		}
		// Six leases without a preference: node 3 holds the four
		// pinned ones, so none of those six, and nodes 1 and 2 three
		// each.
		return counts, counts[3] == 4 && counts[1] == 3 && counts[2] == 3
	})
}

// syncBuffer is a log destination for several goroutines' loggers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// grep returns the lines holding any of subs.
func (b *syncBuffer) grep(subs ...string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, l := range strings.Split(b.buf.String(), "\n") {
		for _, s := range subs {
			if strings.Contains(l, s) {
				out = append(out, l)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}
