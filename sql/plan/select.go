package plan

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/jackc/pgerrcode"
	pg_query "github.com/pganalyze/pg_query_go/v6"
	"google.golang.org/protobuf/proto"

	"github.com/cairn-db/cairn/sql/builtins"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
)

// selResult is a bound query expression.
type selResult struct {
	node  Node
	locks bool // FOR UPDATE/SHARE somewhere: not read-only
}

// cteEnv is the WITH clauses in scope, innermost first.
type cteEnv struct {
	parent *cteEnv
	defs   map[string]*cteDef
}

type cteDef struct {
	name         string
	ast          *pg_query.CommonTableExpr
	refs         int
	materialized bool
	// id is the Plan.CTEs slot once built (-1 before).
	id   int
	cols []Column
	// recursive work table in effect while the recursive term binds.
	workID      int
	workCols    []Column
	inRecursion bool
	recursive   bool
	dml         bool // INSERT, UPDATE or DELETE ... RETURNING
	building    bool
	env         *cteEnv // the WITH level it was declared at (what it may see)
	parentScope *scope
}

func (e *cteEnv) lookup(name string) *cteDef {
	for ; e != nil; e = e.parent {
		if d, ok := e.defs[name]; ok {
			return d
		}
	}
	return nil
}

// buildSelect binds a query expression at a new query level below parent;
// outer collects its references to enclosing levels.
func (b *builder) buildSelect(ss *pg_query.SelectStmt, parent *scope, outer *[]sem.ColumnID) (*selResult, error) {
	b.selectDepth++
	defer func() { b.selectDepth-- }()
	s := &scope{b: b, parent: parent, outer: outer}
	if parent != nil {
		s.ctes = parent.ctes
	}
	if ss.WithClause != nil {
		if err := b.bindWith(ss.WithClause, s, ss); err != nil {
			return nil, err
		}
	}
	if ss.IntoClause != nil {
		return nil, notSupported("SELECT INTO is not supported")
	}
	switch {
	case ss.Op != pg_query.SetOperation_SETOP_NONE && ss.Op != pg_query.SetOperation_SET_OPERATION_UNDEFINED:
		r, err := b.buildSetOp(ss, s)
		if err != nil {
			return nil, err
		}
		return b.finishQuery(ss, s, r)
	case len(ss.ValuesLists) > 0:
		r, err := b.buildValues(ss, s)
		if err != nil {
			return nil, err
		}
		return b.finishQuery(ss, s, r)
	}
	return b.buildSimple(ss, s)
}

// finishQuery applies ORDER BY, LIMIT and locking to a set operation or
// VALUES, whose ORDER BY sees only the output columns.
func (b *builder) finishQuery(ss *pg_query.SelectStmt, s *scope, r *selResult) (*selResult, error) {
	if len(ss.SortClause) == 0 && ss.LimitCount == nil && ss.LimitOffset == nil && len(ss.LockingClause) == 0 {
		return r, nil
	}
	if len(ss.LockingClause) > 0 {
		return nil, pgerror.New(pgerrcode.FeatureNotSupported, "FOR UPDATE is not allowed with UNION/INTERSECT/EXCEPT")
	}
	cols := r.node.Columns()
	os := &scope{b: b, parent: s.parent, outer: s.outer, ctes: s.ctes}
	var idx []int
	for _, c := range cols {
		idx = append(idx, os.add(scopeCol{id: c.ID, name: c.Name, t: c.T}))
	}
	os.addRel("", idx)
	var order []Ordering
	for _, it := range ss.SortClause {
		sb := it.GetSortBy()
		var id sem.ColumnID
		if k, ok := ordinal(sb.Node); ok {
			if k < 1 || k > len(cols) {
				return nil, b.errAt(pgerror.New(pgerrcode.InvalidColumnReference, "ORDER BY position %d is not in select list", k), nodeLoc(sb.Node))
			}
			id = cols[k-1].ID
		} else {
			e, err := b.expr(os, "ORDER BY", sb.Node, nil)
			if err != nil {
				return nil, err
			}
			cr, ok := e.(*sem.ColRef)
			if !ok {
				return nil, b.errAt(pgerror.New(pgerrcode.FeatureNotSupported,
					"invalid UNION/INTERSECT/EXCEPT ORDER BY clause").WithDetail("Only result column names can be used, not expressions or functions."), leftLoc(sb.Node))
			}
			id = cr.ID
		}
		order = append(order, sortOrder(id, sb))
	}
	n := r.node
	if len(order) > 0 {
		n = &Sort{Input: n, Order: order}
	}
	var err error
	if n, err = b.applyLimit(ss, s, n, order); err != nil {
		return nil, err
	}
	return &selResult{node: n, locks: r.locks}, nil
}

func sortOrder(id sem.ColumnID, sb *pg_query.SortBy) Ordering {
	o := Ordering{Col: id, Desc: sb.SortbyDir == pg_query.SortByDir_SORTBY_DESC}
	switch sb.SortbyNulls {
	case pg_query.SortByNulls_SORTBY_NULLS_FIRST:
		o.NullsFirst = true
	case pg_query.SortByNulls_SORTBY_NULLS_LAST:
		o.NullsFirst = false
	default:
		// Postgres: NULLs sort as larger than everything, so they come
		// first in a descending sort.
		o.NullsFirst = o.Desc
	}
	return o
}

func (b *builder) applyLimit(ss *pg_query.SelectStmt, s *scope, n Node, order []Ordering) (Node, error) {
	if ss.LimitCount == nil && ss.LimitOffset == nil {
		return n, nil
	}
	l := &Limit{Input: n}
	var err error
	if ss.LimitCount != nil {
		if c := ss.LimitCount.GetAConst(); c != nil && c.Isnull {
			// LIMIT NULL / LIMIT ALL: no limit.
		} else if l.Limit, err = b.limitExpr(s, "LIMIT", ss.LimitCount); err != nil {
			return nil, err
		}
	}
	if ss.LimitOffset != nil {
		if l.Offset, err = b.limitExpr(s, "OFFSET", ss.LimitOffset); err != nil {
			return nil, err
		}
	}
	if ss.LimitOption == pg_query.LimitOption_LIMIT_OPTION_WITH_TIES {
		if len(order) == 0 {
			return nil, pgerror.New(pgerrcode.SyntaxError, "WITH TIES cannot be specified without ORDER BY clause")
		}
		l.WithTies, l.Order = true, order
	}
	if l.Limit == nil && l.Offset == nil && !l.WithTies {
		return n, nil
	}
	return l, nil
}

func (b *builder) limitExpr(s *scope, clause string, n *pg_query.Node) (sem.Expr, error) {
	// LIMIT sees no columns of its own level (42703 names them), but a
	// correlated subquery's LIMIT may use outer columns; keep it simple:
	// no columns at all.
	bc := b.semCtx(nil, clause)
	e, err := b.semBuild(bc, n, types.Int8)
	if err != nil {
		return nil, err
	}
	return e, nil
}

func ordinal(n *pg_query.Node) (int, bool) {
	c := n.GetAConst()
	if c == nil {
		return 0, false
	}
	if iv := c.GetIval(); iv != nil {
		return int(iv.Ival), true
	}
	return 0, false
}

// ---------------------------------------------------------------------------
// WITH.

