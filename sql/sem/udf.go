package sem

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/jackc/pgerrcode"
	pg_query "github.com/pganalyze/pg_query_go/v6"
	"google.golang.org/protobuf/proto"

	"github.com/cairn-db/cairn/sql/parser"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/types"
)

// User-defined SQL functions (CREATE FUNCTION ... LANGUAGE sql) are
// inlined, as PostgreSQL inlines simple SQL functions: a call becomes the
// function's body with every parameter reference replaced by the
// argument, cast to the parameter's type. A body that is one expression
// (RETURN expr, or SELECT expr with no other clause) becomes that
// expression; any other SELECT a scalar subquery over its first row; a
// set-returning function in FROM a LATERAL subquery (InlineSetCall). The
// body is re-bound at every use, so a call sees the tables as they are
// then, and a plan is only as old as its catalog generation.
//
// Differences from PostgreSQL (docs/sql.md): an argument referenced
// several times in the body is evaluated as many times (PostgreSQL
// declines to inline such calls with a volatile argument and evaluates it
// once); a parameter name shadows a column of the same name in the body's
// FROM (PostgreSQL prefers the column); the body is one SELECT.

// UserFunc is a user-defined function as the binder inlines it.
type UserFunc struct {
	OID    uint32
	Schema string
	Name   string
	// Params are the input parameters in order.
	Params []UserParam
	// Return is the result type of a scalar function, or of a SETOF
	// function's one column.
	Return *types.T
	// Columns are a set-returning function's output columns: RETURNS
	// TABLE's, or one named after the function for SETOF t.
	Columns    []UserParam
	ReturnsSet bool
	Strict     bool
	// Body is the function's SELECT (a SelectStmt node), nil for a
	// RETURN expr body, whose expression is Expr. Both are shared:
	// inlining works on copies.
	Body, Expr *pg_query.Node
}

// UserParam is a parameter or output column of a UserFunc.
type UserParam struct {
	Name string
	Type *types.T
	// Default is the DEFAULT expression, nil when none.
	Default *pg_query.Node
}

// FunctionResolver is implemented by a types.RegResolver that knows the
// user-defined functions (sql/pgcatalog's).
type FunctionResolver interface {
	// UserFunctions returns the functions named name in schema (""
	// for every schema of the search path, earlier ones first).
	UserFunctions(schema, name string) ([]*UserFunc, error)
}

// userFunctions returns the candidates for a call of schema.name, none
// when the context knows no user functions.
func (b *builder) userFunctions(schema, name string) ([]*UserFunc, error) {
	if b.ctx.Types == nil || b.ctx.Types.Reg == nil {
		return nil, nil
	}
	fr, ok := b.ctx.Types.Reg.(FunctionResolver)
	if !ok {
		return nil, nil
	}
	return fr.UserFunctions(schema, name)
}

// funcSchema returns the schema a call names ("" when unqualified).
func funcSchema(names []*pg_query.Node) string {
	if len(names) < 2 {
		return ""
	}
	if s, ok := names[len(names)-2].Node.(*pg_query.Node_String_); ok {
		return s.String_.Sval
	}
	return ""
}

// callArgNodes returns a call's argument ASTs in call order (named
// arguments unwrapped), matching buildCallArgs' order.
func callArgNodes(fc *pg_query.FuncCall) []*pg_query.Node {
	out := make([]*pg_query.Node, len(fc.Args))
	for i, a := range fc.Args {
		if na := a.GetNamedArgExpr(); na != nil {
			out[i] = na.Arg
		} else {
			out[i] = a
		}
	}
	return out
}

