package membership

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairn-db/cairn/raftnode"
)

func TestNeededVoters(t *testing.T) {
	for _, tc := range []struct{ rf, eligible, want int }{
		{3, 0, 1}, {3, 1, 1}, {3, 2, 1}, {3, 3, 3}, {3, 4, 3}, {3, 10, 3},
		{5, 4, 3}, {5, 5, 5}, {1, 3, 1}, {2, 3, 2}, {4, 2, 1}, {4, 3, 3},
	} {
		if got := neededVoters(tc.rf, tc.eligible); got != tc.want {
			t.Errorf("neededVoters(rf %d, eligible %d) = %d, want %d", tc.rf, tc.eligible, got, tc.want)
		}
	}
}

// view builds a View at now = 100 s with DeadAfter 10 s: live nodes
// heartbeated at 99 s (expiring at 104 s), others as given.
func view(nodes map[uint64]NodeRecord, live map[uint64]LivenessRecord) *View {
	v := &View{Now: time.Unix(100, 0), Nodes: nodes, Liveness: live, DeadAfter: 10 * time.Second}
	return v
}

func liveRec(id uint64, replicas int) LivenessRecord {
	return LivenessRecord{NodeID: id, Updated: 99e9, Expiration: 104e9, Replicas: replicas}
}

func TestViewState(t *testing.T) {
	v := view(map[uint64]NodeRecord{
		1: {NodeID: 1, Status: StatusActive},
		2: {NodeID: 2, Status: StatusActive},
		3: {NodeID: 3, Status: StatusActive},
		4: {NodeID: 4, Status: StatusDecommissioned},
		5: {NodeID: 5, Status: StatusActive},
		6: {NodeID: 6, Status: StatusDecommissioning},
	}, map[uint64]LivenessRecord{
		1: liveRec(1, 0),
		2: {NodeID: 2, Updated: 95e9, Expiration: 99e9}, // expired, silent 5 s
		3: {NodeID: 3, Updated: 89e9, Expiration: 93e9}, // silent 11 s
		4: liveRec(4, 0),
		6: liveRec(6, 0),
	})
	for _, tc := range []struct {
		id               uint64
		state            string
		eligible, leaves bool
	}{
		{1, Live, true, false},
		{2, Suspect, false, false},
		{3, Dead, false, true},
		{4, Decommissioned, false, true},
		{5, Suspect, false, false}, // never heartbeated
		{6, Live, false, true},     // decommissioning
	} {
		if got := v.State(tc.id); got != tc.state {
			t.Errorf("node %d: state %s, want %s", tc.id, got, tc.state)
		}
		if got := v.Eligible(tc.id); got != tc.eligible {
			t.Errorf("node %d: eligible %v, want %v", tc.id, got, tc.eligible)
		}
		if got := v.Leaving(tc.id); got != tc.leaves {
			t.Errorf("node %d: leaving %v, want %v", tc.id, got, tc.leaves)
		}
	}
}