func (b *builder) bindWith(w *pg_query.WithClause, s *scope, body *pg_query.SelectStmt) error {
	// Each CTE of a plain WITH sees only the ones before it; in WITH
	// RECURSIVE every one sees all of them, itself included.
	env := s.ctes
	all := map[string]*cteDef{}
	var defs []*cteDef
	for _, n := range w.Ctes {
		c := n.GetCommonTableExpr()
		if c == nil {
			continue
		}
		if _, dup := all[c.Ctename]; dup {
			return b.errAt(pgerror.New(pgerrcode.DuplicateAlias, "WITH query name %q specified more than once", c.Ctename), c.Location)
		}
		d := &cteDef{name: c.Ctename, ast: c, id: -1, env: env, parentScope: s,
			materialized: c.Ctematerialized == pg_query.CTEMaterialize_CTEMaterializeAlways}
		switch c.Ctequery.Node.(type) {
		case *pg_query.Node_SelectStmt:
		case *pg_query.Node_InsertStmt, *pg_query.Node_UpdateStmt, *pg_query.Node_DeleteStmt:
			// A data-modifying CTE runs once, materialized; the executor
			// runs it when the query first reads it, so one the query
			// never reads is rejected below (Build) rather than skipped.
			if b.selectDepth > 1 || b.viewDepth > 0 {
				return b.errAt(notSupported("WITH clause containing a data-modifying statement must be at the top level"), c.Location)
			}
			d.dml, d.materialized = true, true
			b.dmlCTEs = append(b.dmlCTEs, d)
		default:
			return b.errAt(notSupported("WITH query %q is not a SELECT or a data-modifying statement", c.Ctename), c.Location)
		}
		all[c.Ctename] = d
		defs = append(defs, d)
		env = &cteEnv{parent: env, defs: map[string]*cteDef{c.Ctename: d}}
	}
	// Count references to decide which CTEs to inline (one reference, not
	// MATERIALIZED) and which to materialize once. The body's WITH clause
	// is walked too, which counts references from one CTE to another.
	walkAST(&pg_query.Node{Node: &pg_query.Node_SelectStmt{SelectStmt: body}}, func(x *pg_query.Node) bool {
		if rv := x.GetRangeVar(); rv != nil && rv.Schemaname == "" {
			if d, ok := all[rv.Relname]; ok {
				d.refs++
			}
		}
		return true
	})
	for _, d := range defs {
		if w.Recursive {
			d.env = env
			if d.isRecursive() {
				d.recursive = true
				// Rebuilt at each reference (each gets its own work table).
				d.materialized = false
				d.refs = 1
			}
		}
	}
	s.ctes = env
	return nil
}

func (d *cteDef) isRecursive() bool {
	self := false
	walkAST(d.ast.Ctequery, func(x *pg_query.Node) bool {
		if rv := x.GetRangeVar(); rv != nil && rv.Schemaname == "" && rv.Relname == d.name {
			self = true
		}
		return !self
	})
	return self
}

// cteRef binds a reference to CTE d in FROM.
func (b *builder) cteRef(d *cteDef, s *scope) (Node, []Column, error) {
	if d.building && !d.inRecursion {
		return nil, nil, pgerror.New(pgerrcode.InvalidRecursion,
			"recursive reference to query %q must not appear within its non-recursive term", d.name)
	}
	if d.inRecursion {
		cols := freshCols(b, d.workCols)
		return &WorkTable{ID: d.workID, Name: d.name, Cols: cols}, cols, nil
	}
	// A CTE sees the CTEs of its WITH (the earlier ones, and itself when
	// recursive) and the query levels around the WITH, never the FROM
	// clause that references it.
	cs := &scope{b: b, parent: d.parentScope.parent, outer: d.parentScope.outer, ctes: d.env}
	if d.materialized || d.refs > 1 {
		if d.id < 0 {
			n, err := b.buildCTEBody(d, cs)
			if err != nil {
				return nil, nil, err
			}
			d.id = len(b.ctes)
			b.ctes = append(b.ctes, n)
			d.cols = n.Columns()
		}
		cols := freshCols(b, d.cols)
		return &CTEScan{ID: d.id, Name: d.name, Cols: cols}, cols, nil
	}
	n, err := b.buildCTEBody(d, cs)
	if err != nil {
		return nil, nil, err
	}
	return n, n.Columns(), nil
}

func freshCols(b *builder, cols []Column) []Column {
	out := make([]Column, len(cols))
	for i, c := range cols {
		c.ID = b.newCol()
		out[i] = c
	}
	return out
}

func (b *builder) buildCTEBody(d *cteDef, cs *scope) (Node, error) {
	d.building = true
	defer func() { d.building = false }()
	if d.dml {
		return b.buildDMLCTE(d)
	}
	ss := d.ast.Ctequery.GetSelectStmt()
	var n Node
	if d.recursive {
		if ss.Op != pg_query.SetOperation_SETOP_UNION || ss.Larg == nil {
			return nil, b.errAt(pgerror.New(pgerrcode.InvalidRecursion,
				"recursive query %q does not have the form non-recursive-term UNION [ALL] recursive-term", d.name), d.ast.Location)
		}
		init, err := b.buildSelect(ss.Larg, cs, cs.outer)
		if err != nil {
			return nil, err
		}
		initN := stripHidden(b, init.node)
		initCols, err := renameCols(initN.Columns(), strList(d.ast.Aliascolnames), d.name)
		if err != nil {
			return nil, err
		}
		b.lastWT++
		d.workID = b.lastWT
		d.workCols = initCols
		d.inRecursion = true
		rec, err := b.buildSelect(ss.Rarg, cs, cs.outer)
		d.inRecursion = false
		if err != nil {
			return nil, err
		}
		// An untyped literal of the recursive term takes the type of the
		// non-recursive term's column.
		for i, lit := range untypedTargets(ss.Rarg) {
			if lit != nil && i < len(initCols) {
				if err := b.retypeLiteral(rec.node, i, lit, initCols[i].T); err != nil {
					return nil, err
				}
			}
		}
		recN := stripHidden(b, rec.node)
		rc := recN.Columns()
		if len(rc) != len(initCols) {
			return nil, pgerror.New(pgerrcode.SyntaxError, "each UNION query must have the same number of columns")
		}
		for i, c := range rc {
			if !c.T.Equivalent(initCols[i].T) {
				// Postgres does not coerce the recursive term: the types
				// must already agree (typmods may differ).
				return nil, pgerror.New(pgerrcode.DatatypeMismatch,
					"recursive query %q column %d has type %s in non-recursive term but type %s overall",
					d.name, i+1, initCols[i].T.Name(), c.T.Name()).
					WithHint("Cast the output of the non-recursive term to the correct type.")
			}
		}
		n = &RecursiveCTE{ID: d.workID, Init: initN, Recursive: recN, UnionAll: ss.All,
			Cols: freshCols(b, initCols)}
		return n, nil
	}
	r, err := b.buildSelect(ss, cs, cs.outer)
	if err != nil {
		return nil, err
	}
	n = stripHidden(b, r.node)
	if len(d.ast.Aliascolnames) > 0 {
		cols, err := renameCols(n.Columns(), strList(d.ast.Aliascolnames), d.name)
		if err != nil {
			return nil, err
		}
		n = &Project{Input: n, Exprs: passThrough(n.Columns()), Cols: withIDs(cols, n.Columns())}
	}
	return n, nil
}

// buildDMLCTE binds WITH x AS (INSERT/UPDATE/DELETE ... RETURNING ...):
// its rows are what RETURNING returns.
func (b *builder) buildDMLCTE(d *cteDef) (Node, error) {
	saved := b.outerCTEs
	b.outerCTEs = d.env
	defer func() { b.outerCTEs = saved }()
	var n Node
	var err error
	var returning bool
	switch x := d.ast.Ctequery.Node.(type) {
	case *pg_query.Node_InsertStmt:
		returning = len(x.InsertStmt.ReturningList) > 0
		n, err = b.buildInsert(x.InsertStmt)
	case *pg_query.Node_UpdateStmt:
		returning = len(x.UpdateStmt.ReturningList) > 0
		n, err = b.buildUpdate(x.UpdateStmt)
	case *pg_query.Node_DeleteStmt:
		returning = len(x.DeleteStmt.ReturningList) > 0
		n, err = b.buildDelete(x.DeleteStmt)
	}
	if err != nil {
		return nil, err
	}
	if !returning {
		return nil, b.errAt(notSupported("WITH query %q does not have a RETURNING clause", d.name), d.ast.Location)
	}
	b.writes = true
	if len(d.ast.Aliascolnames) > 0 {
		cols, err := renameCols(n.Columns(), strList(d.ast.Aliascolnames), d.name)
		if err != nil {
			return nil, err
		}
		n = &Project{Input: n, Exprs: passThrough(n.Columns()), Cols: freshColsLike(b, cols)}
	}
	return n, nil
}

func passThrough(cols []Column) []sem.Expr {
	out := make([]sem.Expr, len(cols))
	for i, c := range cols {
		out[i] = colRef(c)
	}
	return out
}

func withIDs(cols, from []Column) []Column {
	out := append([]Column(nil), cols...)
	for i := range out {
		out[i].ID = from[i].ID
	}
	return out
}

