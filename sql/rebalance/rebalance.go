// Package rebalance plans the moves of Citus's shard rebalancer
// (rebalance_table_shards, get_rebalance_table_shards_plan; issue 17,
// docs/distributed.md "Rebalancing shards") over Cairn's distributed
// tables. It owns the plan only: a pure function from where the tablets
// of each colocation group are served and how large they are to a list of
// moves. It reads no catalog, sends nothing and keeps no state; sql/pgcatalog
// gathers its input (the catalog, and each tablet as its leaseholder
// describes it) and sql/session carries the moves out (replica moves and
// lease transfers).
//
// A Citus shard placement is the node that serves the shard: in Cairn the
// leaseholder of its tablets (citus_shards' nodename), which runs its
// reads, writes and distributed fragments. Every replica holds the bytes,
// so a lease move is a lease transfer to another voter of the tablet:
// online, with nothing copied. On a cluster with more nodes than replicas
// the bytes a node stores depend on which tablets it holds a replica of,
// so a plan first moves replicas (replicas.go: a copy to a node holding
// none, then the source's replica removed), then leases. The unit is a
// tablet of a colocation group's table group (a shard, or part of a grown
// shard that split), which carries the shard of every table colocated in
// it.
//
// Invariants:
//
//  1. A lease move's target is a voter of its tablet, other than its
//     source, and no tablet's lease moves twice in one plan; a replica
//     move's source is a voter of its tablet that does not lead it, its
//     target no voter, and no tablet's replica moves twice; an excluded
//     shard never moves.
//  2. Each lease move lowers the group's sum of squared node loads (bytes
//     led per node), so a plan always ends, and applied in order its
//     moves leave the loads no further apart than before (replica moves
//     leave leases where they are).
//  3. No move widens the group's spread of lease counts per node beyond
//     one (or beyond what it was): the store's lease balancer keeps each
//     index's (group's) lease counts within one, and a plan that broke
//     that would be undone by it. Balancing bytes within that rule uses
//     swaps, which keep both counts.
//  4. The plan stops once every node's load is within Threshold of the
//     mean, or no move or swap lowers the sum of squares.
//  5. Replica moves come first and follow rules 2 to 4 for the bytes
//     stored per node (the bytes of every tablet it is a voter of) and
//     replica counts per node.
package rebalance

import (
	"slices"
)

// Tablet is one tablet of a colocation group as the planner sees it.
type Tablet struct {
	ID uint64
	// Group is the colocation group (table group) the tablet belongs to:
	// groups are balanced each on its own.
	Group uint64
	// Shard is the Citus shard ID the plan reports for the tablet, and
	// Excluded marks a shard of excluded_shard_list.
	Shard    int64
	Excluded bool
	// Bytes is the tablet's size (its live bytes).
	Bytes int64
	// Node is the leaseholder; Voters the nodes that may take the lease.
	Node   int32
	Voters []int32
}

// Move hands Tablet's lease from From to To or, with Replica, moves its
// replica from From (not its leaseholder) to To (a node that holds none).
type Move struct {
	Tablet   Tablet
	From, To int32
	Replica  bool
}

// Options are the plan's parameters.
type Options struct {
	// Threshold: a node is balanced when its load is within Threshold
	// times the mean of the mean (Citus's threshold; by_disk_size's
	// default, DefaultThreshold, when 0).
	Threshold float64
	// MaxMoves bounds the moves (a swap is two); 0: no bound.
	MaxMoves int
}

// DefaultThreshold is Citus's by_disk_size strategy's default threshold.
const DefaultThreshold = 0.1

// Plan returns the moves that balance the bytes each node leads within
// each group of tablets, over nodes (the nodes that may serve; a node
// without any tablet's lease counts as empty). Groups are planned in
// ascending ID order and the moves of a group in the order to apply them.
func Plan(tablets []Tablet, nodes []int32, opt Options) []Move {
	if opt.Threshold <= 0 {
		opt.Threshold = DefaultThreshold
	}
	groups := map[uint64][]Tablet{}
	for _, t := range tablets {
		groups[t.Group] = append(groups[t.Group], t)
	}
	ids := make([]uint64, 0, len(groups))
	for g := range groups {
		ids = append(ids, g)
	}
	slices.Sort(ids)
	var out []Move
	for _, g := range ids {
		budget := 0
		if opt.MaxMoves > 0 {
			budget = opt.MaxMoves - len(out)
			if budget <= 0 {
				break
			}
		}
		out = append(out, planGroup(groups[g], nodes, opt.Threshold, budget)...)
	}
	return out
}