// matchUserFunc picks the function a call with the given argument types
// and names calls, as PostgreSQL's func_select_candidate does in its
// simplest form: every argument implicitly coercible to its parameter,
// missing ones defaulted, then the most exact type matches. slots[i] is
// the index of the call argument for parameter i (-1: its default). No
// candidate: nil, no error; a tie: 42725.
func matchUserFunc(cands []*UserFunc, name string, argTypes []*types.T, argNames []string) (*UserFunc, []int, error) {
	var best *UserFunc
	var bestSlots []int
	bestScore, ties := -1, 0
next:
	for _, f := range cands {
		if len(argTypes) > len(f.Params) {
			continue
		}
		slots := make([]int, len(f.Params))
		for i := range slots {
			slots[i] = -1
		}
		for i, n := range argNames {
			p := i
			if n != "" {
				p = -1
				for j, prm := range f.Params {
					if prm.Name == n {
						p = j
					}
				}
				if p < 0 || slots[p] >= 0 {
					continue next
				}
			}
			slots[p] = i
		}
		// score counts exact matches, then (PostgreSQL's rule for
		// untyped literals) positions where an unknown argument meets a
		// string parameter: f('a') prefers f(text) to f(int).
		score := 0
		for p, i := range slots {
			if i < 0 {
				if f.Params[p].Default == nil {
					continue next
				}
				continue
			}
			at, pt := argTypes[i], f.Params[p].Type
			switch {
			case at.Family == types.UnknownFamily:
				if cat, _ := pt.Category(); cat == 'S' {
					score++
				}
			case at.Identical(pt) || at.Oid == pt.Oid:
				score += len(argTypes) + 1
			case types.ImplicitCastAllowed(at, pt):
			default:
				continue next
			}
		}
		switch {
		case score > bestScore:
			best, bestSlots, bestScore, ties = f, slots, score, 1
		case score == bestScore:
			ties++
		}
	}
	if ties > 1 {
		return nil, nil, pgerror.New(pgerrcode.AmbiguousFunction, "function %s(%s) is not unique", name, typeList(argTypes)).
			WithHint("Could not choose a best candidate function. You might need to add explicit type casts.")
	}
	return best, bestSlots, nil
}

func typeList(ts []*types.T) string {
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.Name()
	}
	return strings.Join(names, ", ")
}

// maxInlineDepth bounds nested inlining: a function that calls itself
// would otherwise be inlined forever.
const maxInlineDepth = 32

// enterInline counts one more inlined call, failing past maxInlineDepth;
// the caller calls the returned function when done.
func (b *builder) enterInline(f *UserFunc) (func(), error) {
	if b.ctx.Inlining == nil {
		b.ctx.Inlining = new(int)
	}
	d := b.ctx.Inlining
	if *d >= maxInlineDepth {
		return nil, pgerror.New(pgerrcode.StatementTooComplex, "stack depth limit exceeded").
			WithDetail("SQL function %s() is nested more than %d calls deep.", f.Name, maxInlineDepth).
			WithHint("Cairn inlines SQL functions into the query that calls them, so a function cannot call itself.")
	}
	*d++
	return func() { *d-- }, nil
}

// buildUserCall inlines a call of a scalar user function.
func (b *builder) buildUserCall(fc *pg_query.FuncCall, f *UserFunc, slots []int) (Expr, error) {
	done, err := b.enterInline(f)
	if err != nil {
		return nil, err
	}
	defer done()
	if f.ReturnsSet {
		return nil, b.pos(fc.Location, errUnsupported("set-returning function %s() can only be called in FROM", f.Name))
	}
	args, err := inlineArgs(fc, f, slots)
	if err != nil {
		return nil, err
	}
	var body *pg_query.Node
	switch {
	case f.Expr != nil:
		body = SubstituteParams(f.Expr, f.Name, f.Params, args)
	case simpleSelect(f.Body) != nil:
		body = SubstituteParams(simpleSelect(f.Body), f.Name, f.Params, args)
	default:
		// The first row of the body, as PostgreSQL returns for a
		// function not declared SETOF.
		sel := SubstituteParams(f.Body, f.Name, f.Params, args)
		body = &pg_query.Node{Node: &pg_query.Node_SubLink{SubLink: &pg_query.SubLink{
			SubLinkType: pg_query.SubLinkType_EXPR_SUBLINK, Subselect: firstRow(sel, f.Name), Location: fc.Location}}}
	}
	if f.Strict {
		body = strictWrap(body, args)
	}
	e, err := b.build(body)
	if err != nil {
		return nil, b.inlineError(f, fc.Location, err)
	}
	return b.coerceResult(e, f.Return, fc.Location)
}

