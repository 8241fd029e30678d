package plan

import (
	"context"
	"strings"

	"github.com/jackc/pgerrcode"
	pg_query "github.com/pganalyze/pg_query_go/v6"
	"google.golang.org/protobuf/proto"

	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/parser"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
)

// Build binds one statement (SELECT, VALUES, TABLE, INSERT, UPDATE,
// DELETE) into a plan: names resolved through env.Catalog, every scalar
// expression typed by sem.Build, every column given a query-wide ID.
func Build(ctx context.Context, env *Env, stmt *parser.Statement) (p *Plan, err error) {
	if stmt == nil || stmt.AST == nil || stmt.AST.Stmt == nil {
		return nil, pgerror.New(pgerrcode.SyntaxError, "empty statement")
	}
	if env.Params == nil {
		env.Params = sem.NewParamTypes()
	}
	b := &builder{ctx: ctx, env: env, stmt: stmt}
	b.hasCollate, b.hasGrouping = textHints(stmt.SQL)
	p = &Plan{}
	switch n := stmt.AST.Stmt.Node.(type) {
	case *pg_query.Node_SelectStmt:
		root, err := b.buildSelect(n.SelectStmt, nil, nil)
		if err != nil {
			return nil, err
		}
		p.Root, p.Tag, p.ReadOnly = root.node, "SELECT", !root.locks && !b.writes
		for _, c := range root.node.Columns() {
			if !c.Hidden {
				p.Columns = append(p.Columns, c)
			}
		}
		if p.Columns == nil {
			p.Columns = []Column{}
		}
	case *pg_query.Node_InsertStmt:
		if p.Root, err = b.buildInsert(n.InsertStmt); err != nil {
			return nil, err
		}
		p.Tag = "INSERT"
	case *pg_query.Node_UpdateStmt:
		if p.Root, err = b.buildUpdate(n.UpdateStmt); err != nil {
			return nil, err
		}
		p.Tag = "UPDATE"
	case *pg_query.Node_DeleteStmt:
		if p.Root, err = b.buildDelete(n.DeleteStmt); err != nil {
			return nil, err
		}
		p.Tag = "DELETE"
	default:
		return nil, pgerror.New(pgerrcode.FeatureNotSupported, "plan: cannot bind %T", stmt.AST.Stmt.Node)
	}
	if p.Tag != "SELECT" {
		p.Columns = p.Root.Columns()
	}
	for _, d := range b.dmlCTEs {
		if d.id < 0 {
			return nil, b.errAt(notSupported("a data-modifying WITH query the statement does not read (%q) is not supported", d.name), d.ast.Location)
		}
	}
	p.Subqueries, p.CTEs = b.subqueries, b.ctes
	if p.Params, err = env.Params.Types(); err != nil {
		return nil, err
	}
	return p, nil
}

// builder holds what one statement's binding shares: the ID allocator, the
// subqueries and materialized CTEs found so far.
type builder struct {
	ctx        context.Context
	env        *Env
	stmt       *parser.Statement
	lastCol    sem.ColumnID
	subqueries []*Subquery
	ctes       []Node
	lastWT     int
	// viewDepth guards against a view whose definition reaches itself.
	viewDepth int
	// inlineDepth counts nested inlined SQL function calls (sem's
	// BuildContext.Inlining), which guards against recursive functions.
	inlineDepth int
	// selectDepth is how many query expressions enclose the one being
	// bound (data-modifying CTEs are only allowed at the top).
	selectDepth int
	// dmlCTEs are the data-modifying CTEs declared; writes is set once
	// one is bound (the statement is then not read-only).
	dmlCTEs []*cteDef
	writes  bool
	// outerCTEs are the CTEs a data-modifying CTE's statement sees.
	outerCTEs *cteEnv
	// hasCollate: the statement's text mentions COLLATE (stripCollate
	// has work to do only then); hasGrouping: it mentions GROUPING (only
	// then can a grouping() call be in it). Walking the AST by reflection
	// to look for them cost 14% of a point SELECT's CPU.
	hasCollate, hasGrouping bool
}