// renameCols applies column aliases (t(a, b)).
func renameCols(cols []Column, aliases []string, rel string) ([]Column, error) {
	out := append([]Column(nil), cols...)
	if len(aliases) > len(out) {
		return nil, pgerror.New(pgerrcode.InvalidColumnReference,
			"table %q has %d columns available but %d columns specified", rel, len(out), len(aliases))
	}
	for i, a := range aliases {
		out[i].Name = a
	}
	return out, nil
}

// ---------------------------------------------------------------------------
// VALUES and set operations.

func (b *builder) buildValues(ss *pg_query.SelectStmt, s *scope) (*selResult, error) {
	rows := make([][]sem.Expr, len(ss.ValuesLists))
	asts := make([][]*pg_query.Node, len(ss.ValuesLists))
	width := -1
	// VALUES in FROM may reference the outer query (LATERAL), so the
	// enclosing levels are visible.
	vs := &scope{b: b, parent: s.parent, outer: s.outer, ctes: s.ctes}
	for i, l := range ss.ValuesLists {
		items := l.GetList().GetItems()
		if width >= 0 && len(items) != width {
			return nil, b.errAt(pgerror.New(pgerrcode.SyntaxError, "VALUES lists must all be the same length"), nodeLoc(items[0]))
		}
		width = len(items)
		asts[i] = items
		rows[i] = make([]sem.Expr, width)
		for j, it := range items {
			if it.GetSetToDefault() != nil {
				return nil, b.errAt(pgerror.New(pgerrcode.FeatureNotSupported, "DEFAULT is not allowed in this context"), nodeLoc(it))
			}
			if isUntypedLiteral(it) {
				continue // typed below, as the column's other rows are
			}
			e, err := b.expr(vs, "VALUES", it, nil)
			if err != nil {
				return nil, err
			}
			rows[i][j] = e
		}
	}
	v := &Values{Rows: rows}
	for j := 0; j < width; j++ {
		var ts []*types.T
		for i := range rows {
			if rows[i][j] != nil {
				ts = append(ts, rows[i][j].Type())
			}
		}
		t := types.Text
		if len(ts) > 0 {
			var err error
			if t, err = types.CommonType("VALUES", ts...); err != nil {
				return nil, err
			}
		}
		for i := range rows {
			var err error
			if rows[i][j] == nil {
				rows[i][j], err = b.expr(vs, "VALUES", asts[i][j], t)
			} else {
				rows[i][j], err = implicitCast(rows[i][j], t)
			}
			if err != nil {
				return nil, err
			}
		}
		v.Cols = append(v.Cols, Column{ID: b.newCol(), Name: "column" + strconv.Itoa(j+1), T: t})
	}
	return &selResult{node: v}, nil
}

// untypedTargets returns, per output column of a plain SELECT, the AST of
// an untyped literal ('x' or NULL) there, nil for other columns; nil when
// the query is not a plain SELECT. Postgres leaves such literals unknown
// until a set operation or an INSERT gives them a type.
func untypedTargets(ss *pg_query.SelectStmt) []*pg_query.Node {
	if ss == nil || ss.Op != pg_query.SetOperation_SETOP_NONE && ss.Op != pg_query.SetOperation_SET_OPERATION_UNDEFINED ||
		len(ss.ValuesLists) > 0 || len(ss.DistinctClause) > 0 {
		return nil
	}
	out := make([]*pg_query.Node, 0, len(ss.TargetList))
	any := false
	for _, tn := range ss.TargetList {
		rt := tn.GetResTarget()
		if rt == nil {
			return nil
		}
		if cr := rt.Val.GetColumnRef(); cr != nil && cr.Fields[len(cr.Fields)-1].GetAStar() != nil {
			return nil
		}
		if isUntypedLiteral(rt.Val) {
			out = append(out, rt.Val)
			any = true
		} else {
			out = append(out, nil)
		}
	}
	if !any {
		return nil
	}
	return out
}

// retypeLiteral rebuilds output column i of a bound plain SELECT, an
// untyped literal, as type t.
func (b *builder) retypeLiteral(n Node, i int, ast *pg_query.Node, t *types.T) error {
	return b.retypeLiteralAs(n, i, ast, t, "")
}

// retypeLiteralAs is retypeLiteral for a value stored in column colName
// (an INSERT's SELECT), with assignment rules, when colName is set.
func (b *builder) retypeLiteralAs(n Node, i int, ast *pg_query.Node, t *types.T, colName string) error {
	for {
		switch v := n.(type) {
		case *Sort:
			n = v.Input
		case *Limit:
			n = v.Input
		case *Project:
			if i >= len(v.Exprs) {
				return nil
			}
			var e sem.Expr
			var err error
			if colName != "" {
				e, err = b.semBuildAssign(b.semCtx(nil, "SELECT"), ast, t, colName)
			} else {
				e, err = b.expr(nil, "SELECT", ast, t)
			}
			if err != nil {
				return err
			}
			v.Exprs[i] = e
			v.Cols[i].T = e.Type()
			return nil
		default:
			return nil
		}
	}
}

// implicitCast coerces e to t (a type the common-type rules chose, so an
// implicit cast exists).
func implicitCast(e sem.Expr, t *types.T) (sem.Expr, error) {
	if e.Type().Identical(t) {
		return e, nil
	}
	if c, ok := e.(*sem.Const); ok && c.Datum == types.DNull {
		return &sem.Const{Datum: types.DNull, T: t}, nil
	}
	return &sem.Cast{Expr: e, To: t, Context: types.CastImplicit}, nil
}

func (b *builder) buildSetOp(ss *pg_query.SelectStmt, s *scope) (*selResult, error) {
	var kind SetOpKind
	var what string
	switch ss.Op {
	case pg_query.SetOperation_SETOP_UNION:
		kind, what = Union, "UNION"
	case pg_query.SetOperation_SETOP_INTERSECT:
		kind, what = Intersect, "INTERSECT"
	default:
		kind, what = Except, "EXCEPT"
	}
	l, err := b.buildSelect(ss.Larg, &scope{b: b, parent: s.parent, outer: s.outer, ctes: s.ctes}, s.outer)
	if err != nil {
		return nil, err
	}
	r, err := b.buildSelect(ss.Rarg, &scope{b: b, parent: s.parent, outer: s.outer, ctes: s.ctes}, s.outer)
	if err != nil {
		return nil, err
	}
	if len(visibleCols(l.node)) != len(visibleCols(r.node)) {
		return nil, pgerror.New(pgerrcode.SyntaxError, "each %s query must have the same number of columns", what)
	}
	// An untyped literal on one side takes the other side's type.
	lu, ru := untypedTargets(ss.Larg), untypedTargets(ss.Rarg)
	lvis, rvis := visibleCols(l.node), visibleCols(r.node)
	for i := range lvis {
		lUn := i < len(lu) && lu[i] != nil
		rUn := i < len(ru) && ru[i] != nil
		switch {
		case lUn && !rUn:
			if err := b.retypeLiteral(l.node, i, lu[i], rvis[i].T); err != nil {
				return nil, err
			}
		case rUn && !lUn:
			if err := b.retypeLiteral(r.node, i, ru[i], lvis[i].T); err != nil {
				return nil, err
			}
		}
	}
	ln, rn := stripHidden(b, l.node), stripHidden(b, r.node)
	lc, rc := ln.Columns(), rn.Columns()
	out := make([]Column, len(lc))
	lcast, rcast := false, false
	le, re := passThrough(lc), passThrough(rc)
	for i := range lc {
		t, err := types.CommonType(what, lc[i].T, rc[i].T)
		if err != nil {
			return nil, err
		}
		if !lc[i].T.Identical(t) {
			le[i], lcast = &sem.Cast{Expr: le[i], To: t, Context: types.CastImplicit}, true
		}
		if !rc[i].T.Identical(t) {
			re[i], rcast = &sem.Cast{Expr: re[i], To: t, Context: types.CastImplicit}, true
		}
		out[i] = Column{ID: b.newCol(), Name: lc[i].Name, T: t}
	}
	if lcast {
		ln = &Project{Input: ln, Exprs: le, Cols: castCols(b, lc, out)}
	}
	if rcast {
		rn = &Project{Input: rn, Exprs: re, Cols: castCols(b, rc, out)}
	}
	return &selResult{node: &SetOp{Kind: kind, All: ss.All, Left: ln, Right: rn, Cols: out},
		locks: l.locks || r.locks}, nil
}

