package store

import (
	"fmt"
	"testing"
	"time"
)

// loadSim runs the balancers of nodes 1 (us-west), 2 (us-east) and 3
// (eu) over one tablet on a fake clock: each simulated second the
// tablet's leaseholder records that second's requests by gateway (its
// store counts them: a lease that moves starts from nothing on its new
// holder), then every node makes a pass. It returns the leaseholder at
// the end and how many times the lease moved.
type loadSim struct {
	c       *fakeCluster
	loads   map[uint64]*RequestLoad
	bals    map[uint64]*LeaseBalancer
	now     time.Time
	holders []uint64 // the leaseholder after each second
}

func newLoadSim(t *testing.T, holder uint64) *loadSim {
	t.Helper()
	regions := map[uint64]string{1: "us-west", 2: "us-east", 3: "eu"}
	s := &loadSim{c: &fakeCluster{leader: map[uint64]uint64{1: holder}, term: map[uint64]uint64{1: 1}},
		loads: map[uint64]*RequestLoad{}, bals: map[uint64]*LeaseBalancer{}}
	for n := uint64(1); n <= 3; n++ {
		s.loads[n] = NewRequestLoad(DefaultLoadWindow)
		s.loads[n].start = time.Unix(1000, 0)
		b := NewLeaseBalancer(LeaseBalancerConfig{Node: s.c.node(n), Load: s.loads[n], Region: func(n uint64) string { return regions[n] }}, n)
		b.now = func() time.Time { return s.now }
		s.bals[n] = b
	}
	s.now = time.Unix(1000, 0)
	return s
}

// run simulates d; requests(sec) are the requests by gateway of second
// sec (from 0).
func (s *loadSim) run(d time.Duration, requests func(sec int) map[uint64]int) {
	for sec := range int(d / time.Second) {
		holder := s.c.leader[1]
		for gw, n := range requests(sec) {
			for range n {
				s.loads[holder].Record(1, gw)
			}
		}
		s.now = s.now.Add(time.Second)
		for n := uint64(1); n <= 3; n++ {
			s.bals[n].Pass()
		}
		s.holders = append(s.holders, s.c.leader[1])
	}
}

// TestLeaseFollowsSlowLoad (issue #22): a client in us-west whose
// requests reach the tablet, led from us-east, only once every five
// seconds (the seed's read queries on a machine at load 18: 120 queries
// a minute over four statements, bench/README.md "Issue 22, eleventh
// session") draws its lease to us-west within a minute. Judged over the
// last one or two windows alone (10 to 20 s) such a client never sent
// loadMinRequests, and the lease stayed where the balance by count had
// put it for as long as the client ran.
func TestLeaseFollowsSlowLoad(t *testing.T) {
	s := newLoadSim(t, 2)
	s.run(time.Minute, func(sec int) map[uint64]int {
		if sec%5 == 0 {
			return map[uint64]int{1: 1}
		}
		return nil
	})
	if got := s.c.leader[1]; got != 1 {
		t.Fatalf("after a minute of requests from us-west only: leaseholder node %d, want node 1 (us-west); %d moves", got, s.c.moves)
	}
	// And it stays while the requests keep coming.
	s.run(5*time.Minute, func(sec int) map[uint64]int {
		if sec%5 == 0 {
			return map[uint64]int{1: 1}
		}
		return nil
	})
	if got, moves := s.c.leader[1], s.c.moves; got != 1 || moves != 1 {
		t.Fatalf("five more minutes: leaseholder node %d after %d moves, want node 1 after 1", got, moves)
	}
}

// TestLeaseEvenLoadNoPingPong: requests from two regions in equal
// numbers, or close to it, never move the lease back and forth, fast or
// slow (over the longer span a slow load is judged on): the holder's
// region keeps it while it sends half or more, and another region needs
// loadMoveShare. (Not covered, and not met before or after the span: a
// load whose region alternates in phase with the windows, one window's
// requests all from one region and the next's from the other; the last
// one or two windows then show one region's majority, and the lease
// moves every two or three windows, bench/README.md "Issue 22, eleventh
// session".)
func TestLeaseEvenLoadNoPingPong(t *testing.T) {
	for _, tc := range []struct {
		name     string
		requests func(sec int) map[uint64]int
	}{
		{"fast, even", func(int) map[uint64]int { return map[uint64]int{1: 5, 3: 5} }},
		{"fast, 55% from eu", func(int) map[uint64]int { return map[uint64]int{1: 9, 3: 11} }},
		{"slow, alternating", func(sec int) map[uint64]int {
			switch sec % 10 {
			case 0:
				return map[uint64]int{1: 1}
			case 5:
				return map[uint64]int{3: 1}
			}
			return nil
		}},
		{"slow, bursts alternating within windows", func(sec int) map[uint64]int {
			// Three requests from one region, then three from the
			// other, a request every other second.
			if sec%2 == 0 {
				return map[uint64]int{[2]uint64{1, 3}[(sec/6)%2]: 1}
			}
			return nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, start := range []uint64{1, 3} {
				s := newLoadSim(t, start)
				s.run(10*time.Minute, tc.requests)
				if s.c.moves > 1 {
					t.Errorf("lease from node %d: %d moves in 10 minutes, want at most 1 (holders by second: %v)", start, s.c.moves, compress(s.holders))
				}
			}
		})
	}
}

