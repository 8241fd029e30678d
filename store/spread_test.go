package store

import "testing"

// TestSpreadTarget: the voter a SpreadLeaseRequest's ordinal picks,
// round-robin over the eligible voters in node ID order.
func TestSpreadTarget(t *testing.T) {
	all := func(uint64) bool { return true }
	not := func(bad ...uint64) func(uint64) bool {
		return func(v uint64) bool {
			for _, b := range bad {
				if v == b {
					return false
				}
			}
			return true
		}
	}
	for _, tc := range []struct {
		name     string
		voters   []uint64
		eligible func(uint64) bool
		ordinals []int
		want     []uint64
	}{
		{"sorted round-robin", []uint64{3, 1, 2}, nil, []int{0, 1, 2, 3, 4, 5}, []uint64{1, 2, 3, 1, 2, 3}},
		{"all eligible", []uint64{2, 5, 9}, all, []int{7, 8, 9}, []uint64{5, 9, 2}},
		{"negative ordinal", []uint64{1, 2, 3}, nil, []int{-1}, []uint64{3}},
		{"dead voter left out", []uint64{1, 2, 3}, not(2), []int{0, 1, 2, 3}, []uint64{1, 3, 1, 3}},
		{"only one eligible", []uint64{1, 2, 3}, not(1, 3), []int{0, 1}, []uint64{2, 2}},
		{"none eligible", []uint64{1, 2, 3}, not(1, 2, 3), []int{0}, []uint64{0}},
		{"no voters", nil, nil, []int{0}, []uint64{0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i, o := range tc.ordinals {
				if got := spreadTarget(tc.voters, tc.eligible, o); got != tc.want[i] {
					t.Errorf("spreadTarget(%v, ordinal %d) = %d, want %d", tc.voters, o, got, tc.want[i])
				}
			}
		})
	}
}