// textHints reports whether sql mentions COLLATE and GROUPING, the words
// without which the binder's AST rewrites for them have nothing to do.
func textHints(sql string) (collate, grouping bool) {
	up := strings.ToUpper(sql)
	return strings.Contains(up, "COLLATE"), strings.Contains(up, "GROUPING")
}

func (b *builder) newCol() sem.ColumnID {
	b.lastCol++
	return b.lastCol
}

// pos maps an AST location to the client position.
func (b *builder) pos(loc int32) int {
	if loc < 0 {
		return 0
	}
	return b.stmt.Position(loc)
}

// errAt attaches a position to err unless it has one.
func (b *builder) errAt(err error, loc int32) error {
	if err == nil || loc < 0 || sem.ErrorPosition(err) != 0 {
		return err
	}
	return &sem.PositionError{Err: err, Pos: b.pos(loc)}
}

func notSupported(format string, args ...any) error {
	return pgerror.New(pgerrcode.FeatureNotSupported, format, args...)
}

// ---------------------------------------------------------------------------
// Scopes.

// scopeCol is one column a FROM clause makes visible.
type scopeCol struct {
	id   sem.ColumnID
	name string
	t    *types.T
	rel  string // qualifier that names it ("" for a merged USING column)
	// hidden: not expanded by * (rowid); noUnqual: only reachable
	// qualified (the right side of a JOIN USING); noStar: left out of *
	// because a merged column stands for it.
	hidden, noUnqual, noStar bool
	tbl                      catalog.ID
	tcol                     rowenc.ColumnID
}

// rel is one relation of a FROM clause, for qualified names and t.*.
type rel struct {
	alias string
	cols  []int // indexes into scope.cols
	// pk are a table's primary-key columns (GROUP BY functional
	// dependency).
	pk []sem.ColumnID
}

// scope is one query level's FROM clause. parent is the enclosing query
// level (a subquery's outer query), searched when a name is not found
// here; outer, when set, collects the columns found beyond this level,
// which is how correlation is noticed.
type scope struct {
	b      *builder
	cols   []scopeCol
	rels   []*rel
	parent *scope
	outer  *[]sem.ColumnID
	ctes   *cteEnv
	// grouped is set once the level has GROUP BY or aggregates: outer
	// references from subqueries are then not checked (see groupCheck).
	qualify bool // print column names qualified (more than one relation)
	// invisible is the FROM clause a non-LATERAL item may not see: only
	// for the better error Postgres gives when it names one of its tables.
	invisible *scope
}

func (s *scope) add(c scopeCol) int {
	s.cols = append(s.cols, c)
	return len(s.cols) - 1
}

func (s *scope) addRel(alias string, idx []int) {
	s.rels = append(s.rels, &rel{alias: alias, cols: idx})
}

func (s *scope) printName(c *scopeCol) string {
	if (s.qualify || s.nested()) && c.rel != "" {
		return quoteIdentIfNeeded(c.rel) + "." + quoteIdentIfNeeded(c.name)
	}
	return quoteIdentIfNeeded(c.name)
}

// nested says whether an enclosing level has relations: Postgres's
// EXPLAIN then qualifies every column (the statement has several).
func (s *scope) nested() bool {
	for p := s.parent; p != nil; p = p.parent {
		if len(p.rels) > 0 {
			return true
		}
	}
	return false
}