// state is one group's loads while a plan is made.
type state struct {
	tablets []Tablet // Node as moved so far
	nodes   []int32
	bytes   map[int32]int64
	count   map[int32]int
	moved   map[uint64]bool
}

func planGroup(ts []Tablet, nodes []int32, threshold float64, budget int) []Move {
	s := &state{bytes: map[int32]int64{}, count: map[int32]int{}, moved: map[uint64]bool{}}
	seen := map[int32]bool{}
	for _, n := range nodes {
		if !seen[n] {
			seen[n] = true
			s.nodes = append(s.nodes, n)
		}
	}
	for _, t := range ts {
		for _, n := range append([]int32{t.Node}, t.Voters...) {
			if !seen[n] {
				seen[n] = true
				s.nodes = append(s.nodes, n)
			}
		}
	}
	slices.Sort(s.nodes)
	// Stored bytes first (invariant 5), then leases over the voters and
	// leaseholders those moves leave.
	out, after := planReplicas(ts, s.nodes, threshold, budget)
	s.tablets = after
	for _, t := range s.tablets {
		s.bytes[t.Node] += t.Bytes
		s.count[t.Node]++
	}
	for budget == 0 || len(out) < budget {
		if s.balanced(threshold) {
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
	return out
}

// balanced reports whether every node's load is within threshold of the
// mean.
func (s *state) balanced(threshold float64) bool { return balancedLoads(s.nodes, s.bytes, threshold) }

// countSpread is the largest difference of lease counts between nodes.
func (s *state) countSpread() int { return spreadOf(s.nodes, s.count) }

// movable says whether t may move (invariant 1) and to which nodes.
func (s *state) movable(t Tablet, to int32) bool {
	return !t.Excluded && !s.moved[t.ID] && to != t.Node && slices.Contains(t.Voters, to)
}

// best returns the move, or the swap (when swaps are allowed), that
// lowers the sum of squared loads most (invariant 2) within the count
// rule (invariant 3); nil when none lowers it.
func (s *state) best(swaps bool) []Move {
	var best []Move
	var gain int64
	limit := max(1, s.countSpread())
	consider := func(ms []Move, g int64) {
		if g > gain {
			best, gain = ms, g
		}
	}
	for _, t := range s.tablets {
		a := t.Node
		for _, b := range s.nodes {
			if !s.movable(t, b) {
				continue
			}
			// Moving size x from a to b changes the sum of squares by
			// 2x(x + Bb - Ba): it falls when x < Ba - Bb.
			if d := s.bytes[a] - s.bytes[b]; t.Bytes > 0 && t.Bytes < d {
				s.count[a]--
				s.count[b]++
				ok := s.countSpread() <= limit
				s.count[a]++
				s.count[b]--
				if ok {
					consider([]Move{{Tablet: t, From: a, To: b}}, 2*t.Bytes*(d-t.Bytes))
				}
			}
			if !swaps {
				continue
			}
			for _, u := range s.tablets {
				if u.Node != b || !s.movable(u, a) {
					continue
				}
				// A swap moves x - y from a to b, counts unchanged.
				x := t.Bytes - u.Bytes
				if d := s.bytes[a] - s.bytes[b]; x > 0 && x < d {
					consider([]Move{{Tablet: t, From: a, To: b}, {Tablet: u, From: b, To: a}}, 2*x*(d-x))
				}
			}
		}
	}
	return best
}

func (s *state) apply(m Move) {
	for i := range s.tablets {
		if s.tablets[i].ID == m.Tablet.ID {
			s.tablets[i].Node = m.To
		}
	}
	s.moved[m.Tablet.ID] = true
	s.bytes[m.From] -= m.Tablet.Bytes
	s.bytes[m.To] += m.Tablet.Bytes
	s.count[m.From]--
	s.count[m.To]++
}
