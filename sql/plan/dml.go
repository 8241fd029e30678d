package plan

import (
	"fmt"
	"strings"
	"sync"

	"github.com/jackc/pgerrcode"
	pg_query "github.com/pganalyze/pg_query_go/v6"

	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/parser"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
)

// targetTable resolves the table a DML statement writes.
func (b *builder) targetTable(rv *pg_query.RangeVar, verb string) (*catalog.Table, string, error) {
	r, err := b.env.Catalog.LookupRelation(b.ctx, rv.Schemaname, rv.Relname)
	if err != nil {
		return nil, "", b.errAt(err, rv.Location)
	}
	alias := rv.Relname
	if rv.Alias != nil {
		alias = rv.Alias.Aliasname
	}
	switch {
	case r.Table != nil:
		return r.Table, alias, nil
	case r.View != nil:
		return nil, "", b.errAt(pgerror.New(pgerrcode.FeatureNotSupported, "cannot %s view %q", verb, rv.Relname).
			WithDetail("Views that are not automatically updatable are not supported."), rv.Location)
	}
	return nil, "", b.errAt(pgerror.New(pgerrcode.WrongObjectType, "cannot change relation %q", rv.Relname), rv.Location)
}

// tableScope is t's columns known by ids, under alias.
func (b *builder) tableScope(t *catalog.Table, ids []sem.ColumnID, alias string, parent *scope) *scope {
	s := &scope{b: b, parent: parent}
	if parent != nil {
		s.ctes = parent.ctes
	}
	var idx []int
	for i, c := range t.Columns {
		idx = append(idx, s.add(scopeCol{id: ids[i], name: c.Name, t: c.Type, rel: alias, hidden: c.Hidden, tbl: t.ID, tcol: c.ID}))
	}
	s.addRel(alias, idx)
	return s
}

func (b *builder) freshIDs(n int) []sem.ColumnID {
	ids := make([]sem.ColumnID, n)
	for i := range ids {
		ids[i] = b.newCol()
	}
	return ids
}

// parseStoredExpr parses a catalog expression (DEFAULT, generated
// column, CHECK) stored as SQL text.
func parseStoredExpr(text, what string) (*pg_query.Node, error) {
	stmts, err := parseCached("SELECT " + text)
	if err == nil && len(stmts) == 1 {
		if ss := stmts[0].AST.Stmt.GetSelectStmt(); ss != nil && len(ss.TargetList) == 1 {
			return ss.TargetList[0].GetResTarget().Val, nil
		}
	}
	return nil, pgerror.New(pgerrcode.InternalError, "plan: invalid stored %s expression %q", what, text)
}

// storedBuild binds a catalog expression; errors lose the position, which
// is in the catalog's text, not the statement's.
func (b *builder) storedBuild(text, what string, s sem.Scope, colType *types.T, colName string) (sem.Expr, error) {
	n, err := parseStoredExpr(text, what)
	if err != nil {
		return nil, err
	}
	bc := sem.BuildContext{Scope: s, Types: b.env.Types, Clause: what}
	saved := b.hasCollate
	b.hasCollate = strings.Contains(strings.ToUpper(text), "COLLATE")
	defer func() { b.hasCollate = saved }()
	var e sem.Expr
	if colType != nil {
		e, err = b.semBuildAssign(bc, n, colType, colName)
	} else {
		e, err = b.semBuild(bc, n, types.Bool)
	}
	if pe, ok := err.(*sem.PositionError); ok {
		err = pe.Err
	}
	return e, err
}

func (b *builder) defaultExpr(c *catalog.Column) (sem.Expr, error) {
	text := defaultText(c)
	if text == "" && c.Type.Domain != nil && c.ComputedExpr == "" {
		// A column of a domain without a default of its own takes the
		// domain's, else NULL, which a NOT NULL domain refuses.
		if text = c.Type.Domain.Default; text == "" {
			return sem.CoerceToAssignIn(b.env.Types, &sem.Const{Datum: types.DNull, T: types.BaseType(c.Type)}, c.Type, c.Name)
		}
	}
	if text == "" {
		return &sem.Const{Datum: types.DNull, T: c.Type}, nil
	}
	return b.storedBuild(text, "DEFAULT", nil, c.Type, c.Name)
}

// defaultText is column c's default as SQL text ("" when it is NULL). An
// identity column stores no default text: its default is its sequence's
// nextval (descriptor IDs are the OIDs regclass names), as the executor's
// COPY path computes it too.
func defaultText(c *catalog.Column) string {
	if c.ComputedExpr != "" {
		return ""
	}
	if c.DefaultExpr == "" && c.Identity != "" && c.SequenceID != 0 {
		return fmt.Sprintf("nextval(%d::regclass)", c.SequenceID)
	}
	return c.DefaultExpr
}

