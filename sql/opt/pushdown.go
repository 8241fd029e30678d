package opt

import (
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
)

// pushdown returns a node equivalent to n filtered by every predicate of
// preds, with each predicate moved as close to the data as its columns
// allow. Where a predicate may go:
//
//   - through Project when it reads only pass-through columns (a
//     pass-through keeps its ID, so the predicate needs no rewriting),
//     through Sort, through Distinct (DISTINCT ON only when it reads the
//     ON columns) and through GroupBy when it reads only group columns;
//   - into the sides of an inner join, and turned into join conditions
//     when it reads both; into the preserved side of an outer join only
//     (the WHERE of a LEFT JOIN into Left, its ON conjuncts that read only
//     Right into Right); never through a FULL join;
//   - into Scan, IndexJoin and VirtualScan filters, which the reader
//     evaluates.
//
// Pinned predicates (conj.go) stay where the binder put them.
func (o *optimizer) pushdown(n plan.Node, preds []sem.Expr) plan.Node {
	var movable, stay []sem.Expr
	for _, p := range preds {
		if pinned(p) {
			stay = append(stay, p)
		} else {
			movable = append(movable, p)
		}
	}
	switch v := n.(type) {
	case *plan.Filter:
		for _, c := range conjuncts(v.Pred) {
			if pinned(c) {
				stay = append(stay, c)
			} else {
				movable = append(movable, c)
			}
		}
		return wrap(o.pushdown(v.Input, movable), stay)

	case *plan.Project:
		in := colsOf(v.Input.Columns())
		var down []sem.Expr
		for _, p := range movable {
			if o.within(p, in) {
				down = append(down, p)
			} else {
				stay = append(stay, p)
			}
		}
		v.Input = o.pushdown(v.Input, down)
		return wrap(v, stay)

	case *plan.Sort:
		v.Input = o.pushdown(v.Input, movable)
		return wrap(v, stay)

	case *plan.Distinct:
		down, up := movable, []sem.Expr(nil)
		if len(v.On) > 0 {
			down, up = o.split(movable, idSet(v.On))
		}
		v.Input = o.pushdown(v.Input, down)
		return wrap(v, append(stay, up...))

	case *plan.GroupBy:
		var down, up []sem.Expr
		if len(v.GroupCols) > 0 {
			down, up = o.split(movable, idSet(v.GroupCols))
		} else {
			up = movable
		}
		v.Input = o.pushdown(v.Input, down)
		return wrap(v, append(stay, up...))

	case *plan.Join:
		return wrap(o.pushJoin(v, movable), stay)

	case *plan.SetOp:
		// Only UNION ALL: a filter commutes with every set operation on
		// bags, but the deduplicating ones keep one of several equal rows
		// whose values a predicate might still tell apart (1.0 and 1.00).
		if v.Kind != plan.Union || !v.All || !sameTypes(v.Cols, v.Left.Columns()) || !sameTypes(v.Cols, v.Right.Columns()) {
			for _, c := range children(n) {
				*c = o.pushdown(*c, nil)
			}
			return wrap(v, append(stay, movable...))
		}
		down, up := o.split(movable, colsOf(v.Cols))
		v.Left = o.pushdown(v.Left, renameCols(down, v.Cols, v.Left.Columns()))
		v.Right = o.pushdown(v.Right, renameCols(down, v.Cols, v.Right.Columns()))
		return wrap(v, append(stay, up...))

	case *plan.Scan:
		v.Filter = and(append(conjuncts(v.Filter), movable...))
		return wrap(v, stay)

	case *plan.IndexJoin:
		v.Input = o.pushdown(v.Input, nil)
		v.Filter = and(append(conjuncts(v.Filter), movable...))
		return wrap(v, stay)

	case *plan.VirtualScan:
		v.Filter = and(append(conjuncts(v.Filter), movable...))
		return wrap(v, stay)
	}
	for _, c := range children(n) {
		*c = o.pushdown(*c, nil)
	}
	return wrap(n, append(stay, movable...))
}

// pushJoin pushes preds (none pinned) and the join's own condition into
// its sides, following the rules of pushdown.
func (o *optimizer) pushJoin(j *plan.Join, preds []sem.Expr) plan.Node {
	lcols, rcols := colsOf(j.Left.Columns()), colsOf(j.Right.Columns())
	var lp, rp, on, up []sem.Expr
	// side sorts a movable predicate into the side it reads, if any.
	side := func(p sem.Expr) (left, right bool) {
		return o.within(p, lcols), o.within(p, rcols)
	}
	for _, p := range preds {
		l, r := side(p)
		switch j.Kind {
		case plan.InnerJoin:
			switch {
			case l:
				lp = append(lp, p)
			case r:
				rp = append(rp, p)
			default:
				on = append(on, p)
			}
		case plan.LeftJoin, plan.SemiJoin, plan.AntiJoin:
			// Semi and anti joins output Left's columns only, so every
			// WHERE predicate reads Left (or outer columns).
			if l {
				lp = append(lp, p)
			} else {
				up = append(up, p)
			}
		case plan.RightJoin:
			if r {
				rp = append(rp, p)
			} else {
				up = append(up, p)
			}
		default: // FullJoin: neither side may lose rows.
			up = append(up, p)
		}
	}
	for _, c := range conjuncts(j.On) {
		if pinned(c) {
			on = append(on, c)
			continue
		}
		l, r := side(c)
		switch {
		case j.Kind == plan.InnerJoin && l, j.Kind == plan.SemiJoin && l:
			// A failing left-only condition drops the left row from an
			// inner or semi join, exactly as filtering Left does.
			lp = append(lp, c)
		case r && (j.Kind == plan.InnerJoin || j.Kind == plan.LeftJoin ||
			j.Kind == plan.SemiJoin || j.Kind == plan.AntiJoin):
			// A right-only condition makes that right row match nothing,
			// exactly as filtering it out of Right does.
			rp = append(rp, c)
		case l && j.Kind == plan.RightJoin:
			lp = append(lp, c)
		default:
			on = append(on, c)
		}
	}
	j.Left = o.pushdown(j.Left, lp)
	j.Right = o.pushdown(j.Right, rp)
	j.On = and(on)
	o.joinKeys(j)
	return wrap(j, up)
}