func TestPickTargetAndVictim(t *testing.T) {
	m := &Member{cfg: Config{Self: NodeRecord{NodeID: 1}}}
	rec := func(id uint64, loc string) NodeRecord {
		return NodeRecord{NodeID: id, Locality: loc, Status: StatusActive}
	}
	v := view(map[uint64]NodeRecord{
		1: rec(1, "region=a"), 2: rec(2, "region=a"), 3: rec(3, "region=b"),
		4: rec(4, "region=a"), 5: rec(5, "region=c"), 6: rec(6, "region=c"), 7: rec(7, "region=d"),
	}, map[uint64]LivenessRecord{
		1: liveRec(1, 9), 2: liveRec(2, 8), 3: liveRec(3, 5),
		4: liveRec(4, 0), 5: liveRec(5, 7), 6: liveRec(6, 3),
		// 7 never heartbeated: not eligible.
	})
	for _, tc := range []struct {
		members, good []uint64
		want          uint64
	}{
		// A new locality first (c, the emptier of its two nodes), though
		// node 4 holds fewer replicas.
		{[]uint64{1, 3}, []uint64{1, 3}, 6},
		// Every locality used: the fewest replicas.
		{[]uint64{1, 3, 5, 6}, []uint64{1, 3, 5, 6}, 4},
		// Members never, ineligible nodes never.
		{[]uint64{1, 2, 3, 4, 5, 6}, []uint64{1, 2, 3, 4, 5, 6}, 0},
	} {
		if got := m.pickTarget(v, tc.members, tc.good, ""); got != tc.want {
			t.Errorf("pickTarget(members %v) = %d, want %d", tc.members, got, tc.want)
		}
	}
	for _, tc := range []struct {
		good []uint64
		want uint64
	}{
		// Region a holds two voters: the fuller of them goes (this node).
		{[]uint64{1, 2, 3, 5}, 1},
		{[]uint64{2, 4, 3, 5}, 2},
		// One voter per locality: the fullest node.
		{[]uint64{3, 5, 1, 7}, 1},
		{[]uint64{3, 5, 6}, 5},
	} {
		if got := m.pickVictim(v, tc.good, ""); got != tc.want {
			t.Errorf("pickVictim(%v) = %d, want %d", tc.good, got, tc.want)
		}
	}
}

// TestAddableSkipsNodesHoldingAReplica: the queue adds a learner only on
// a node that holds no replica of the tablet (one the group removed but
// that is not destroyed yet would catch up by log through its own
// removal and destroy itself while the leader counted on its log);
// pickTarget's order otherwise.
func TestAddableSkipsNodesHoldingAReplica(t *testing.T) {
	rec := func(id uint64, loc string) NodeRecord {
		return NodeRecord{NodeID: id, Locality: loc, Status: StatusActive}
	}
	v := view(map[uint64]NodeRecord{
		1: rec(1, "region=a"), 2: rec(2, "region=a"), 3: rec(3, "region=b"),
		4: rec(4, "region=a"), 5: rec(5, "region=c"), 6: rec(6, "region=c"),
	}, map[uint64]LivenessRecord{
		1: liveRec(1, 9), 2: liveRec(2, 8), 3: liveRec(3, 5),
		4: liveRec(4, 0), 5: liveRec(5, 7), 6: liveRec(6, 3),
	})
	const tablet = 7
	for _, tc := range []struct {
		holding []uint64
		want    uint64
	}{
		{nil, 6},
		// The next in pickTarget's order: region c's other node.
		{[]uint64{6}, 5},
		// Then the emptiest of the rest.
		{[]uint64{5, 6}, 4},
		{[]uint64{2, 4, 5, 6}, 0},
	} {
		m := &Member{cfg: Config{Self: NodeRecord{NodeID: 1}, Logger: slog.New(slog.DiscardHandler)}}
		var asked []uint64
		m.testingHolds = func(node, id uint64) bool {
			if id != tablet {
				t.Fatalf("asked about tablet %d, want %d", id, tablet)
			}
			asked = append(asked, node)
			return slices.Contains(tc.holding, node)
		}
		if got := m.addable(context.Background(), tablet, v, []uint64{1, 3}, []uint64{1, 3}, ""); got != tc.want {
			t.Errorf("holding %v: addable = %d (asked %v), want %d", tc.holding, got, asked, tc.want)
		}
	}
}