// rowExprs binds what the executor computes over a written row known by
// ids: generated columns and CHECK constraints.
func (b *builder) rowExprs(t *catalog.Table, ids []sem.ColumnID) (computed []sem.Expr, checks []Check, err error) {
	ms := mapScope{names: map[string]*scopeCol{}}
	for i, c := range t.Columns {
		ms.names[c.Name] = &scopeCol{id: ids[i], name: c.Name, t: c.Type}
	}
	for i := range t.Columns {
		c := &t.Columns[i]
		if c.ComputedExpr == "" {
			continue
		}
		if computed == nil {
			computed = make([]sem.Expr, len(t.Columns))
		}
		if computed[i], err = b.storedBuild(c.ComputedExpr, "generation expression", ms, c.Type, c.Name); err != nil {
			return nil, nil, err
		}
	}
	for _, ck := range t.Checks {
		e, err := b.storedBuild(ck.Expr, "check constraint", ms, nil, "")
		if err != nil {
			return nil, nil, err
		}
		checks = append(checks, Check{Name: ck.Name, Expr: e})
	}
	return computed, checks, nil
}

func undefinedTargetColumn(name, table string) error {
	return pgerror.New(pgerrcode.UndefinedColumn, "column %q of relation %q does not exist", name, table)
}

func generatedColumnErr(c *catalog.Column, update bool) error {
	if update {
		return pgerror.New(pgerrcode.GeneratedAlways, "column %q can only be updated to DEFAULT", c.Name).
			WithDetail("Column %q is a generated column.", c.Name)
	}
	return pgerror.New(pgerrcode.GeneratedAlways, "cannot insert a non-DEFAULT value into column %q", c.Name).
		WithDetail("Column %q is a generated column.", c.Name)
}

func identityAlwaysErr(c *catalog.Column, update bool) error {
	if update {
		return pgerror.New(pgerrcode.GeneratedAlways, "column %q can only be updated to DEFAULT", c.Name).
			WithDetail("Column %q is an identity column defined as GENERATED ALWAYS.", c.Name)
	}
	return pgerror.New(pgerrcode.GeneratedAlways, "cannot insert a non-DEFAULT value into column %q", c.Name).
		WithDetail("Column %q is an identity column defined as GENERATED ALWAYS.", c.Name).
		WithHint("Use OVERRIDING SYSTEM VALUE to override.")
}

// returningScope is the FROM scope of an UPDATE or DELETE with the target
// table's columns (from) known by the IDs RETURNING reads them as (to).
func returningScope(s *scope, from, to []sem.ColumnID) *scope {
	m := map[sem.ColumnID]sem.ColumnID{}
	for i := range from {
		m[from[i]] = to[i]
	}
	rs := &scope{b: s.b, rels: s.rels, ctes: s.ctes, qualify: s.qualify}
	for _, c := range s.cols {
		if id, ok := m[c.id]; ok {
			c.id = id
		}
		rs.cols = append(rs.cols, c)
	}
	return rs
}

// returning binds a RETURNING list over s.
func (b *builder) returning(list []*pg_query.Node, s *scope) (*Returning, error) {
	if len(list) == 0 {
		return nil, nil
	}
	r := &Returning{}
	for _, n := range list {
		rt := n.GetResTarget()
		var ts []*target
		if cr := rt.Val.GetColumnRef(); cr != nil && cr.Fields[len(cr.Fields)-1].GetAStar() != nil {
			var err error
			if ts, err = b.expandStar(s, cr); err != nil {
				return nil, err
			}
		} else {
			e, err := b.expr(s, "RETURNING", rt.Val, nil)
			if err != nil {
				return nil, err
			}
			t := &target{e: e, name: rt.Name}
			if t.name == "" {
				t.name = figureColname(rt.Val)
			}
			if cr, ok := e.(*sem.ColRef); ok {
				if c, ok, _ := findByID(s, cr.ID); ok {
					t.tbl, t.tcol = c.tbl, c.tcol
				}
			}
			ts = []*target{t}
		}
		for _, t := range ts {
			r.Exprs = append(r.Exprs, t.e)
			r.Cols = append(r.Cols, Column{ID: b.newCol(), Name: t.name, T: t.e.Type(), Table: t.tbl, TableCol: t.tcol})
		}
	}
	return r, nil
}

