package opt

import (
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/sem"
)

// maxReorder is the largest inner join tree whose order is chosen by
// enumerating every left-deep order (5! = 120 orders).
const maxReorder = 5

// reorderJoins picks, for each tree of 3 to maxReorder inputs joined by
// inner joins, the left-deep order whose intermediate results are
// smallest by the statistics' estimates (the sum of the rows every join
// but the last produces, PostgreSQL's and System R's C_out), and rebuilds
// the tree in it: each join condition goes to the lowest join that has
// its columns, and a Project restores the original column order. Trees
// with an input that has no statistics keep the binder's order, as does a
// tree with a pinned condition (a volatile call or a subquery must run
// where it was written).
func (o *optimizer) reorderJoins(n plan.Node) plan.Node {
	j, ok := n.(*plan.Join)
	if !ok || j.Kind != plan.InnerJoin || j.Lateral {
		for _, c := range children(n) {
			*c = o.reorderJoins(*c)
		}
		return n
	}
	var leaves []plan.Node
	var preds []sem.Expr
	var flatten func(x plan.Node)
	flatten = func(x plan.Node) {
		if jj, ok := x.(*plan.Join); ok && jj.Kind == plan.InnerJoin && !jj.Lateral {
			flatten(jj.Left)
			flatten(jj.Right)
			preds = append(preds, conjuncts(jj.On)...)
			return
		}
		leaves = append(leaves, x)
	}
	flatten(j)
	for i := range leaves {
		leaves[i] = o.reorderJoins(leaves[i])
	}
	if len(leaves) < 3 || len(leaves) > maxReorder {
		return o.rebuildAs(j, leaves, preds, identity(len(leaves)))
	}
	for _, p := range preds {
		if pinned(p) {
			return o.rebuildAs(j, leaves, preds, identity(len(leaves)))
		}
	}
	for _, l := range leaves {
		if !o.hasStats(l) {
			return o.rebuildAs(j, leaves, preds, identity(len(leaves)))
		}
	}
	orig := identity(len(leaves))
	best, bestCost := orig, o.orderCost(leaves, preds, orig)
	permute(len(leaves), func(order []int) {
		if c := o.orderCost(leaves, preds, order); c < bestCost*0.999 {
			best, bestCost = append([]int(nil), order...), c
		}
	})
	return o.rebuildAs(j, leaves, preds, best)
}

// rebuildAs returns the join tree of leaves in order (left-deep), under a
// Project restoring j's columns when the order changed; j itself (with
// its reordered subtrees) when it did not.
func (o *optimizer) rebuildAs(j *plan.Join, leaves []plan.Node, preds []sem.Expr, order []int) plan.Node {
	same := true
	for i, k := range order {
		if i != k {
			same = false
		}
	}
	if same {
		// Only the leaves' insides may have changed: put them back.
		i := 0
		var put func(x plan.Node) plan.Node
		put = func(x plan.Node) plan.Node {
			if jj, ok := x.(*plan.Join); ok && jj.Kind == plan.InnerJoin && !jj.Lateral {
				jj.Left = put(jj.Left)
				jj.Right = put(jj.Right)
				return jj
			}
			l := leaves[i]
			i++
			return l
		}
		return put(j)
	}
	root := o.leftDeep(leaves, preds, order)
	p := &plan.Project{Input: root, Cols: j.Columns()}
	for _, c := range p.Cols {
		p.Exprs = append(p.Exprs, &sem.ColRef{ID: c.ID, T: c.T, Name: c.Name})
	}
	return p
}

// leftDeep joins leaves in order, each condition at the lowest join whose
// inputs produce every column it reads.
func (o *optimizer) leftDeep(leaves []plan.Node, preds []sem.Expr, order []int) plan.Node {
	placed := make([]bool, len(preds))
	cur := leaves[order[0]]
	have := colsOf(cur.Columns())
	for _, k := range order[1:] {
		next := leaves[k]
		for _, c := range next.Columns() {
			have[c.ID] = struct{}{}
		}
		var on []sem.Expr
		for i, p := range preds {
			if !placed[i] && o.within(p, have) {
				placed[i] = true
				on = append(on, p)
			}
		}
		jj := &plan.Join{Kind: plan.InnerJoin, Left: cur, Right: next, On: and(on)}
		o.joinKeys(jj)
		cur = jj
	}
	// Every condition reads columns of the tree (or outer ones), so the
	// last join has them all; this keeps any the loop could not place.
	var rest []sem.Expr
	for i, p := range preds {
		if !placed[i] {
			rest = append(rest, p)
		}
	}
	if len(rest) > 0 {
		jj := cur.(*plan.Join)
		jj.On = and(append(conjuncts(jj.On), rest...))
		o.joinKeys(jj)
	}
	return cur
}

// orderCost is the sum of the estimated rows of every intermediate result
// of joining leaves in order.
func (o *optimizer) orderCost(leaves []plan.Node, preds []sem.Expr, order []int) float64 {
	root := o.leftDeep(leaves, preds, order)
	cost := 0.0
	for x := root; ; {
		jj, ok := x.(*plan.Join)
		if !ok {
			break
		}
		if jj != root {
			cost += o.joinEstimate(jj)
		}
		x = jj.Left
	}
	return cost
}

// joinEstimate is estimate for a join being ordered, where a join
// without equality keys is the cross product it is (filtered by its
// condition's default selectivity) rather than estimate's guess.
func (o *optimizer) joinEstimate(j *plan.Join) float64 {
	l := o.estimate(j.Left)
	if jj, ok := j.Left.(*plan.Join); ok {
		l = o.joinEstimate(jj)
	}
	r := o.estimate(j.Right)
	if rows, ok := o.joinRows(j, l, r); ok {
		return rows
	}
	rows := l * r
	if j.On != nil {
		rows *= o.costs.RangeFraction
	}
	return max(rows, 1)
}

// hasStats reports whether some column n produces has statistics (n's
// estimate then rests on them, not on cost.go's guesses).
func (o *optimizer) hasStats(n plan.Node) bool {
	if _, ok := n.(*plan.Values); ok {
		return true
	}
	for _, c := range n.Columns() {
		if cs, ok := o.colStats[c.ID]; ok && cs.table != nil {
			return true
		}
	}
	return false
}

func identity(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// permute calls f with every permutation of 0..n-1 (Heap's algorithm);
// f must not keep the slice.
func permute(n int, f func([]int)) {
	a := identity(n)
	c := make([]int, n)
	f(a)
	for i := 0; i < n; {
		if c[i] < i {
			if i%2 == 0 {
				a[0], a[i] = a[i], a[0]
			} else {
				a[c[i]], a[i] = a[i], a[c[i]]
			}
			f(a)
			c[i]++
			i = 0
		} else {
			c[i] = 0
			i++
		}
	}
}
