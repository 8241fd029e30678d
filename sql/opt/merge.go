package opt

import (
	"github.com/cairn-db/cairn/sql/plan"
)

// Merge joins. A join whose two sides are scans that can read an index in
// the order of the join's equality keys needs no hash table: sql/exec's
// merge join reads both sides front to back once and holds only the right
// rows of one key. Its reads are the hash join's (the right side whole,
// in order), so it costs the same in Costs' units, and where both apply
// the planner takes the merge join: at equal reads it holds one key's
// rows instead of the whole right side, never spills to disk, and keeps
// its left side's order. So the three methods split by profile: a lookup
// join where few keys are looked up on cheap seeks (ssd); a merge join
// where the inputs are ordered and seeks or requests are dear (hdd,
// object-store); a hash join otherwise (TestJoinMethodByProfile).

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
	if s == nil || s.Table == nil {
		return false
	}
	rev, merge, ok := scanProvides(s, order)
	return ok && !rev && !merge
}

// mergeJoin makes j a merge join when both sides can be read in the
// order of its keys and it would otherwise be a hash join (hashCost: the
// hash join's price, which the merge join's equals), and records the
// choice; it reports whether it did.
func (o *optimizer) mergeJoin(j *plan.Join, hashCost float64) bool {
	lo, ro, ok := mergeOrders(j)
	if !ok || o.costs.MergeJoinOff || !readsInOrder(j.Left, lo) || !readsInOrder(j.Right, ro) {
		return false
	}
	if !o.provide(j.Left, lo) || !o.provide(j.Right, ro) {
		return false
	}
	j.Merge = true
	o.noteChoice(j, &JoinChoice{Chosen: "merge join", ChosenCost: hashCost, Rejected: "hash join", RejectedCost: hashCost})
	return true
}

// hashJoinCost is what a hash join of j costs in the units lookupJoin
// compares: reading its right side whole; ok false when the right side
// is not a planned scan.
func (o *optimizer) hashJoinCost(j *plan.Join) (float64, bool) {
	right, ok := o.orig[j.Right]
	if !ok {
		return 0, false
	}
	if _, empty := j.Right.(*plan.Values); empty {
		return 0, false
	}
	return o.bestAccess(right).cost, true
}
