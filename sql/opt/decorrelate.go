package opt

import (
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
)

// Subqueries tested by a WHERE (or HAVING) become semi and anti joins.
//
// The executor runs a correlated subquery once per distinct outer binding
// and holds what it returns (sql/exec/subquery.go): an `x IN (SELECT ...)`
// over a large correlated set holds it all, outside work_mem, and a
// correlated EXISTS re-reads the inner side for every outer row.
// PostgreSQL pulls such sublinks up into semi and anti joins
// (pull_up_sublinks); so does decorrelate, for a conjunct of a Filter
// that is
//
//   - `EXISTS (sub)` or `NOT EXISTS (sub)` with sub correlated: a semi or
//     anti join whose condition is sub's correlated conjuncts;
//   - `x IN (sub)` (`x = ANY`), correlated, or uncorrelated with x and
//     the subquery's column of different integer widths or a column cast
//     to the operator's type (which the executor's own IN filter,
//     sql/exec/inset.go, does not take): a semi join on x = y (y cast as
//     sem casts it) and the correlated conjuncts;
//   - `x NOT IN (sub)` with sub correlated: an anti join on the correlated
//     conjuncts and `x = y OR x IS NULL OR y IS NULL`. A row is kept when
//     no inner row passes that test, which is NOT IN's truth exactly: its
//     set is empty, or x and every y are non-null and none equals x (a
//     NULL on either side makes NOT IN NULL, and a WHERE drops it).
//
// The join is then an ordinary join: pushdown finds its hash keys, the
// hash join spills past work_mem, lookup joins apply. Only a sub of the
// shape [Project] Filter* base qualifies, where every outer reference is
// in a Filter conjunct (no volatile function, subquery or aggregate in
// it), base and the Project do not read outer columns, no subquery
// appears in it anywhere, and every outer column is a column of the
// Filter's input (not of a scope further out). Anything else keeps the
// executor's subquery path. Uncorrelated EXISTS is left alone: it runs
// once and stops at its first row.
func (o *optimizer) decorrelate(p *plan.Plan) {
	uses := map[int]int{}
	countUses := func(root plan.Node) {
		walk(root, func(n plan.Node) {
			for _, e := range exprsOf(n) {
				sem.Walk(e, func(x sem.Expr) bool {
					if s, ok := x.(*sem.SubqueryRef); ok {
						uses[s.ID]++
					}
					return true
				})
			}
		})
	}
	countUses(p.Root)
	for _, sq := range p.Subqueries {
		countUses(sq.Root)
	}
	for _, c := range p.CTEs {
		countUses(c)
	}
	gone := map[int]bool{}
	var visit func(n plan.Node) plan.Node
	visit = func(n plan.Node) plan.Node {
		for _, c := range children(n) {
			*c = visit(*c)
		}
		f, ok := n.(*plan.Filter)
		if !ok {
			return n
		}
		in := f.Input
		conj := conjuncts(f.Pred)
		var rest []sem.Expr
		for _, c := range conj {
			j, sq := o.semiJoin(p, in, c, uses)
			if j == nil {
				rest = append(rest, c)
				continue
			}
			gone[sq.ID] = true
			// The subquery's own filters may hold sublinks of their own.
			if jj, ok := j.(*plan.Join); ok {
				jj.Right = visit(jj.Right)
			} else if pr, ok := j.(*plan.Project); ok {
				jj := pr.Input.(*plan.Join)
				jj.Right = visit(jj.Right)
			}
			in = j
		}
		if len(rest) == len(conj) {
			return n
		}
		return wrap(in, rest)
	}
	p.Root = visit(p.Root)
	for _, sq := range p.Subqueries {
		if !gone[sq.ID] {
			sq.Root = visit(sq.Root)
		}
	}
	for i := range p.CTEs {
		p.CTEs[i] = visit(p.CTEs[i])
	}
	if len(gone) == 0 {
		return
	}
	kept := p.Subqueries[:0]
	for _, sq := range p.Subqueries {
		if !gone[sq.ID] {
			kept = append(kept, sq)
		}
	}
	p.Subqueries = kept
}