// TestRebalanceByDomain tables rebalance's choices on five nodes in one
// locality: the target is the node with the fewest replicas of the
// tablet's domain (then in all), the replica comes off the voter with
// the most, and a move is made only when it narrows the spread at both
// ends: two more of the domain, or, for the totals, two more in all and
// fewer of the domain on the target.
func TestRebalanceByDomain(t *testing.T) {
	const d = "idx"
	for _, tc := range []struct {
		name          string
		dom, total    [5]int // nodes 1..5
		good          []uint64
		d             string
		target, from  uint64
		move          bool
		wantWhyPrefix string
	}{
		{"bucket replicas piled on three nodes", [5]int{8, 7, 7, 4, 4}, [5]int{20, 20, 20, 20, 20}, []uint64{1, 2, 3}, d, 4, 1, true, "rebalance domain"},
		{"a gap of two is worth a move", [5]int{7, 6, 6, 6, 5}, [5]int{20, 20, 20, 20, 20}, []uint64{1, 2, 3}, d, 5, 1, true, "rebalance domain"},
		{"a gap of one would only swap", [5]int{7, 6, 6, 6, 5}, [5]int{20, 20, 20, 20, 20}, []uint64{2, 3, 4}, d, 5, 4, false, ""},
		{"ties go to the fuller node in all", [5]int{7, 7, 5, 5, 6}, [5]int{20, 21, 20, 19, 20}, []uint64{1, 2, 3}, d, 4, 2, true, "rebalance domain"},
		{"totals uneven, domain even: a move would widen the domain", [5]int{6, 6, 6, 6, 6}, [5]int{30, 20, 20, 10, 20}, []uint64{1, 2, 3}, d, 4, 1, false, ""},
		{"totals uneven, fewer of the domain on the target", [5]int{7, 6, 6, 6, 6}, [5]int{30, 20, 20, 28, 10}, []uint64{1, 2, 3}, d, 5, 1, true, "rebalance from"},
		{"no domain: totals alone", [5]int{}, [5]int{12, 11, 11, 10, 11}, []uint64{1, 2, 3}, "", 4, 1, true, "rebalance from"},
		{"no domain, totals within one", [5]int{}, [5]int{11, 11, 11, 10, 11}, []uint64{1, 2, 3}, "", 4, 3, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes := map[uint64]NodeRecord{}
			live := map[uint64]LivenessRecord{}
			report := map[uint64]int{}
			for i := range 5 {
				id := uint64(i + 1)
				nodes[id] = NodeRecord{NodeID: id, Status: StatusActive}
				live[id] = liveRec(id, tc.total[i])
				report[id] = tc.dom[i]
			}
			// One leader's report holds the domain's counts; the view sums
			// them over every record.
			l := live[1]
			l.Domains = map[string]map[uint64]int{d: report}
			live[1] = l
			v := view(nodes, live)
			m := &Member{cfg: Config{Self: NodeRecord{NodeID: 1}}}
			target := m.pickTarget(v, tc.good, nil, tc.d)
			if target != tc.target {
				t.Fatalf("target %d, want %d", target, tc.target)
			}
			if from := m.pickVictim(v, tc.good, tc.d); from != tc.from {
				t.Errorf("replica taken from node %d, want %d", from, tc.from)
			}
			_, why, _, ok := m.worthMoving(v, tc.good, target, tc.d)
			if ok != tc.move || !strings.HasPrefix(why, tc.wantWhyPrefix) {
				t.Errorf("worthMoving = %q, %v; want a move %v (%q...)", why, ok, tc.move, tc.wantWhyPrefix)
			}
		})
	}
}

