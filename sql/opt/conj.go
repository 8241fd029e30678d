package opt

import (
	"github.com/cairn-db/cairn/sql/builtins"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
)

// conjuncts splits e into the arguments of its top-level ANDs (nested ANDs
// flattened); nil yields nothing and a constant TRUE is dropped.
func conjuncts(e sem.Expr) []sem.Expr {
	if e == nil {
		return nil
	}
	if a, ok := e.(*sem.And); ok {
		var out []sem.Expr
		for _, x := range a.Args {
			out = append(out, conjuncts(x)...)
		}
		return out
	}
	if c, ok := e.(*sem.Const); ok && c.Datum == types.DBool(true) {
		return nil
	}
	return []sem.Expr{e}
}

// and joins conjuncts back into one predicate (nil for none).
func and(es []sem.Expr) sem.Expr {
	switch len(es) {
	case 0:
		return nil
	case 1:
		return es[0]
	}
	return &sem.And{Args: append([]sem.Expr(nil), es...)}
}

// colSet is a set of column IDs.
type colSet map[sem.ColumnID]struct{}

func colsOf(cols []plan.Column) colSet {
	s := make(colSet, len(cols))
	for _, c := range cols {
		s[c.ID] = struct{}{}
	}
	return s
}

func (s colSet) has(id sem.ColumnID) bool { _, ok := s[id]; return ok }

// refs returns the columns e reads.
func refs(e sem.Expr) colSet {
	s := colSet{}
	sem.Walk(e, func(x sem.Expr) bool {
		if c, ok := x.(*sem.ColRef); ok {
			s[c.ID] = struct{}{}
		}
		return true
	})
	return s
}

// within reports whether every column e reads that the current tree
// produces is in cols. Columns the tree does not produce are outer
// references (a correlated subquery's), bound by the executor wherever the
// expression runs, so they never pin a predicate.
func (o *optimizer) within(e sem.Expr, cols colSet) bool {
	for id := range refs(e) {
		if !cols.has(id) && o.produced.has(id) {
			return false
		}
	}
	return true
}

// pinned reports whether a predicate must stay where the binder put it:
// it calls a volatile function (moving it would change how often it runs),
// or it contains a subquery or an aggregate/window reference, which only
// the operator above can evaluate (a pushed-down reader cannot run a
// subquery).
func pinned(e sem.Expr) bool {
	pin := false
	sem.Walk(e, func(x sem.Expr) bool {
		var fn *builtins.Resolved
		switch v := x.(type) {
		case *sem.SubqueryRef, *sem.AggRef, *sem.WindowRef, *sem.AggCall:
			pin = true
		case *sem.FuncCall:
			fn = v.Fn
		case *sem.BinOp:
			fn = v.Fn
		case *sem.UnaryOp:
			fn = v.Fn
		case *sem.Cmp:
			fn = v.Fn
		}
		if fn != nil && fn.Overload != nil && fn.Overload.Volatility == builtins.Volatile {
			pin = true
		}
		return !pin
	})
	return pin
}