// withScope binds a DML statement's WITH clause into a fresh top scope.
func (b *builder) withScope(w *pg_query.WithClause) (*scope, error) {
	s := &scope{b: b, ctes: b.outerCTEs}
	if w != nil {
		if err := b.bindWith(w, s, &pg_query.SelectStmt{WithClause: w}); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// ---------------------------------------------------------------------------
// INSERT.

func (b *builder) buildInsert(ins *pg_query.InsertStmt) (Node, error) {
	top, err := b.withScope(ins.WithClause)
	if err != nil {
		return nil, err
	}
	if ins.WithClause != nil {
		// References from the SELECT part were not counted against the
		// statement body: materialize none of them twice by counting.
		countCTERefs(top.ctes, ins.SelectStmt)
	}
	t, alias, vt, err := b.dmlTarget(ins.Relation, "insert into")
	if err != nil {
		return nil, err
	}
	overrideSystem := ins.Override == pg_query.OverridingKind_OVERRIDING_SYSTEM_VALUE
	// OVERRIDING USER VALUE: the values given for identity columns are
	// ignored and the columns take their sequences' values.
	overrideUser := ins.Override == pg_query.OverridingKind_OVERRIDING_USER_VALUE
	ins2 := &Insert{Table: t, TableCols: b.freshIDs(len(t.Columns))}
	// Target columns.
	var cols []*catalog.Column
	if len(ins.Cols) > 0 {
		seen := map[string]bool{}
		for _, cn := range ins.Cols {
			rt := cn.GetResTarget()
			if len(rt.Indirection) > 0 {
				return nil, b.errAt(notSupported("INSERT into a subfield or array element is not supported"), rt.Location)
			}
			c := t.ColumnByName(rt.Name)
			if vt != nil {
				if c, err = vt.column(rt.Name, "insert into"); err != nil {
					return nil, vt.columnErrAt(b, err, rt.Location)
				}
				// Two view columns may be the same table column.
				if seen["\x00"+c.Name] {
					return nil, pgerror.New(pgerrcode.SyntaxError, "multiple assignments to same column %q", c.Name)
				}
				seen["\x00"+c.Name] = true
			}
			if c == nil {
				return nil, b.errAt(undefinedTargetColumn(rt.Name, t.Name), rt.Location)
			}
			if seen[rt.Name] {
				return nil, b.errAt(pgerror.New(pgerrcode.DuplicateColumn, "column %q specified more than once", rt.Name), rt.Location)
			}
			seen[rt.Name] = true
			cols = append(cols, c)
		}
	} else if vt != nil {
		// The view's columns, as many as there are values when known.
		width := -1
		if ss := ins.SelectStmt.GetSelectStmt(); ss != nil && isPlainValues(ss) {
			width = len(ss.ValuesLists[0].GetList().GetItems())
		}
		if cols, err = vt.insertColumns(width); err != nil {
			return nil, err
		}
	} else {
		for i := range t.Columns {
			if !t.Columns[i].Hidden {
				cols = append(cols, &t.Columns[i])
			}
		}
	}
	// The rows.
	ss := ins.SelectStmt.GetSelectStmt()
	switch {
	case ss == nil:
		// DEFAULT VALUES
		ins2.Input = oneRow()
		cols = nil
	case isPlainValues(ss):
		v := &Values{}
		for _, c := range cols {
			v.Cols = append(v.Cols, Column{ID: b.newCol(), Name: c.Name, T: c.Type})
		}
		width := -1
		for _, l := range ss.ValuesLists {
			items := l.GetList().GetItems()
			if width >= 0 && len(items) != width {
				return nil, b.errAt(pgerror.New(pgerrcode.SyntaxError, "VALUES lists must all be the same length"), nodeLoc(items[0]))
			}
			width = len(items)
			if len(items) > len(cols) {
				return nil, b.errAt(pgerror.New(pgerrcode.SyntaxError, "INSERT has more expressions than target columns"), nodeLoc(items[len(cols)]))
			}
			if len(items) < len(cols) && len(ins.Cols) > 0 {
				return nil, b.errAt(pgerror.New(pgerrcode.SyntaxError, "INSERT has more target columns than expressions"), nodeLoc(ins.Cols[len(items)]))
			}
			row := make([]sem.Expr, len(cols))
			for i, c := range cols {
				if i >= len(items) {
					// INSERT INTO t VALUES (1): the rest take defaults.
					e, err := b.defaultExpr(c)
					if err != nil {
						return nil, err
					}
					row[i] = e
					continue
				}
				it := items[i]
				if it.GetSetToDefault() != nil || (overrideUser && c.Identity != "") {
					e, err := b.defaultExpr(c)
					if err != nil {
						return nil, err
					}
					row[i] = e
					continue
				}
				if err := checkInsertable(c, overrideSystem); err != nil {
					// PostgreSQL's rewriter raises this one, with no
					// position in the statement.
					return nil, err
				}
				bc := b.semCtx(top, "VALUES")
				bc.Scope = nil
				e, err := b.semBuildAssign(bc, it, c.Type, c.Name)
				if err != nil {
					return nil, err
				}
				row[i] = e
			}
			v.Rows = append(v.Rows, row)
		}
		ins2.Input = v
	default:
		r, err := b.buildSelect(ss, top, nil)
		if err != nil {
			return nil, err
		}
		// Untyped literals take their target column's type.
		for i, lit := range untypedTargets(ss) {
			if lit != nil && i < len(cols) {
				if err := b.retypeLiteralAs(r.node, i, lit, cols[i].Type, cols[i].Name); err != nil {
					return nil, err
				}
			}
		}
		n := stripHidden(b, r.node)
		in := n.Columns()
		if len(in) > len(cols) {
			return nil, pgerror.New(pgerrcode.SyntaxError, "INSERT has more expressions than target columns")
		}
		if len(in) < len(cols) {
			if len(ins.Cols) > 0 {
				return nil, pgerror.New(pgerrcode.SyntaxError, "INSERT has more target columns than expressions")
			}
			cols = cols[:len(in)]
		}
		p := &Project{Input: n}
		cast := false
		for i, c := range cols {
			if overrideUser && c.Identity != "" {
				e, err := b.defaultExpr(c)
				if err != nil {
					return nil, err
				}
				p.Exprs = append(p.Exprs, e)
				p.Cols = append(p.Cols, Column{ID: b.newCol(), Name: c.Name, T: c.Type})
				cast = true
				continue
			}
			if err := checkInsertable(c, overrideSystem); err != nil {
				return nil, err
			}
			var e sem.Expr = colRef(in[i])
			if !in[i].T.Identical(c.Type) {
				ce, err := sem.CoerceToAssignIn(b.env.Types, e, c.Type, c.Name)
				if err != nil {
					return nil, err
				}
				e, cast = ce, true
			}
			p.Exprs = append(p.Exprs, e)
			p.Cols = append(p.Cols, Column{ID: b.newCol(), Name: c.Name, T: c.Type})
		}
		if cast {
			n = p
		}
		ins2.Input = n
	}
	for _, c := range cols {
		ins2.InsertCols = append(ins2.InsertCols, c.ID)
	}
	ins2.Defaults = make([]sem.Expr, len(t.Columns))
	for i := range t.Columns {
		c := &t.Columns[i]
		if defaultText(c) == "" && c.Type.Domain == nil {
			continue
		}
		if ins2.Defaults[i], err = b.defaultExpr(c); err != nil {
			return nil, err
		}
	}
	if ins2.Computed, ins2.Checks, err = b.rowExprs(t, ins2.TableCols); err != nil {
		return nil, err
	}
	if ins.OnConflictClause != nil && vt != nil {
		if ins2.OnConflict, err = b.viewOnConflict(vt, ins.OnConflictClause); err != nil {
			return nil, err
		}
	} else if ins.OnConflictClause != nil {
		if ins2.OnConflict, err = b.onConflict(t, alias, ins.OnConflictClause); err != nil {
			return nil, err
		}
	}
	if vt != nil {
		ins2.Checks = append(ins2.Checks, vt.checks(b, ins2.TableCols)...)
		s, _ := vt.rowScope(b, ins2.TableCols, nil)
		if ins2.Returning, err = b.returning(ins.ReturningList, s); err != nil {
			return nil, err
		}
		vt.fixReturning(b, ins2.Returning, ins2.TableCols)
		return ins2, nil
	}
	if ins2.Returning, err = b.returning(ins.ReturningList, b.tableScope(t, ins2.TableCols, alias, nil)); err != nil {
		return nil, err
	}
	return ins2, nil
}

func countCTERefs(env *cteEnv, n *pg_query.Node) {
	if env == nil || n == nil {
		return
	}
	walkAST(n, func(x *pg_query.Node) bool {
		if rv := x.GetRangeVar(); rv != nil && rv.Schemaname == "" {
			if d, ok := env.defs[rv.Relname]; ok {
				d.refs++
			}
		}
		return true
	})
}

func checkInsertable(c *catalog.Column, overrideSystem bool) error {
	if c.ComputedExpr != "" {
		return generatedColumnErr(c, false)
	}
	if c.Identity == catalog.IdentityAlways && !overrideSystem {
		return identityAlwaysErr(c, false)
	}
	return nil
}

// isPlainValues: a bare VALUES list (DEFAULT allowed, values assigned to
// the target columns' types directly).
func isPlainValues(ss *pg_query.SelectStmt) bool {
	return len(ss.ValuesLists) > 0 && len(ss.SortClause) == 0 && ss.LimitCount == nil &&
		ss.LimitOffset == nil && ss.WithClause == nil && len(ss.LockingClause) == 0
}

func (b *builder) onConflict(t *catalog.Table, alias string, oc *pg_query.OnConflictClause) (*OnConflict, error) {
	out := &OnConflict{DoNothing: oc.Action == pg_query.OnConflictAction_ONCONFLICT_NOTHING}
	if oc.Infer != nil {
		arb, err := b.inferArbiter(t, oc.Infer)
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
	s := b.tableScope(t, out.ExistingCols, alias, nil)
	var idx []int
	for i, c := range t.Columns {
		idx = append(idx, s.add(scopeCol{id: out.ExcludedCols[i], name: c.Name, t: c.Type, rel: "excluded", noUnqual: true, noStar: true}))
	}
	s.addRel("excluded", idx)
	s.qualify = true
	sets, exprs, err := b.assignments(t, s, oc.TargetList, nil)
	if err != nil {
		return nil, err
	}
	out.SetCols, out.Set = sets, exprs
	if oc.WhereClause != nil {
		if out.Where, err = b.expr(s, "WHERE", oc.WhereClause, types.Bool); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// inferExprColumn finds the hidden column holding an expression index's
// key equal to expr (compared as bound and printed over the table's
// columns); 0 when none, which then matches no index.
func (b *builder) inferExprColumn(t *catalog.Table, expr *pg_query.Node) (rowenc.ColumnID, error) {
	s := b.tableScope(t, b.freshIDs(len(t.Columns)), t.Name, nil)
	e, err := b.expr(s, "index expression", expr, nil)
	if err != nil {
		return 0, err
	}
	want := e.String()
	for i := range t.Columns {
		c := &t.Columns[i]
		if !c.IsIndexExpr() {
			continue
		}
		n, err := parseStoredExpr(c.ComputedExpr, "index expression")
		if err != nil {
			return 0, err
		}
		ce, err := b.semBuild(sem.BuildContext{Scope: s, Types: b.env.Types, Clause: "index expression"}, n, nil)
		if err != nil {
			continue
		}
		if ce.String() == want {
			return c.ID, nil
		}
	}
	return 0, nil
}

func (b *builder) inferArbiter(t *catalog.Table, inf *pg_query.InferClause) (*catalog.Index, error) {
	indexes := []*catalog.Index{&t.PrimaryIndex}
	for i := range t.Indexes {
		indexes = append(indexes, &t.Indexes[i])
	}
	if inf.Conname != "" {
		for _, u := range t.Uniques {
			if u.Name == inf.Conname {
				if ix := t.IndexByID(u.IndexID); ix != nil {
					return ix, nil
				}
			}
		}
		for _, ix := range indexes {
			if ix.Name == inf.Conname && ix.Unique {
				return ix, nil
			}
		}
		return nil, b.errAt(pgerror.New(pgerrcode.UndefinedObject, "constraint %q for table %q does not exist", inf.Conname, t.Name), inf.Location)
	}
	want := map[rowenc.ColumnID]bool{}
	for _, e := range inf.IndexElems {
		ie := e.GetIndexElem()
		if ie != nil && ie.Name == "" && ie.Expr != nil {
			// An expression matches an expression index's key column.
			id, err := b.inferExprColumn(t, ie.Expr)
			if err != nil {
				return nil, err
			}
			want[id] = true
			continue
		}
		if ie == nil || ie.Name == "" {
			return nil, b.errAt(notSupported("ON CONFLICT with an expression is not supported"), inf.Location)
		}
		c := t.ColumnByName(ie.Name)
		if c == nil {
			return nil, b.errAt(sem.ErrUndefinedColumn(ie.Name), inf.Location)
		}
		want[c.ID] = true
	}
	for _, ix := range indexes {
		if !ix.Unique || (ix.State != "" && ix.State != catalog.IndexPublic) {
			continue
		}
		if ix.Predicate != "" && inf.WhereClause == nil {
			continue
		}
		have := map[rowenc.ColumnID]bool{}
		for _, k := range ix.KeyColumnIDs {
			if c := t.ColumnByID(k); c != nil && c.Hidden && ix.HashSharding != nil {
				continue // the shard column is not part of the user's key
			}
			have[k] = true
		}
		if len(have) != len(want) {
			continue
		}
		match := true
		for k := range want {
			if !have[k] {
				match = false
			}
		}
		if match {
			return ix, nil
		}
	}
	return nil, pgerror.New(pgerrcode.InvalidColumnReference, "there is no unique or exclusion constraint matching the ON CONFLICT specification")
}

// assignments binds SET a = x, (b, c) = (y, z), d = DEFAULT.
//
// node, when not nil, is the UPDATE's input: (a, b) = (SELECT ...) joins
// it with the subquery (LATERAL, at most one row, NULLs when none, as
// Postgres assigns them) and assigns the subquery's columns.
func (b *builder) assignments(t *catalog.Table, s *scope, list []*pg_query.Node, node *Node) ([]rowenc.ColumnID, []sem.Expr, error) {
	var cols []rowenc.ColumnID
	var exprs []sem.Expr
	seen := map[string]bool{}
	multi := map[int32][]Column{} // bound (a, b) = (SELECT ...) sources, by location
	elemSet := map[string]int{}   // SET a[i] = x: the index in exprs of a's new value
	for _, n := range list {
		rt := n.GetResTarget()
		c := t.ColumnByName(rt.Name)
		if c == nil {
			return nil, nil, b.errAt(undefinedTargetColumn(rt.Name, t.Name), rt.Location)
		}
		if len(rt.Indirection) > 0 {
			if seen[rt.Name] {
				return nil, nil, b.errAt(pgerror.New(pgerrcode.SyntaxError, "multiple assignments to same column %q", rt.Name), rt.Location)
			}
			if err := b.elementAssignment(t, c, s, rt, elemSet, &cols, &exprs); err != nil {
				return nil, nil, err
			}
			continue
		}
		if _, ok := elemSet[rt.Name]; ok || seen[rt.Name] {
			return nil, nil, b.errAt(pgerror.New(pgerrcode.SyntaxError, "multiple assignments to same column %q", rt.Name), rt.Location)
		}
		seen[rt.Name] = true
		val := rt.Val
		if ma := val.GetMultiAssignRef(); ma != nil {
			row := ma.Source.GetRowExpr()
			if row == nil {
				if l := ma.Source.GetList(); l != nil {
					if int(ma.Colno) > len(l.Items) {
						return nil, nil, b.errAt(pgerror.New(pgerrcode.SyntaxError, "number of columns does not match number of values"), rt.Location)
					}
					val = l.Items[ma.Colno-1]
				} else if sl := ma.Source.GetSubLink(); sl != nil && node != nil {
					sc, ok := multi[sl.Location]
					if !ok {
						var lat []sem.ColumnID
						r, err := b.buildSelect(sl.Subselect.GetSelectStmt(), s, &lat)
						if err != nil {
							return nil, nil, err
						}
						sub := stripHidden(b, r.node)
						sc = sub.Columns()
						if len(sc) != int(ma.Ncolumns) {
							return nil, nil, b.errAt(pgerror.New(pgerrcode.SyntaxError, "number of columns does not match number of values"), rt.Location)
						}
						*node = &Join{Kind: LeftJoin, Left: *node, Right: &Max1Row{Input: sub}, Lateral: referencesLevel(s, lat)}
						multi[sl.Location] = sc
					}
					c2 := t.ColumnByName(rt.Name)
					e, err := sem.CoerceToAssignIn(b.env.Types, colRef(sc[ma.Colno-1]), c2.Type, c2.Name)
					if err != nil {
						return nil, nil, b.errAt(err, rt.Location)
					}
					if c2.ComputedExpr != "" {
						return nil, nil, b.errAt(generatedColumnErr(c2, true), rt.Location)
					}
					cols = append(cols, c2.ID)
					exprs = append(exprs, e)
					continue
				} else {
					return nil, nil, b.errAt(notSupported("multiple-column assignment from a subquery is not supported here"), rt.Location)
				}
			} else {
				if int(ma.Ncolumns) != len(row.Args) {
					return nil, nil, b.errAt(pgerror.New(pgerrcode.SyntaxError, "number of columns does not match number of values"), row.Location)
				}
				val = row.Args[ma.Colno-1]
			}
		}
		var e sem.Expr
		var err error
		if val.GetSetToDefault() != nil {
			if c.Identity == catalog.IdentityAlways || c.ComputedExpr != "" {
				// The executor recomputes generated columns; identity
				// columns keep... Postgres assigns nextval: use the default.
			}
			if e, err = b.defaultExpr(c); err != nil {
				return nil, nil, err
			}
		} else {
			if c.ComputedExpr != "" {
				return nil, nil, b.errAt(generatedColumnErr(c, true), rt.Location)
			}
			if c.Identity == catalog.IdentityAlways {
				return nil, nil, b.errAt(identityAlwaysErr(c, true), rt.Location)
			}
			bc := b.semCtx(s, "UPDATE")
			if e, err = b.semBuildAssign(bc, val, c.Type, c.Name); err != nil {
				return nil, nil, err
			}
		}
		cols = append(cols, c.ID)
		exprs = append(exprs, e)
	}
	return cols, exprs, nil
}

// ---------------------------------------------------------------------------
// UPDATE and DELETE.

// joinFromFilter puts an UPDATE's FROM or a DELETE's USING items, joined
// in order, above the target's rows (node, whose columns s names), then
// the WHERE filter over them all.
func (b *builder) joinFromFilter(node Node, s *scope, from []*pg_query.Node, where *pg_query.Node) (Node, error) {
	for _, it := range from {
		n, lateral, err := b.fromItem(it, s)
		if err != nil {
			return nil, err
		}
		node = &Join{Kind: InnerJoin, Left: node, Right: n, Lateral: lateral}
	}
	if err := checkDupAliases(s); err != nil {
		return nil, err
	}
	s.qualify = len(s.rels) > 1
	if where != nil {
		w, err := b.expr(s, "WHERE", rewriteRowIn(where), types.Bool)
		if err != nil {
			return nil, err
		}
		node = &Filter{Input: node, Pred: w}
	}
	return node, nil
}

// dmlSource scans the target table, joins the FROM/USING items and
// filters by WHERE; it returns the node and the scan's column IDs in
// Table.Columns order.
func (b *builder) dmlSource(t *catalog.Table, alias string, top *scope, from []*pg_query.Node,
	where *pg_query.Node) (Node, *scope, []sem.ColumnID, error) {
	s := &scope{b: b, ctes: top.ctes}
	sc, pk := b.scanTable(t)
	b.addRelCols(s, alias, sc.Cols, pk)
	node, err := b.joinFromFilter(sc, s, from, where)
	if err != nil {
		return nil, nil, nil, err
	}
	ids := make([]sem.ColumnID, len(sc.Cols))
	for i, c := range sc.Cols {
		ids[i] = c.ID
	}
	return node, s, ids, nil
}

func (b *builder) buildUpdate(up *pg_query.UpdateStmt) (Node, error) {
	top, err := b.withScope(up.WithClause)
	if err != nil {
		return nil, err
	}
	t, alias, vt, err := b.dmlTarget(up.Relation, "update")
	if err != nil {
		return nil, err
	}
	countCTERefs(top.ctes, &pg_query.Node{Node: &pg_query.Node_UpdateStmt{UpdateStmt: &pg_query.UpdateStmt{
		FromClause: up.FromClause, WhereClause: up.WhereClause, TargetList: up.TargetList}}})
	var node Node
	var s *scope
	var fetch []sem.ColumnID
	targetList := up.TargetList
	if vt != nil {
		if targetList, err = vt.setTargets(b, targetList); err != nil {
			return nil, err
		}
		node, s, fetch, err = vt.source(b, top, up.FromClause, up.WhereClause)
	} else {
		node, s, fetch, err = b.dmlSource(t, alias, top, up.FromClause, up.WhereClause)
	}
	if err != nil {
		return nil, err
	}
	setCols, setExprs, err := b.assignments(t, s, targetList, &node)
	if err != nil {
		return nil, err
	}
	u := &Update{Table: t, FetchCols: fetch, SetCols: setCols, TableCols: b.freshIDs(len(t.Columns))}
	p := &Project{Input: node}
	byID := map[sem.ColumnID]Column{}
	for _, c := range node.Columns() {
		byID[c.ID] = c
	}
	for _, id := range fetch {
		c := byID[id]
		p.Exprs = append(p.Exprs, colRef(c))
		p.Cols = append(p.Cols, c)
	}
	for i, e := range setExprs {
		c := Column{ID: b.newCol(), Name: t.ColumnByID(setCols[i]).Name, T: e.Type()}
		u.NewCols = append(u.NewCols, c.ID)
		p.Exprs = append(p.Exprs, e)
		p.Cols = append(p.Cols, c)
	}
	// The FROM tables' columns follow, for RETURNING (the executor
	// evaluates it over the new row, then the input row).
	isFetch := map[sem.ColumnID]bool{}
	for _, id := range fetch {
		isFetch[id] = true
	}
	if len(up.ReturningList) > 0 {
		for _, c := range node.Columns() {
			if !isFetch[c.ID] {
				p.Exprs = append(p.Exprs, colRef(c))
				p.Cols = append(p.Cols, c)
			}
		}
	}
	u.Input = p
	if u.Computed, u.Checks, err = b.rowExprs(t, u.TableCols); err != nil {
		return nil, err
	}
	if vt != nil {
		u.Checks = append(u.Checks, vt.checks(b, u.TableCols)...)
	}
	if u.Returning, err = b.returning(up.ReturningList, returningScope(s, fetch, u.TableCols)); err != nil {
		return nil, err
	}
	if vt != nil {
		vt.fixReturning(b, u.Returning, u.TableCols)
	}
	return u, nil
}

func (b *builder) buildDelete(del *pg_query.DeleteStmt) (Node, error) {
	top, err := b.withScope(del.WithClause)
	if err != nil {
		return nil, err
	}
	t, alias, vt, err := b.dmlTarget(del.Relation, "delete from")
	if err != nil {
		return nil, err
	}
	countCTERefs(top.ctes, &pg_query.Node{Node: &pg_query.Node_DeleteStmt{DeleteStmt: &pg_query.DeleteStmt{
		UsingClause: del.UsingClause, WhereClause: del.WhereClause}}})
	var node Node
	var s *scope
	var fetch []sem.ColumnID
	if vt != nil {
		node, s, fetch, err = vt.source(b, top, del.UsingClause, del.WhereClause)
	} else {
		node, s, fetch, err = b.dmlSource(t, alias, top, del.UsingClause, del.WhereClause)
	}
	if err != nil {
		return nil, err
	}
	d := &Delete{Table: t, Input: node, FetchCols: fetch}
	if d.Returning, err = b.returning(del.ReturningList, returningScope(s, fetch, fetch)); err != nil {
		return nil, err
	}
	if vt != nil {
		vt.fixReturning(b, d.Returning, fetch)
	}
	return d, nil
}

// parsedCache keeps the parse trees of catalog text (defaults, checks,
// generated columns, views), which every statement touching the table
// would otherwise parse again. Trees are never modified after parsing
// (the binder and sem only read them), so sharing them is safe.
var parsedCache struct {
	sync.Mutex
	m map[string][]parser.Statement
}

const parsedCacheMax = 4096

func parseCached(sql string) ([]parser.Statement, error) {
	parsedCache.Lock()
	stmts, ok := parsedCache.m[sql]
	parsedCache.Unlock()
	if ok {
		return stmts, nil
	}
	stmts, err := parser.Parse(sql)
	if err != nil {
		return nil, err
	}
	parsedCache.Lock()
	if parsedCache.m == nil || len(parsedCache.m) >= parsedCacheMax {
		parsedCache.m = map[string][]parser.Statement{}
	}
	parsedCache.m[sql] = stmts
	parsedCache.Unlock()
	return stmts, nil
}

// elementAssignment binds SET a[i] = x and SET a[i:j] = y: the column's
// new value is its old one (the target row's, or what an earlier
// assignment to another element of it made) with those elements replaced,
// which Postgres allows for several elements of one column in one SET.
func (b *builder) elementAssignment(t *catalog.Table, c *catalog.Column, s *scope, rt *pg_query.ResTarget,
	elemSet map[string]int, cols *[]rowenc.ColumnID, exprs *[]sem.Expr) error {
	if rt.Val.GetMultiAssignRef() != nil {
		return b.errAt(notSupported("assignment to an array element in a multiple-column assignment is not supported"), rt.Location)
	}
	if c.ComputedExpr != "" {
		return b.errAt(generatedColumnErr(c, true), rt.Location)
	}
	if c.Identity == catalog.IdentityAlways {
		return b.errAt(identityAlwaysErr(c, true), rt.Location)
	}
	var old sem.Expr
	i, again := elemSet[rt.Name]
	if again {
		old = (*exprs)[i]
	} else {
		// The target table's columns are the first relation of the scope.
		for _, ci := range s.rels[0].cols {
			if sc := s.cols[ci]; sc.tcol == c.ID {
				old = &sem.ColRef{ID: sc.id, T: sc.t, Name: quoteIdentIfNeeded(sc.name)}
			}
		}
		if old == nil {
			return b.errAt(undefinedTargetColumn(rt.Name, t.Name), rt.Location)
		}
	}
	e, err := sem.BuildArrayAssign(b.semCtx(s, "UPDATE"), old, rt.Indirection, b.stripCollate(rt.Val), c.Name)
	if err != nil {
		return b.errAt(err, rt.Location)
	}
	if again {
		(*exprs)[i] = e
		return nil
	}
	elemSet[rt.Name] = len(*exprs)
	*cols = append(*cols, c.ID)
	*exprs = append(*exprs, e)
	return nil
}