func visibleCols(n Node) []Column {
	var out []Column
	for _, c := range n.Columns() {
		if !c.Hidden {
			out = append(out, c)
		}
	}
	return out
}

func castCols(b *builder, in, out []Column) []Column {
	cols := make([]Column, len(in))
	for i := range in {
		cols[i] = Column{ID: b.newCol(), Name: in[i].Name, T: out[i].T}
	}
	return cols
}

// ---------------------------------------------------------------------------
// SELECT ... FROM ... WHERE ... GROUP BY ... HAVING ... WINDOW ... ORDER BY.

// target is one column of the select list, or a hidden one ORDER BY or
// DISTINCT ON added.
type target struct {
	name   string
	ast    *pg_query.Node
	e      sem.Expr
	hidden bool
	tbl    catalog.ID
	tcol   rowenc.ColumnID
	srfs   []*SetFunc // set-returning calls: e reads their columns
	// aggs and windows are the AST calls of e, for pairing (callsIn).
	aggs, windows []*pg_query.FuncCall
}

// windowSpec is an OVER clause, bound.
type windowSpec struct {
	partition []sem.Expr
	order     []SortExpr
	frame     builtins.Frame
	startOff  sem.Expr
	endOff    sem.Expr
}

func (b *builder) buildSimple(ss *pg_query.SelectStmt, s *scope) (*selResult, error) {
	// grouping() calls become hidden columns of the FROM scope, which the
	// grouping sets' union computes (groupingsets.go).
	var gf *groupingFuncs
	if b.hasGrouping && hasGroupingFunc(append(append([]*pg_query.Node{ss.HavingClause}, ss.TargetList...), ss.SortClause...)...) {
		ss, gf = rewriteGroupingFuncs(ss)
	}
	node, err := b.buildFrom(ss.FromClause, s)
	if err != nil {
		return nil, err
	}
	s.qualify = len(s.rels) > 1
	if ss.WhereClause != nil {
		w, err := b.expr(s, "WHERE", rewriteRowIn(ss.WhereClause), types.Bool)
		if err != nil {
			return nil, err
		}
		node = &Filter{Input: node, Pred: w}
	}
	if gf != nil {
		gf.addToScope(b, s)
	}
	// The select list.
	var targets []*target
	for _, tn := range ss.TargetList {
		rt := tn.GetResTarget()
		if rt == nil {
			continue
		}
		ts, err := b.bindTarget(s, rt)
		if err != nil {
			return nil, err
		}
		targets = append(targets, ts...)
	}
	nVisible := len(targets)
	// Named windows.
	named := map[string]*pg_query.WindowDef{}
	for _, wn := range ss.WindowClause {
		wd := wn.GetWindowDef()
		if _, dup := named[wd.Name]; dup {
			return nil, b.errAt(pgerror.New(pgerrcode.WindowingError, "window %q is already defined", wd.Name), wd.Location)
		}
		named[wd.Name] = wd
	}
	// GROUP BY.
	var groupExprs []sem.Expr
	var gsets *groupingSets
	var gargs [][]int
	hasSets := false
	for _, g := range ss.GroupClause {
		hasSets = hasSets || g.GetGroupingSet() != nil
	}
	if hasSets || gf != nil {
		if gsets, err = b.expandGroupBy(s, ss.GroupClause, targets[:nVisible], ss.GroupDistinct); err != nil {
			return nil, err
		}
		groupExprs = gsets.items
		if gf != nil {
			if gargs, err = b.bindGroupingArgs(s, gf, gsets); err != nil {
				return nil, err
			}
		}
	}
	for _, g := range ss.GroupClause {
		if gsets != nil {
			break
		}
		e, err := b.groupItem(s, g, targets[:nVisible])
		if err != nil {
			return nil, err
		}
		groupExprs = append(groupExprs, e)
	}
	var having sem.Expr
	var havingAggs []*pg_query.FuncCall
	if ss.HavingClause != nil {
		bc := b.semCtx(s, "HAVING")
		bc.AllowAggregates = true
		if having, err = b.semBuild(bc, rewriteRowIn(ss.HavingClause), types.Bool); err != nil {
			return nil, err
		}
		havingAggs, _ = callsIn(ss.HavingClause)
	}
	// DISTINCT.
	distinct := len(ss.DistinctClause) > 0
	var distinctOn []int
	if distinct && ss.DistinctClause[0] != nil && ss.DistinctClause[0].Node != nil {
		for _, dn := range ss.DistinctClause {
			i, err := b.orderTarget(s, dn, &targets, nVisible, false)
			if err != nil {
				return nil, err
			}
			distinctOn = append(distinctOn, i)
		}
	}
	// ORDER BY.
	type ord struct {
		t  int
		sb *pg_query.SortBy
	}
	var order []ord
	for _, it := range ss.SortClause {
		sb := it.GetSortBy()
		if sb.SortbyDir == pg_query.SortByDir_SORTBY_USING {
			return nil, b.errAt(notSupported("ORDER BY USING is not supported"), sb.Location)
		}
		i, err := b.orderTarget(s, sb.Node, &targets, nVisible, true)
		if err != nil {
			return nil, err
		}
		if distinct && i >= nVisible && len(distinctOn) == 0 {
			return nil, b.errAt(pgerror.New(pgerrcode.InvalidColumnReference,
				"for SELECT DISTINCT, ORDER BY expressions must appear in select list"), nodeLoc(sb.Node))
		}
		order = append(order, ord{i, sb})
	}
	if len(distinctOn) > 0 && len(order) > 0 {
		// DISTINCT ON expressions must match the leading ORDER BY ones.
		n := len(order)
		if len(distinctOn) < n {
			n = len(distinctOn)
		}
		for k := 0; k < n; k++ {
			found := false
			for _, d := range distinctOn {
				if d == order[k].t {
					found = true
				}
			}
			if !found {
				return nil, b.errAt(pgerror.New(pgerrcode.InvalidColumnReference,
					"SELECT DISTINCT ON expressions must match initial ORDER BY expressions"), nodeLoc(ss.DistinctClause[0]))
			}
		}
	}

	// Window definitions of every window call, bound over the FROM row.
	specs := map[*pg_query.FuncCall]*windowSpec{}
	var specExprs []*sem.Expr // partition/order exprs, for the aggregate mapping
	for _, t := range targets {
		for _, fc := range t.windows {
			sp, err := b.bindWindow(s, fc.Over, named)
			if err != nil {
				return nil, err
			}
			specs[fc] = sp
			for i := range sp.partition {
				specExprs = append(specExprs, &sp.partition[i])
			}
			for i := range sp.order {
				specExprs = append(specExprs, &sp.order[i].Expr)
			}
		}
	}

	// Aggregation.
	hasAgg := having != nil || len(groupExprs) > 0 || gsets != nil
	for _, t := range targets {
		if aggCount(t.e) > 0 || srfAgg(t.srfs) {
			hasAgg = true
		}
	}
	for _, p := range specExprs {
		if aggCount(*p) > 0 {
			hasAgg = true
		}
	}
	if hasAgg {
		g := &grouper{b: b, s: s}
		if node, err = g.build(node, groupExprs); err != nil {
			return nil, err
		}
		if gf != nil {
			for _, id := range gf.ids {
				g.allowed[id] = true
			}
		}
		for _, t := range targets {
			if t.e, err = g.mapExpr(t.e, t.aggs); err != nil {
				return nil, g.position(err, t.ast)
			}
			for _, f := range t.srfs {
				for i, a := range f.Call.Args {
					if f.Call.Args[i], err = g.mapExpr(a, nil); err != nil {
						return nil, err
					}
				}
			}
		}
		for _, p := range specExprs {
			if *p, err = g.mapExpr(*p, nil); err != nil {
				return nil, err
			}
		}
		if having != nil {
			if having, err = g.mapExpr(having, havingAggs); err != nil {
				return nil, g.position(err, ss.HavingClause)
			}
		}
		gb := g.finish()
		node = gb
		if gsets != nil {
			var remap map[sem.ColumnID]sem.Expr
			var partial map[sem.ColumnID]bool
			rebuild := func() (Node, error) { return b.rebuildFromWhere(ss, s) }
			if node, remap, partial, err = b.groupingUnion(gb, g, gsets, gf, gargs, rebuild); err != nil {
				return nil, err
			}
			if len(partial) > 0 {
				for _, t := range targets {
					if err := g.partialRef(t.e, partial); err != nil {
						return nil, g.position(err, t.ast)
					}
				}
				if having != nil {
					if err := g.partialRef(having, partial); err != nil {
						return nil, g.position(err, ss.HavingClause)
					}
				}
			}
			for _, t := range targets {
				t.e = substitute(t.e, remap)
				for _, f := range t.srfs {
					f.Call.Args = substituteAll(f.Call.Args, remap)
				}
			}
			for _, p := range specExprs {
				*p = substitute(*p, remap)
			}
			if having != nil {
				having = substitute(having, remap)
			}
		}
		if having != nil {
			node = &Filter{Input: node, Pred: having}
		}
	}

	// Window functions.
	var win *Window
	for _, t := range targets {
		if len(t.windows) == 0 {
			continue
		}
		if win == nil {
			win = &Window{Input: node, Cols: append([]Column(nil), node.Columns()...)}
		}
		k := 0
		var ferr error
		t.e = sem.Map(t.e, func(x sem.Expr) sem.Expr {
			ac, ok := x.(*sem.AggCall)
			if !ok || !ac.Window || ferr != nil {
				return x
			}
			// Pair with the next OVER clause of this function's name (a
			// call folded away leaves its clause unpaired).
			k = pairCall(t.windows, k, ac.Name)
			if k >= len(t.windows) {
				ferr = notSupported("window function call could not be matched to its OVER clause")
				return x
			}
			sp := specs[t.windows[k]]
			k++
			wf := WindowFunc{Fn: ac.Fn, Name: ac.Name, Args: ac.Args, Filter: ac.Filter,
				PartitionBy: sp.partition, OrderBy: sp.order, Frame: sp.frame,
				FrameStartOffset: sp.startOff, FrameEndOffset: sp.endOff}
			win.Funcs = append(win.Funcs, wf)
			c := Column{ID: b.newCol(), Name: ac.String(), T: ac.Type()}
			win.Cols = append(win.Cols, c)
			return &sem.ColRef{ID: c.ID, T: c.T, Name: ac.String()}
		})
		if ferr != nil {
			return nil, ferr
		}
	}
	if win != nil {
		node = win
	}

	// Set-returning functions of the select list.
	var ps *ProjectSet
	for _, t := range targets {
		for _, f := range t.srfs {
			if ps == nil {
				ps = &ProjectSet{Input: node, Cols: append([]Column(nil), node.Columns()...)}
			}
			ps.Funcs = append(ps.Funcs, *f)
			ps.Cols = append(ps.Cols, f.Cols...)
		}
	}
	if ps != nil {
		node = ps
	}

	// The projection.
	proj := &Project{Input: node}
	seen := map[sem.ColumnID]bool{}
	for _, t := range targets {
		c := Column{Name: t.name, T: t.e.Type(), Hidden: t.hidden, Table: t.tbl, TableCol: t.tcol}
		if cr, ok := t.e.(*sem.ColRef); ok && !seen[cr.ID] {
			c.ID = cr.ID
		} else {
			c.ID = b.newCol()
		}
		seen[c.ID] = true
		proj.Exprs = append(proj.Exprs, t.e)
		proj.Cols = append(proj.Cols, c)
	}
	node = proj

	var ordering []Ordering
	for _, o := range order {
		ordering = append(ordering, sortOrder(proj.Cols[o.t].ID, o.sb))
	}
	switch {
	case len(distinctOn) > 0:
		on := make([]sem.ColumnID, len(distinctOn))
		for i, d := range distinctOn {
			on[i] = proj.Cols[d].ID
		}
		if len(ordering) > 0 {
			node = &Sort{Input: node, Order: ordering}
		}
		node = &Distinct{Input: node, On: on}
	case distinct:
		// Hidden columns are ORDER BY keys, which DISTINCT requires to be
		// in the select list: distinct on the visible ones.
		d := &Distinct{Input: node}
		if len(targets) > nVisible {
			for i := 0; i < nVisible; i++ {
				d.On = append(d.On, proj.Cols[i].ID)
			}
		}
		node = d
		if len(ordering) > 0 {
			node = &Sort{Input: node, Order: ordering}
		}
	default:
		if len(ordering) > 0 {
			node = &Sort{Input: node, Order: ordering}
		}
	}
	if node, err = b.applyLimit(ss, s, node, ordering); err != nil {
		return nil, err
	}
	locks := false
	if len(ss.LockingClause) > 0 {
		if hasAgg || distinct || win != nil {
			what := "GROUP BY clause"
			if distinct {
				what = "DISTINCT clause"
			} else if win != nil {
				what = "window functions"
			} else if len(groupExprs) == 0 {
				what = "aggregate functions"
			}
			return nil, pgerror.New(pgerrcode.FeatureNotSupported, "FOR UPDATE is not allowed with %s", what)
		}
		if err := b.applyLocks(ss.LockingClause, s, proj); err != nil {
			return nil, err
		}
		locks = true
		b.writes = true // row locks are writes (intents), wherever they are
	}
	return &selResult{node: node, locks: locks}, nil
}

