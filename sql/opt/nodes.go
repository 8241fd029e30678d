package opt

import (
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/sem"
)

// children returns pointers to n's input nodes, so a rule can replace them.
func children(n plan.Node) []*plan.Node {
	switch v := n.(type) {
	case *plan.IndexJoin:
		return []*plan.Node{&v.Input}
	case *plan.LookupJoin:
		return []*plan.Node{&v.Input}
	case *plan.Filter:
		return []*plan.Node{&v.Input}
	case *plan.Project:
		return []*plan.Node{&v.Input}
	case *plan.Join:
		return []*plan.Node{&v.Left, &v.Right}
	case *plan.GroupBy:
		return []*plan.Node{&v.Input}
	case *plan.Window:
		return []*plan.Node{&v.Input}
	case *plan.Sort:
		return []*plan.Node{&v.Input}
	case *plan.Limit:
		return []*plan.Node{&v.Input}
	case *plan.Distinct:
		return []*plan.Node{&v.Input}
	case *plan.SetOp:
		return []*plan.Node{&v.Left, &v.Right}
	case *plan.RecursiveCTE:
		return []*plan.Node{&v.Init, &v.Recursive}
	case *plan.ProjectSet:
		return []*plan.Node{&v.Input}
	case *plan.Max1Row:
		return []*plan.Node{&v.Input}
	case *plan.Insert:
		return []*plan.Node{&v.Input}
	case *plan.Update:
		return []*plan.Node{&v.Input}
	case *plan.Delete:
		return []*plan.Node{&v.Input}
	}
	return nil
}

// walk calls f for n and every node below it, parents first.
func walk(n plan.Node, f func(plan.Node)) {
	if n == nil {
		return
	}
	f(n)
	for _, c := range children(n) {
		walk(*c, f)
	}
}

// exprsOf lists the scalar expressions a node holds (for ID accounting).
func exprsOf(n plan.Node) []sem.Expr {
	var out []sem.Expr
	add := func(es ...sem.Expr) {
		for _, e := range es {
			if e != nil {
				out = append(out, e)
			}
		}
	}
	switch v := n.(type) {
	case *plan.Scan:
		add(v.Filter)
	case *plan.IndexJoin:
		add(v.Filter)
	case *plan.LookupJoin:
		add(v.On)
	case *plan.VirtualScan:
		add(v.Filter)
	case *plan.Values:
		for _, r := range v.Rows {
			add(r...)
		}
	case *plan.Filter:
		add(v.Pred)
	case *plan.Project:
		add(v.Exprs...)
	case *plan.Join:
		add(v.On)
	case *plan.GroupBy:
		for _, a := range v.Aggs {
			add(a.Args...)
			add(a.Filter)
			for _, s := range a.OrderBy {
				add(s.Expr)
			}
		}
	case *plan.Window:
		for _, f := range v.Funcs {
			add(f.Args...)
			add(f.Filter, f.FrameStartOffset, f.FrameEndOffset)
			add(f.PartitionBy...)
			for _, s := range f.OrderBy {
				add(s.Expr)
			}
		}
	case *plan.ProjectSet:
		for _, f := range v.Funcs {
			add(f.Call)
		}
	case *plan.Insert:
		add(v.Defaults...)
		add(v.Computed...)
		for _, c := range v.Checks {
			add(c.Expr)
		}
		if oc := v.OnConflict; oc != nil {
			add(oc.Set...)
			add(oc.Where)
		}
		if v.Returning != nil {
			add(v.Returning.Exprs...)
		}
	case *plan.Update:
		add(v.Computed...)
		for _, c := range v.Checks {
			add(c.Expr)
		}
		if v.Returning != nil {
			add(v.Returning.Exprs...)
		}
	case *plan.Delete:
		if v.Returning != nil {
			add(v.Returning.Exprs...)
		}
	}
	return out
}

// colIDsOf lists the column IDs a node names outside its Columns and
// expressions.
func colIDsOf(n plan.Node) []sem.ColumnID {
	var out []sem.ColumnID
	ords := func(os []plan.Ordering) {
		for _, o := range os {
			out = append(out, o.Col)
		}
	}
	switch v := n.(type) {
	case *plan.IndexJoin:
		out = append(out, v.KeyCols...)
	case *plan.LookupJoin:
		out = append(out, v.KeyCols...)
	case *plan.Join:
		out = append(append(out, v.LeftEq...), v.RightEq...)
	case *plan.GroupBy:
		out = append(out, v.GroupCols...)
	case *plan.Sort:
		ords(v.Order)
	case *plan.Limit:
		ords(v.Order)
	case *plan.Distinct:
		out = append(out, v.On...)
	case *plan.Insert:
		out = append(out, v.TableCols...)
		if oc := v.OnConflict; oc != nil {
			out = append(append(out, oc.ExistingCols...), oc.ExcludedCols...)
		}
	case *plan.Update:
		out = append(append(append(out, v.FetchCols...), v.NewCols...), v.TableCols...)
	case *plan.Delete:
		out = append(out, v.FetchCols...)
	}
	return out
}
