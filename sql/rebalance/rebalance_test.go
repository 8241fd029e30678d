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
		for _, t := range ts {
			node[t.ID] = t.Node
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
		sq0 := map[uint64]int64{}
		limit := map[uint64]int{}
		for _, g := range []uint64{1, 2} {
			sq, sp := sums(g)
			sq0[g], limit[g] = sq, max(1, sp)
		}
		moved := map[uint64]bool{}
		for i, m := range moves {
			if m.Tablet.Excluded || moved[m.Tablet.ID] || m.From == m.To || !slices.Contains(m.Tablet.Voters, m.To) || node[m.Tablet.ID] != m.From {
				rt.Fatalf("move %d breaks invariant 1: %+v", i, m)
			}
			moved[m.Tablet.ID] = true
			node[m.Tablet.ID] = m.To
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

func groupMoved(moves []Move, g uint64) bool {
	for _, m := range moves {
		if m.Tablet.Group == g {
			return true
		}
	}
	return false
}
