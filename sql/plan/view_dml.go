package plan

import (
	"github.com/jackc/pgerrcode"
	pg_query "github.com/pganalyze/pg_query_go/v6"

	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
)

// Automatically updatable views (PostgreSQL's rewriteTargetView): an
// INSERT, UPDATE or DELETE naming a view over exactly one table or
// updatable view, without aggregates, DISTINCT, GROUP BY, set operations,
// WITH, LIMIT, window or set-returning functions, writes the base table.
// The view is flattened down to its base table once per statement: each
// view column becomes an expression over the base table's columns (a
// plain column when the view column is updatable), each level's WHERE a
// condition over them. UPDATE and DELETE scan the base table filtered by
// those conditions; WITH CHECK OPTION adds them as Checks (View set) on the
// new row.

// viewTarget is a view flattened onto its base table.
type viewTarget struct {
	view  *catalog.View
	verb  string
	alias string
	table *catalog.Table
	// ids are placeholder IDs of the base table's columns (Table.Columns
	// order) that cols and conds are expressed over; substitute replaces
	// them by the IDs a statement knows the row by.
	ids   []sem.ColumnID
	cols  []viewCol
	conds []viewCond // innermost view first
	// computed are the computed view columns' indexes in cols by the IDs
	// rowScope gave them.
	computed map[sem.ColumnID]int
	// bound are the view bound again over a statement's row IDs (keyed by
	// the IDs' first element), so that subqueries in the view's query see
	// the row's columns themselves.
	bound map[*sem.ColumnID]*viewTarget
}

// on is the view bound over the row ids (once per row).
func (vt *viewTarget) on(b *builder, ids []sem.ColumnID) *viewTarget {
	if len(ids) == 0 {
		return vt
	}
	if r, ok := vt.bound[&ids[0]]; ok {
		return r
	}
	r, err := b.flattenView(vt.view, vt.verb, 0, ids)
	if err != nil {
		// The same view bound without error a moment ago.
		return vt
	}
	r.alias = vt.alias
	if vt.bound == nil {
		vt.bound = map[*sem.ColumnID]*viewTarget{}
	}
	vt.bound[&ids[0]] = r
	return r
}

type viewCol struct {
	name string
	expr sem.Expr
	// base is the table column index of an updatable column, -1 for a
	// computed one.
	base int
}

type viewCond struct {
	view  string
	expr  sem.Expr
	check bool // under a WITH CHECK OPTION (own or cascaded from above)
}

// ViewNotUpdatableReason says why a view's query is not automatically
// updatable, in PostgreSQL's words (the DETAIL of its 55000 error), or ""
// when it is. It looks at the query alone: a single relation in FROM is
// assumed to be a table or a view.
func ViewNotUpdatableReason(query string) string {
	stmts, err := parseCached(query)
	if err != nil || len(stmts) != 1 || stmts[0].AST.Stmt.GetSelectStmt() == nil {
		return "Views that do not select from a single table or view are not automatically updatable."
	}
	return notUpdatableReason(stmts[0].AST.Stmt.GetSelectStmt())
}

// notUpdatableReason is view_query_is_auto_updatable, in its order.
func notUpdatableReason(ss *pg_query.SelectStmt) string {
	switch {
	case len(ss.DistinctClause) > 0:
		return "Views containing DISTINCT are not automatically updatable."
	case len(ss.GroupClause) > 0:
		return "Views containing GROUP BY are not automatically updatable."
	case ss.HavingClause != nil:
		return "Views containing HAVING are not automatically updatable."
	case ss.Op != pg_query.SetOperation_SETOP_NONE || len(ss.ValuesLists) > 0:
		if len(ss.ValuesLists) > 0 {
			return "Views that do not select from a single table or view are not automatically updatable."
		}
		return "Views containing UNION, INTERSECT, or EXCEPT are not automatically updatable."
	case ss.WithClause != nil:
		return "Views containing WITH are not automatically updatable."
	case ss.LimitCount != nil || ss.LimitOffset != nil:
		return "Views containing LIMIT or OFFSET are not automatically updatable."
	}
	var hasAgg, hasWin, hasSRFs bool
	for _, t := range ss.TargetList {
		aggs, wins := callsIn(t)
		hasAgg = hasAgg || len(aggs) > 0
		hasWin = hasWin || len(wins) > 0
		hasSRFs = hasSRFs || hasSRF(t)
	}
	switch {
	case hasAgg:
		return "Views that return aggregate functions are not automatically updatable."
	case hasWin:
		return "Views that return window functions are not automatically updatable."
	case hasSRFs:
		return "Views that return set-returning functions are not automatically updatable."
	case len(ss.FromClause) != 1 || ss.FromClause[0].GetRangeVar() == nil:
		return "Views that do not select from a single table or view are not automatically updatable."
	}
	return ""
}

