package opt

import (
	"context"
	"errors"
	"math"
	"sort"

	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
)

// JoinLimits bounds the join order search, with PostgreSQL's planner
// settings of the same names and meanings (the session passes its own).
type JoinLimits struct {
	// JoinCollapse (join_collapse_limit): an explicit JOIN is flattened
	// into the search of the list around it only while the two lists it
	// joins have at most this many items together; otherwise each side
	// is searched on its own. 1 keeps explicit JOINs in written order.
	JoinCollapse int
	// FromCollapse (from_collapse_limit): a FROM item that is itself a
	// list (an explicit JOIN kept whole, a subquery whose projection only
	// passes columns through) is merged into its FROM list only while the
	// list stays within this many items.
	FromCollapse int
	// Geqo and GeqoThreshold (geqo, geqo_threshold): a search over this
	// many items or more is greedy (joinsearch.go) rather than exhaustive.
	Geqo          bool
	GeqoThreshold int
}

// DefaultJoinLimits are PostgreSQL's defaults.
var DefaultJoinLimits = JoinLimits{JoinCollapse: 8, FromCollapse: 8, Geqo: true, GeqoThreshold: 12}

// searchRecord describes one join search, for tests: how many items it
// ordered, whether greedily, and how many candidate joins it costed.
type searchRecord struct {
	items      int
	greedy     bool
	considered int
}

// reorderJoins chooses the order of every tree of inner joins of three or
// more inputs, as PostgreSQL does:
//
//  1. The tree is cut into join lists (deconstruct, PostgreSQL's
//     deconstruct_jointree) under JoinLimits: a FROM list's items form one
//     list, an explicit JOIN's sides are merged into it within
//     join_collapse_limit, nested lists within from_collapse_limit; a
//     list that is not merged is searched on its own and joins the list
//     around it as one item.
//  2. Each list is searched (joinsearch.go): exhaustively below
//     geqo_threshold items, greedily from it on (or always, with geqo
//     off and past 64 items, or past the exhaustive search's state
//     budget). Row estimates come from statistics where there are any
//     and from cost.go's heuristics otherwise; equalities between
//     columns are selective by their distinct counts (a single-column
//     unique key has as many as its table has rows).
//  3. The tree is rebuilt in the chosen order unless the written one is
//     estimated no worse and has no more cross products: each condition at the lowest join that has all
//     its columns, and a Project restoring the original column order.
//
// Trees with a pinned condition (a volatile call or a subquery must run
// where it was written) keep the binder's order; their inputs are still
// reordered inside. The search checks ctx, the statement's context, as it
// goes.
func (o *optimizer) reorderJoins(ctx context.Context, n plan.Node) (plan.Node, error) {
	j, ok := n.(*plan.Join)
	if !ok || !reorderable(j) {
		for _, c := range children(n) {
			var err error
			if *c, err = o.reorderJoins(ctx, *c); err != nil {
				return nil, err
			}
		}
		return n, nil
	}
	f := &flattener{lim: o.limits}
	orig, list := f.walk(j)
	for i := range f.leaves {
		var err error
		if f.leaves[i], err = o.reorderJoins(ctx, f.leaves[i]); err != nil {
			return nil, err
		}
	}
	if len(f.leaves) < 3 {
		return putLeaves(j, f.leaves), nil
	}
	for _, p := range f.preds {
		if pinned(p) {
			return putLeaves(j, f.leaves), nil
		}
	}
	lg := o.leafGraph(f.leaves, f.preds)
	best, err := o.planList(ctx, list, lg)
	if err != nil {
		return nil, err
	}
	// The written order stays when the search found nothing cheaper
	// (Optimize is idempotent) and it crosses no more relations without
	// a condition than the search's order does.
	if best.equal(orig) || lg.cost(orig) <= lg.cost(best)*1.001 && lg.crossings(orig) <= lg.crossings(best) {
		return putLeaves(j, f.leaves), nil
	}
	root := o.buildTree(best, f.leaves, f.preds, lg)
	p := &plan.Project{Input: root, Cols: j.Columns()}
	for _, c := range p.Cols {
		p.Exprs = append(p.Exprs, &sem.ColRef{ID: c.ID, T: c.T, Name: c.Name})
	}
	o.rows[p] = o.estimate(root)
	return p, nil
}