func srfAgg(fs []*SetFunc) bool {
	for _, f := range fs {
		if anyAgg(f.Call.Args) {
			return true
		}
	}
	return false
}

// hasSRF says whether n calls a set-returning function outside subqueries.
func hasSRF(n *pg_query.Node) bool {
	found := false
	walkAST(n, func(x *pg_query.Node) bool {
		switch v := x.Node.(type) {
		case *pg_query.Node_SubLink:
			return false
		case *pg_query.Node_FuncCall:
			if v.FuncCall.Over == nil && isGeneratorName(funcName(v.FuncCall)) {
				found = true
			}
		}
		return !found
	})
	return found
}

// srfScope resolves the placeholders bindTarget put where set-returning
// calls were, and everything else through the FROM scope.
type srfScope struct {
	sem.Scope
	cols map[string]Column
}

func (s *srfScope) Resolve(fields []string) (sem.ColumnID, *types.T, string, error) {
	if len(fields) == 1 {
		if c, ok := s.cols[fields[0]]; ok {
			return c.ID, c.T, c.Name, nil
		}
	}
	return s.Scope.Resolve(fields)
}

func anyAgg(es []sem.Expr) bool {
	for _, e := range es {
		if aggCount(e) > 0 {
			return true
		}
	}
	return false
}

// aggCount counts the plain (non-window) aggregate calls in e, including
// those inside window calls' arguments.
func aggCount(e sem.Expr) int {
	n := 0
	for _, a := range sem.Aggregates(e) {
		if !a.Window {
			n++
		}
	}
	return n
}

