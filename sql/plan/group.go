package plan

import (
	"github.com/jackc/pgerrcode"
	pg_query "github.com/pganalyze/pg_query_go/v6"

	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/sem"
)

// grouper turns a level's GROUP BY and aggregate calls into a GroupBy and
// rewrites the expressions above it to read the group's columns.
type grouper struct {
	b     *builder
	s     *scope
	input Node
	// groupCols are the GroupBy's key columns; computed ones are made by
	// a Project below it (pre). groupKeys finds a computed key by its text.
	groupCols []Column
	groupKeys map[string]sem.ColumnID
	pre       *Project
	aggs      []Aggregate
	aggCols   []Column
	aggKeys   map[string]int
	inputIDs  map[sem.ColumnID]bool
	allowed   map[sem.ColumnID]bool
}

func (g *grouper) build(input Node, groupExprs []sem.Expr) (Node, error) {
	g.input = input
	g.groupKeys = map[string]sem.ColumnID{}
	g.aggKeys = map[string]int{}
	g.inputIDs = map[sem.ColumnID]bool{}
	g.allowed = map[sem.ColumnID]bool{}
	in := input.Columns()
	for _, c := range in {
		g.inputIDs[c.ID] = true
	}
	for _, c := range g.s.cols {
		g.inputIDs[c.id] = true
	}
	byID := map[sem.ColumnID]Column{}
	for _, c := range in {
		byID[c.ID] = c
	}
	for _, e := range groupExprs {
		if cr, ok := e.(*sem.ColRef); ok {
			if c, ok := byID[cr.ID]; ok {
				if !g.allowed[c.ID] {
					g.groupCols = append(g.groupCols, c)
					g.allowed[c.ID] = true
				}
				continue
			}
		}
		key := e.String()
		if _, dup := g.groupKeys[key]; dup {
			continue
		}
		if g.pre == nil {
			g.pre = &Project{Input: input, Exprs: passThrough(in), Cols: append([]Column(nil), in...)}
		}
		c := Column{ID: g.b.newCol(), Name: key, T: e.Type()}
		g.pre.Exprs = append(g.pre.Exprs, e)
		g.pre.Cols = append(g.pre.Cols, c)
		g.groupCols = append(g.groupCols, c)
		g.groupKeys[key] = c.ID
		g.allowed[c.ID] = true
	}
	// Functional dependency (Postgres 9.1+): grouping by a table's whole
	// primary key allows every column of that table.
	for _, r := range g.s.rels {
		if len(r.pk) == 0 {
			continue
		}
		all := true
		for _, id := range r.pk {
			if !g.allowed[id] {
				all = false
			}
		}
		if all {
			for _, i := range r.cols {
				c := g.s.cols[i]
				if _, ok := byID[c.id]; ok && !g.allowed[c.id] {
					g.groupCols = append(g.groupCols, byID[c.id])
					g.allowed[c.id] = true
				}
			}
		}
	}
	if g.pre != nil {
		return g.pre, nil
	}
	return input, nil
}