// lookup finds fields in this level only; found=false when no column
// matches (the caller then tries the parent).
func (s *scope) lookup(fields []string) (c *scopeCol, found bool, err error) {
	switch len(fields) {
	case 1:
		var hit *scopeCol
		for i := range s.cols {
			sc := &s.cols[i]
			if sc.noUnqual || sc.name != fields[0] {
				continue
			}
			if hit != nil && hit.id != sc.id {
				return nil, true, sem.ErrAmbiguousColumn(fields[0])
			}
			hit = sc
		}
		return hit, hit != nil, nil
	default:
		// schema.table.col or db.schema.table.col: the table and column
		// are the last two.
		q, name := fields[len(fields)-2], fields[len(fields)-1]
		var r *rel
		for _, x := range s.rels {
			if x.alias == q {
				r = x
				break
			}
		}
		if r == nil {
			return nil, false, nil
		}
		var hit *scopeCol
		for _, i := range r.cols {
			sc := &s.cols[i]
			if sc.name != name {
				continue
			}
			if hit != nil && hit.id != sc.id {
				return nil, true, sem.ErrAmbiguousColumn(q + "." + name)
			}
			hit = sc
		}
		if hit == nil {
			return nil, true, sem.ErrUndefinedColumn(fields...)
		}
		return hit, true, nil
	}
}

func (s *scope) hasRel(name string) bool {
	for _, r := range s.rels {
		if r.alias == name {
			return true
		}
	}
	return false
}

// Resolve implements sem.Scope: this level first, then the enclosing ones,
// recording outer references on every level crossed.
func (s *scope) Resolve(fields []string) (sem.ColumnID, *types.T, string, error) {
	var crossed []*scope
	relSeen := false
	for cur := s; cur != nil; cur = cur.parent {
		c, found, err := cur.lookup(fields)
		if err != nil {
			return 0, nil, "", err
		}
		if len(fields) > 1 && cur.hasRel(fields[len(fields)-2]) {
			relSeen = true
		}
		if found {
			for _, x := range crossed {
				if x.outer != nil {
					addOuter(x.outer, c.id)
				}
			}
			if len(crossed) > 0 && c.rel != "" {
				return c.id, c.t, quoteIdentIfNeeded(c.rel) + "." + quoteIdentIfNeeded(c.name), nil
			}
			return c.id, c.t, cur.printName(c), nil
		}
		crossed = append(crossed, cur)
	}
	if len(fields) > 1 && !relSeen {
		q := fields[len(fields)-2]
		for cur := s; cur != nil; cur = cur.parent {
			if cur.invisible != nil && cur.invisible.hasRel(q) {
				return 0, nil, "", pgerror.New(pgerrcode.UndefinedTable,
					"invalid reference to FROM-clause entry for table %q", q).
					WithHint("There is an entry for table %q, but it cannot be referenced from this part of the query.", q)
			}
		}
		return 0, nil, "", sem.ErrMissingFrom(q)
	}
	return 0, nil, "", sem.ErrUndefinedColumn(fields...)
}

func addOuter(list *[]sem.ColumnID, id sem.ColumnID) {
	for _, x := range *list {
		if x == id {
			return
		}
	}
	*list = append(*list, id)
}

// starCols are the columns * expands to, in order.
func (s *scope) starCols() []scopeCol {
	var out []scopeCol
	for _, c := range s.cols {
		if !c.hidden && !c.noStar {
			out = append(out, c)
		}
	}
	return out
}

// mapScope resolves a fixed set of names (the table columns of a DML
// statement's defaults, checks and RETURNING).
type mapScope struct {
	names map[string]*scopeCol
}

func (m mapScope) Resolve(fields []string) (sem.ColumnID, *types.T, string, error) {
	name := fields[len(fields)-1]
	if c, ok := m.names[name]; ok && len(fields) == 1 {
		return c.id, c.t, quoteIdentIfNeeded(c.name), nil
	}
	return 0, nil, "", sem.ErrUndefinedColumn(fields...)
}

// ---------------------------------------------------------------------------
// Expressions.

// semCtx is the sem.BuildContext for expressions of query level s (nil:
// no columns visible, subqueries still allowed).
func (b *builder) semCtx(s *scope, clause string) sem.BuildContext {
	bc := sem.BuildContext{
		Params:   b.env.Params,
		Types:    b.env.Types,
		Clause:   clause,
		Position: b.stmt.Position,
		Inlining: &b.inlineDepth,
	}
	bc.Subqueries = &subqueryPlanner{b: b, s: s}
	if s != nil {
		bc.Scope = s
	}
	return bc
}