// reorderable reports whether j may change places with the joins around
// it: an inner join that is not lateral.
func reorderable(j *plan.Join) bool { return j.Kind == plan.InnerJoin && !j.Lateral }

// passThrough returns x as a Project that only passes columns of an inner
// join through (a subquery in FROM selecting columns: PostgreSQL pulls it
// up into the FROM list around it).
func passThrough(x plan.Node) (*plan.Project, bool) {
	p, ok := x.(*plan.Project)
	if !ok {
		return nil, false
	}
	if j, ok := p.Input.(*plan.Join); !ok || !reorderable(j) {
		return nil, false
	}
	for i, e := range p.Exprs {
		if c, ok := e.(*sem.ColRef); !ok || c.ID != p.Cols[i].ID {
			return nil, false
		}
	}
	return p, true
}

// joinItem is one item of a join list: a leaf, or a nested list searched
// on its own (sub != nil).
type joinItem struct {
	leaf int
	sub  []joinItem
}

// flattener collects a tree of reorderable joins: its leaves (the inputs
// that are not such joins, numbered left to right), the conjuncts of its
// join conditions, its written shape and its join lists.
type flattener struct {
	lim    JoinLimits
	leaves []plan.Node
	preds  []sem.Expr
}

// walk returns x's written shape and its join list.
func (f *flattener) walk(x plan.Node) (*joinTree, []joinItem) {
	if p, ok := passThrough(x); ok {
		return f.walk(p.Input)
	}
	j, ok := x.(*plan.Join)
	if !ok || !reorderable(j) {
		f.leaves = append(f.leaves, x)
		return &joinTree{rel: len(f.leaves) - 1}, []joinItem{{leaf: len(f.leaves) - 1}}
	}
	if j.Explicit {
		lt, ll := f.walk(j.Left)
		rt, rl := f.walk(j.Right)
		f.preds = append(f.preds, conjuncts(j.On)...)
		t := &joinTree{left: lt, right: rt}
		if len(ll)+len(rl) <= f.lim.JoinCollapse {
			return t, append(ll, rl...)
		}
		return t, []joinItem{part(ll), part(rl)}
	}
	// A FROM list: the binder joins its items left-deep with commas.
	var items [][]joinItem
	t := f.comma(j, &items)
	var list []joinItem
	remaining := len(items)
	for _, sub := range items {
		remaining--
		if len(sub) <= 1 || len(list)+len(sub)+remaining <= f.lim.FromCollapse {
			list = append(list, sub...)
		} else {
			list = append(list, joinItem{sub: sub})
		}
	}
	return t, list
}

// comma walks the comma joins of a FROM list, appending each item's list.
func (f *flattener) comma(x plan.Node, items *[][]joinItem) *joinTree {
	if j, ok := x.(*plan.Join); ok && reorderable(j) && !j.Explicit {
		lt := f.comma(j.Left, items)
		rt := f.comma(j.Right, items)
		f.preds = append(f.preds, conjuncts(j.On)...)
		return &joinTree{left: lt, right: rt}
	}
	t, l := f.walk(x)
	*items = append(*items, l)
	return t
}

// part is a list as one item of the list around it.
func part(l []joinItem) joinItem {
	if len(l) == 1 {
		return l[0]
	}
	return joinItem{sub: l}
}