// joinKeys adds to LeftEq/RightEq every conjunct of On of the form
// left column = right column (either way round) whose sides compare
// without a cast, keeping the pairs already there.
func (o *optimizer) joinKeys(j *plan.Join) {
	lc, rc := j.Left.Columns(), j.Right.Columns()
	types := map[sem.ColumnID]*types.T{}
	for _, c := range lc {
		types[c.ID] = c.T
	}
	for _, c := range rc {
		types[c.ID] = c.T
	}
	joinKeysWith(j, colsOf(lc), colsOf(rc), types)
}

// joinKeysWith is joinKeys given the columns of j's sides and their
// types (a caller building deep trees keeps them rather than asking each
// join for its columns again).
func joinKeysWith(j *plan.Join, lcols, rcols colSet, types map[sem.ColumnID]*types.T) {
	have := map[[2]sem.ColumnID]bool{}
	for i := range j.LeftEq {
		have[[2]sem.ColumnID{j.LeftEq[i], j.RightEq[i]}] = true
	}
	for _, c := range conjuncts(j.On) {
		cmp, ok := c.(*sem.Cmp)
		if !ok || cmp.Op != sem.EQ {
			continue
		}
		a, aok := cmp.Left.(*sem.ColRef)
		b, bok := cmp.Right.(*sem.ColRef)
		if !aok || !bok {
			continue
		}
		if rcols.has(a.ID) && lcols.has(b.ID) {
			a, b = b, a
		}
		if !lcols.has(a.ID) || !rcols.has(b.ID) || !keyTypesMatch(types[a.ID], types[b.ID]) {
			continue
		}
		k := [2]sem.ColumnID{a.ID, b.ID}
		if !have[k] {
			have[k] = true
			j.LeftEq = append(j.LeftEq, a.ID)
			j.RightEq = append(j.RightEq, b.ID)
		}
	}
}

// renameCols rewrites preds over the columns from into the columns at
// the same positions of to (a set operation's output into one of its inputs).
func renameCols(preds []sem.Expr, from, to []plan.Column) []sem.Expr {
	m := map[sem.ColumnID]plan.Column{}
	for i, c := range from {
		m[c.ID] = to[i]
	}
	var out []sem.Expr
	for _, p := range preds {
		out = append(out, sem.Map(p, func(e sem.Expr) sem.Expr {
			if c, ok := e.(*sem.ColRef); ok {
				if t, ok := m[c.ID]; ok {
					return &sem.ColRef{ID: t.ID, T: c.T, Name: t.Name}
				}
			}
			return e
		}))
	}
	return out
}

// sameTypes reports whether two column lists have identical types
// position by position.
func sameTypes(a, b []plan.Column) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].T == nil || b[i].T == nil || !a[i].T.Identical(b[i].T) {
			return false
		}
	}
	return true
}

// split divides preds into those reading only cols (and outer columns)
// and the rest.
func (o *optimizer) split(preds []sem.Expr, cols colSet) (in, out []sem.Expr) {
	for _, p := range preds {
		if o.within(p, cols) {
			in = append(in, p)
		} else {
			out = append(out, p)
		}
	}
	return in, out
}

func idSet(ids []sem.ColumnID) colSet {
	s := make(colSet, len(ids))
	for _, id := range ids {
		s[id] = struct{}{}
	}
	return s
}

// wrap puts a Filter of preds over n (n itself when there are none).
func wrap(n plan.Node, preds []sem.Expr) plan.Node {
	if len(preds) == 0 {
		return n
	}
	return &plan.Filter{Input: n, Pred: and(preds)}
}

// keyTypesMatch reports whether values of a and b can be compared by
// their key encodings and hashes as the SQL equality does: the same type,
// or integers of any width (they encode and hash alike). char(n) compares
// ignoring trailing blanks, so it only matches itself.
func keyTypesMatch(a, b *types.T) bool {
	if a == nil || b == nil || a.Family != b.Family {
		return false
	}
	switch a.Family {
	case types.IntFamily:
		return true
	case types.StringFamily:
		return isBPChar(a) == isBPChar(b) && (!isBPChar(a) || a.Width == b.Width)
	case types.ArrayFamily:
		return a.Identical(b)
	}
	return a.Oid == b.Oid
}

func isBPChar(t *types.T) bool { return t.Oid == types.BPChar.Oid }