// viewNotUpdatable is the 55000 error of a DML statement on a view that
// is not automatically updatable.
func viewNotUpdatable(verb, name, detail string) error {
	kind := map[string]string{"insert into": "INSERT", "update": "UPDATE", "delete from": "DELETE"}[verb]
	ing := map[string]string{"insert into": "inserting into", "update": "updating", "delete from": "deleting from"}[verb]
	return pgerror.New(pgerrcode.ObjectNotInPrerequisiteState, "cannot %s view %q", verb, name).
		WithDetail("%s", detail).
		WithHint("To enable %s the view, provide an INSTEAD OF %s trigger or an unconditional ON %s DO INSTEAD rule.", ing, kind, kind)
}

// dmlTarget resolves the relation a DML statement writes: a table, or an
// automatically updatable view flattened onto its base table (vt set,
// t its base table, alias the name the statement knows the view by).
func (b *builder) dmlTarget(rv *pg_query.RangeVar, verb string) (t *catalog.Table, alias string, vt *viewTarget, err error) {
	r, err := b.env.Catalog.LookupRelation(b.ctx, rv.Schemaname, rv.Relname)
	if err != nil {
		return nil, "", nil, b.errAt(err, rv.Location)
	}
	if r.View == nil {
		t, alias, err = b.targetTable(rv, verb)
		return t, alias, nil, err
	}
	alias = rv.Relname
	if rv.Alias != nil {
		alias = rv.Alias.Aliasname
	}
	// The rewriter's errors (PostgreSQL's rewriteTargetView) carry no
	// position.
	// This first binding checks the view and maps its columns; every use
	// binds it again over the statement's row (on), so the subqueries it
	// made are dropped.
	nsub := len(b.subqueries)
	vt, err = b.flattenView(r.View, verb, 0, nil)
	if err != nil {
		return nil, "", nil, err
	}
	b.subqueries = b.subqueries[:nsub]
	vt.alias = alias
	return vt.table, alias, vt, nil
}

