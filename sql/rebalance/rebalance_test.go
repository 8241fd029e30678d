package rebalance

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// layout builds one group's tablets from "node:bytes" placements, IDs in
// order, every tablet on voters 1, 2 and 3.
func layout(placements ...string) []Tablet {
	var out []Tablet
	for i, p := range placements {
		var n int32
		var b int64
		if _, err := fmt.Sscanf(p, "%d:%d", &n, &b); err != nil {
			panic(err)
		}
		out = append(out, Tablet{ID: uint64(i + 1), Group: 1, Shard: int64(100 + i), Bytes: b, Node: n, Voters: []int32{1, 2, 3}})
	}
	return out
}

// loads applies moves to ts and prints each node's bytes and lease count.
func loads(ts []Tablet, moves []Move) string {
	node := map[uint64]int32{}
	for _, t := range ts {
		node[t.ID] = t.Node
	}
	for _, m := range moves {
		node[m.Tablet.ID] = m.To
	}
	var parts []string
	for _, n := range []int32{1, 2, 3} {
		var b int64
		c := 0
		for _, t := range ts {
			if node[t.ID] == n {
				b += t.Bytes
				c++
			}
		}
		parts = append(parts, fmt.Sprintf("n%d=%d/%d", n, b, c))
	}
	return strings.Join(parts, " ")
}

func TestPlan(t *testing.T) {
	for _, tc := range []struct {
		name    string
		tablets []Tablet
		opt     Options
		moves   int
		want    string // loads after the plan: bytes/leases per node
	}{
		{"balanced", layout("1:10", "2:10", "3:10", "1:10", "2:10", "3:10"), Options{}, 0, "n1=20/2 n2=20/2 n3=20/2"},
		{"one large shard stays", layout("1:100", "1:10", "2:10", "2:10", "3:10", "3:10"), Options{}, 0, "n1=110/2 n2=20/2 n3=20/2"},
		{"a swap keeps the counts", layout("1:50", "1:40", "2:10", "2:5", "3:20", "3:15"), Options{}, 2, "n1=50/2 n2=55/2 n3=35/2"},
		{"a move to a node with fewer leases", layout("1:30", "1:30", "2:10", "3:10", "3:10"), Options{}, 1, "n1=30/1 n2=40/2 n3=20/2"},
		{"an empty node takes a lease", layout("1:10", "1:10", "2:10", "2:10"), Options{}, 1, "n1=10/1 n2=20/2 n3=10/1"},
		{"max moves", layout("1:50", "1:40", "2:10", "2:5", "3:20", "3:15"), Options{MaxMoves: 1}, 0, "n1=90/2 n2=15/2 n3=35/2"},
		{"threshold", layout("1:12", "2:10", "3:9"), Options{Threshold: 0.2}, 0, "n1=12/1 n2=10/1 n3=9/1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			moves := Plan(tc.tablets, []int32{1, 2, 3}, tc.opt)
			if got := loads(tc.tablets, moves); len(moves) != tc.moves || got != tc.want {
				t.Errorf("%d moves %v: %s, want %d moves: %s", len(moves), moves, got, tc.moves, tc.want)
			}
		})
	}
}

// An excluded shard and a tablet with no voter on the lighter node never
// move.
func TestPlanKeepsUnmovable(t *testing.T) {
	ts := layout("1:50", "1:40", "2:10", "2:5", "3:20", "3:15")
	ts[0].Excluded = true
	ts[1].Voters = []int32{1, 3}
	for _, m := range Plan(ts, []int32{1, 2, 3}, Options{}) {
		if m.Tablet.ID == 1 || m.Tablet.ID == 2 && m.To == 2 {
			t.Errorf("moved %+v", m)
		}
	}
}