// bindTarget binds one select-list entry (* expands to several).
func (b *builder) bindTarget(s *scope, rt *pg_query.ResTarget) ([]*target, error) {
	if cr := rt.Val.GetColumnRef(); cr != nil {
		last := cr.Fields[len(cr.Fields)-1]
		if last.GetAStar() != nil {
			return b.expandStar(s, cr)
		}
	}
	if len(rt.Indirection) > 0 {
		return nil, b.errAt(notSupported("select list indirection is not supported"), rt.Location)
	}
	t := &target{ast: rt.Val, name: rt.Name}
	if t.name == "" {
		t.name = figureColname(rt.Val)
	}
	val := rt.Val
	var scope sem.Scope = s
	simple := false
	switch val.Node.(type) {
	case *pg_query.Node_ColumnRef, *pg_query.Node_AConst, *pg_query.Node_ParamRef:
		// Nothing to walk for (the common case of simple statements).
		simple = true
	}
	if !simple && hasSRF(val) {
		// Set-returning calls become columns of a ProjectSet below the
		// projection: bind each, and the rest of the expression over a
		// copy of the AST where each call is a reference to its column.
		val = proto.Clone(val).(*pg_query.Node)
		ss := &srfScope{Scope: s, cols: map[string]Column{}}
		var ferr error
		walkAST(val, func(x *pg_query.Node) bool {
			if ferr != nil {
				return false
			}
			switch v := x.Node.(type) {
			case *pg_query.Node_SubLink:
				return false
			case *pg_query.Node_FuncCall:
				fc := v.FuncCall
				if fc.Over != nil || !isGeneratorName(funcName(fc)) {
					return true
				}
				for _, a := range fc.Args {
					if hasSRF(a) {
						ferr = b.errAt(notSupported("nested set-returning functions are not supported"), fc.Location)
						return false
					}
				}
				call, cols, err := b.bindSRF(s, fc, "SELECT")
				if err != nil {
					ferr = err
					return false
				}
				t.srfs = append(t.srfs, &SetFunc{Call: call, Cols: cols})
				// Each output column becomes a placeholder reference; a
				// function of several columns (a composite result, as
				// pgjdbc's _pg_expandarray) is the record of them, named
				// as its columns are, which (f(...)).col reads.
				refs := make([]*pg_query.Node, len(cols))
				names := make([]*pg_query.Node, len(cols))
				for i, c := range cols {
					name := fmt.Sprintf("\x00srf%d", len(ss.cols))
					ss.cols[name] = c
					refs[i] = &pg_query.Node{Node: &pg_query.Node_ColumnRef{ColumnRef: &pg_query.ColumnRef{
						Fields: []*pg_query.Node{pg_query.MakeStrNode(name)}, Location: fc.Location}}}
					names[i] = pg_query.MakeStrNode(c.Name)
				}
				if len(refs) == 1 {
					x.Node = refs[0].Node
				} else {
					x.Node = &pg_query.Node_RowExpr{RowExpr: &pg_query.RowExpr{Args: refs, Colnames: names,
						RowFormat: pg_query.CoercionForm_COERCE_IMPLICIT_CAST, Location: fc.Location}}
				}
				return false
			}
			return true
		})
		if ferr != nil {
			return nil, ferr
		}
		scope = ss
	}
	bc := b.semCtx(s, "SELECT")
	bc.Scope = scope
	bc.AllowAggregates, bc.AllowWindows = true, true
	e, err := b.semBuild(bc, val, nil)
	if err != nil {
		return nil, err
	}
	t.e = e
	if !simple {
		t.aggs, t.windows = callsIn(val)
	}
	if cr, ok := e.(*sem.ColRef); ok {
		if c, found, _ := findByID(s, cr.ID); found {
			t.tbl, t.tcol = c.tbl, c.tcol
		}
	}
	return []*target{t}, nil
}

func (b *builder) expandStar(s *scope, cr *pg_query.ColumnRef) ([]*target, error) {
	var cols []scopeCol
	if len(cr.Fields) == 1 {
		if len(s.rels) == 0 {
			return nil, b.errAt(pgerror.New(pgerrcode.SyntaxError, "SELECT * with no tables specified is not valid"), cr.Location)
		}
		cols = s.starCols()
	} else {
		q := strVal(cr.Fields[len(cr.Fields)-2])
		var r *rel
		for _, x := range s.rels {
			if x.alias == q {
				r = x
			}
		}
		if r == nil {
			return nil, b.errAt(sem.ErrMissingFrom(q), cr.Location)
		}
		for _, i := range r.cols {
			if !s.cols[i].hidden {
				cols = append(cols, s.cols[i])
			}
		}
	}
	out := make([]*target, len(cols))
	for i, c := range cols {
		out[i] = &target{name: c.name, e: &sem.ColRef{ID: c.id, T: c.t, Name: s.printName(&c)},
			tbl: c.tbl, tcol: c.tcol}
	}
	return out, nil
}

// groupItem binds one GROUP BY item: an output-column ordinal, an output
// column name that is not an input column, or an expression.
func (b *builder) groupItem(s *scope, g *pg_query.Node, targets []*target) (sem.Expr, error) {
	if k, ok := ordinal(g); ok {
		if k < 1 || k > len(targets) {
			return nil, b.errAt(pgerror.New(pgerrcode.InvalidColumnReference, "GROUP BY position %d is not in select list", k), nodeLoc(g))
		}
		t := targets[k-1]
		if aggCount(t.e) > 0 {
			return nil, b.errAt(pgerror.New(pgerrcode.GroupingError, "aggregate functions are not allowed in GROUP BY"), nodeLoc(g))
		}
		return t.e, nil
	}
	if cr := g.GetColumnRef(); cr != nil && len(cr.Fields) == 1 {
		name := strVal(cr.Fields[0])
		if _, found, _ := s.lookup([]string{name}); !found {
			for _, t := range targets {
				if t.name == name {
					if aggCount(t.e) > 0 {
						return nil, b.errAt(pgerror.New(pgerrcode.GroupingError, "aggregate functions are not allowed in GROUP BY"), nodeLoc(g))
					}
					return t.e, nil
				}
			}
		}
	}
	return b.expr(s, "GROUP BY", g, nil)
}

// orderTarget resolves an ORDER BY or DISTINCT ON item to a target index,
// adding a hidden target for an expression not in the select list.
func (b *builder) orderTarget(s *scope, n *pg_query.Node, targets *[]*target, nVisible int, isOrder bool) (int, error) {
	clause := "ORDER BY"
	if !isOrder {
		clause = "DISTINCT ON"
	}
	if k, ok := ordinal(n); ok {
		if k < 1 || k > nVisible {
			return 0, b.errAt(pgerror.New(pgerrcode.InvalidColumnReference, "%s position %d is not in select list", clause, k), nodeLoc(n))
		}
		return k - 1, nil
	}
	if cr := n.GetColumnRef(); cr != nil && len(cr.Fields) == 1 && cr.Fields[0].GetString_() != nil {
		// An output column name wins over an input column (ORDER BY
		// only; Postgres's SQL92 rule).
		name := strVal(cr.Fields[0])
		hit := -1
		for i := 0; i < nVisible; i++ {
			if (*targets)[i].name == name {
				if hit >= 0 && !sameExpr((*targets)[hit].e, (*targets)[i].e) {
					return 0, b.errAt(pgerror.New(pgerrcode.AmbiguousColumn, "%s %q is ambiguous", clause, name), cr.Location)
				}
				if hit < 0 {
					hit = i
				}
			}
		}
		if hit >= 0 {
			return hit, nil
		}
	}
	bc := b.semCtx(s, clause)
	bc.AllowAggregates, bc.AllowWindows = true, isOrder
	e, err := b.semBuild(bc, n, nil)
	if err != nil {
		return 0, err
	}
	for i, t := range *targets {
		if len(t.srfs) == 0 && sameExpr(t.e, e) {
			return i, nil
		}
	}
	t := &target{name: figureColname(n), ast: n, e: e, hidden: true}
	t.aggs, t.windows = callsIn(n)
	*targets = append(*targets, t)
	return len(*targets) - 1, nil
}

func sameExpr(a, b sem.Expr) bool {
	if ca, ok := a.(*sem.ColRef); ok {
		cb, ok := b.(*sem.ColRef)
		return ok && ca.ID == cb.ID
	}
	return a.Type().Identical(b.Type()) && a.String() == b.String() && !hasVolatile(a)
}

func hasVolatile(e sem.Expr) bool {
	v := false
	sem.Walk(e, func(x sem.Expr) bool {
		switch f := x.(type) {
		case *sem.FuncCall:
			if f.Fn.Overload.Volatility == builtins.Volatile {
				v = true
			}
		case *sem.SubqueryRef:
			v = true
		}
		return !v
	})
	return v
}