// flattenView binds view v's query over its base relation, recursively,
// with the base table's columns known by ids (fresh placeholders when
// nil). Errors carry no position: it would be in the view's text.
func (b *builder) flattenView(v *catalog.View, verb string, depth int, ids []sem.ColumnID) (*viewTarget, error) {
	if depth > 32 {
		return nil, pgerror.New(pgerrcode.InvalidObjectDefinition, "infinite recursion detected in rules for relation %q", v.Name)
	}
	stmts, err := parseCached(v.Query)
	if err != nil || len(stmts) != 1 || stmts[0].AST.Stmt.GetSelectStmt() == nil {
		return nil, pgerror.New(pgerrcode.InternalError, "plan: view %q has an invalid stored query", v.Name)
	}
	ss := stmts[0].AST.Stmt.GetSelectStmt()
	if why := notUpdatableReason(ss); why != "" {
		return nil, viewNotUpdatable(verb, v.Name, why)
	}
	brv := ss.FromClause[0].GetRangeVar()
	r, err := b.env.Catalog.LookupRelation(b.ctx, brv.Schemaname, brv.Relname)
	if err != nil {
		return nil, err
	}
	// The lower level: the base table itself, or the view below.
	var lower *viewTarget
	switch {
	case r.Table != nil:
		if ids == nil {
			ids = b.freshIDs(len(r.Table.Columns))
		}
		lower = &viewTarget{table: r.Table, ids: ids}
		for i, c := range r.Table.Columns {
			lower.cols = append(lower.cols, viewCol{name: c.Name, base: i,
				expr: &sem.ColRef{ID: lower.ids[i], T: c.Type, Name: quoteIdentIfNeeded(c.Name)}})
		}
	case r.View != nil:
		if lower, err = b.flattenView(r.View, verb, depth+1, ids); err != nil {
			return nil, err
		}
	default:
		return nil, viewNotUpdatable(verb, v.Name, "Views that do not select from a single table or view are not automatically updatable.")
	}
	// This level's scope: the lower level's columns under the FROM alias,
	// known by placeholder IDs standing for their expressions.
	alias := brv.Relname
	if brv.Alias != nil {
		alias = brv.Alias.Aliasname
	}
	s := &scope{b: b}
	sub := map[sem.ColumnID]sem.Expr{}
	var idx []int
	for i, c := range lower.cols {
		// A plain column keeps its ID; a computed one is a placeholder
		// substituted afterwards.
		var id sem.ColumnID
		if cr, ok := c.expr.(*sem.ColRef); ok {
			id = cr.ID
		} else {
			id = b.newCol()
			sub[id] = c.expr
		}
		hidden := r.Table != nil && r.Table.Columns[i].Hidden
		idx = append(idx, s.add(scopeCol{id: id, name: c.name, t: c.expr.Type(), rel: alias, hidden: hidden}))
	}
	s.addRel(alias, idx)
	saved, savedCollate := b.stmt, b.hasCollate
	b.stmt = &stmts[0]
	defer func() { b.stmt, b.hasCollate = saved, savedCollate }()
	out := &viewTarget{view: v, verb: verb, table: lower.table, ids: lower.ids, conds: lower.conds}
	nsub := len(b.subqueries)
	var targets []*target
	for _, tn := range ss.TargetList {
		ts, err := b.bindTarget(s, tn.GetResTarget())
		if err != nil {
			return nil, stripPos(err)
		}
		targets = append(targets, ts...)
	}
	for i, t := range targets {
		if i >= len(v.Columns) {
			break
		}
		e := substitute(t.e, sub)
		base := -1
		if cr, ok := e.(*sem.ColRef); ok {
			for j, id := range out.ids {
				if id == cr.ID {
					base = j
				}
			}
		}
		out.cols = append(out.cols, viewCol{name: v.Columns[i].Name, expr: e, base: base})
	}
	if ss.WhereClause != nil {
		w, err := b.expr(s, "WHERE", ss.WhereClause, types.Bool)
		if err != nil {
			return nil, stripPos(err)
		}
		out.conds = append(out.conds, viewCond{view: v.Name, expr: substitute(w, sub)})
	}
	// A subquery sees the row's columns by ID; a computed column of the
	// view below would be a placeholder it cannot read.
	for _, sq := range b.subqueries[nsub:] {
		for _, o := range sq.Outer {
			if _, ok := sub[o]; ok {
				return nil, notSupported("%s view %q, whose subquery reads a computed column of the view below, is not supported", verb, v.Name)
			}
		}
	}
	// WITH CHECK OPTION: LOCAL checks this view's own condition (views
	// below check theirs if they have the option); CASCADED checks every
	// condition down to the table.
	switch v.CheckOption {
	case "cascaded":
		for i := range out.conds {
			out.conds[i].check = true
		}
	case "local":
		if ss.WhereClause != nil {
			out.conds[len(out.conds)-1].check = true
		}
	}
	return out, nil
}

func stripPos(err error) error {
	if pe, ok := err.(*sem.PositionError); ok {
		return pe.Err
	}
	return err
}

