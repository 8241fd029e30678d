package membership

import (
	"slices"
	"testing"
)

// TestPlacementOf tables the placement Place aims a bucket at: voters
// round-robin from the ordinal's place over the nodes in ID order, the
// first the leaseholder; over n consecutive ordinals every node leads
// one bucket and holds need replicas.
func TestPlacementOf(t *testing.T) {
	for _, tc := range []struct {
		nodes         []uint64
		need, ordinal int
		want          []uint64
	}{
		{[]uint64{1, 2, 3}, 3, 0, []uint64{1, 2, 3}},
		{[]uint64{3, 1, 2}, 3, 1, []uint64{2, 3, 1}},
		{[]uint64{1, 2, 3, 4, 5}, 3, 0, []uint64{1, 2, 3}},
		{[]uint64{1, 2, 3, 4, 5}, 3, 3, []uint64{4, 5, 1}},
		{[]uint64{1, 2, 3, 4, 5}, 3, 9, []uint64{5, 1, 2}},
		{[]uint64{2, 7, 9}, 5, 4, []uint64{7, 9, 2}}, // fewer nodes than voters wanted
		{[]uint64{1}, 3, 5, []uint64{1}},
		{[]uint64{1, 2, 3}, 1, -1, []uint64{3}},
	} {
		if got := placementOf(tc.nodes, tc.need, tc.ordinal); !slices.Equal(got, tc.want) {
			t.Errorf("placementOf(%v, %d, %d) = %v, want %v", tc.nodes, tc.need, tc.ordinal, got, tc.want)
		}
	}
	// Any n consecutive ordinals: one lease and need replicas per node.
	nodes := []uint64{1, 2, 3, 4, 5}
	for first := range 7 {
		leases, reps := map[uint64]int{}, map[uint64]int{}
		for o := first; o < first+len(nodes); o++ {
			p := placementOf(nodes, 3, o)
			leases[p[0]]++
			for _, n := range p {
				reps[n]++
			}
		}
		for _, n := range nodes {
			if leases[n] != 1 || reps[n] != 3 {
				t.Errorf("ordinals %d..%d: node %d leads %d and holds %d, want 1 and 3", first, first+4, n, leases[n], reps[n])
			}
		}
	}
}