// bindSRF binds a set-returning function call: sem.Build rejects them, so
// the arguments are built here and the overload resolved with untyped
// string literals left unknown, as Postgres resolves them.
func (b *builder) bindSRF(s *scope, fc *pg_query.FuncCall, clause string) (*sem.FuncCall, []Column, error) {
	// In the select list the arguments may aggregate (generate_series(1,
	// count(*))); in FROM they may not.
	build := func(a *pg_query.Node, want *types.T) (sem.Expr, error) {
		bc := b.semCtx(s, clause)
		bc.AllowAggregates = clause == "SELECT"
		return b.semBuild(bc, a, want)
	}
	if fc.AggDistinct || fc.AggFilter != nil || len(fc.AggOrder) > 0 || fc.AggStar {
		return nil, nil, b.errAt(pgerror.New(pgerrcode.WrongObjectType, "%s is not an aggregate function", funcName(fc)), fc.Location)
	}
	if fc.FuncVariadic {
		return nil, nil, b.errAt(notSupported("VARIADIC is not supported"), fc.Location)
	}
	name := funcName(fc)
	// Named arguments (get_rebalance_table_shards_plan(threshold => 0.2))
	// as in an expression (sem's buildCallArgs): after the positional
	// ones, each name once; the parameters none supplies take their
	// defaults.
	argTypes := make([]*types.T, len(fc.Args))
	argNodes := make([]*pg_query.Node, len(fc.Args))
	names := make([]string, len(fc.Args))
	for i, a := range fc.Args {
		if na := a.GetNamedArgExpr(); na != nil {
			if slices.Contains(names[:i], na.Name) {
				return nil, nil, b.errAt(pgerror.New(pgerrcode.SyntaxError, "argument name \"%s\" used more than once", na.Name), na.Location)
			}
			names[i], a = na.Name, na.Arg
		} else if i > 0 && names[i-1] != "" {
			return nil, nil, b.errAt(pgerror.New(pgerrcode.SyntaxError, "positional argument cannot follow named argument"), fc.Location)
		}
		argNodes[i] = a
		if isUntypedLiteral(a) {
			argTypes[i] = types.Unknown
			continue
		}
		e, err := build(a, nil)
		if err != nil {
			return nil, nil, err
		}
		argTypes[i] = e.Type()
	}
	res, err := builtins.ResolveFuncNamed(name, argTypes, names)
	if err != nil {
		return nil, nil, b.errAt(err, fc.Location)
	}
	var args []sem.Expr
	if res.Order == nil {
		args = make([]sem.Expr, len(argNodes))
		for i, a := range argNodes {
			if args[i], err = build(a, res.ArgTypes[i]); err != nil {
				return nil, nil, err
			}
		}
	} else {
		o := res.Overload
		args = make([]sem.Expr, len(res.Order))
		for p, i := range res.Order {
			if i < 0 {
				args[p] = &sem.Const{Datum: o.Defaults[p-(len(o.Args)-len(o.Defaults))], T: res.ArgTypes[p]}
				continue
			}
			if args[p], err = build(argNodes[i], res.ArgTypes[p]); err != nil {
				return nil, nil, err
			}
		}
	}
	call := &sem.FuncCall{Fn: res, Args: args}
	var cols []Column
	if res.Overload.Class == builtins.Generator && res.Overload.Columns != nil {
		for _, c := range res.Overload.Columns(res.ArgTypes) {
			cols = append(cols, Column{ID: b.newCol(), Name: c.Name, T: c.Type})
		}
	} else {
		cols = []Column{{ID: b.newCol(), Name: res.Overload.Name(), T: res.Return}}
	}
	return call, cols, nil
}

func isUntypedLiteral(n *pg_query.Node) bool {
	c := n.GetAConst()
	return c != nil && (c.Isnull || c.GetSval() != nil)
}

// bindWindow binds an OVER clause, following a named window reference.
func (b *builder) bindWindow(s *scope, wd *pg_query.WindowDef, named map[string]*pg_query.WindowDef) (*windowSpec, error) {
	if wd.Name != "" && wd.Refname == "" && len(wd.PartitionClause) == 0 && len(wd.OrderClause) == 0 && wd.FrameOptions&frameNonDefault == 0 {
		// OVER w
		ref, ok := named[wd.Name]
		if !ok {
			return nil, b.errAt(pgerror.New(pgerrcode.UndefinedObject, "window %q does not exist", wd.Name), wd.Location)
		}
		wd = ref
	}
	partition, orderBy, frameOpts := wd.PartitionClause, wd.OrderClause, wd.FrameOptions
	startOff, endOff := wd.StartOffset, wd.EndOffset
	if wd.Refname != "" {
		ref, ok := named[wd.Refname]
		if !ok {
			return nil, b.errAt(pgerror.New(pgerrcode.UndefinedObject, "window %q does not exist", wd.Refname), wd.Location)
		}
		if len(partition) > 0 {
			return nil, b.errAt(pgerror.New(pgerrcode.WindowingError, "cannot override PARTITION BY clause of window %q", wd.Refname), wd.Location)
		}
		partition = ref.PartitionClause
		if len(ref.OrderClause) > 0 {
			if len(orderBy) > 0 {
				return nil, b.errAt(pgerror.New(pgerrcode.WindowingError, "cannot override ORDER BY clause of window %q", wd.Refname), wd.Location)
			}
			orderBy = ref.OrderClause
		}
		if ref.FrameOptions&frameNonDefault != 0 {
			return nil, b.errAt(pgerror.New(pgerrcode.WindowingError, "cannot copy window %q because it has a frame clause", wd.Refname), wd.Location)
		}
	}
	sp := &windowSpec{frame: builtins.DefaultFrame}
	bc := b.semCtx(s, "window definition")
	bc.AllowAggregates = true
	for _, p := range partition {
		e, err := b.semBuild(bc, p, nil)
		if err != nil {
			return nil, err
		}
		sp.partition = append(sp.partition, e)
	}
	for _, o := range orderBy {
		sb := o.GetSortBy()
		e, err := b.semBuild(bc, sb.Node, nil)
		if err != nil {
			return nil, err
		}
		so := sortOrder(0, sb)
		sp.order = append(sp.order, SortExpr{Expr: e, Desc: so.Desc, NullsFirst: so.NullsFirst})
	}
	if frameOpts&frameNonDefault == 0 {
		return sp, nil
	}
	switch {
	case frameOpts&frameExcludeCurrentRow != 0:
		sp.frame.Exclude = builtins.ExcludeCurrentRow
	case frameOpts&frameExcludeGroup != 0:
		sp.frame.Exclude = builtins.ExcludeGroup
	case frameOpts&frameExcludeTies != 0:
		sp.frame.Exclude = builtins.ExcludeTies
	}
	switch {
	case frameOpts&frameGroups != 0:
		if len(sp.order) == 0 {
			return nil, b.errAt(pgerror.New(pgerrcode.WindowingError, "GROUPS mode requires an ORDER BY clause"), wd.Location)
		}
		sp.frame.Mode = builtins.Groups
	case frameOpts&frameRows != 0:
		sp.frame.Mode = builtins.Rows
	default:
		sp.frame.Mode = builtins.Range
	}
	bound := func(start bool) (builtins.Bound, sem.Expr, error) {
		sh := 0
		if !start {
			sh = 1
		}
		var bd builtins.Bound
		off := startOff
		if !start {
			off = endOff
		}
		switch {
		case frameOpts&(frameStartUnboundedPreceding<<sh) != 0:
			bd.Kind = builtins.UnboundedPreceding
		case frameOpts&(frameStartUnboundedFollowing<<sh) != 0:
			bd.Kind = builtins.UnboundedFollowing
		case frameOpts&(frameStartCurrentRow<<sh) != 0:
			bd.Kind = builtins.CurrentRow
		case frameOpts&(frameStartOffsetPreceding<<sh) != 0:
			bd.Kind = builtins.OffsetPreceding
		case frameOpts&(frameStartOffsetFollowing<<sh) != 0:
			bd.Kind = builtins.OffsetFollowing
		default:
			bd.Kind = builtins.CurrentRow
		}
		if bd.Kind != builtins.OffsetPreceding && bd.Kind != builtins.OffsetFollowing {
			return bd, nil, nil
		}
		want := types.Int8
		if sp.frame.Mode == builtins.Range {
			if len(sp.order) != 1 {
				return bd, nil, b.errAt(pgerror.New(pgerrcode.WindowingError,
					"RANGE with offset PRECEDING/FOLLOWING requires exactly one ORDER BY column"), wd.Location)
			}
			want = nil
			switch sp.order[0].Expr.Type().Family {
			case types.IntFamily, types.FloatFamily, types.NumericFamily:
				want = sp.order[0].Expr.Type()
			default:
				want = types.Interval
			}
		}
		e, err := b.expr(nil, "window definition", off, want)
		if err != nil {
			return bd, nil, err
		}
		if c, ok := e.(*sem.Const); ok {
			if c.Datum == types.DNull {
				return bd, nil, pgerror.New(pgerrcode.NullValueNotAllowedDataException, "frame starting offset must not be null")
			}
			bd.Offset = c.Datum
			return bd, nil, nil
		}
		return bd, e, nil
	}
	var err error
	if sp.frame.Start, sp.startOff, err = bound(true); err != nil {
		return nil, err
	}
	if frameOpts&frameBetween != 0 {
		if sp.frame.End, sp.endOff, err = bound(false); err != nil {
			return nil, err
		}
	} else {
		sp.frame.End = builtins.Bound{Kind: builtins.CurrentRow}
	}
	return sp, nil
}