// substitute replaces the column references of e that m maps.
func substitute(e sem.Expr, m map[sem.ColumnID]sem.Expr) sem.Expr {
	return sem.Map(e, func(x sem.Expr) sem.Expr {
		if cr, ok := x.(*sem.ColRef); ok {
			if r, ok := m[cr.ID]; ok {
				return r
			}
		}
		return x
	})
}

// onRow maps the placeholder base-column IDs to ids (a statement's row).
func (vt *viewTarget) onRow(ids []sem.ColumnID) map[sem.ColumnID]sem.Expr {
	m := map[sem.ColumnID]sem.Expr{}
	for i, id := range vt.ids {
		c := vt.table.Columns[i]
		m[id] = &sem.ColRef{ID: ids[i], T: c.Type, Name: quoteIdentIfNeeded(c.Name)}
	}
	return m
}

// column is the base table column view column name writes; a computed
// view column is 0A000 as in PostgreSQL.
func (vt *viewTarget) column(name, verb string) (*catalog.Column, error) {
	for _, c := range vt.cols {
		if c.name != name {
			continue
		}
		if c.base < 0 {
			return nil, pgerror.New(pgerrcode.FeatureNotSupported, "cannot %s column %q of view %q", verb, name, vt.view.Name).
				WithDetail("View columns that are not columns of their base relation are not updatable.")
		}
		return &vt.table.Columns[c.base], nil
	}
	return nil, undefinedTargetColumn(name, vt.view.Name)
}

// columnErrAt positions an unknown column as the parser does; the
// rewriter's refusal of a computed column has no position.
func (vt *viewTarget) columnErrAt(b *builder, err error, loc int32) error {
	if pgerror.Code(err) == pgerrcode.UndefinedColumn {
		return b.errAt(err, loc)
	}
	return err
}

// checks are the WITH CHECK OPTION conditions over the new row ids.
func (vt *viewTarget) checks(b *builder, ids []sem.ColumnID) []Check {
	vt = vt.on(b, ids)
	m := vt.onRow(ids)
	var out []Check
	for _, c := range vt.conds {
		if c.check {
			out = append(out, Check{Name: c.view, Expr: substitute(c.expr, m), View: c.view})
		}
	}
	return out
}

// scope is the view's columns under its alias, over the row ids; the
// computed ones are added by the Project that source puts above node.
func (vt *viewTarget) rowScope(b *builder, ids []sem.ColumnID, parent *scope) (*scope, *Project) {
	rv := vt.on(b, ids)
	m := rv.onRow(ids)
	s := &scope{b: b, parent: parent}
	if parent != nil {
		s.ctes = parent.ctes
	}
	p := &Project{}
	var idx []int
	for i, c := range rv.cols {
		var id sem.ColumnID
		sc := scopeCol{name: c.name, t: c.expr.Type(), rel: vt.alias}
		if c.base >= 0 {
			id = ids[c.base]
			sc.tbl, sc.tcol = vt.table.ID, vt.table.Columns[c.base].ID
		} else {
			id = b.newCol()
			if vt.computed == nil {
				vt.computed = map[sem.ColumnID]int{}
			}
			vt.computed[id] = i
			p.Exprs = append(p.Exprs, substitute(c.expr, m))
			p.Cols = append(p.Cols, Column{ID: id, Name: c.name, T: c.expr.Type()})
		}
		sc.id = id
		idx = append(idx, s.add(sc))
	}
	s.addRel(vt.alias, idx)
	return s, p
}

// source is dmlSource for a view: the base table's rows that satisfy
// every level's condition, with the view's computed columns, joined with
// FROM/USING and filtered by WHERE.
func (vt *viewTarget) source(b *builder, top *scope, from []*pg_query.Node, where *pg_query.Node) (Node, *scope, []sem.ColumnID, error) {
	sc, _ := b.scanTable(vt.table)
	ids := make([]sem.ColumnID, len(sc.Cols))
	for i, c := range sc.Cols {
		ids[i] = c.ID
	}
	var node Node = sc
	rv := vt.on(b, ids)
	m := rv.onRow(ids)
	for _, c := range rv.conds {
		node = &Filter{Input: node, Pred: substitute(c.expr, m)}
	}
	s, p := vt.rowScope(b, ids, nil)
	s.ctes = top.ctes
	if len(p.Exprs) > 0 {
		p.Input = node
		p.Exprs = append(passThrough(node.Columns()), p.Exprs...)
		p.Cols = append(append([]Column(nil), node.Columns()...), p.Cols...)
		node = p
	}
	node, err := b.joinFromFilter(node, s, from, where)
	if err != nil {
		return nil, nil, nil, err
	}
	return node, s, ids, nil
}