// inlineError places an error met while binding an inlined body at the
// call (the body's own offsets mean nothing in the caller's text) and
// says where it came from, as PostgreSQL's CONTEXT does.
func (b *builder) inlineError(f *UserFunc, loc int32, err error) error {
	var pe *PositionError
	if errors.As(err, &pe) && pe == err {
		err = pe.Err
	}
	var pg *pgerror.Error
	if errors.As(err, &pg) && pg == err {
		where := fmt.Sprintf("SQL function \"%s\" during inlining", f.Name)
		if pg.Where != "" {
			where = pg.Where + "\n" + where
		}
		err = pg.WithWhere("%s", where)
	}
	return b.pos(loc, err)
}

// coerceResult converts an inlined body's value to the declared result
// type: assignment casts, as PostgreSQL's check_sql_fn_retval allows.
func (b *builder) coerceResult(e Expr, to *types.T, loc int32) (Expr, error) {
	if e.Type().Family != types.UnknownFamily && !e.Type().Identical(to) && !types.AssignmentCastAllowed(e.Type(), to) {
		return nil, b.pos(loc, ErrReturnMismatch(to, e.Type()))
	}
	return b.coerceTo(e, to, types.CastAssignment, loc)
}

// ErrReturnMismatch is PostgreSQL's 42P13 for a body whose result does
// not convert to the declared type.
func ErrReturnMismatch(declared, actual *types.T) error {
	return pgerror.New(pgerrcode.InvalidFunctionDefinition, "return type mismatch in function declared to return %s", declared.Name()).
		WithDetail("Actual return type is %s.", actual.Name())
}

// inlineArgs returns, per parameter, the AST the body's references to it
// become: the call's argument (or the parameter's default) cast to the
// parameter's type.
func inlineArgs(fc *pg_query.FuncCall, f *UserFunc, slots []int) ([]*pg_query.Node, error) {
	nodes := callArgNodes(fc)
	out := make([]*pg_query.Node, len(f.Params))
	for p, i := range slots {
		var a *pg_query.Node
		if i < 0 {
			a = f.Params[p].Default
		} else {
			a = nodes[i]
		}
		c, err := CastNode(proto.Clone(a).(*pg_query.Node), f.Params[p].Type)
		if err != nil {
			return nil, err
		}
		out[p] = c
	}
	return out, nil
}

// simpleSelect returns the one target expression of a SELECT that has
// nothing else (no FROM, WHERE, ...), nil for any other body.
func simpleSelect(n *pg_query.Node) *pg_query.Node {
	s := n.GetSelectStmt()
	if s == nil || len(s.TargetList) != 1 || len(s.FromClause) > 0 || s.WhereClause != nil || len(s.GroupClause) > 0 ||
		s.HavingClause != nil || len(s.SortClause) > 0 || s.LimitCount != nil || s.LimitOffset != nil ||
		len(s.DistinctClause) > 0 || s.WithClause != nil || s.Op != pg_query.SetOperation_SETOP_NONE ||
		len(s.ValuesLists) > 0 || len(s.WindowClause) > 0 {
		return nil
	}
	rt := s.TargetList[0].GetResTarget()
	if rt == nil || rt.Val == nil || rt.Val.GetColumnRef() != nil && isStar(rt.Val.GetColumnRef()) {
		return nil
	}
	return rt.Val
}

func isStar(c *pg_query.ColumnRef) bool {
	return len(c.Fields) > 0 && c.Fields[len(c.Fields)-1].GetAStar() != nil
}

// firstRow wraps sel as SELECT * FROM (sel) AS name LIMIT 1.
func firstRow(sel *pg_query.Node, name string) *pg_query.Node {
	return selectFrom(sel, name, nil, nil, &pg_query.Node{Node: &pg_query.Node_AConst{AConst: &pg_query.A_Const{
		Val: &pg_query.A_Const_Ival{Ival: &pg_query.Integer{Ival: 1}}}}})
}