// putLeaves puts the (reordered inside) leaves back into the tree they
// came from, in the order flattener numbered them.
func putLeaves(j *plan.Join, leaves []plan.Node) plan.Node {
	i := 0
	var put func(x plan.Node) plan.Node
	put = func(x plan.Node) plan.Node {
		if p, ok := passThrough(x); ok {
			p.Input = put(p.Input)
			return p
		}
		if jj, ok := x.(*plan.Join); ok && reorderable(jj) {
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

// leafGraph is the join graph of a tree's leaves: their row estimates and
// the conditions reading two or more of them.
func (o *optimizer) leafGraph(leaves []plan.Node, preds []sem.Expr) *joinGraph {
	leafOf := map[sem.ColumnID]int{}
	g := &joinGraph{rows: make([]float64, len(leaves))}
	for i, l := range leaves {
		g.rows[i] = o.estimate(l)
		for _, c := range l.Columns() {
			leafOf[c.ID] = i
		}
	}
	unique := o.uniqueColumns()
	for _, p := range preds {
		rels := predLeaves(p, leafOf)
		if len(rels) < 2 {
			continue
		}
		g.preds = append(g.preds, graphPred{rels: rels, sel: o.predSel(p, leafOf, g.rows, unique)})
	}
	return g
}

// predLeaves lists, ascending, the leaves whose columns p reads.
func predLeaves(p sem.Expr, leafOf map[sem.ColumnID]int) []int {
	seen := map[int]bool{}
	var out []int
	for id := range refs(p) {
		if l, ok := leafOf[id]; ok && !seen[l] {
			seen[l] = true
			out = append(out, l)
		}
	}
	sort.Ints(out)
	return out
}

// predSel estimates the fraction of the cross product of its leaves a
// join condition keeps: an equality of two columns 1/max of their
// distinct counts (PostgreSQL's eqjoinsel without statistics of the
// values), anything else the range fraction.
func (o *optimizer) predSel(p sem.Expr, leafOf map[sem.ColumnID]int, rows []float64, unique colSet) float64 {
	if cmp, ok := p.(*sem.Cmp); ok && cmp.Op == sem.EQ {
		a, aok := cmp.Left.(*sem.ColRef)
		b, bok := cmp.Right.(*sem.ColRef)
		if aok && bok {
			la, lok := leafOf[a.ID]
			lb, rok := leafOf[b.ID]
			if lok && rok && la != lb {
				da := o.joinDistinct(a.ID, rows[la], unique)
				db := o.joinDistinct(b.ID, rows[lb], unique)
				return 1 / math.Max(math.Max(da, db), 1)
			}
		}
	}
	return o.costs.RangeFraction
}

// joinDistinct estimates how many distinct values column id takes among
// the rows of its leaf: from statistics, else all of them for a
// single-column unique key, else one per EqRows of a table (cost.go).
func (o *optimizer) joinDistinct(id sem.ColumnID, rows float64, unique colSet) float64 {
	if d := o.distinct(id, rows); d > 0 {
		return d
	}
	d := o.costs.TableRows / o.costs.EqRows
	if unique.has(id) {
		d = o.costs.TableRows
	}
	return math.Max(1, math.Min(d, rows))
}

// uniqueColumns is the set of columns that the scans planned so far read
// from a single-column unique key (a primary key or a public, non-partial
// unique index).
func (o *optimizer) uniqueColumns() colSet {
	out := colSet{}
	keys := map[*catalog.Table]map[rowenc.ColumnID]bool{}
	for _, s := range o.orig {
		uk, ok := keys[s.Table]
		if !ok {
			uk = map[rowenc.ColumnID]bool{}
			for _, idx := range lookupIndexes(s.Table) {
				if idx.Unique && len(idx.KeyColumnIDs) == 1 {
					uk[idx.KeyColumnIDs[0]] = true
				}
			}
			keys[s.Table] = uk
		}
		for i, c := range s.Cols {
			if uk[s.TableCols[i]] {
				out[c.ID] = struct{}{}
			}
		}
	}
	return out
}

// planList searches one join list, each nested list first, and returns
// its order as a tree over the leaves.
func (o *optimizer) planList(ctx context.Context, list []joinItem, lg *joinGraph) (*joinTree, error) {
	trees := make([]*joinTree, len(list))
	itemOf := map[int]int{}
	for i, it := range list {
		if it.sub == nil {
			trees[i] = &joinTree{rel: it.leaf}
		} else {
			var err error
			if trees[i], err = o.planList(ctx, it.sub, lg); err != nil {
				return nil, err
			}
		}
		for _, l := range trees[i].rels(nil) {
			itemOf[l] = i
		}
	}
	if len(list) == 1 {
		return trees[0], nil
	}
	g := &joinGraph{rows: make([]float64, len(list))}
	for i, t := range trees {
		_, g.rows[i] = lg.costOf(t, make([]bool, len(lg.rows)))
	}
	for _, p := range lg.preds {
		var items []int
		seen := map[int]bool{}
		inList := true
		for _, l := range p.rels {
			i, ok := itemOf[l]
			if !ok {
				inList = false // a condition for a list around this one
				break
			}
			if !seen[i] {
				seen[i] = true
				items = append(items, i)
			}
		}
		if inList && len(items) >= 2 {
			sort.Ints(items)
			g.preds = append(g.preds, graphPred{rels: items, sel: p.sel})
		}
	}
	greedy := o.limits.Geqo && len(list) >= o.limits.GeqoThreshold || len(list) > 64
	var t *joinTree
	var err error
	if !greedy {
		t, err = g.searchDP(ctx)
		if errors.Is(err, errDPBudget) {
			greedy = true
		} else if err != nil {
			return nil, err
		}
	}
	if greedy {
		if t, err = g.searchGreedy(ctx); err != nil {
			return nil, err
		}
	}
	o.searches = append(o.searches, searchRecord{items: len(list), greedy: greedy, considered: g.considered})
	return substitute(t, trees), nil
}

// substitute replaces each item of t by its tree.
func substitute(t *joinTree, trees []*joinTree) *joinTree {
	if t.isLeaf() {
		return trees[t.rel]
	}
	return &joinTree{left: substitute(t.left, trees), right: substitute(t.right, trees)}
}

// buildTree makes the joins of t over leaves, each condition at the
// lowest join whose inputs produce every column it reads (conditions on
// no leaf at the root), recording each join's estimate.
func (o *optimizer) buildTree(t *joinTree, leaves []plan.Node, preds []sem.Expr, lg *joinGraph) plan.Node {
	placed := make([]bool, len(preds))
	typeOf := map[sem.ColumnID]*types.T{}
	leafCols := make([]colSet, len(leaves))
	for i, l := range leaves {
		cols := l.Columns()
		leafCols[i] = colsOf(cols)
		for _, c := range cols {
			typeOf[c.ID] = c.T
		}
	}
	// rec returns the joins of t and the columns they produce.
	var rec func(t *joinTree) (plan.Node, colSet)
	rec = func(t *joinTree) (plan.Node, colSet) {
		if t.isLeaf() {
			return leaves[t.rel], leafCols[t.rel]
		}
		l, lcols := rec(t.left)
		r, rcols := rec(t.right)
		have := make(colSet, len(lcols)+len(rcols))
		for id := range lcols {
			have[id] = struct{}{}
		}
		for id := range rcols {
			have[id] = struct{}{}
		}
		var on []sem.Expr
		for i, p := range preds {
			if !placed[i] && o.within(p, have) {
				placed[i] = true
				on = append(on, p)
			}
		}
		jj := &plan.Join{Kind: plan.InnerJoin, Left: l, Right: r, On: and(on)}
		joinKeysWith(jj, lcols, rcols, typeOf)
		_, o.rows[jj] = lg.costOf(t, make([]bool, len(lg.rows)))
		return jj, have
	}
	root, _ := rec(t)
	// Every condition reads columns of the tree (or outer ones), so the
	// root has them all; this keeps any the walk could not place.
	var rest []sem.Expr
	for i, p := range preds {
		if !placed[i] {
			rest = append(rest, p)
		}
	}
	if len(rest) > 0 {
		jj := root.(*plan.Join)
		jj.On = and(append(conjuncts(jj.On), rest...))
		o.joinKeys(jj)
	}
	return root
}