// compress describes a sequence of holders as runs ("2×10 1×590").
func compress(hs []uint64) string {
	out := ""
	for i := 0; i < len(hs); {
		j := i
		for j < len(hs) && hs[j] == hs[i] {
			j++
		}
		out += fmt.Sprintf("%d×%d ", hs[i], j-i)
		i = j
	}
	return out
}

// balancerPastMinHold is node 1's balancer over groups led as leads
// says (the nodes in caughtUp caught up on each), on a clock of its own
// (advance *now), after its first two passes: the first only finds the
// leases, the second, MinHold later, may move them.
func balancerPastMinHold(leads map[uint64]int, caughtUp []uint64) (*fakeLeaseNode, *LeaseBalancer, *time.Time) {
	node := &fakeLeaseNode{self: 1, groups: leaseGroups(leads, caughtUp), moved: map[uint64]int{}}
	b := NewLeaseBalancer(LeaseBalancerConfig{Node: node}, 1)
	now := time.Unix(1000, 0)
	b.now = func() time.Time { return now }
	b.Pass()
	now = now.Add(b.cfg.MinHold)
	b.Pass()
	return node, b, &now
}

// TestLeaseBalancerForgivesLateTransfer: a transfer not seen to end
// within moveWait makes its target avoided, but once the tablet is seen
// led by the target (the transfer ended late, on a loaded machine) the
// target takes leases again at once, not after avoidFor.
func TestLeaseBalancerForgivesLateTransfer(t *testing.T) {
	// Node 1 leads 5, node 2 3 (not caught up: no candidate), node 3
	// none.
	node, b, now := balancerPastMinHold(map[uint64]int{1: 5, 2: 3}, []uint64{3})
	if node.moved[3] != 2 {
		t.Fatalf("transfers %v, want two to node 3", node.moved)
	}
	*now = now.Add(moveWait)
	b.Pass() // neither ended: node 3 avoided
	if _, ok := b.avoid[3]; !ok {
		t.Fatalf("node 3 not avoided after transfers that did not end within moveWait")
	}
	// Tablet 1's transfer ends now: node 3 leads it.
	node.groups[0].Lease, node.groups[0].Leader, node.groups[0].Active, node.groups[0].CaughtUp = 0, 3, nil, nil
	node.moved = map[uint64]int{}
	*now = now.Add(time.Second)
	b.Pass()
	// Node 1 leads 4 against node 3's 1: one goes to node 3.
	if fmt.Sprint(node.moved) != fmt.Sprint(map[uint64]int{3: 1}) {
		t.Errorf("after node 3 took tablet 1 late: transfers %v, want one to node 3 (avoided until %v)", node.moved, b.avoid[3])
	}
}

// TestLeaseBalancerLeaseGoneIsNoFailedTransfer: a transfer whose lease
// left this node without the target being seen to lead (the target took
// it and stopped before the next pass, and another node was elected) is
// not counted failed: the target is not avoided when it comes back. In
// testcluster.TestLeasesBalancedByDefault the node stopped right after
// the first balance was avoided for 30 s by the node that had handed it
// leases, from 5 s after those transfers, on every run.
func TestLeaseBalancerLeaseGoneIsNoFailedTransfer(t *testing.T) {
	node, b, now := balancerPastMinHold(map[uint64]int{1: 5, 2: 3}, []uint64{3})
	if node.moved[3] != 2 {
		t.Fatalf("transfers %v, want two to node 3", node.moved)
	}
	// Node 3 took both and stopped before this node's next pass; node 2
	// was elected for both.
	for i := range 2 {
		node.groups[i].Lease, node.groups[i].Leader, node.groups[i].Active, node.groups[i].CaughtUp = 0, 2, nil, nil
	}
	*now = now.Add(moveWait)
	b.Pass()
	if until, ok := b.avoid[3]; ok {
		t.Fatalf("node 3 avoided until %v after its transfers' leases went to node 2", until)
	}
}

// TestLeaseBalancerCountsTransfersInFlight: a transfer that has not
// ended by the next pass (a loaded machine: the target's election waits
// for its raft loop) counts as its target's lease, as the pass that
// started it counted it; the next pass neither hands away another lease
// nor the same one again. Counted as this node's, node 1 balanced at
// 4/3/3 after its first pass found itself at 6 again and moved two more.
func TestLeaseBalancerCountsTransfersInFlight(t *testing.T) {
	node, b, now := balancerPastMinHold(map[uint64]int{1: 6, 2: 2, 3: 2}, []uint64{2, 3})
	if fmt.Sprint(node.moved) != fmt.Sprint(map[uint64]int{2: 1, 3: 1}) {
		t.Fatalf("first pass: transfers %v, want one to node 2 and one to node 3", node.moved)
	}
	// Neither transfer has ended: node 1 still leads both groups.
	*now = now.Add(time.Second)
	b.Pass()
	if fmt.Sprint(node.moved) != fmt.Sprint(map[uint64]int{2: 1, 3: 1}) || len(node.tried) != 2 {
		t.Errorf("second pass, transfers in flight: transfers %v of tablets %v, want the first pass's two only", node.moved, node.tried)
	}
}