// The FRAMEOPTION_* bits of Postgres's parsenodes.h.
const (
	frameNonDefault              = 0x00001
	frameRange                   = 0x00002
	frameRows                    = 0x00004
	frameGroups                  = 0x00008
	frameBetween                 = 0x00010
	frameStartUnboundedPreceding = 0x00020
	frameStartUnboundedFollowing = 0x00080
	frameStartCurrentRow         = 0x00200
	frameStartOffsetPreceding    = 0x00800
	frameStartOffsetFollowing    = 0x02000
	frameExcludeCurrentRow       = 0x08000
	frameExcludeGroup            = 0x10000
	frameExcludeTies             = 0x20000
)

// The end-bound bits are the start-bound bits shifted left by one, which
// bindWindow relies on.
var _ = [1]int{}[(0x00040>>1)-frameStartUnboundedPreceding]

// applyLocks marks the scans of this level FOR UPDATE/SHARE.
func (b *builder) applyLocks(clauses []*pg_query.Node, s *scope, n Node) error {
	for _, cn := range clauses {
		lc := cn.GetLockingClause()
		var st LockStrength
		switch lc.Strength {
		case pg_query.LockClauseStrength_LCS_FORKEYSHARE:
			st = LockForKeyShare
		case pg_query.LockClauseStrength_LCS_FORSHARE:
			st = LockForShare
		case pg_query.LockClauseStrength_LCS_FORNOKEYUPDATE:
			st = LockForNoKeyUpdate
		default:
			st = LockForUpdate
		}
		wait := LockWaitBlock
		switch lc.WaitPolicy {
		case pg_query.LockWaitPolicy_LockWaitSkip:
			wait = LockWaitSkip
		case pg_query.LockWaitPolicy_LockWaitError:
			wait = LockWaitError
		}
		names := map[string]bool{}
		for _, r := range lc.LockedRels {
			rv := r.GetRangeVar()
			if !s.hasRel(rv.Relname) {
				return b.errAt(pgerror.New(pgerrcode.UndefinedTable,
					"relation %q in FOR UPDATE clause not found in FROM clause", rv.Relname), rv.Location)
			}
			names[rv.Relname] = true
		}
		lockScans(n, func(sc *Scan) {
			if len(names) > 0 {
				alias := sc.Table.Name
				if len(sc.Cols) > 0 {
					if c, ok, _ := findByID(s, sc.Cols[0].ID); ok {
						alias = c.rel
					}
				}
				if !names[alias] {
					return
				}
			}
			if st > sc.Lock {
				sc.Lock = st
			}
			if wait > sc.LockWait {
				sc.LockWait = wait
			}
		})
	}
	return nil
}

// lockScans visits the scans of one query level (not subqueries'); CTE
// bodies are separate plans and never locked.
func lockScans(n Node, f func(*Scan)) {
	switch x := n.(type) {
	case *Scan:
		f(x)
	case *Filter:
		lockScans(x.Input, f)
	case *Project:
		lockScans(x.Input, f)
	case *Join:
		lockScans(x.Left, f)
		lockScans(x.Right, f)
	case *Sort:
		lockScans(x.Input, f)
	case *Limit:
		lockScans(x.Input, f)
	case *ProjectSet:
		lockScans(x.Input, f)
	}
}

// figureColname names a select-list column as Postgres's
// FigureColname does.
func figureColname(n *pg_query.Node) string {
	name, _ := figureColnameStrength(n)
	if name == "" {
		return "?column?"
	}
	return name
}

func figureColnameStrength(n *pg_query.Node) (string, int) {
	if n == nil {
		return "", 0
	}
	switch x := n.Node.(type) {
	case *pg_query.Node_ColumnRef:
		f := x.ColumnRef.Fields
		if s := f[len(f)-1].GetString_(); s != nil {
			return s.Sval, 2
		}
	case *pg_query.Node_AIndirection:
		for i := len(x.AIndirection.Indirection) - 1; i >= 0; i-- {
			if s := x.AIndirection.Indirection[i].GetString_(); s != nil {
				return s.Sval, 2
			}
		}
		return figureColnameStrength(x.AIndirection.Arg)
	case *pg_query.Node_FuncCall:
		return funcName(x.FuncCall), 2
	case *pg_query.Node_AExpr:
		if x.AExpr.Kind == pg_query.A_Expr_Kind_AEXPR_NULLIF {
			return "nullif", 2
		}
	case *pg_query.Node_TypeCast:
		if name, st := figureColnameStrength(x.TypeCast.Arg); st > 1 {
			return name, st
		}
		if tn := x.TypeCast.TypeName; tn != nil && len(tn.Names) > 0 {
			return strVal(tn.Names[len(tn.Names)-1]), 1
		}
	case *pg_query.Node_CollateClause:
		return figureColnameStrength(x.CollateClause.Arg)
	case *pg_query.Node_SubLink:
		switch x.SubLink.SubLinkType {
		case pg_query.SubLinkType_EXISTS_SUBLINK:
			return "exists", 2
		case pg_query.SubLinkType_ARRAY_SUBLINK:
			return "array", 2
		case pg_query.SubLinkType_EXPR_SUBLINK:
			if ss := x.SubLink.Subselect.GetSelectStmt(); ss != nil && len(ss.TargetList) > 0 {
				if rt := ss.TargetList[0].GetResTarget(); rt != nil {
					if rt.Name != "" {
						return rt.Name, 2
					}
					return figureColnameStrength(rt.Val)
				}
			}
		}
	case *pg_query.Node_CaseExpr:
		if name, st := figureColnameStrength(x.CaseExpr.Defresult); st > 1 {
			return name, st
		}
		return "case", 1
	case *pg_query.Node_AArrayExpr:
		return "array", 2
	case *pg_query.Node_RowExpr:
		return "row", 2
	case *pg_query.Node_CoalesceExpr:
		return "coalesce", 2
	case *pg_query.Node_MinMaxExpr:
		if x.MinMaxExpr.Op == pg_query.MinMaxOp_IS_GREATEST {
			return "greatest", 2
		}
		return "least", 2
	case *pg_query.Node_SqlvalueFunction:
		switch x.SqlvalueFunction.Op {
		case pg_query.SQLValueFunctionOp_SVFOP_CURRENT_DATE:
			return "current_date", 2
		case pg_query.SQLValueFunctionOp_SVFOP_CURRENT_TIME, pg_query.SQLValueFunctionOp_SVFOP_CURRENT_TIME_N:
			return "current_time", 2
		case pg_query.SQLValueFunctionOp_SVFOP_CURRENT_TIMESTAMP, pg_query.SQLValueFunctionOp_SVFOP_CURRENT_TIMESTAMP_N:
			return "current_timestamp", 2
		case pg_query.SQLValueFunctionOp_SVFOP_LOCALTIME, pg_query.SQLValueFunctionOp_SVFOP_LOCALTIME_N:
			return "localtime", 2
		case pg_query.SQLValueFunctionOp_SVFOP_LOCALTIMESTAMP, pg_query.SQLValueFunctionOp_SVFOP_LOCALTIMESTAMP_N:
			return "localtimestamp", 2
		case pg_query.SQLValueFunctionOp_SVFOP_CURRENT_ROLE:
			return "current_role", 2
		case pg_query.SQLValueFunctionOp_SVFOP_CURRENT_USER:
			return "current_user", 2
		case pg_query.SQLValueFunctionOp_SVFOP_USER:
			return "user", 2
		case pg_query.SQLValueFunctionOp_SVFOP_SESSION_USER:
			return "session_user", 2
		case pg_query.SQLValueFunctionOp_SVFOP_CURRENT_CATALOG:
			return "current_catalog", 2
		case pg_query.SQLValueFunctionOp_SVFOP_CURRENT_SCHEMA:
			return "current_schema", 2
		}
	case *pg_query.Node_BooleanTest, *pg_query.Node_NullTest, *pg_query.Node_BoolExpr:
	}
	return "", 0
}

func strList(ns []*pg_query.Node) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = strVal(n)
	}
	return out
}

// pairCall returns the index, from k on, of the first call named name in
// calls, or k when none is (an alias resolving to another name).
func pairCall(calls []*pg_query.FuncCall, k int, name string) int {
	for j := k; j < len(calls); j++ {
		if funcName(calls[j]) == name {
			return j
		}
	}
	return k
}
