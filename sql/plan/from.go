package plan

import (
	"strings"

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

// oneRow is the input of a SELECT without FROM: one row of no columns.
func oneRow() *Values { return &Values{Rows: [][]sem.Expr{{}}} }

// buildFrom binds a FROM list into s; comma-separated items are cross
// joins, LATERAL when the later item references an earlier one.
func (b *builder) buildFrom(items []*pg_query.Node, s *scope) (Node, error) {
	if len(items) == 0 {
		return oneRow(), nil
	}
	var node Node
	for _, it := range items {
		n, lateral, err := b.fromItem(it, s)
		if err != nil {
			return nil, err
		}
		if node == nil {
			node = n
			continue
		}
		node = &Join{Kind: InnerJoin, Left: node, Right: n, Lateral: lateral}
	}
	if err := checkDupAliases(s); err != nil {
		return nil, err
	}
	return node, nil
}

func checkDupAliases(s *scope) error {
	seen := map[string]bool{}
	for _, r := range s.rels {
		if r.alias == "" {
			continue
		}
		if seen[r.alias] {
			return pgerror.New(pgerrcode.DuplicateAlias, "table name %q specified more than once", r.alias)
		}
		seen[r.alias] = true
	}
	return nil
}

// referencesLevel says whether any of ids is a column of s itself.
func referencesLevel(s *scope, ids []sem.ColumnID) bool {
	for _, id := range ids {
		if _, ok, _ := findByID(s, id); ok {
			return true
		}
	}
	return false
}

func (b *builder) fromItem(it *pg_query.Node, s *scope) (Node, bool, error) {
	switch x := it.Node.(type) {
	case *pg_query.Node_RangeVar:
		n, err := b.rangeVar(x.RangeVar, s)
		return n, false, err
	case *pg_query.Node_RangeSubselect:
		rs := x.RangeSubselect
		alias, colAliases := aliasOf(rs.Alias)
		if rs.Alias == nil {
			return nil, false, pgerror.New(pgerrcode.SyntaxError, "subquery in FROM must have an alias").
				WithHint("For example, FROM (SELECT ...) [AS] foo.")
		}
		var lat []sem.ColumnID
		ss := rs.Subquery.GetSelectStmt()
		var r *selResult
		var err error
		if rs.Lateral {
			r, err = b.buildSelect(ss, s, &lat)
		} else {
			r, err = b.buildSelect(ss, &scope{b: b, parent: s.parent, outer: s.outer, ctes: s.ctes, invisible: s}, nil)
		}
		if err != nil {
			return nil, false, err
		}
		n := stripHidden(b, r.node)
		cols, err := renameCols(n.Columns(), colAliases, alias)
		if err != nil {
			return nil, false, err
		}
		b.addRelCols(s, alias, cols, nil)
		return n, rs.Lateral && referencesLevel(s, lat), nil
	case *pg_query.Node_RangeFunction:
		return b.rangeFunction(x.RangeFunction, s)
	case *pg_query.Node_JoinExpr:
		n, err := b.joinExpr(x.JoinExpr, s)
		return n, false, err
	case *pg_query.Node_RangeTableSample:
		return nil, false, notSupported("TABLESAMPLE is not supported")
	}
	return nil, false, notSupported("FROM item %T is not supported", it.Node)
}

// addRelCols makes cols visible under alias.
func (b *builder) addRelCols(s *scope, alias string, cols []Column, pk []sem.ColumnID) {
	idx := make([]int, len(cols))
	for i, c := range cols {
		idx[i] = s.add(scopeCol{id: c.ID, name: c.Name, t: c.T, rel: alias, hidden: c.Hidden, tbl: c.Table, tcol: c.TableCol})
	}
	s.rels = append(s.rels, &rel{alias: alias, cols: idx, pk: pk})
}

func (b *builder) rangeVar(rv *pg_query.RangeVar, s *scope) (Node, error) {
	alias, colAliases := aliasOf(rv.Alias)
	if alias == "" {
		alias = rv.Relname
	}
	if rv.Schemaname == "" && rv.Catalogname == "" {
		if d := s.ctes.lookup(rv.Relname); d != nil {
			n, cols, err := b.cteRef(d, s)
			if err != nil {
				return nil, err
			}
			if cols, err = renameCols(cols, colAliases, alias); err != nil {
				return nil, err
			}
			switch x := n.(type) {
			case *CTEScan:
				x.Cols = cols
			case *WorkTable:
				x.Cols = cols
			default:
				if len(colAliases) > 0 {
					n = &Project{Input: n, Exprs: passThrough(n.Columns()), Cols: withIDs(cols, n.Columns())}
				}
			}
			b.addRelCols(s, alias, cols, nil)
			return n, nil
		}
	}
	r, err := b.env.Catalog.LookupRelation(b.ctx, rv.Schemaname, rv.Relname)
	if err != nil {
		return nil, b.errAt(err, rv.Location)
	}
	switch {
	case r.Table != nil:
		sc, pk := b.scanTable(r.Table)
		cols, err := renameCols(sc.Cols, colAliases, alias)
		if err != nil {
			return nil, err
		}
		sc.Cols = cols
		b.addRelCols(s, alias, cols, pk)
		return sc, nil
	case r.View != nil:
		n, err := b.bindView(r.View)
		if err != nil {
			return nil, err
		}
		cols, err := renameCols(n.Columns(), colAliases, alias)
		if err != nil {
			return nil, err
		}
		n.(*Project).Cols = cols
		b.addRelCols(s, alias, cols, nil)
		return n, nil
	case r.Virtual != nil || r.Sequence != nil:
		if r.Sequence != nil {
			r.Virtual = &sequenceRelation{seq: r.Sequence, schema: rv.Schemaname}
		}
		vs := &VirtualScan{Table: r.Virtual}
		for i, c := range r.Virtual.Columns() {
			vs.Cols = append(vs.Cols, Column{ID: b.newCol(), Name: c.Name, T: c.T})
			vs.ColIdx = append(vs.ColIdx, i)
		}
		cols, err := renameCols(vs.Cols, colAliases, alias)
		if err != nil {
			return nil, err
		}
		vs.Cols = cols
		if b.stmt == nil || !strings.Contains(strings.ToLower(b.stmt.SQL), "tableoid") {
			b.addRelCols(s, alias, cols, nil)
			return vs, nil
		}
		// tableoid, the one system column catalog queries read (pg_dump
		// selects it from every catalog it lists), is the catalog's own
		// pg_class OID: a hidden constant column, so * leaves it out. Only
		// statements that mention it get the projection adding it.
		tableoid := Column{ID: b.newCol(), Name: "tableoid", T: types.Oid, Hidden: true}
		cols = append(cols[:len(cols):len(cols)], tableoid)
		exprs := append(passThrough(vs.Cols), &sem.Const{Datum: types.DOid(r.Virtual.OID()), T: types.Oid})
		b.addRelCols(s, alias, cols, nil)
		return &Project{Input: vs, Exprs: exprs, Cols: cols}, nil
	}
	return nil, b.errAt(undefinedRelation(rv.Relname), rv.Location)
}

// scanTable scans every column of t's primary index; it returns the
// primary key's column IDs too.
func (b *builder) scanTable(t *catalog.Table) (*Scan, []sem.ColumnID) {
	sc := &Scan{Table: t}
	byTC := map[rowenc.ColumnID]sem.ColumnID{}
	for _, c := range t.Columns {
		id := b.newCol()
		byTC[c.ID] = id
		sc.Cols = append(sc.Cols, Column{ID: id, Name: c.Name, T: c.Type, Hidden: c.Hidden, Table: t.ID, TableCol: c.ID})
		sc.TableCols = append(sc.TableCols, c.ID)
	}
	var pk []sem.ColumnID
	for _, k := range t.PrimaryIndex.KeyColumnIDs {
		if c := t.ColumnByID(k); c != nil && c.Hidden && c.ComputedExpr != "" {
			// A hash-sharded key's shard column is computed from the
			// others: grouping by them determines it.
			continue
		}
		pk = append(pk, byTC[k])
	}
	return sc, pk
}

// bindView binds a view's stored query in a fresh scope, naming its
// columns as the view does.
func (b *builder) bindView(v *catalog.View) (Node, error) {
	if b.viewDepth > 32 {
		return nil, pgerror.New(pgerrcode.InvalidObjectDefinition, "infinite recursion detected in rules for relation %q", v.Name)
	}
	stmts, err := parseCached(v.Query)
	if err != nil || len(stmts) != 1 || stmts[0].AST.Stmt.GetSelectStmt() == nil {
		return nil, pgerror.New(pgerrcode.InternalError, "plan: view %q has an invalid stored query", v.Name)
	}
	saved, savedCollate, savedGrouping := b.stmt, b.hasCollate, b.hasGrouping
	b.stmt = &stmts[0]
	b.hasCollate, b.hasGrouping = textHints(v.Query)
	b.viewDepth++
	r, err := b.buildSelect(stmts[0].AST.Stmt.GetSelectStmt(), nil, nil)
	b.viewDepth--
	b.stmt, b.hasCollate, b.hasGrouping = saved, savedCollate, savedGrouping
	if err != nil {
		// The error's position is in the view's text, not the query's.
		if pe, ok := err.(*sem.PositionError); ok {
			err = pe.Err
		}
		return nil, err
	}
	n := stripHidden(b, r.node)
	cols := append([]Column(nil), n.Columns()...)
	for i := range cols {
		if i < len(v.Columns) {
			cols[i].Name = v.Columns[i].Name
		}
	}
	return &Project{Input: n, Exprs: passThrough(n.Columns()), Cols: freshColsLike(b, cols)}, nil
}

func freshColsLike(b *builder, cols []Column) []Column {
	out := make([]Column, len(cols))
	for i, c := range cols {
		c.ID = b.newCol()
		out[i] = c
	}
	return out
}

// userSetFunction binds a set-returning user-defined function in FROM as
// the LATERAL subquery sem.InlineSetCall makes of it. ok is false when rf
// is something else.
func (b *builder) userSetFunction(rf *pg_query.RangeFunction, s *scope) (n Node, lateral, ok bool, err error) {
	if len(rf.Functions) != 1 {
		return nil, false, false, nil
	}
	items := rf.Functions[0].GetList().GetItems()
	if len(items) == 0 {
		return nil, false, false, nil
	}
	fc := items[0].GetFuncCall()
	if fc == nil || isGeneratorName(funcName(fc)) {
		return nil, false, false, nil
	}
	var lat []sem.ColumnID
	side := &scope{b: b, parent: s, outer: &lat, ctes: s.ctes}
	sel, cols, ok, err := sem.InlineSetCall(b.semCtx(side, "FROM"), fc)
	if err != nil || !ok {
		return nil, false, ok, err
	}
	if rf.Ordinality || len(rf.Coldeflist) > 0 {
		return nil, false, true, notSupported("WITH ORDINALITY and column definition lists are not supported on user-defined functions")
	}
	alias := &pg_query.Alias{Aliasname: funcName(fc)}
	if rf.Alias != nil {
		alias = proto.Clone(rf.Alias).(*pg_query.Alias)
		// SETOF scalar aliased t names its column t, as in PostgreSQL.
		if len(alias.Colnames) == 0 && len(cols) == 1 && cols[0].Name == funcName(fc) {
			alias.Colnames = []*pg_query.Node{pg_query.MakeStrNode(alias.Aliasname)}
		}
	}
	// The body is inlined: its own calls count as nested (sem's
	// BuildContext.Inlining), so a function that calls itself stops.
	b.inlineDepth++
	defer func() { b.inlineDepth-- }()
	n, lateral, err = b.fromItem(&pg_query.Node{Node: &pg_query.Node_RangeSubselect{RangeSubselect: &pg_query.RangeSubselect{
		Lateral: true, Subquery: sel, Alias: alias}}}, s)
	return n, lateral, true, err
}

// rangeFunction binds functions in FROM: set-returning ones become a
// ProjectSet over one row, others a one-row Project.
func (b *builder) rangeFunction(rf *pg_query.RangeFunction, s *scope) (Node, bool, error) {
	if n, lateral, ok, err := b.jsonToRecord(rf, s); ok {
		return n, lateral, err
	}
	if n, lateral, ok, err := b.userSetFunction(rf, s); ok || err != nil {
		return n, lateral, err
	}
	if len(rf.Coldeflist) > 0 {
		return nil, false, notSupported("a column definition list is not supported")
	}
	rf = expandMultiUnnest(rf)
	alias, colAliases := aliasOf(rf.Alias)
	var lat []sem.ColumnID
	// Functions in FROM may always reference earlier FROM items (they are
	// implicitly LATERAL).
	side := &scope{b: b, parent: s, outer: &lat, ctes: s.ctes}
	ps := &ProjectSet{Input: oneRow()}
	var proj *Project
	for _, fn := range rf.Functions {
		items := fn.GetList().GetItems()
		if len(items) == 0 {
			continue
		}
		fc := items[0].GetFuncCall()
		if fc == nil {
			return nil, false, notSupported("only function calls are supported in FROM")
		}
		if isGeneratorName(funcName(fc)) {
			call, cols, err := b.bindSRF(side, fc, "FROM")
			if err != nil {
				return nil, false, err
			}
			ps.Funcs = append(ps.Funcs, SetFunc{Call: call, Cols: cols})
			ps.Cols = append(ps.Cols, cols...)
			continue
		}
		if len(rf.Functions) > 1 {
			return nil, false, notSupported("ROWS FROM with a function that returns no set is not supported")
		}
		e, err := b.expr(side, "FROM", items[0], nil)
		if err != nil {
			return nil, false, err
		}
		proj = &Project{Input: oneRow(), Exprs: []sem.Expr{e},
			Cols: []Column{{ID: b.newCol(), Name: funcName(fc), T: e.Type()}}}
	}
	var n Node = ps
	cols := ps.Cols
	if proj != nil {
		n, cols = proj, proj.Cols
	}
	var ordCol *Column
	if rf.Ordinality {
		// WITH ORDINALITY numbers the function's rows: row_number() over
		// the rows in the order the function produced them (a Window
		// without ORDER BY keeps its input order), restarting for each
		// outer row of a LATERAL call as the whole node is re-run.
		rn, err := builtins.ResolveFunc("row_number", nil)
		if err != nil {
			return nil, false, err
		}
		c := Column{ID: b.newCol(), Name: "ordinality", T: rn.Return}
		ordCol = &c
		n = &Window{Input: n, Funcs: []WindowFunc{{Fn: rn, Name: "row_number", Frame: builtins.DefaultFrame}},
			Cols: append(append([]Column(nil), cols...), c)}
		cols = n.Columns()
	}
	if alias == "" && len(cols) > 0 {
		alias = cols[0].Name
		if len(rf.Functions) > 0 {
			if fc := rf.Functions[0].GetList().GetItems()[0].GetFuncCall(); fc != nil {
				alias = funcName(fc)
			}
		}
	}
	// A single-column function aliased t without column aliases names its
	// column t, as Postgres does.
	if len(cols) == 1 && ordCol == nil && len(colAliases) == 0 && rf.Alias != nil {
		colAliases = []string{alias}
	}
	cols, err := renameCols(cols, colAliases, alias)
	if err != nil {
		return nil, false, err
	}
	if ordCol != nil {
		n.(*Window).Cols = cols
		cols := cols[:len(cols)-1]
		if proj != nil {
			proj.Cols = cols
		} else {
			ps.Cols = cols
		}
	}
	if proj != nil {
		proj.Cols = cols[:len(proj.Cols)]
	} else {
		k := 0
		for i := range ps.Funcs {
			ps.Funcs[i].Cols = cols[k : k+len(ps.Funcs[i].Cols)]
			k += len(ps.Funcs[i].Cols)
		}
		ps.Cols = cols[:k]
	}
	b.addRelCols(s, alias, cols, nil)
	return n, referencesLevel(s, lat), nil
}

// joinExpr binds a JOIN into s.
func (b *builder) joinExpr(j *pg_query.JoinExpr, s *scope) (Node, error) {
	l0, lr0 := len(s.cols), len(s.rels)
	left, _, err := b.fromItem(j.Larg, s)
	if err != nil {
		return nil, err
	}
	l1 := len(s.cols)
	right, lateral, err := b.fromItem(j.Rarg, s)
	if err != nil {
		return nil, err
	}
	r1 := len(s.cols)
	var kind JoinKind
	switch j.Jointype {
	case pg_query.JoinType_JOIN_INNER:
		kind = InnerJoin
	case pg_query.JoinType_JOIN_LEFT:
		kind = LeftJoin
	case pg_query.JoinType_JOIN_RIGHT:
		kind = RightJoin
	case pg_query.JoinType_JOIN_FULL:
		kind = FullJoin
	default:
		return nil, notSupported("join type %s is not supported", j.Jointype)
	}
	if lateral && (kind == RightJoin || kind == FullJoin) {
		return nil, pgerror.New(pgerrcode.InvalidColumnReference,
			"invalid reference to FROM-clause entry for table").WithDetail("The combining JOIN type must be INNER or LEFT for a LATERAL reference.")
	}
	join := &Join{Kind: kind, Left: left, Right: right, Lateral: lateral, Explicit: true}
	var node Node = join
	var using []string
	if j.IsNatural {
		for i := l0; i < l1; i++ {
			lc := s.cols[i]
			if lc.hidden || lc.noUnqual {
				continue
			}
			for k := l1; k < r1; k++ {
				rc := s.cols[k]
				if !rc.hidden && !rc.noUnqual && rc.name == lc.name {
					using = append(using, lc.name)
					break
				}
			}
		}
	}
	for _, u := range j.UsingClause {
		using = append(using, strVal(u))
	}
	s.qualify = true
	if len(using) > 0 {
		var conds []sem.Expr
		var merged []int
		var coalesce []sem.Expr
		var coalesceCols []Column
		for _, name := range using {
			li, err := findSide(s, l0, l1, name, "left")
			if err != nil {
				return nil, err
			}
			ri, err := findSide(s, l1, r1, name, "right")
			if err != nil {
				return nil, err
			}
			lc, rc := s.cols[li], s.cols[ri]
			cmp, err := b.eqCond(lc, rc, s)
			if err != nil {
				return nil, err
			}
			conds = append(conds, cmp)
			t, err := types.CommonType("JOIN/USING", lc.t, rc.t)
			if err != nil {
				return nil, err
			}
			le, _ := implicitCast(&sem.ColRef{ID: lc.id, T: lc.t, Name: s.printName(&lc)}, t)
			re, _ := implicitCast(&sem.ColRef{ID: rc.id, T: rc.t, Name: s.printName(&rc)}, t)
			// The merged column is the left one (INNER, LEFT) or the right
			// one (RIGHT) when it already has the common type; otherwise,
			// and always for FULL (COALESCE), a computed column.
			var merge sem.Expr
			switch kind {
			case InnerJoin, LeftJoin:
				s.cols[ri].noUnqual, s.cols[ri].noStar = true, true
				if lc.t.Identical(t) {
					merged = append(merged, li)
					continue
				}
				s.cols[li].noUnqual, s.cols[li].noStar = true, true
				merge = le
			case RightJoin:
				s.cols[li].noUnqual, s.cols[li].noStar = true, true
				if rc.t.Identical(t) {
					merged = append(merged, ri)
					continue
				}
				s.cols[ri].noUnqual, s.cols[ri].noStar = true, true
				merge = re
			case FullJoin:
				s.cols[li].noUnqual, s.cols[li].noStar = true, true
				s.cols[ri].noUnqual, s.cols[ri].noStar = true, true
				merge = &sem.Coalesce{Args: []sem.Expr{le, re}, T: t}
			}
			c := Column{ID: b.newCol(), Name: name, T: t}
			coalesce = append(coalesce, merge)
			coalesceCols = append(coalesceCols, c)
			merged = append(merged, s.add(scopeCol{id: c.ID, name: name, t: t}))
		}
		if len(conds) == 1 {
			join.On = conds[0]
		} else {
			join.On = &sem.And{Args: conds}
		}
		if len(coalesce) > 0 {
			p := &Project{Input: join, Exprs: append(passThrough(join.Columns()), coalesce...),
				Cols: append(append([]Column(nil), join.Columns()...), coalesceCols...)}
			node = p
		}
		// Star order: the merged columns, then the left's, then the right's.
		reorderScope(s, l0, merged)
	} else if j.Quals != nil {
		on, err := b.expr(s, "JOIN/ON", rewriteRowIn(j.Quals), types.Bool)
		if err != nil {
			return nil, err
		}
		join.On = on
	}
	join.LeftEq, join.RightEq = equiKeys(join.On, colSet(left.Columns()), colSet(right.Columns()))
	if j.Alias != nil {
		alias, colAliases := aliasOf(j.Alias)
		var idx []int
		for i := l0; i < len(s.cols); i++ {
			if !s.cols[i].hidden && !s.cols[i].noStar {
				idx = append(idx, i)
			}
		}
		for k, i := range idx {
			s.cols[i].rel = alias
			if k < len(colAliases) {
				s.cols[i].name = colAliases[k]
			}
		}
		s.rels = append(s.rels[:lr0], &rel{alias: alias, cols: idx})
	}
	return node, nil
}

func findSide(s *scope, from, to int, name, side string) (int, error) {
	hit := -1
	for i := from; i < to; i++ {
		c := s.cols[i]
		if c.noUnqual || c.name != name {
			continue
		}
		if hit >= 0 {
			return 0, pgerror.New(pgerrcode.AmbiguousColumn, "common column name %q appears more than once in %s table", name, side)
		}
		hit = i
	}
	if hit < 0 {
		return 0, pgerror.New(pgerrcode.UndefinedColumn, "column %q specified in USING clause does not exist in %s table", name, side)
	}
	return hit, nil
}

// eqCond builds l = r with Postgres's operator resolution, through a
// synthetic AST over a two-name scope.
func (b *builder) eqCond(l, r scopeCol, s *scope) (sem.Expr, error) {
	ms := mapScope{names: map[string]*scopeCol{}}
	lc, rc := l, r
	lc.name, rc.name = s.printName(&l), s.printName(&r)
	ms.names["\x00l"], ms.names["\x00r"] = &lc, &rc
	ast := pg_query.MakeAExprNode(pg_query.A_Expr_Kind_AEXPR_OP, []*pg_query.Node{pg_query.MakeStrNode("=")},
		pg_query.MakeColumnRefNode([]*pg_query.Node{pg_query.MakeStrNode("\x00l")}, -1),
		pg_query.MakeColumnRefNode([]*pg_query.Node{pg_query.MakeStrNode("\x00r")}, -1), -1)
	bc := sem.BuildContext{Scope: rawNameScope(ms), Types: b.env.Types, Clause: "JOIN/USING"}
	return sem.Build(bc, ast, types.Bool)
}

// rawNameScope prints names as given (eqCond already qualified them).
type rawNameScope mapScope

func (m rawNameScope) Resolve(fields []string) (sem.ColumnID, *types.T, string, error) {
	if c, ok := m.names[fields[len(fields)-1]]; ok {
		return c.id, c.t, c.name, nil
	}
	return 0, nil, "", sem.ErrUndefinedColumn(fields...)
}

// reorderScope moves the merged USING columns to the front of the join's
// columns (from index from), keeping rel indexes right.
func reorderScope(s *scope, from int, merged []int) {
	perm := append([]int(nil), merged...)
	isMerged := map[int]bool{}
	for _, m := range merged {
		isMerged[m] = true
	}
	for i := from; i < len(s.cols); i++ {
		if !isMerged[i] {
			perm = append(perm, i)
		}
	}
	newPos := map[int]int{}
	cols := append([]scopeCol(nil), s.cols[:from]...)
	for k, old := range perm {
		newPos[old] = from + k
		cols = append(cols, s.cols[old])
	}
	s.cols = cols
	for _, r := range s.rels {
		for i, c := range r.cols {
			if p, ok := newPos[c]; ok {
				r.cols[i] = p
			}
		}
	}
}

func colSet(cols []Column) map[sem.ColumnID]bool {
	m := make(map[sem.ColumnID]bool, len(cols))
	for _, c := range cols {
		m[c.ID] = true
	}
	return m
}

// equiKeys finds the column = column conjuncts of on usable as hash keys.
func equiKeys(on sem.Expr, left, right map[sem.ColumnID]bool) (l, r []sem.ColumnID) {
	if on == nil {
		return nil, nil
	}
	conj := []sem.Expr{on}
	if a, ok := on.(*sem.And); ok {
		conj = a.Args
	}
	for _, c := range conj {
		cmp, ok := c.(*sem.Cmp)
		if !ok || cmp.Op != sem.EQ {
			continue
		}
		lc, ok1 := cmp.Left.(*sem.ColRef)
		rc, ok2 := cmp.Right.(*sem.ColRef)
		if !ok1 || !ok2 || lc.T.Family != rc.T.Family {
			continue
		}
		switch {
		case left[lc.ID] && right[rc.ID]:
			l, r = append(l, lc.ID), append(r, rc.ID)
		case left[rc.ID] && right[lc.ID]:
			l, r = append(l, rc.ID), append(r, lc.ID)
		}
	}
	return l, r
}