// selectFrom is SELECT <targets, * when nil> FROM (sel) AS alias [WHERE
// where] [LIMIT limit].
func selectFrom(sel *pg_query.Node, alias string, targets []*pg_query.Node, where, limit *pg_query.Node) *pg_query.Node {
	if targets == nil {
		targets = []*pg_query.Node{{Node: &pg_query.Node_ResTarget{ResTarget: &pg_query.ResTarget{
			Val: &pg_query.Node{Node: &pg_query.Node_ColumnRef{ColumnRef: &pg_query.ColumnRef{
				Fields: []*pg_query.Node{{Node: &pg_query.Node_AStar{AStar: &pg_query.A_Star{}}}}}}}}}}}
	}
	from := &pg_query.Node{Node: &pg_query.Node_RangeSubselect{RangeSubselect: &pg_query.RangeSubselect{
		Subquery: sel, Alias: &pg_query.Alias{Aliasname: alias}}}}
	return &pg_query.Node{Node: &pg_query.Node_SelectStmt{SelectStmt: &pg_query.SelectStmt{
		TargetList: targets, FromClause: []*pg_query.Node{from}, WhereClause: where, LimitCount: limit,
		LimitOption: limitOption(limit)}}}
}

func limitOption(limit *pg_query.Node) pg_query.LimitOption {
	if limit == nil {
		return pg_query.LimitOption_LIMIT_OPTION_DEFAULT
	}
	return pg_query.LimitOption_LIMIT_OPTION_COUNT
}

// anyNull is (a1 IS NULL OR a2 IS NULL ...), nil without arguments.
func anyNull(args []*pg_query.Node) *pg_query.Node {
	var tests []*pg_query.Node
	for _, a := range args {
		tests = append(tests, &pg_query.Node{Node: &pg_query.Node_NullTest{NullTest: &pg_query.NullTest{
			Arg: proto.Clone(a).(*pg_query.Node), Nulltesttype: pg_query.NullTestType_IS_NULL}}})
	}
	switch len(tests) {
	case 0:
		return nil
	case 1:
		return tests[0]
	}
	return &pg_query.Node{Node: &pg_query.Node_BoolExpr{BoolExpr: &pg_query.BoolExpr{
		Boolop: pg_query.BoolExprType_OR_EXPR, Args: tests}}}
}

// strictWrap is CASE WHEN <an argument is NULL> THEN NULL ELSE body END:
// a STRICT function returns NULL on a NULL argument without running.
func strictWrap(body *pg_query.Node, args []*pg_query.Node) *pg_query.Node {
	cond := anyNull(args)
	if cond == nil {
		return body
	}
	null := &pg_query.Node{Node: &pg_query.Node_AConst{AConst: &pg_query.A_Const{Isnull: true}}}
	return &pg_query.Node{Node: &pg_query.Node_CaseExpr{CaseExpr: &pg_query.CaseExpr{
		Args:      []*pg_query.Node{{Node: &pg_query.Node_CaseWhen{CaseWhen: &pg_query.CaseWhen{Expr: cond, Result: null}}}},
		Defresult: body}}}
}

// SubstituteParams returns a copy of body with every reference to a
// parameter ($n, the parameter's name, or fname.name) replaced by a copy
// of args[n-1]. Parameters without a name are reachable as $n only.
func SubstituteParams(body *pg_query.Node, fname string, params []UserParam, args []*pg_query.Node) *pg_query.Node {
	body = proto.Clone(body).(*pg_query.Node)
	byName := func(name string) *pg_query.Node {
		for i, p := range params {
			if p.Name != "" && p.Name == name {
				return args[i]
			}
		}
		return nil
	}
	replace := func(n *pg_query.Node) *pg_query.Node {
		switch v := n.Node.(type) {
		case *pg_query.Node_ParamRef:
			if i := int(v.ParamRef.Number); i >= 1 && i <= len(args) {
				return args[i-1]
			}
		case *pg_query.Node_ColumnRef:
			f := v.ColumnRef.Fields
			switch {
			case len(f) == 1 && f[0].GetString_() != nil:
				return byName(f[0].GetString_().Sval)
			case len(f) == 2 && f[0].GetString_() != nil && f[1].GetString_() != nil && f[0].GetString_().Sval == fname:
				return byName(f[1].GetString_().Sval)
			}
		}
		return nil
	}
	if r := replace(body); r != nil {
		return proto.Clone(r).(*pg_query.Node)
	}
	parser.WalkAST(body, func(n *pg_query.Node) bool {
		if r := replace(n); r != nil {
			n.Node = proto.Clone(r).(*pg_query.Node).Node
			return false
		}
		return true
	})
	return body
}

