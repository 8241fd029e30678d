package opt

import (
	"github.com/cairn-db/cairn/sql/plan"
)

// Merge joins. A join whose two sides are scans that can read an index in
// the order of the join's equality keys needs no hash table: sql/exec's
// merge join reads both sides front to back once and holds only the right
// rows of one key. Its reads are the hash join's (the right side whole,
// in order) without the hash table's build (Costs.HashRow), so where both
// apply the merge join costs less and is taken; it also holds one key's
// rows instead of the whole right side, never spills to disk, and keeps
// its left side's order. So the three methods split by cost: a lookup
// join where the keys looked up cost less than reading the right side
// whole, else a merge join where the inputs are ordered, else a hash
// join.

// mergeOrders returns the orderings a merge join of j needs of its left
// and right sides (ascending by the equality keys in LeftEq's order), or
// ok false when j is no candidate: a kind sql/exec's merge join does not
// run, a lateral join, or key types whose encodings differ.
func mergeOrders(j *plan.Join) (left, right []plan.Ordering, ok bool) {
	switch j.Kind {
	case plan.InnerJoin, plan.LeftJoin, plan.SemiJoin, plan.AntiJoin:
	default:
		return nil, nil, false
	}
	if j.Lateral || len(j.LeftEq) == 0 || len(j.LeftEq) != len(j.RightEq) {
		return nil, nil, false
	}
	lt, rt := map[int]plan.Column{}, map[int]plan.Column{}
	lcols, rcols := j.Left.Columns(), j.Right.Columns()
	for i, id := range j.LeftEq {
		for _, c := range lcols {
			if c.ID == id {
				lt[i] = c
			}
		}
		for _, c := range rcols {
			if c.ID == j.RightEq[i] {
				rt[i] = c
			}
		}
		l, lok := lt[i]
		r, rok := rt[i]
		if !lok || !rok || !keyTypesMatch(l.T, r.T) {
			return nil, nil, false
		}
		left = append(left, plan.Ordering{Col: id})
		right = append(right, plan.Ordering{Col: j.RightEq[i]})
	}
	return left, right, true
}

// readsInOrder reports whether n can yield its rows ascending by order
// by reading its scan forward in index order (order.go's provide, without
// asking the scan to yet).
func readsInOrder(n plan.Node, order []plan.Ordering) bool {
	cols := colSet{}
	for _, k := range order {
		cols[k.Col] = struct{}{}
	}
	s := orderedScan(n, cols)
	if s == nil || s.Table == nil || bucketed(s) {
		// A hash-partitioned table (a distributed table's) yields key
		// order only by merging every bucket's stream at one node; read
		// unordered, a hash join of it runs in the distributed layer's
		// fragments, next to the tablets (sql/exec, distsql_join.go).
		return false
	}
	rev, merge, ok := scanProvides(s, order)
	return ok && !rev && !merge
}

// canMerge reports whether j could be a merge join: its kind and keys
// allow one, enable_mergejoin is on, and both sides can be read in the
// order of its keys (mergeJoin then asks them to).
func (o *optimizer) canMerge(j *plan.Join) bool {
	lo, ro, ok := mergeOrders(j)
	return ok && !o.costs.MergeJoinOff && readsInOrder(j.Left, lo) && readsInOrder(j.Right, ro)
}

// mergeJoin makes j a merge join when it can be one (canMerge) and its
// sides provide the order; it reports whether it did.
func (o *optimizer) mergeJoin(j *plan.Join) bool {
	if !o.canMerge(j) {
		return false
	}
	lo, ro, _ := mergeOrders(j)
	if !o.provide(j.Left, lo) || !o.provide(j.Right, ro) {
		return false
	}
	j.Merge = true
	return true
}

// rightReadCost is what reading j's right side whole costs (the reads of
// a hash or merge join, in the units lookupJoin compares); ok false when
// the right side is not a planned scan.
func (o *optimizer) rightReadCost(j *plan.Join) (float64, bool) {
	right, ok := o.orig[j.Right]
	if !ok {
		return 0, false
	}
	if _, empty := j.Right.(*plan.Values); empty {
		return 0, false
	}
	return o.bestAccess(right).cost, true
}

// hashCost is what a hash join of j costs given read, the reading of its
// right side: that, and every row of it put in the hash table (plus
// disableCost with enable_hashjoin off).
func (o *optimizer) hashCost(j *plan.Join, read float64) float64 {
	cost := read + o.costs.hashBuildCost(o.estimate(j.Right))
	if o.costs.HashJoinOff {
		cost += disableCost
	}
	return cost
}