// TestRebalanceStaggeredByRank: every leaseholder of a tablet on the
// fullest node reads the same reports and finds the same move worth
// making; each waits one settle more per live lower-ID node that, by its
// record, could make it too (leads a tablet of the domain, or for a
// move by the totals any tablet, that the source holds a replica of),
// so the first mover's learner reaches the reports before the next one
// moves. Without it three nodes moved a replica off node 2 at once.
func TestRebalanceStaggeredByRank(t *testing.T) {
	const d = "idx"
	nodes := map[uint64]NodeRecord{}
	live := map[uint64]LivenessRecord{}
	for id := uint64(1); id <= 5; id++ {
		nodes[id] = NodeRecord{NodeID: id, Status: StatusActive}
		live[id] = liveRec(id, 10)
	}
	// Node 1 leads a tablet of idx on node 2, node 2 one of its own,
	// node 3 only a tablet of no domain on node 2; node 4's record has
	// expired (it would count otherwise).
	set := func(id uint64, members map[uint64]int, dom map[uint64]int) {
		l := live[id]
		l.Members = members
		if dom != nil {
			l.Domains = map[string]map[uint64]int{d: dom}
		}
		live[id] = l
	}
	set(1, map[uint64]int{1: 1, 2: 1, 5: 1}, map[uint64]int{1: 1, 2: 1, 5: 1})
	set(2, map[uint64]int{2: 1, 3: 1, 4: 1}, map[uint64]int{2: 1, 3: 1, 4: 1})
	set(3, map[uint64]int{2: 1, 3: 1, 4: 1}, nil)
	set(4, map[uint64]int{2: 1, 4: 1, 5: 1}, map[uint64]int{2: 1, 4: 1, 5: 1})
	l := live[4]
	l.Updated, l.Expiration = 90e9, 95e9
	live[4] = l
	v := view(nodes, live)
	for _, tc := range []struct {
		self     uint64
		byDomain bool
		want     int
	}{
		{1, true, 0}, {2, true, 1}, {3, true, 2}, {5, true, 2},
		{1, false, 0}, {2, false, 1}, {3, false, 2}, {5, false, 3},
	} {
		m := &Member{cfg: Config{Self: NodeRecord{NodeID: tc.self}}}
		if got := m.rankAmongMovers(v, 2, d, tc.byDomain); got != tc.want {
			t.Errorf("node %d, by domain %v: rank %d, want %d", tc.self, tc.byDomain, got, tc.want)
		}
	}

	// A move seen in every scan is made after the wait, not before; a
	// scan that does not see it starts the wait again.
	m := &Member{cfg: Config{LivenessTTL: 3 * time.Second, ScanInterval: time.Second}, considered: map[uint64]consideredMove{}}
	settle := m.settle()
	start := time.Unix(1000, 0)
	for _, tc := range []struct {
		rank  int
		scans []bool // every half settle
		want  int    // the scan that moves (-1: none)
	}{
		{0, []bool{true, true, true, true}, 2},
		{2, []bool{true, true, true, true, true, true, true, true}, 6},
		{2, []bool{true, true, true, false, true, true, true, true}, -1},
	} {
		clear(m.considered)
		got := -1
		for i, seen := range tc.scans {
			now := start.Add(time.Duration(i) * settle / 2)
			if m.seenLongEnough(7, [2]uint64{2, 5}, seen, now, settle*time.Duration(1+tc.rank)) {
				got = i
				break
			}
		}
		if got != tc.want {
			t.Errorf("rank %d, scans %v: moved at scan %d, want %d", tc.rank, tc.scans, got, tc.want)
		}
	}
}