// typeNames caches the TypeName AST of a type's SQL name.
var typeNames sync.Map // string -> *pg_query.TypeName

// CastNode returns CAST(n AS t) as an AST.
func CastNode(n *pg_query.Node, t *types.T) (*pg_query.Node, error) {
	name := SQLTypeName(t)
	tn, ok := typeNames.Load(name)
	if !ok {
		tree, err := pg_query.Parse("SELECT CAST(NULL AS " + name + ")")
		if err != nil {
			return nil, fmt.Errorf("sem: type name %q: %w", name, err)
		}
		tc := tree.Stmts[0].Stmt.GetSelectStmt().TargetList[0].GetResTarget().Val.GetTypeCast()
		tn = tc.TypeName
		typeNames.Store(name, tn)
	}
	return &pg_query.Node{Node: &pg_query.Node_TypeCast{TypeCast: &pg_query.TypeCast{
		Arg: n, TypeName: proto.Clone(tn.(*pg_query.TypeName)).(*pg_query.TypeName), Location: -1}}}, nil
}

// SQLTypeName is a type's name as SQL text that names it from any search
// path: user-defined types schema-qualified.
func SQLTypeName(t *types.T) string {
	elem, suffix := t, ""
	if t.Family == types.ArrayFamily && t.Elem != nil {
		elem, suffix = t.Elem, "[]"
	}
	switch {
	case elem.Domain != nil:
		return quoteIdent(elem.Domain.Schema) + "." + quoteIdent(elem.Domain.Name) + suffix
	case elem.Family == types.EnumFamily && elem.Enum != nil:
		return quoteIdent(elem.Enum.Schema) + "." + quoteIdent(elem.Enum.Name) + suffix
	}
	return t.Name()
}

func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// ParseFunctionBody parses a stored function body: the string of AS
// '...' (sqlBody false) or a SQL-standard body, RETURN expr or BEGIN
// ATOMIC ... END (sqlBody true). It returns the body's one SELECT, or
// RETURN's expression; anything else is 0A000.
func ParseFunctionBody(body string, sqlBody bool) (sel, expr *pg_query.Node, err error) {
	var stmts []*pg_query.Node
	if sqlBody {
		tree, err := pg_query.Parse("CREATE FUNCTION f() RETURNS int LANGUAGE sql " + body)
		if err != nil {
			return nil, nil, pgerror.New(pgerrcode.SyntaxError, "%s", err.Error())
		}
		cf := tree.Stmts[0].Stmt.GetCreateFunctionStmt()
		if cf == nil || cf.SqlBody == nil {
			return nil, nil, pgerror.New(pgerrcode.InvalidFunctionDefinition, "function body is not a SQL-standard body")
		}
		if r := cf.SqlBody.GetReturnStmt(); r != nil {
			return nil, r.Returnval, nil
		}
		var flat func(n *pg_query.Node)
		flat = func(n *pg_query.Node) {
			if l := n.GetList(); l != nil {
				for _, it := range l.Items {
					flat(it)
				}
				return
			}
			stmts = append(stmts, n)
		}
		flat(cf.SqlBody)
	} else {
		tree, err := pg_query.Parse(body)
		if err != nil {
			return nil, nil, pgerror.New(pgerrcode.SyntaxError, "%s", err.Error())
		}
		for _, s := range tree.Stmts {
			stmts = append(stmts, s.Stmt)
		}
	}
	if len(stmts) == 1 {
		if r := stmts[0].GetReturnStmt(); r != nil {
			return nil, r.Returnval, nil
		}
		if s := stmts[0].GetSelectStmt(); s != nil && s.IntoClause == nil {
			return stmts[0], nil, nil
		}
	}
	if len(stmts) == 0 {
		return nil, nil, pgerror.New(pgerrcode.InvalidFunctionDefinition, "return type mismatch in function declared to return a value").
			WithDetail("Function's final statement must be SELECT or INSERT/UPDATE/DELETE RETURNING.")
	}
	return nil, nil, errUnsupported("SQL functions whose body is not a single SELECT or RETURN are not supported yet")
}