// semiJoin returns the join that replaces conjunct c of a Filter over in
// (with the subquery it absorbs), or nil when c does not qualify.
func (o *optimizer) semiJoin(p *plan.Plan, in plan.Node, c sem.Expr, uses map[int]int) (plan.Node, *plan.Subquery) {
	not := false
	if n, ok := c.(*sem.Not); ok {
		not, c = true, n.Arg
	}
	s, ok := c.(*sem.SubqueryRef)
	if !ok || uses[s.ID] != 1 {
		return nil, nil
	}
	var sq *plan.Subquery
	for _, x := range p.Subqueries {
		if x != nil && x.ID == s.ID {
			sq = x
		}
	}
	if sq == nil || sq.Kind != s.Kind {
		return nil, nil
	}
	inCols := in.Columns()
	have := colsOf(inCols)
	outer := colSet{}
	for _, id := range sq.Outer {
		if !have.has(id) {
			return nil, nil
		}
		outer[id] = struct{}{}
	}
	correlated := len(outer) > 0
	needCast := false // y needs a cast to the operator's right type
	switch s.Kind {
	case sem.ExistsSubquery:
		if !correlated {
			return nil, nil
		}
	case sem.AnySubquery:
		if s.Op != sem.EQ || s.Fn == nil || len(s.Fn.ArgTypes) != 2 || s.Col == nil || s.Left == nil || pinned(s.Left) {
			return nil, nil
		}
		to := s.Fn.ArgTypes[1]
		needCast = !s.Col.Identical(to) && (s.Col.Family != to.Family || s.Col.Oid != to.Oid)
		if !correlated && (not || !needCast && !intWidths(s.Left.Type(), s.Col)) {
			return nil, nil
		}
	default:
		return nil, nil
	}
	readsOuter := func(e sem.Expr) bool {
		for id := range refs(e) {
			if outer.has(id) {
				return true
			}
		}
		return false
	}
	hasSub := func(e sem.Expr) bool {
		found := false
		sem.Walk(e, func(x sem.Expr) bool {
			if _, ok := x.(*sem.SubqueryRef); ok {
				found = true
			}
			return !found
		})
		return found
	}

	// Peel [Project] Filter* off the subquery.
	node := sq.Root
	var top *plan.Project
	if pr, ok := node.(*plan.Project); ok {
		top, node = pr, pr.Input
		for _, e := range pr.Exprs {
			if readsOuter(e) || hasSub(e) {
				return nil, nil
			}
		}
	}
	var corr, local []sem.Expr
	for {
		f, ok := node.(*plan.Filter)
		if !ok {
			break
		}
		for _, x := range conjuncts(f.Pred) {
			if hasSub(x) {
				return nil, nil
			}
			if readsOuter(x) {
				if pinned(x) {
					return nil, nil
				}
				corr = append(corr, x)
			} else {
				local = append(local, x)
			}
		}
		node = f.Input
	}
	base := node
	bad := false
	walk(base, func(n plan.Node) {
		for _, e := range exprsOf(n) {
			if readsOuter(e) || hasSub(e) {
				bad = true
			}
		}
		for _, id := range colIDsOf(n) {
			if outer.has(id) {
				bad = true
			}
		}
		if _, ok := n.(*plan.WorkTable); ok {
			bad = true // a recursive CTE's working table is only readable in place
		}
	})
	if bad || (correlated && len(corr) == 0) {
		return nil, nil
	}
	var right plan.Node = base
	if len(local) > 0 {
		right = &plan.Filter{Input: base, Pred: and(local)}
	}

	// Equalities between an outer expression and an inner one compare
	// columns, so pushdown makes them hash keys: an expression that is not
	// a column is computed by a Project on its side (left: in's columns
	// and the new ones; right: the columns the condition reads).
	var leftExprs, rightExprs []sem.Expr
	var leftCols, rightCols []plan.Column
	leftKey := func(e sem.Expr) *sem.ColRef {
		if cr, ok := e.(*sem.ColRef); ok && have.has(cr.ID) {
			return cr
		}
		c := plan.Column{ID: o.newID(), Name: "?column?", T: e.Type()}
		leftExprs, leftCols = append(leftExprs, e), append(leftCols, c)
		return colRefOf(c)
	}
	rightKey := func(e sem.Expr) sem.Expr {
		if _, ok := e.(*sem.ColRef); ok {
			return e
		}
		c := plan.Column{ID: o.newID(), Name: "?column?", T: e.Type()}
		rightExprs, rightCols = append(rightExprs, e), append(rightCols, c)
		return colRefOf(c)
	}
	onlyOuter := func(e sem.Expr) bool {
		r := refs(e)
		for id := range r {
			if !outer.has(id) {
				return false
			}
		}
		return len(r) > 0
	}
	var on []sem.Expr
	for _, x := range corr {
		cmp, ok := x.(*sem.Cmp)
		if ok && cmp.Op == sem.EQ {
			switch {
			case onlyOuter(cmp.Left) && !readsOuter(cmp.Right) && len(refs(cmp.Right)) > 0:
				x = &sem.Cmp{Op: cmp.Op, Fn: cmp.Fn, Left: leftKey(cmp.Left), Right: rightKey(cmp.Right)}
			case onlyOuter(cmp.Right) && !readsOuter(cmp.Left) && len(refs(cmp.Left)) > 0:
				x = &sem.Cmp{Op: cmp.Op, Fn: cmp.Fn, Left: rightKey(cmp.Left), Right: leftKey(cmp.Right)}
			}
		}
		on = append(on, x)
	}
	var ycol plan.Column
	var yexpr sem.Expr
	if s.Kind == sem.AnySubquery {
		if top != nil {
			if len(top.Exprs) != 1 || len(top.Cols) != 1 {
				return nil, nil
			}
			ycol, yexpr = top.Cols[0], top.Exprs[0]
		} else {
			cols := base.Columns()
			if len(cols) == 0 {
				return nil, nil
			}
			ycol = cols[0]
			yexpr = colRefOf(ycol)
		}
		if needCast {
			// As sem casts the subquery's values to the operator's type.
			to := s.Fn.ArgTypes[1]
			yexpr = &sem.Cast{Expr: yexpr, To: to, Context: types.CastImplicit}
			ycol = plan.Column{ID: o.newID(), Name: ycol.Name, T: to}
		}
		xcol := leftKey(s.Left)
		yref := colRefOf(ycol)
		eq := sem.Expr(&sem.Cmp{Op: sem.EQ, Fn: s.Fn, Left: xcol, Right: yref})
		if not {
			eq = &sem.Or{Args: []sem.Expr{eq, &sem.IsNull{Arg: xcol}, &sem.IsNull{Arg: yref}}}
		}
		on = append(on, eq)
	}
	if yexpr != nil || len(rightExprs) > 0 {
		// The right side outputs y, the base columns the condition reads
		// and the inner keys.
		pr := &plan.Project{Input: right}
		seen := colSet{}
		if yexpr != nil {
			pr.Exprs, pr.Cols = append(pr.Exprs, yexpr), append(pr.Cols, ycol)
			seen[ycol.ID] = struct{}{}
		}
		r := colSet{}
		for _, x := range on {
			for id := range refs(x) {
				r[id] = struct{}{}
			}
		}
		for _, bc := range base.Columns() {
			if r.has(bc.ID) && !seen.has(bc.ID) {
				seen[bc.ID] = struct{}{}
				pr.Exprs, pr.Cols = append(pr.Exprs, colRefOf(bc)), append(pr.Cols, bc)
			}
		}
		pr.Exprs, pr.Cols = append(pr.Exprs, rightExprs...), append(pr.Cols, rightCols...)
		right = pr
	}
	left := in
	if len(leftExprs) > 0 {
		lp := &plan.Project{Input: in}
		for _, c := range inCols {
			lp.Exprs, lp.Cols = append(lp.Exprs, colRefOf(c)), append(lp.Cols, c)
		}
		lp.Exprs, lp.Cols = append(lp.Exprs, leftExprs...), append(lp.Cols, leftCols...)
		left = lp
	}
	kind := plan.SemiJoin
	if not {
		kind = plan.AntiJoin
	}
	var out plan.Node = &plan.Join{Kind: kind, Left: left, Right: right, On: and(on)}
	if left != in {
		// Drop the computed keys again: the Filter's output is its input's.
		pr := &plan.Project{Input: out}
		for _, c := range inCols {
			pr.Exprs, pr.Cols = append(pr.Exprs, colRefOf(c)), append(pr.Cols, c)
		}
		out = pr
	}
	return out, sq
}

// intWidths reports whether a and b are integers of different widths,
// which hash joins compare by key (keyTypesMatch) and the executor's IN
// filter does not.
func intWidths(a, b *types.T) bool {
	return a != nil && b != nil && a.Family == types.IntFamily && b.Family == types.IntFamily && a.Oid != b.Oid
}

func colRefOf(c plan.Column) *sem.ColRef {
	return &sem.ColRef{ID: c.ID, T: c.T, Name: c.Name}
}
