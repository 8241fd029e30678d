package rebalance

import (
	"cmp"
	"slices"
)

// The replica phase (invariant 5): on a cluster with more nodes than
// replicas a node holds the bytes of the tablets it is a voter of, so the
// bytes stored per node differ with which tablets each holds, not with
// who leads them. Before balancing leases, a group's replicas are moved
// (kvpb.PlacementRequest: a learner on the target, promoted, the source's
// voter removed) so that the bytes stored per node, the sum of the bytes
// of the tablets it is a voter of, come within Threshold of the mean. The
// rule is the lease phase's with voters for leaseholders: the move or
// swap that lowers the sum of squares of stored bytes most, each tablet's
// replica moving at most once, replica counts per node kept within one
// (or no further apart than they were: the replicate queue evens counts
// out and would undo a move that broke that). A replica moves only off a
// node that does not lead its tablet, so that leases stay where they are
// and the lease phase's invariants (2 and 3) hold over the moves of both
// phases; a second rebalance moves what a lease kept in place.

// replicaState is one group's stored bytes while replica moves are
// planned.
type replicaState struct {
	tablets []Tablet // Voters and Node as moved so far
	nodes   []int32
	bytes   map[int32]int64 // stored: the bytes of every tablet the node is a voter of
	count   map[int32]int   // replicas
	moved   map[uint64]bool
}

// planReplicas returns the replica moves that balance the bytes stored
// per node over ts (one group, nodes sorted and distinct) and the tablets
// as they will be after them.
func planReplicas(ts []Tablet, nodes []int32, threshold float64, budget int) ([]Move, []Tablet) {
	s := &replicaState{tablets: make([]Tablet, len(ts)), nodes: nodes, bytes: map[int32]int64{}, count: map[int32]int{}, moved: map[uint64]bool{}}
	for i, t := range ts {
		t.Voters = slices.Clone(t.Voters)
		s.tablets[i] = t
		for _, v := range t.Voters {
			s.bytes[v] += t.Bytes
			s.count[v]++
		}
	}
	slices.SortFunc(s.tablets, func(a, b Tablet) int { return cmp.Compare(a.ID, b.ID) })
	var out []Move
	for budget == 0 || len(out) < budget {
		if balancedLoads(s.nodes, s.bytes, threshold) {
			break
		}
		moves := s.best(budget == 0 || budget-len(out) >= 2)
		if moves == nil {
			break
		}
		for _, m := range moves {
			s.apply(m)
			out = append(out, m)
		}
	}
	return out, s.tablets
}

// balancedLoads reports whether every node's load is within threshold of
// the mean.
func balancedLoads(nodes []int32, load map[int32]int64, threshold float64) bool {
	var total int64
	for _, n := range nodes {
		total += load[n]
	}
	mean := float64(total) / float64(len(nodes))
	for _, n := range nodes {
		if d := float64(load[n]) - mean; d > threshold*mean || -d > threshold*mean {
			return false
		}
	}
	return true
}

// spreadOf is the largest difference of counts between nodes.
func spreadOf(nodes []int32, count map[int32]int) int {
	lo, hi := -1, -1
	for _, n := range nodes {
		c := count[n]
		if lo < 0 || c < lo {
			lo = c
		}
		if c > hi {
			hi = c
		}
	}
	return hi - lo
}

// movable says whether t's replica on from may move to to: t has not
// moved, is not excluded, from is a voter of it but not its leaseholder,
// and to is no voter.
func (s *replicaState) movable(t Tablet, from, to int32) bool {
	return !t.Excluded && !s.moved[t.ID] && from != to && from != t.Node &&
		slices.Contains(t.Voters, from) && !slices.Contains(t.Voters, to)
}

// best returns the replica move, or swap (when swaps are allowed), that
// lowers the sum of squared stored bytes most within the count rule; nil
// when none lowers it.
func (s *replicaState) best(swaps bool) []Move {
	var best []Move
	var gain int64
	limit := max(1, spreadOf(s.nodes, s.count))
	consider := func(ms []Move, g int64) {
		if g > gain {
			best, gain = ms, g
		}
	}
	for _, t := range s.tablets {
		for _, a := range t.Voters {
			for _, b := range s.nodes {
				if !s.movable(t, a, b) {
					continue
				}
				// As for leases: moving x from a to b lowers the sum of
				// squares by 2x(Ba - Bb - x).
				d := s.bytes[a] - s.bytes[b]
				if t.Bytes > 0 && t.Bytes < d {
					s.count[a]--
					s.count[b]++
					ok := spreadOf(s.nodes, s.count) <= limit
					s.count[a]++
					s.count[b]--
					if ok {
						consider([]Move{{Tablet: t, From: a, To: b, Replica: true}}, 2*t.Bytes*(d-t.Bytes))
					}
				}
				if !swaps {
					continue
				}
				for _, u := range s.tablets {
					if u.ID == t.ID || !s.movable(u, b, a) {
						continue
					}
					// A swap moves x - y from a to b, counts unchanged.
					if x := t.Bytes - u.Bytes; x > 0 && x < d {
						consider([]Move{{Tablet: t, From: a, To: b, Replica: true}, {Tablet: u, From: b, To: a, Replica: true}}, 2*x*(d-x))
					}
				}
			}
		}
	}
	return best
}

func (s *replicaState) apply(m Move) {
	for i := range s.tablets {
		if t := &s.tablets[i]; t.ID == m.Tablet.ID {
			// A new slice: m.Tablet keeps the voters before the move.
			vs := slices.Clone(t.Voters)
			vs[slices.Index(vs, m.From)] = m.To
			slices.Sort(vs)
			t.Voters = vs
		}
	}
	s.moved[m.Tablet.ID] = true
	s.bytes[m.From] -= m.Tablet.Bytes
	s.bytes[m.To] += m.Tablet.Bytes
	s.count[m.From]--
	s.count[m.To]++
}