// mapExpr replaces aggregate calls by the GroupBy's columns and group
// expressions by their key columns, then checks that nothing else of the
// input row is left (42803). aggASTs pairs e's aggregate calls with their
// AST, for ORDER BY inside the call.
func (g *grouper) mapExpr(e sem.Expr, aggASTs []*pg_query.FuncCall) (sem.Expr, error) {
	var ferr error
	k := 0
	out := sem.Map(e, func(x sem.Expr) sem.Expr {
		if ferr != nil {
			return x
		}
		switch v := x.(type) {
		case *sem.AggCall:
			if v.Window {
				return x
			}
			var order []SortExpr
			k = pairCall(aggASTs, k, v.Name)
			if k < len(aggASTs) {
				fc := aggASTs[k]
				for _, o := range fc.AggOrder {
					sb := o.GetSortBy()
					oe, err := g.b.expr(g.s, "ORDER BY", sb.Node, nil)
					if err != nil {
						ferr = err
						return x
					}
					so := sortOrder(0, sb)
					order = append(order, SortExpr{Expr: oe, Desc: so.Desc, NullsFirst: so.NullsFirst})
				}
			}
			k++
			key := v.String()
			for _, o := range order {
				key += "|" + o.Expr.String()
				if o.Desc {
					key += " DESC"
				}
			}
			i, ok := g.aggKeys[key]
			if !ok {
				i = len(g.aggs)
				g.aggKeys[key] = i
				g.aggs = append(g.aggs, Aggregate{Fn: v.Fn, Name: v.Name, Args: v.Args, Star: v.Star,
					Distinct: v.Distinct, Filter: v.Filter, OrderBy: order})
				g.aggCols = append(g.aggCols, Column{ID: g.b.newCol(), Name: v.String(), T: v.Type()})
			}
			c := g.aggCols[i]
			return &sem.ColRef{ID: c.ID, T: c.T, Name: v.String()}
		case *sem.ColRef:
			return x
		default:
			if len(g.groupKeys) > 0 {
				if id, ok := g.groupKeys[x.String()]; ok {
					return &sem.ColRef{ID: id, T: x.Type(), Name: x.String()}
				}
			}
		}
		return x
	})
	if ferr != nil {
		return nil, ferr
	}
	var bad, badSub sem.ColumnID
	sem.Walk(out, func(x sem.Expr) bool {
		switch v := x.(type) {
		case *sem.ColRef:
			if g.inputIDs[v.ID] && !g.allowed[v.ID] {
				bad = v.ID
			}
		case *sem.SubqueryRef:
			// A correlated subquery may only see the group's columns.
			if v.ID >= 1 && v.ID <= len(g.b.subqueries) {
				for _, o := range g.b.subqueries[v.ID-1].Outer {
					if g.inputIDs[o] && !g.allowed[o] {
						badSub = o
					}
				}
			}
		}
		return bad == 0 && badSub == 0
	})
	if badSub != 0 {
		return nil, pgerror.New(pgerrcode.GroupingError,
			"subquery uses ungrouped column %q from outer query", g.qualifiedName(badSub))
	}
	if bad != 0 {
		return nil, &groupingError{err: pgerror.New(pgerrcode.GroupingError,
			"column %q must appear in the GROUP BY clause or be used in an aggregate function", g.qualifiedName(bad)), col: bad}
	}
	return out, nil
}

func (g *grouper) finish() *GroupBy {
	in := g.input
	if g.pre != nil {
		in = g.pre
	}
	gb := &GroupBy{Input: in}
	for _, c := range g.groupCols {
		gb.GroupCols = append(gb.GroupCols, c.ID)
		gb.Cols = append(gb.Cols, c)
	}
	gb.Aggs = g.aggs
	gb.Cols = append(gb.Cols, g.aggCols...)
	return gb
}

// qualifiedName is how Postgres names a column in grouping errors:
// always with its relation.
func (g *grouper) qualifiedName(id sem.ColumnID) string {
	if c, ok, _ := findByID(g.s, id); ok {
		if c.rel != "" {
			return c.rel + "." + c.name
		}
		return c.name
	}
	return "?"
}

// groupingError is a 42803 about column col, positioned by the caller,
// which has the expression's AST.
type groupingError struct {
	err error
	col sem.ColumnID
}

func (e *groupingError) Error() string { return e.err.Error() }
func (e *groupingError) Unwrap() error { return e.err }

// position gives a grouping error the position of the first reference to
// its column outside aggregate calls in ast, as Postgres reports it.
func (g *grouper) position(err error, ast *pg_query.Node) error {
	ge, ok := err.(*groupingError)
	if !ok {
		return err
	}
	c, found, _ := findByID(g.s, ge.col)
	if !found || ast == nil {
		return ge.err
	}
	loc := int32(-1)
	walkAST(ast, func(x *pg_query.Node) bool {
		if loc >= 0 {
			return false
		}
		switch v := x.Node.(type) {
		case *pg_query.Node_SubLink:
			return false
		case *pg_query.Node_FuncCall:
			if v.FuncCall.Over == nil && isAggName(funcName(v.FuncCall)) {
				return false
			}
		case *pg_query.Node_ColumnRef:
			f := v.ColumnRef.Fields
			if strVal(f[len(f)-1]) == c.name && (len(f) == 1 || strVal(f[len(f)-2]) == c.rel) {
				loc = v.ColumnRef.Location
			}
		}
		return true
	})
	return g.b.errAt(ge.err, loc)
}