// TestLearnerEntriesForgotten: the queue's record of when it first saw
// a learner lasts while its scans keep seeing it, and is dropped once
// they have not for learnerForget (another leaseholder promoted or
// removed it). A learner added again on the same node for the same
// tablet, a later move, then starts its LearnerTimeout afresh; with the
// entry kept it inherited the first one's start and was removed as
// timed out at once.
func TestLearnerEntriesForgotten(t *testing.T) {
	m := &Member{cfg: Config{Self: NodeRecord{NodeID: 1}, ScanInterval: time.Second}, learners: map[[2]uint64]learnerSeen{}}
	key := [2]uint64{7, 4}
	t0 := time.Unix(1000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	for _, step := range []struct {
		forget    bool // a scan's end (forgetMoves) rather than a sighting
		at        time.Duration
		wantSince time.Duration // a sighting: the start it returns
		wantKept  bool          // a scan's end: whether the entry is kept
	}{
		{at: 0, wantSince: 0},
		{at: 2 * time.Second, wantSince: 0},
		{forget: true, at: 4 * time.Second, wantKept: true},
		{at: 4 * time.Second, wantSince: 0},
		{forget: true, at: 9 * time.Second, wantKept: true},   // last seen 5 s ago: not past learnerForget
		{forget: true, at: 10 * time.Second, wantKept: false}, // 6 s
		{at: 90 * time.Second, wantSince: 90 * time.Second},   // added again: a fresh start
	} {
		if step.forget {
			m.forgetMoves(at(step.at))
			if _, kept := m.learners[key]; kept != step.wantKept {
				t.Fatalf("scan ending at +%v: entry kept %v, want %v", step.at, kept, step.wantKept)
			}
			continue
		}
		if got := m.learnerSince(key, at(step.at)); !got.Equal(at(step.wantSince)) {
			t.Fatalf("seen at +%v: watched since +%v, want +%v", step.at, got.Sub(t0), step.wantSince)
		}
	}
}

// TestGCCandidate tables which replicas replica GC asks the leaseholder
// about. A learner removed while it missed its removal keeps the leader
// it heard last (a learner never campaigns, so nothing clears it); it
// was never asked about and lived on forever.
func TestGCCandidate(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		term, leader         uint64
		learner, placeholder bool
		want                 bool
	}{
		{"leaseholder", 5, 1, false, false, false},
		{"leaseholder that is a learner in a stale view", 5, 1, true, false, false},
		{"voter following a leader", 0, 2, false, false, false},
		{"voter that lost its leader", 0, 0, false, false, true},
		{"learner with a leader (removed or catching up)", 0, 2, true, false, true},
		{"learner without a leader", 0, 0, true, false, true},
		{"empty placeholder with a leader", 0, 2, false, true, true},
	} {
		if got := gcCandidate(tc.term, tc.leader, tc.learner, tc.placeholder); got != tc.want {
			t.Errorf("%s: asked about %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestRemovableVoters: a surplus voter goes only if the voters left keep
// a quorum that is up in raft's view (heard from lately, or holding every
// committed entry), and one not up goes first. The first case is
// bench/hashshard's five-node start: nodes 1 and 3 died at their start,
// and removing node 5 (live) left tablet 1 with four voters, two of them
// dead.
func TestRemovableVoters(t *testing.T) {
	// prog: the leader's view; active heard from lately, caught holding
	// index 10 (the commit index), the others index 0.
	prog := func(voters []uint64, active, caught []uint64) raftnode.Progress {
		p := raftnode.Progress{Commit: 10, Match: map[uint64]uint64{}, Active: map[uint64]bool{}}
		for _, v := range voters {
			p.Active[v] = slices.Contains(active, v)
			if slices.Contains(caught, v) {
				p.Match[v] = 10
			}
		}
		return p
	}
	five, four := []uint64{1, 2, 3, 4, 5}, []uint64{1, 2, 3, 4}
	for _, tc := range []struct {
		name           string
		voters         []uint64
		active, caught []uint64
		want           []uint64
	}{
		{"two of five dead from the start, counted good by liveness: only the dead go", five, []uint64{2, 4, 5}, []uint64{2, 4, 5}, []uint64{1, 3}},
		{"all heard from: any", four, four, four, four},
		{"right after CheckQuorum cleared the followers: caught up counts as up", five, []uint64{2}, five, five},
		{"a fresh leader that has heard from nobody, nobody caught up: none", five, []uint64{2}, []uint64{2}, nil},
		{"four voters, one silent and behind: that one", four, []uint64{1, 2, 3}, []uint64{1, 2, 3}, []uint64{4}},
		{"four voters, two down: either (two of three left up)", four, []uint64{1, 2}, []uint64{1, 2}, []uint64{3, 4}},
		{"five voters, three down: none (two up are no quorum of four)", five, []uint64{1, 2}, []uint64{1, 2}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := removableVoters(tc.voters, tc.voters, upVoters(prog(tc.voters, tc.active, tc.caught))); !slices.Equal(got, tc.want) {
				t.Fatalf("removableVoters(%v, active %v, caught up %v) = %v, want %v", tc.voters, tc.active, tc.caught, got, tc.want)
			}
		})
	}
}