func (b *builder) expr(s *scope, clause string, n *pg_query.Node, want *types.T) (sem.Expr, error) {
	return b.semBuild(b.semCtx(s, clause), n, want)
}

// semBuild is sem.Build over an expression with COLLATE clauses that
// change nothing removed (see noopCollations).
func (b *builder) semBuild(bc sem.BuildContext, n *pg_query.Node, want *types.T) (sem.Expr, error) {
	return sem.Build(bc, b.wholeRowJSON(bc, b.stripCollate(n)), want)
}

// semBuildAssign is sem.BuildAssign after stripCollate.
func (b *builder) semBuildAssign(bc sem.BuildContext, n *pg_query.Node, t *types.T, col string) (sem.Expr, error) {
	return sem.BuildAssign(bc, b.stripCollate(n), t, col)
}

// noopCollations are the collations that are Cairn's only one (bytewise,
// C): COLLATE with them is a no-op, which psql's \d queries rely on
// (COLLATE pg_catalog.default). Other collations are left for sem to
// reject.
var noopCollations = map[string]bool{"default": true, "C": true, "POSIX": true, "ucs_basic": true}

// stripCollate returns n without its no-op COLLATE clauses: n itself when
// it has none, else a copy (the parse tree is never modified).
func (b *builder) stripCollate(n *pg_query.Node) *pg_query.Node {
	if n == nil || !b.hasCollate {
		return n
	}
	isNoop := func(c *pg_query.CollateClause) bool {
		return len(c.Collname) > 0 && noopCollations[strVal(c.Collname[len(c.Collname)-1])]
	}
	found := false
	walkAST(n, func(x *pg_query.Node) bool {
		if c := x.GetCollateClause(); c != nil && isNoop(c) {
			found = true
		}
		return !found
	})
	if !found {
		return n
	}
	n = proto.Clone(n).(*pg_query.Node)
	walkAST(n, func(x *pg_query.Node) bool {
		for {
			c := x.GetCollateClause()
			if c == nil || !isNoop(c) || c.Arg == nil {
				return true
			}
			x.Node = c.Arg.Node
		}
	})
	return n
}

// subqueryPlanner implements sem.Subqueries for one query level.
type subqueryPlanner struct {
	b *builder
	s *scope
}

func (p *subqueryPlanner) Plan(sel *pg_query.Node, kind sem.SubqueryKind) (int, []*types.T, error) {
	b := p.b
	ss := sel.GetSelectStmt()
	if ss == nil {
		return 0, nil, notSupported("subquery of type %T is not supported", sel.Node)
	}
	var outer []sem.ColumnID
	r, err := b.buildSelect(ss, p.s, &outer)
	if err != nil {
		return 0, nil, err
	}
	node := stripHidden(b, r.node)
	cols := node.Columns()
	if kind != sem.ExistsSubquery && len(cols) != 1 {
		msg := "subquery must return only one column"
		if len(cols) == 0 {
			msg = "subquery must return a column"
		}
		return 0, nil, pgerror.New(pgerrcode.SyntaxError, "%s", msg)
	}
	if kind == sem.ScalarSubquery {
		node = &Max1Row{Input: node}
	}
	id := len(b.subqueries) + 1
	sq := &Subquery{ID: id, Kind: kind, Root: node, Outer: outer}
	b.subqueries = append(b.subqueries, sq)
	ts := make([]*types.T, len(cols))
	for i, c := range cols {
		ts[i] = c.T
	}
	return id, ts, nil
}

func findByID(s *scope, id sem.ColumnID) (*scopeCol, bool, error) {
	for i := range s.cols {
		if s.cols[i].id == id {
			return &s.cols[i], true, nil
		}
	}
	return nil, false, nil
}