// setTargets renames SET targets from view columns to the base table's.
func (vt *viewTarget) setTargets(b *builder, list []*pg_query.Node) ([]*pg_query.Node, error) {
	out := make([]*pg_query.Node, len(list))
	for i, n := range list {
		rt := n.GetResTarget()
		c, err := vt.column(rt.Name, "update")
		if err != nil {
			return nil, vt.columnErrAt(b, err, rt.Location)
		}
		out[i] = &pg_query.Node{Node: &pg_query.Node_ResTarget{ResTarget: &pg_query.ResTarget{
			Name: c.Name, Indirection: rt.Indirection, Val: rt.Val, Location: rt.Location}}}
	}
	return out, nil
}

// insertColumns are the base table columns an INSERT into the view
// without a column list fills: the view's, in its order.
func (vt *viewTarget) insertColumns(width int) ([]*catalog.Column, error) {
	var out []*catalog.Column
	seen := map[string]bool{}
	for i, c := range vt.cols {
		if width >= 0 && i >= width {
			break
		}
		bc, err := vt.column(c.name, "insert into")
		if err != nil {
			return nil, err
		}
		if seen[bc.Name] {
			return nil, pgerror.New(pgerrcode.SyntaxError, "multiple assignments to same column %q", bc.Name)
		}
		seen[bc.Name] = true
		out = append(out, bc)
	}
	return out, nil
}

// fixReturning rewrites r, bound over a scope rowScope made, onto the row
// ids: the view's computed columns become their expressions over it.
func (vt *viewTarget) fixReturning(b *builder, r *Returning, ids []sem.ColumnID) {
	if r == nil || len(vt.computed) == 0 {
		return
	}
	rv := vt.on(b, ids)
	m := map[sem.ColumnID]sem.Expr{}
	for id, i := range vt.computed {
		m[id] = rv.cols[i].expr
	}
	for i := range r.Exprs {
		r.Exprs[i] = substitute(r.Exprs[i], m)
	}
}

// ViewIsUpdatable is what information_schema reports of a view from its
// query alone (pg_relation_is_updatable without triggers or rules): a view
// that is automatically updatable accepts DELETE, and INSERT and UPDATE
// too when one of its columns is a column of its base relation. The
// relation in FROM is assumed to be a table or an updatable view.
func ViewIsUpdatable(query string) (updatable, insertable bool) {
	stmts, err := parseCached(query)
	if err != nil || len(stmts) != 1 || stmts[0].AST.Stmt.GetSelectStmt() == nil {
		return false, false
	}
	ss := stmts[0].AST.Stmt.GetSelectStmt()
	if notUpdatableReason(ss) != "" {
		return false, false
	}
	for _, t := range ss.TargetList {
		if t.GetResTarget().GetVal().GetColumnRef() != nil {
			return true, true
		}
	}
	return false, false
}