// The plan's invariants (package doc) over random groups.
func TestPlanInvariants(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		nodes := []int32{1, 2, 3, 4}[:rapid.IntRange(2, 4).Draw(rt, "nodes")]
		var ts []Tablet
		for i := range rapid.IntRange(1, 20).Draw(rt, "tablets") {
			voters := rapid.SliceOfNDistinct(rapid.SampledFrom(nodes), 1, len(nodes), rapid.ID).Draw(rt, "voters")
			slices.Sort(voters)
			ts = append(ts, Tablet{ID: uint64(i + 1), Group: uint64(rapid.IntRange(1, 2).Draw(rt, "group")),
				Bytes: rapid.Int64Range(0, 1000).Draw(rt, "bytes"), Node: rapid.SampledFrom(voters).Draw(rt, "node"),
				Voters: voters, Excluded: rapid.IntRange(0, 9).Draw(rt, "excluded") == 0})
		}
		moves := Plan(ts, nodes, Options{})
		node := map[uint64]int32{}
		voters := map[uint64][]int32{}
		for _, t := range ts {
			node[t.ID] = t.Node
			voters[t.ID] = slices.Clone(t.Voters)
		}
		stored := func(g uint64) (sq int64, spread int) {
			b, c := map[int32]int64{}, map[int32]int{}
			for _, t := range ts {
				if t.Group == g {
					for _, v := range voters[t.ID] {
						b[v] += t.Bytes
						c[v]++
					}
				}
			}
			lo, hi := -1, 0
			for _, n := range nodes {
				sq += b[n] * b[n]
				if lo < 0 || c[n] < lo {
					lo = c[n]
				}
				hi = max(hi, c[n])
			}
			return sq, hi - lo
		}
		sums := func(g uint64) (sq int64, spread int) {
			b, c := map[int32]int64{}, map[int32]int{}
			for _, t := range ts {
				if t.Group == g {
					b[node[t.ID]] += t.Bytes
					c[node[t.ID]]++
				}
			}
			lo, hi := -1, 0
			for _, n := range nodes {
				sq += b[n] * b[n]
				if lo < 0 || c[n] < lo {
					lo = c[n]
				}
				hi = max(hi, c[n])
			}
			return sq, hi - lo
		}
		sq0, rsq0 := map[uint64]int64{}, map[uint64]int64{}
		limit, rlimit := map[uint64]int{}, map[uint64]int{}
		for _, g := range []uint64{1, 2} {
			sq, sp := sums(g)
			sq0[g], limit[g] = sq, max(1, sp)
			sq, sp = stored(g)
			rsq0[g], rlimit[g] = sq, max(1, sp)
		}
		moved, replicaMoved := map[uint64]bool{}, map[uint64]bool{}
		leaseMoves := map[uint64]bool{} // per group
		for i, m := range moves {
			id := m.Tablet.ID
			if m.Replica {
				// Replica moves come first (invariant 5), off a voter
				// that does not lead the tablet, to a node holding none.
				if leaseMoves[m.Tablet.Group] || m.Tablet.Excluded || replicaMoved[id] || node[id] == m.From ||
					!slices.Contains(voters[id], m.From) || slices.Contains(voters[id], m.To) {
					rt.Fatalf("replica move %d breaks invariants 1 or 5: %+v (voters %v, leaseholder %d)", i, m, voters[id], node[id])
				}
				replicaMoved[id] = true
				vs := voters[id]
				vs[slices.Index(vs, m.From)] = m.To
				continue
			}
			leaseMoves[m.Tablet.Group] = true
			if m.Tablet.Excluded || moved[id] || m.From == m.To || !slices.Contains(voters[id], m.To) || node[id] != m.From {
				rt.Fatalf("move %d breaks invariant 1: %+v", i, m)
			}
			moved[id] = true
			node[id] = m.To
		}
		for _, g := range []uint64{1, 2} {
			sq, sp := stored(g)
			if sq > rsq0[g] {
				rt.Fatalf("group %d: sum of squared stored bytes %d after the plan, %d before (invariant 5)", g, sq, rsq0[g])
			}
			if sp > rlimit[g] {
				rt.Fatalf("group %d: replica counts %d apart after the plan, limit %d (invariant 5)", g, sp, rlimit[g])
			}
		}
		for _, g := range []uint64{1, 2} {
			sq, sp := sums(g)
			if sq > sq0[g] || (sq == sq0[g] && len(moves) > 0 && groupMoved(moves, g)) {
				rt.Fatalf("group %d: sum of squared loads %d after the plan, %d before (invariant 2)", g, sq, sq0[g])
			}
			if sp > limit[g] {
				rt.Fatalf("group %d: lease counts %d apart after the plan, limit %d (invariant 3)", g, sp, limit[g])
			}
		}
	})
}

// groupMoved reports whether a lease of group g moves.
func groupMoved(moves []Move, g uint64) bool {
	for _, m := range moves {
		if m.Tablet.Group == g && !m.Replica {
			return true
		}
	}
	return false
}

// On five nodes with three replicas, node 1 holds a replica of the three
// largest tablets (leading none of them): the plan moves replicas off it
// to nodes holding less, keeps replica counts within one and leads with
// those moves (invariant 5).
func TestPlanReplicas(t *testing.T) {
	ts := []Tablet{
		{ID: 1, Bytes: 100, Node: 2, Voters: []int32{1, 2, 3}},
		{ID: 2, Bytes: 90, Node: 3, Voters: []int32{1, 3, 4}},
		{ID: 3, Bytes: 80, Node: 4, Voters: []int32{1, 4, 5}},
		{ID: 4, Bytes: 10, Node: 5, Voters: []int32{2, 3, 5}},
		{ID: 5, Bytes: 10, Node: 2, Voters: []int32{2, 4, 5}},
		{ID: 6, Bytes: 10, Node: 3, Voters: []int32{3, 4, 5}},
	}
	nodes := []int32{1, 2, 3, 4, 5}
	stored := func(moves []Move) (bytes map[int32]int64, spread int) {
		voters := map[uint64][]int32{}
		for _, t := range ts {
			voters[t.ID] = slices.Clone(t.Voters)
		}
		for _, m := range moves {
			if m.Replica {
				vs := voters[m.Tablet.ID]
				vs[slices.Index(vs, m.From)] = m.To
			}
		}
		bytes, count := map[int32]int64{}, map[int32]int{}
		for _, t := range ts {
			for _, v := range voters[t.ID] {
				bytes[v] += t.Bytes
				count[v]++
			}
		}
		return bytes, spreadOf(nodes, count)
	}
	moves := Plan(ts, nodes, Options{})
	before, _ := stored(nil)
	after, counts := stored(moves)
	var replicas int
	leases := false
	for _, m := range moves {
		if m.Replica {
			replicas++
			if leases {
				t.Errorf("a replica move after a lease move: %v", moves)
			}
		} else {
			leases = true
		}
	}
	extent := func(b map[int32]int64) int64 {
		lo, hi := b[1], b[1]
		for _, n := range nodes {
			lo, hi = min(lo, b[n]), max(hi, b[n])
		}
		return hi - lo
	}
	if replicas == 0 || extent(after) >= extent(before) || after[1] >= before[1] || counts > 1 {
		t.Errorf("moves %v: stored bytes %v (counts %d apart), before %v", moves, after, counts, before)
	}
	t.Logf("stored bytes %v after %d replica moves, %v before", after, replicas, before)
}