// stripHidden drops hidden columns from n's output (a subquery, a derived
// table, an INSERT's SELECT).
func stripHidden(b *builder, n Node) Node {
	cols := n.Columns()
	hidden := false
	for _, c := range cols {
		if c.Hidden {
			hidden = true
			break
		}
	}
	if !hidden {
		return n
	}
	p := &Project{Input: n}
	for _, c := range cols {
		if c.Hidden {
			continue
		}
		p.Exprs = append(p.Exprs, &sem.ColRef{ID: c.ID, T: c.T, Name: quoteIdentIfNeeded(c.Name)})
		p.Cols = append(p.Cols, c)
	}
	return p
}

// quoteIdentIfNeeded quotes an identifier as Postgres's EXPLAIN does.
func quoteIdentIfNeeded(s string) string {
	if s == "" {
		return `""`
	}
	ok := true
	for i, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || i > 0 && (r >= '0' && r <= '9' || r == '$')) {
			ok = false
			break
		}
	}
	if ok && !reservedWords[s] {
		return s
	}
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

var reservedWords = map[string]bool{
	"all": true, "analyse": true, "analyze": true, "and": true, "any": true, "array": true, "as": true,
	"asc": true, "case": true, "cast": true, "check": true, "collate": true, "column": true,
	"constraint": true, "create": true, "default": true, "desc": true, "distinct": true, "do": true,
	"else": true, "end": true, "except": true, "false": true, "for": true, "foreign": true, "from": true,
	"grant": true, "group": true, "having": true, "in": true, "intersect": true, "into": true,
	"limit": true, "not": true, "null": true, "offset": true, "on": true, "only": true, "or": true,
	"order": true, "primary": true, "references": true, "select": true, "table": true, "then": true,
	"to": true, "true": true, "union": true, "unique": true, "user": true, "using": true, "when": true,
	"where": true, "window": true, "with": true,
}

func colRef(c Column) *sem.ColRef {
	return &sem.ColRef{ID: c.ID, T: c.T, Name: quoteIdentIfNeeded(c.Name)}
}

func nodeLoc(n *pg_query.Node) int32 {
	if n == nil {
		return -1
	}
	switch x := n.Node.(type) {
	case *pg_query.Node_ColumnRef:
		return x.ColumnRef.Location
	case *pg_query.Node_AConst:
		return x.AConst.Location
	case *pg_query.Node_FuncCall:
		return x.FuncCall.Location
	case *pg_query.Node_AExpr:
		return x.AExpr.Location
	case *pg_query.Node_TypeCast:
		return x.TypeCast.Location
	case *pg_query.Node_ResTarget:
		return x.ResTarget.Location
	case *pg_query.Node_RangeVar:
		return x.RangeVar.Location
	case *pg_query.Node_SubLink:
		return x.SubLink.Location
	case *pg_query.Node_ParamRef:
		return x.ParamRef.Location
	case *pg_query.Node_SetToDefault:
		return x.SetToDefault.Location
	case *pg_query.Node_RowExpr:
		return x.RowExpr.Location
	}
	return -1
}

// leftLoc is the position PostgreSQL's exprLocation reports for an
// expression: an operator or a cast counts from its leftmost operand.
func leftLoc(n *pg_query.Node) int32 {
	loc := nodeLoc(n)
	var left *pg_query.Node
	switch x := n.GetNode().(type) {
	case *pg_query.Node_AExpr:
		left = x.AExpr.Lexpr
	case *pg_query.Node_TypeCast:
		left = x.TypeCast.Arg
	}
	if left == nil {
		return loc
	}
	if l := leftLoc(left); l >= 0 && (loc < 0 || l < loc) {
		return l
	}
	return loc
}

func strVal(n *pg_query.Node) string {
	if s := n.GetString_(); s != nil {
		return s.Sval
	}
	return ""
}

func aliasOf(a *pg_query.Alias) (string, []string) {
	if a == nil {
		return "", nil
	}
	var cols []string
	for _, c := range a.Colnames {
		cols = append(cols, strVal(c))
	}
	return a.Aliasname, cols
}