// viewOnConflict is ON CONFLICT for an INSERT into a view: the inference
// names the view's columns, DO UPDATE's SET, WHERE and EXCLUDED read the
// view's columns of the conflicting and the proposed rows. The view's
// check options apply to the updated row as to inserted ones (Insert.Checks
// cover both).
func (b *builder) viewOnConflict(vt *viewTarget, oc *pg_query.OnConflictClause) (*OnConflict, error) {
	t := vt.table
	out := &OnConflict{DoNothing: oc.Action == pg_query.OnConflictAction_ONCONFLICT_NOTHING}
	if inf := oc.Infer; inf != nil {
		mapped := &pg_query.InferClause{Conname: inf.Conname, WhereClause: inf.WhereClause, Location: inf.Location}
		for _, e := range inf.IndexElems {
			ie := e.GetIndexElem()
			if ie == nil || ie.Name == "" {
				return nil, b.errAt(notSupported("ON CONFLICT with an expression on a view is not supported"), inf.Location)
			}
			c, err := vt.column(ie.Name, "insert into")
			if err != nil {
				if pgerror.Code(err) == pgerrcode.UndefinedColumn {
					return nil, b.errAt(sem.ErrUndefinedColumn(ie.Name), inf.Location)
				}
				return nil, err
			}
			mapped.IndexElems = append(mapped.IndexElems, &pg_query.Node{Node: &pg_query.Node_IndexElem{IndexElem: &pg_query.IndexElem{
				Name: c.Name, Collation: ie.Collation, Opclass: ie.Opclass, Ordering: ie.Ordering, NullsOrdering: ie.NullsOrdering}}})
		}
		arb, err := b.inferArbiter(t, mapped)
		if err != nil {
			return nil, err
		}
		out.Arbiter = arb
	} else if !out.DoNothing {
		return nil, b.errAt(pgerror.New(pgerrcode.SyntaxError, "ON CONFLICT DO UPDATE requires inference specification or constraint name").
			WithHint("For example, ON CONFLICT (column_name)."), oc.Location)
	}
	if out.DoNothing {
		return out, nil
	}
	out.ExistingCols = b.freshIDs(len(t.Columns))
	out.ExcludedCols = b.freshIDs(len(t.Columns))
	s, p1 := vt.rowScope(b, out.ExistingCols, nil)
	ex, p2 := vt.rowScope(b, out.ExcludedCols, nil)
	var idx []int
	for _, c := range ex.cols {
		c.rel, c.noUnqual, c.noStar, c.tbl, c.tcol = "excluded", true, true, 0, 0
		idx = append(idx, s.add(c))
	}
	s.addRel("excluded", idx)
	s.qualify = true
	targets, err := vt.setTargets(b, oc.TargetList)
	if err != nil {
		return nil, err
	}
	sets, exprs, err := b.assignments(t, s, targets, nil)
	if err != nil {
		return nil, err
	}
	// Computed view columns read by SET or WHERE become their expressions
	// over the conflicting or the proposed row.
	m := map[sem.ColumnID]sem.Expr{}
	for _, p := range []*Project{p1, p2} {
		for i, c := range p.Cols {
			m[c.ID] = p.Exprs[i]
		}
	}
	out.SetCols, out.Set = sets, substituteAll(exprs, m)
	if oc.WhereClause != nil {
		w, err := b.expr(s, "WHERE", oc.WhereClause, types.Bool)
		if err != nil {
			return nil, err
		}
		out.Where = substitute(w, m)
	}
	return out, nil
}

// ViewColumnsUpdatable says, for each of a view's n columns, whether it
// is updatable (information_schema.columns.is_updatable): the view is
// automatically updatable and the column is a column of its base
// relation. Like ViewIsUpdatable it reads the query alone.
func ViewColumnsUpdatable(query string, n int) []bool {
	out := make([]bool, n)
	stmts, err := parseCached(query)
	if err != nil || len(stmts) != 1 || stmts[0].AST.Stmt.GetSelectStmt() == nil {
		return out
	}
	ss := stmts[0].AST.Stmt.GetSelectStmt()
	if notUpdatableReason(ss) != "" {
		return out
	}
	i := 0
	for k, t := range ss.TargetList {
		cr := t.GetResTarget().GetVal().GetColumnRef()
		if cr != nil && len(cr.Fields) > 0 && cr.Fields[len(cr.Fields)-1].GetAStar() != nil {
			// * stands for the columns the entries after it do not take.
			for rest := n - (len(ss.TargetList) - k - 1); i < rest && i < n; i++ {
				out[i] = true
			}
			continue
		}
		if i < n {
			out[i] = cr != nil
		}
		i++
	}
	return out
}