// InlineSetCall turns a call of a set-returning user function in FROM
// into the SELECT that replaces it: SELECT CAST(c1 AS t1) AS name1, ...
// FROM (body) AS fname [WHERE no argument is NULL, when STRICT]. ok is
// false when the call is not one of a set-returning user function (the
// caller binds it as usual).
func InlineSetCall(ctx BuildContext, fc *pg_query.FuncCall) (sel *pg_query.Node, cols []UserParam, ok bool, err error) {
	b := &builder{ctx: ctx}
	name := opName(fc.Funcname)
	cands, err := b.userFunctions(funcSchema(fc.Funcname), name)
	if err != nil || len(cands) == 0 {
		return nil, nil, false, err
	}
	hasSet := false
	for _, c := range cands {
		hasSet = hasSet || c.ReturnsSet
	}
	if !hasSet {
		return nil, nil, false, nil
	}
	args, names, _, err := b.buildCallArgs(fc)
	if err != nil {
		return nil, nil, false, err
	}
	argTypes := make([]*types.T, len(args))
	for i, a := range args {
		argTypes[i] = a.Type()
	}
	f, slots, err := matchUserFunc(cands, name, argTypes, names)
	if err != nil || f == nil || !f.ReturnsSet {
		return nil, nil, false, err
	}
	// The caller binds the subquery this returns, counting it in
	// BuildContext.Inlining meanwhile; here the depth is only checked.
	done, err := b.enterInline(f)
	if err != nil {
		return nil, nil, false, err
	}
	done()
	inl, err := inlineArgs(fc, f, slots)
	if err != nil {
		return nil, nil, false, err
	}
	body := SubstituteParams(f.Body, f.Name, f.Params, inl)
	if f.Body == nil {
		return nil, nil, false, errUnsupported("set-returning function %s() must have a SELECT body", f.Name)
	}
	// Name the body's columns c1..cn so the casts can address them
	// whatever the body calls them.
	alias := "_" + f.Name
	var targets []*pg_query.Node
	colNames := make([]*pg_query.Node, len(f.Columns))
	for i, c := range f.Columns {
		inner := fmt.Sprintf("c%d", i+1)
		colNames[i] = pg_query.MakeStrNode(inner)
		ref := &pg_query.Node{Node: &pg_query.Node_ColumnRef{ColumnRef: &pg_query.ColumnRef{
			Fields: []*pg_query.Node{pg_query.MakeStrNode(alias), pg_query.MakeStrNode(inner)}}}}
		v, err := CastNode(ref, c.Type)
		if err != nil {
			return nil, nil, false, err
		}
		targets = append(targets, &pg_query.Node{Node: &pg_query.Node_ResTarget{ResTarget: &pg_query.ResTarget{
			Name: c.Name, Val: v}}})
	}
	var where *pg_query.Node
	if f.Strict {
		if cond := anyNull(inl); cond != nil {
			where = &pg_query.Node{Node: &pg_query.Node_BoolExpr{BoolExpr: &pg_query.BoolExpr{
				Boolop: pg_query.BoolExprType_NOT_EXPR, Args: []*pg_query.Node{cond}}}}
		}
	}
	out := selectFrom(body, alias, targets, where, nil)
	out.GetSelectStmt().FromClause[0].GetRangeSubselect().Alias.Colnames = colNames
	return out, f.Columns, true, nil
}
