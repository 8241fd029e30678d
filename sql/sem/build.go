package sem

import (
	"strconv"
	"strings"

	"github.com/jackc/pgerrcode"
	pg_query "github.com/pganalyze/pg_query_go/v6"

	"github.com/cairn-db/cairn/sql/builtins"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/types"
)

// Build turns an expression of the Postgres AST into a typed Expr. want,
// when not nil, is the type the context demands (types.Bool for WHERE):
// the result is coerced to it implicitly, and a mismatch is 42804
// "argument of <Clause> must be type boolean, not type integer". With want
// nil an untyped literal becomes text. Errors carry SQLSTATEs and, where
// Postgres reports one, a position (ErrorPosition). Immutable calls over
// constants are folded (Fold).
func Build(ctx BuildContext, node *pg_query.Node, want *types.T) (Expr, error) {
	b := &builder{ctx: ctx}
	e, err := b.build(node)
	if err != nil {
		return nil, err
	}
	loc := location(node)
	if want != nil {
		e, err = b.coerceArg(e, want, ctx.Clause, loc)
	} else if e.Type().Family == types.UnknownFamily {
		e, err = b.coerce(e, types.Text, loc)
	}
	if err != nil {
		return nil, err
	}
	if err := b.checkParams(e); err != nil {
		return nil, err
	}
	return Fold(ctx.Types, e), nil
}

// checkParams finds parameters left untyped where they were used (IS NULL
// gives no type) but typed by a later use: Postgres rejects that with
// 42P08, and so do we. A parameter no use typed stays unknown for
// ParamTypes.Types to report (42P18).
func (b *builder) checkParams(e Expr) error {
	var err error
	Walk(e, func(x Expr) bool {
		if p, ok := x.(*Param); ok && p.T.Family == types.UnknownFamily && b.ctx.Params != nil &&
			b.ctx.Params.Type(p.Index).Family != types.UnknownFamily && err == nil {
			err = b.pos(b.paramLoc[p], errAmbiguousParam(p.Index))
		}
		return err == nil
	})
	return err
}

// builder carries one Build call's state.
type builder struct {
	ctx BuildContext
	// litLoc remembers where each literal was, so a literal that does not
	// parse as the type it meets is reported at itself.
	litLoc map[*Const]int32
	// paramLoc remembers where each parameter reference was.
	paramLoc map[*Param]int32
	// inAgg is set while building an aggregate's arguments.
	inAgg bool
	// inWindow is set while building a window call's arguments (an
	// aggregate used with OVER included): PostgreSQL refuses a window call
	// there as nested (42P20) but allows a plain aggregate.
	inWindow bool
}

func (b *builder) pos(loc int32, err error) error {
	if err == nil || loc < 0 || ErrorPosition(err) != 0 {
		return err
	}
	p := int(loc) + 1
	if b.ctx.Position != nil {
		p = b.ctx.Position(loc)
	}
	return &PositionError{Err: err, Pos: p}
}

func (b *builder) clause() string {
	if b.ctx.Clause == "" {
		return "this context"
	}
	return b.ctx.Clause
}

func (b *builder) build(n *pg_query.Node) (Expr, error) {
	if n == nil {
		return nil, errUnsupported("missing expression")
	}
	switch v := n.Node.(type) {
	case *pg_query.Node_AConst:
		return b.buildConst(v.AConst)
	case *pg_query.Node_ColumnRef:
		return b.buildColumnRef(v.ColumnRef)
	case *pg_query.Node_ParamRef:
		return b.buildParam(v.ParamRef)
	case *pg_query.Node_AExpr:
		return b.buildAExpr(v.AExpr)
	case *pg_query.Node_BoolExpr:
		return b.buildBoolExpr(v.BoolExpr)
	case *pg_query.Node_NullTest:
		return b.buildNullTest(v.NullTest)
	case *pg_query.Node_BooleanTest:
		return b.buildBoolTest(v.BooleanTest)
	case *pg_query.Node_CaseExpr:
		return b.buildCase(v.CaseExpr)
	case *pg_query.Node_CoalesceExpr:
		return b.buildCoalesce(v.CoalesceExpr)
	case *pg_query.Node_MinMaxExpr:
		return b.buildMinMax(v.MinMaxExpr)
	case *pg_query.Node_TypeCast:
		return b.buildTypeCast(v.TypeCast)
	case *pg_query.Node_FuncCall:
		return b.buildFuncCall(v.FuncCall)
	case *pg_query.Node_SqlvalueFunction:
		return b.buildSQLValueFunction(v.SqlvalueFunction)
	case *pg_query.Node_AArrayExpr:
		return b.buildArray(v.AArrayExpr, nil)
	case *pg_query.Node_AIndirection:
		return b.buildIndirection(v.AIndirection)
	case *pg_query.Node_SubLink:
		return b.buildSubLink(v.SubLink)
	case *pg_query.Node_RowExpr:
		return b.buildRow(v.RowExpr)
	case *pg_query.Node_CollateClause:
		// The binder strips the collations Cairn has (default, C, POSIX):
		// any other names one that does not exist here.
		var name []string
		for _, p := range v.CollateClause.Collname {
			name = append(name, p.GetString_().GetSval())
		}
		return nil, b.pos(v.CollateClause.Location, pgerror.New(pgerrcode.UndefinedObject,
			"collation %q for encoding \"UTF8\" does not exist", strings.Join(name, ".")))
	}
	return nil, b.pos(location(n), errUnsupported("unsupported expression: %s", nodeName(n)))
}

// nodeName names an AST node kind for error messages ("CollateClause").
func nodeName(n *pg_query.Node) string {
	s := strings.TrimPrefix(strings.TrimPrefix(typeNameOf(n.Node), "*pg_query.Node_"), "pg_query.Node_")
	return s
}

func (b *builder) buildConst(c *pg_query.A_Const) (Expr, error) {
	e, err := b.constant(c)
	if k, ok := e.(*Const); ok {
		if b.litLoc == nil {
			b.litLoc = map[*Const]int32{}
		}
		b.litLoc[k] = c.Location
	}
	return e, err
}

func (b *builder) constant(c *pg_query.A_Const) (Expr, error) {
	if c.Isnull {
		return &Const{Datum: types.DNull, T: types.Unknown}, nil
	}
	switch v := c.Val.(type) {
	case *pg_query.A_Const_Ival:
		return &Const{Datum: types.DInt(v.Ival.Ival), T: types.Int4}, nil
	case *pg_query.A_Const_Fval:
		return b.numberLiteral(v.Fval.Fval, c.Location)
	case *pg_query.A_Const_Sval:
		return &Const{Datum: types.DString(v.Sval.Sval), T: types.Unknown}, nil
	case *pg_query.A_Const_Boolval:
		return &Const{Datum: types.DBool(v.Boolval.Boolval), T: types.Bool}, nil
	case *pg_query.A_Const_Bsval:
		// B'101' and X'1F' bit strings: Cairn has no bit type.
		return nil, b.pos(c.Location, errUnsupported("bit string literals are not supported"))
	}
	return nil, b.pos(c.Location, errUnsupported("unsupported constant"))
}

// numberLiteral types a numeric literal the grammar did not make an int4:
// int8 when it is an integer that fits, numeric otherwise.
func (b *builder) numberLiteral(s string, loc int32) (Expr, error) {
	if !strings.ContainsAny(s, ".eE") {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			if i >= -1<<31 && i < 1<<31 {
				return &Const{Datum: types.DInt(i), T: types.Int4}, nil
			}
			return &Const{Datum: types.DInt(i), T: types.Int8}, nil
		}
	}
	d, err := types.ParseDatum(b.ctx.Types, types.Numeric, s)
	if err != nil {
		return nil, b.pos(loc, err)
	}
	return &Const{Datum: d, T: types.Numeric}, nil
}

func (b *builder) buildColumnRef(c *pg_query.ColumnRef) (Expr, error) {
	fields := make([]string, 0, len(c.Fields))
	for _, f := range c.Fields {
		s, ok := f.Node.(*pg_query.Node_String_)
		if !ok {
			return nil, b.pos(c.Location, errUnsupported("* is not allowed in a scalar expression"))
		}
		fields = append(fields, s.String_.Sval)
	}
	if b.ctx.Scope == nil && b.ctx.Clause == "DEFAULT" {
		// transformColumnRef refuses any column reference in a column
		// default before looking the name up.
		return nil, b.pos(c.Location, pgerror.New(pgerrcode.FeatureNotSupported, "cannot use column reference in DEFAULT expression"))
	}
	if b.ctx.Scope == nil {
		return nil, b.pos(c.Location, ErrUndefinedColumn(fields...))
	}
	id, t, name, err := b.ctx.Scope.Resolve(fields)
	if err != nil {
		return nil, b.pos(c.Location, err)
	}
	return &ColRef{ID: id, T: t, Name: name}, nil
}

func (b *builder) buildParam(p *pg_query.ParamRef) (Expr, error) {
	if b.ctx.Params == nil {
		return nil, b.pos(p.Location, errNoParam(int(p.Number)))
	}
	t, err := b.ctx.Params.use(int(p.Number))
	if err != nil {
		return nil, b.pos(p.Location, err)
	}
	e := &Param{Index: int(p.Number), T: t}
	if b.paramLoc == nil {
		b.paramLoc = map[*Param]int32{}
	}
	b.paramLoc[e] = p.Location
	return e, nil
}

// opName returns an operator's name without its schema.
func opName(names []*pg_query.Node) string {
	if len(names) == 0 {
		return ""
	}
	if s, ok := names[len(names)-1].Node.(*pg_query.Node_String_); ok {
		return s.String_.Sval
	}
	return ""
}

func isCmpOp(op string) bool {
	switch op {
	case "=", "<>", "<", "<=", ">", ">=":
		return true
	}
	return false
}

func (b *builder) buildAExpr(a *pg_query.A_Expr) (Expr, error) {
	op := opName(a.Name)
	switch a.Kind {
	case pg_query.A_Expr_Kind_AEXPR_OP:
		if a.Lexpr == nil {
			arg, err := b.build(a.Rexpr)
			if err != nil {
				return nil, err
			}
			return b.unary(op, arg, a.Location)
		}
		if isCmpOp(op) {
			if l, r, ok := rowPair(a.Lexpr, a.Rexpr); ok {
				return b.rowCompare(CmpOp(op), l, r, a.Location)
			}
		}
		l, r, err := b.build2(a.Lexpr, a.Rexpr)
		if err != nil {
			return nil, err
		}
		return b.binary(op, l, r, a.Location)
	case pg_query.A_Expr_Kind_AEXPR_DISTINCT, pg_query.A_Expr_Kind_AEXPR_NOT_DISTINCT:
		cop := IsDistinctFrom
		if a.Kind == pg_query.A_Expr_Kind_AEXPR_NOT_DISTINCT {
			cop = IsNotDistinctFrom
		}
		if l, r, ok := rowPair(a.Lexpr, a.Rexpr); ok {
			return b.rowCompare(cop, l, r, a.Location)
		}
		l, r, err := b.build2(a.Lexpr, a.Rexpr)
		if err != nil {
			return nil, err
		}
		return b.compare(cop, l, r, a.Location)
	case pg_query.A_Expr_Kind_AEXPR_NULLIF:
		l, r, err := b.build2(a.Lexpr, a.Rexpr)
		if err != nil {
			return nil, err
		}
		c, err := b.compare(EQ, l, r, a.Location)
		if err != nil {
			return nil, err
		}
		cmp := c.(*Cmp)
		return &NullIf{Left: cmp.Left, Right: cmp.Right, Eq: cmp.Fn}, nil
	case pg_query.A_Expr_Kind_AEXPR_IN:
		return b.buildIn(a, op == "<>")
	case pg_query.A_Expr_Kind_AEXPR_OP_ANY, pg_query.A_Expr_Kind_AEXPR_OP_ALL:
		l, arr, err := b.build2(a.Lexpr, a.Rexpr)
		if err != nil {
			return nil, err
		}
		return b.anyAll(op, l, arr, a.Kind == pg_query.A_Expr_Kind_AEXPR_OP_ALL, a.Location)
	case pg_query.A_Expr_Kind_AEXPR_LIKE, pg_query.A_Expr_Kind_AEXPR_ILIKE, pg_query.A_Expr_Kind_AEXPR_SIMILAR:
		// The grammar already chose the operator (~~, !~~*, ~) and wrapped
		// an ESCAPE clause in like_escape/similar_to_escape.
		l, r, err := b.build2(a.Lexpr, a.Rexpr)
		if err != nil {
			return nil, err
		}
		return b.binary(op, l, r, a.Location)
	case pg_query.A_Expr_Kind_AEXPR_BETWEEN, pg_query.A_Expr_Kind_AEXPR_NOT_BETWEEN,
		pg_query.A_Expr_Kind_AEXPR_BETWEEN_SYM, pg_query.A_Expr_Kind_AEXPR_NOT_BETWEEN_SYM:
		return b.buildBetween(a)
	}
	return nil, b.pos(a.Location, errUnsupported("unsupported operator form %s", a.Kind))
}

func (b *builder) build2(l, r *pg_query.Node) (Expr, Expr, error) {
	le, err := b.build(l)
	if err != nil {
		return nil, nil, err
	}
	re, err := b.build(r)
	if err != nil {
		return nil, nil, err
	}
	return le, re, nil
}

func (b *builder) unary(op string, arg Expr, loc int32) (Expr, error) {
	r, err := builtins.LookupUnaryOp(op, arg.Type())
	if err != nil {
		return nil, b.pos(loc, err)
	}
	arg, err = b.coerce(arg, r.ArgTypes[0], loc)
	if err != nil {
		return nil, err
	}
	return &UnaryOp{Op: op, Fn: r, Arg: arg}, nil
}

func (b *builder) binary(op string, l, r Expr, loc int32) (Expr, error) {
	if isCmpOp(op) {
		return b.compare(CmpOp(op), l, r, loc)
	}
	res, err := builtins.LookupBinaryOp(op, l.Type(), r.Type())
	if err != nil {
		return nil, b.pos(loc, err)
	}
	if l, err = b.coerce(l, res.ArgTypes[0], loc); err != nil {
		return nil, err
	}
	if r, err = b.coerce(r, res.ArgTypes[1], loc); err != nil {
		return nil, err
	}
	return &BinOp{Op: op, Fn: res, Left: l, Right: r}, nil
}

// compare resolves a comparison; the DISTINCT forms use "=".
func (b *builder) compare(op CmpOp, l, r Expr, loc int32) (Expr, error) {
	name := string(op)
	if op == IsDistinctFrom || op == IsNotDistinctFrom {
		name = "="
	}
	res, err := builtins.LookupBinaryOp(name, l.Type(), r.Type())
	if err != nil {
		return nil, b.pos(loc, err)
	}
	if res.Return.Family != types.BoolFamily {
		return nil, b.pos(loc, errOpNotBoolean(name))
	}
	if l, err = b.coerce(l, res.ArgTypes[0], loc); err != nil {
		return nil, err
	}
	if r, err = b.coerce(r, res.ArgTypes[1], loc); err != nil {
		return nil, err
	}
	return &Cmp{Op: op, Fn: res, Left: l, Right: r}, nil
}

// rowPair reports whether both sides of a comparison are row constructors
// (ROW(a, b) or (a, b)), returning their fields.
func rowPair(l, r *pg_query.Node) ([]*pg_query.Node, []*pg_query.Node, bool) {
	lr, ok1 := l.GetNode().(*pg_query.Node_RowExpr)
	rr, ok2 := r.GetNode().(*pg_query.Node_RowExpr)
	if !ok1 || !ok2 {
		return nil, nil, false
	}
	return lr.RowExpr.Args, rr.RowExpr.Args, true
}

// rowCompare expands a row comparison as Postgres does: = and IS NOT
// DISTINCT FROM become a conjunction of the pairs, <> and IS DISTINCT
// FROM a disjunction, and the ordering operators a RowCmp.
func (b *builder) rowCompare(op CmpOp, ln, rn []*pg_query.Node, loc int32) (Expr, error) {
	if len(ln) != len(rn) {
		return nil, b.pos(loc, errRowArity())
	}
	var pairs []Expr
	var fns []*builtins.Resolved
	var ls, rs []Expr
	for i := range ln {
		l, r, err := b.build2(ln[i], rn[i])
		if err != nil {
			return nil, err
		}
		c, err := b.compare(op, l, r, loc)
		if err != nil {
			return nil, err
		}
		cmp := c.(*Cmp)
		pairs = append(pairs, c)
		fns = append(fns, cmp.Fn)
		ls, rs = append(ls, cmp.Left), append(rs, cmp.Right)
	}
	if len(pairs) == 1 {
		return pairs[0], nil
	}
	switch op {
	case EQ, IsNotDistinctFrom:
		return &And{Args: pairs}, nil
	case NE, IsDistinctFrom:
		return &Or{Args: pairs}, nil
	}
	return &RowCmp{Op: op, Fns: fns, Left: ls, Right: rs}, nil
}

// buildIn follows Postgres's transformAExprIn: the list elements that
// reference no column, when there are at least two and they share a type
// with the left side, become one `= ANY (array)` test (an In node); every
// other element is compared on its own, and the arms are ORed (ANDed, with
// <>, for NOT IN).
func (b *builder) buildIn(a *pg_query.A_Expr, negated bool) (Expr, error) {
	left, err := b.build(a.Lexpr)
	if err != nil {
		return nil, err
	}
	items := a.Rexpr.GetList().GetItems()
	var all, consts, vars []Expr
	var constNodes []*pg_query.Node
	for _, it := range items {
		e, err := b.build(it)
		if err != nil {
			return nil, err
		}
		all = append(all, e)
		if hasColumn(e) {
			vars = append(vars, e)
		} else {
			consts = append(consts, e)
			constNodes = append(constNodes, it)
		}
	}
	var arms []Expr
	if len(consts) > 1 {
		ts := []*types.T{left.Type()}
		for _, e := range consts {
			ts = append(ts, e.Type())
		}
		if common, err := types.CommonType("IN", ts...); err == nil {
			l, err := b.coerce(left, common, a.Location)
			if err != nil {
				return nil, err
			}
			for i := range consts {
				if consts[i], err = b.coerce(consts[i], common, location(constNodes[i])); err != nil {
					return nil, err
				}
			}
			res, err := builtins.LookupBinaryOp("=", common, common)
			if err != nil {
				return nil, b.pos(a.Location, err)
			}
			arms = append(arms, &In{Left: l, List: consts, Eq: res, Negated: negated})
			all = vars
		}
	}
	op := EQ
	if negated {
		op = NE
	}
	for _, r := range all {
		c, err := b.compare(op, left, r, a.Location)
		if err != nil {
			return nil, err
		}
		arms = append(arms, c)
	}
	switch {
	case len(arms) == 1:
		return arms[0], nil
	case negated:
		return &And{Args: arms}, nil
	}
	return &Or{Args: arms}, nil
}

// hasColumn reports whether e reads a column of the row.
func hasColumn(e Expr) bool {
	found := false
	Walk(e, func(x Expr) bool {
		if _, ok := x.(*ColRef); ok {
			found = true
		}
		return !found
	})
	return found
}

func (b *builder) anyAll(op string, l, arr Expr, all bool, loc int32) (Expr, error) {
	at := arr.Type()
	elem := types.Unknown
	switch at.Family {
	case types.ArrayFamily:
		elem = at.Elem
	case types.UnknownFamily:
	default:
		return nil, b.pos(loc, errAnyNeedsArray(at))
	}
	res, err := builtins.LookupBinaryOp(op, l.Type(), elem)
	if err != nil {
		return nil, b.pos(loc, err)
	}
	if res.Return.Family != types.BoolFamily {
		return nil, b.pos(loc, errOpNotBoolean(op))
	}
	if l, err = b.coerce(l, res.ArgTypes[0], loc); err != nil {
		return nil, err
	}
	want, err := types.MakeArray(res.ArgTypes[1])
	if err != nil {
		return nil, b.pos(loc, err)
	}
	if arr, err = b.coerce(arr, want, loc); err != nil {
		return nil, err
	}
	return &AnyAll{Op: CmpOp(op), Fn: res, Left: l, Array: arr, All: all}, nil
}

// buildBetween expands BETWEEN as Postgres's grammar does:
// a BETWEEN x AND y is (a >= x AND a <= y); SYMMETRIC also tries the
// bounds swapped; NOT negates.
func (b *builder) buildBetween(a *pg_query.A_Expr) (Expr, error) {
	bounds := a.Rexpr.GetList().GetItems()
	if len(bounds) != 2 {
		return nil, b.pos(a.Location, errUnsupported("malformed BETWEEN"))
	}
	not := a.Kind == pg_query.A_Expr_Kind_AEXPR_NOT_BETWEEN || a.Kind == pg_query.A_Expr_Kind_AEXPR_NOT_BETWEEN_SYM
	sym := a.Kind == pg_query.A_Expr_Kind_AEXPR_BETWEEN_SYM || a.Kind == pg_query.A_Expr_Kind_AEXPR_NOT_BETWEEN_SYM
	pair := func(lo, hi *pg_query.Node) (Expr, error) {
		lop, hop := GE, LE
		if not {
			lop, hop = LT, GT
		}
		x, y, err := b.build2(a.Lexpr, lo)
		if err != nil {
			return nil, err
		}
		c1, err := b.compare(lop, x, y, a.Location)
		if err != nil {
			return nil, err
		}
		x, z, err := b.build2(a.Lexpr, hi)
		if err != nil {
			return nil, err
		}
		c2, err := b.compare(hop, x, z, a.Location)
		if err != nil {
			return nil, err
		}
		if not {
			return &Or{Args: []Expr{c1, c2}}, nil
		}
		return &And{Args: []Expr{c1, c2}}, nil
	}
	e, err := pair(bounds[0], bounds[1])
	if err != nil || !sym {
		return e, err
	}
	e2, err := pair(bounds[1], bounds[0])
	if err != nil {
		return nil, err
	}
	if not {
		return &And{Args: []Expr{e, e2}}, nil
	}
	return &Or{Args: []Expr{e, e2}}, nil
}

func (b *builder) buildBoolExpr(be *pg_query.BoolExpr) (Expr, error) {
	what := map[pg_query.BoolExprType]string{
		pg_query.BoolExprType_AND_EXPR: "AND", pg_query.BoolExprType_OR_EXPR: "OR", pg_query.BoolExprType_NOT_EXPR: "NOT",
	}[be.Boolop]
	args := make([]Expr, len(be.Args))
	for i, n := range be.Args {
		e, err := b.build(n)
		if err != nil {
			return nil, err
		}
		if args[i], err = b.coerceArg(e, types.Bool, what, location(n)); err != nil {
			return nil, err
		}
	}
	switch be.Boolop {
	case pg_query.BoolExprType_AND_EXPR:
		return &And{Args: args}, nil
	case pg_query.BoolExprType_OR_EXPR:
		return &Or{Args: args}, nil
	}
	return &Not{Arg: args[0]}, nil
}

func (b *builder) buildNullTest(nt *pg_query.NullTest) (Expr, error) {
	neg := nt.Nulltesttype == pg_query.NullTestType_IS_NOT_NULL
	// ROW(a, b) IS NULL holds when every field is NULL, IS NOT NULL when
	// none is: both are conjunctions over the fields.
	if r, ok := nt.Arg.GetNode().(*pg_query.Node_RowExpr); ok {
		var arms []Expr
		for _, f := range r.RowExpr.Args {
			e, err := b.build(f)
			if err != nil {
				return nil, err
			}
			arms = append(arms, &IsNull{Arg: b.settle(e), Negated: neg})
		}
		if len(arms) == 1 {
			return arms[0], nil
		}
		return &And{Args: arms}, nil
	}
	e, err := b.build(nt.Arg)
	if err != nil {
		return nil, err
	}
	return &IsNull{Arg: b.settle(e), Negated: neg}, nil
}

// settle gives an untyped literal its default type, text, where the
// context demands none (IS NULL, COALESCE of unknowns).
func (b *builder) settle(e Expr) Expr {
	if _, ok := e.(*Param); ok || e.Type().Family != types.UnknownFamily {
		// A parameter is not settled: a later use may still type it.
		return e
	}
	out, err := b.coerce(e, types.Text, -1)
	if err != nil {
		return e
	}
	return out
}

func (b *builder) buildBoolTest(bt *pg_query.BooleanTest) (Expr, error) {
	e, err := b.build(bt.Arg)
	if err != nil {
		return nil, err
	}
	kind := BoolTestKind(bt.Booltesttype - pg_query.BoolTestType_IS_TRUE)
	what := strings.TrimPrefix(boolTestNames[kind], "IS ")
	what = "IS " + what
	if e, err = b.coerceArg(e, types.Bool, what, location(bt.Arg)); err != nil {
		return nil, err
	}
	return &BoolTest{Kind: kind, Arg: e}, nil
}

func (b *builder) buildCase(c *pg_query.CaseExpr) (Expr, error) {
	out := &Case{}
	var operand Expr
	var err error
	if c.Arg != nil {
		if operand, err = b.build(c.Arg); err != nil {
			return nil, err
		}
		operand = b.settle(operand)
		out.Operand = operand
	}
	results := make([]Expr, 0, len(c.Args)+1)
	resultNodes := make([]*pg_query.Node, 0, len(c.Args)+1)
	for _, wn := range c.Args {
		w := wn.GetCaseWhen()
		cond, err := b.build(w.Expr)
		if err != nil {
			return nil, err
		}
		var when When
		if operand != nil {
			cmp, err := b.compare(EQ, operand, cond, w.Location)
			if err != nil {
				return nil, err
			}
			cc := cmp.(*Cmp)
			when.Cond, when.Eq = cc.Right, cc.Fn
			if !cc.Left.Type().Identical(operand.Type()) {
				when.OperandTo = cc.Left.Type()
			}
		} else if when.Cond, err = b.coerceArg(cond, types.Bool, "CASE/WHEN", location(w.Expr)); err != nil {
			return nil, err
		}
		res, err := b.build(w.Result)
		if err != nil {
			return nil, err
		}
		results = append(results, res)
		resultNodes = append(resultNodes, w.Result)
		out.Whens = append(out.Whens, when)
	}
	if c.Defresult != nil {
		res, err := b.build(c.Defresult)
		if err != nil {
			return nil, err
		}
		// transformCaseExpr puts ELSE first in the list it unifies, so a
		// mismatch names the ELSE type first and points at a WHEN branch.
		results = append([]Expr{res}, results...)
		resultNodes = append([]*pg_query.Node{c.Defresult}, resultNodes...)
	}
	t, err := b.unify("CASE", results, resultNodes, c.Location)
	if err != nil {
		return nil, err
	}
	out.T = t
	if c.Defresult != nil {
		out.Else, results = results[0], results[1:]
	}
	for i := range out.Whens {
		out.Whens[i].Result = results[i]
	}
	return out, nil
}

// unify coerces es (in place) to their common type, reporting a mismatch
// at the offending expression as Postgres does.
func (b *builder) unify(what string, es []Expr, nodes []*pg_query.Node, loc int32) (*types.T, error) {
	ts := make([]*types.T, len(es))
	for i, e := range es {
		ts[i] = e.Type()
	}
	t, err := types.CommonType(what, ts...)
	if err != nil {
		// Point at the first expression whose type clashes with the ones
		// before it, as select_common_type does.
		for i := 1; i < len(ts); i++ {
			if _, e2 := types.CommonType(what, ts[:i+1]...); e2 != nil {
				return nil, b.pos(location(nodes[i]), err)
			}
		}
		return nil, b.pos(loc, err)
	}
	for i := range es {
		if es[i], err = b.coerce(es[i], t, location(nodes[i])); err != nil {
			return nil, err
		}
	}
	return t, nil
}

func (b *builder) buildList(nodes []*pg_query.Node) ([]Expr, error) {
	out := make([]Expr, len(nodes))
	for i, n := range nodes {
		e, err := b.build(n)
		if err != nil {
			return nil, err
		}
		out[i] = e
	}
	return out, nil
}

func (b *builder) buildCoalesce(c *pg_query.CoalesceExpr) (Expr, error) {
	args, err := b.buildList(c.Args)
	if err != nil {
		return nil, err
	}
	t, err := b.unify("COALESCE", args, c.Args, c.Location)
	if err != nil {
		return nil, err
	}
	return &Coalesce{Args: args, T: t}, nil
}

func (b *builder) buildMinMax(m *pg_query.MinMaxExpr) (Expr, error) {
	args, err := b.buildList(m.Args)
	if err != nil {
		return nil, err
	}
	what := "GREATEST"
	if m.Op == pg_query.MinMaxOp_IS_LEAST {
		what = "LEAST"
	}
	t, err := b.unify(what, args, m.Args, m.Location)
	if err != nil {
		return nil, err
	}
	// The values must be comparable: resolve the ordering operator once.
	if _, err := builtins.LookupBinaryOp("<", t, t); err != nil {
		return nil, b.pos(m.Location, err)
	}
	return &MinMax{Greatest: m.Op == pg_query.MinMaxOp_IS_GREATEST, Args: args, T: t}, nil
}

func (b *builder) buildTypeCast(tc *pg_query.TypeCast) (Expr, error) {
	to, err := TypeFromAST(b.ctx.Types, tc.TypeName)
	if err != nil {
		return nil, b.pos(tc.TypeName.GetLocation(), err)
	}
	// ARRAY[...]::t[] types the elements as t, as Postgres does, so
	// ARRAY[]::int[] and ARRAY['1','2']::int[] work.
	if arr, ok := tc.Arg.GetNode().(*pg_query.Node_AArrayExpr); ok && to.Family == types.ArrayFamily {
		e, err := b.buildArray(arr.AArrayExpr, to.Elem)
		if err != nil {
			return nil, err
		}
		return b.explicitCast(e, to, tc.Location)
	}
	e, err := b.build(tc.Arg)
	if err != nil {
		return nil, err
	}
	return b.explicitCast(e, to, tc.Location)
}

func (b *builder) buildFuncCall(fc *pg_query.FuncCall) (Expr, error) {
	fc = rowToJSONCall(fc)
	name := opName(fc.Funcname)
	argb := b
	switch {
	case fc.Over != nil:
		inner := *b
		inner.inAgg, inner.inWindow = false, true
		argb = &inner
	case isAggregateName(name):
		if b.inAgg {
			return nil, b.pos(fc.Location, pgerror.New(pgerrcode.GroupingError, "aggregate function calls cannot be nested"))
		}
		inner := *b
		inner.inAgg, inner.inWindow = true, false
		argb = &inner
	}
	args, names, locs, err := argb.buildCallArgs(fc)
	if err != nil {
		return nil, err
	}
	argTypes := make([]*types.T, len(args))
	for i, a := range args {
		argTypes[i] = a.Type()
	}
	// Built-in functions first, as pg_catalog is searched first (and
	// qualified built-ins, crdb_internal.f, resolve by their last name).
	schema := funcSchema(fc.Funcname)
	res, err := builtins.ResolveFuncNamed(name, argTypes, names)
	if pgerror.Code(err) == pgerrcode.UndefinedFunction && schema != "pg_catalog" {
		// Not a built-in: a user-defined function (udf.go), inlined.
		cands, uerr := b.userFunctions(schema, name)
		if uerr != nil {
			return nil, uerr
		}
		f, slots, uerr := matchUserFunc(cands, name, argTypes, names)
		if uerr != nil {
			return nil, b.pos(fc.Location, uerr)
		}
		if f != nil {
			if fc.Over != nil {
				return nil, b.pos(fc.Location, pgerrorOverNonWindow(name))
			}
			if fc.AggDistinct || fc.AggFilter != nil || len(fc.AggOrder) > 0 || fc.AggStar {
				return nil, b.pos(fc.Location, errNotAggregate("DISTINCT, FILTER or ORDER BY", name))
			}
			return b.buildUserCall(fc, f, slots)
		}
	}
	if err != nil {
		return nil, b.pos(fc.Location, err)
	}
	if err := b.checkWithinGroup(fc, name, res); err != nil {
		return nil, err
	}
	if args, err = b.placeArgs(res, args, locs); err != nil {
		return nil, err
	}
	class := res.Overload.Class
	isAgg := class == builtins.AggregateClass
	switch {
	case class == builtins.Generator:
		return nil, b.pos(fc.Location, errSRFNotAllowed(b.clause()))
	case fc.Over != nil:
		if b.inWindow {
			return nil, b.pos(fc.Location, pgerror.New(pgerrcode.WindowingError, "window function calls cannot be nested"))
		}
		if b.inAgg {
			return nil, b.pos(fc.Location, pgerror.New(pgerrcode.GroupingError, "aggregate function calls cannot contain window function calls"))
		}
		if !isAgg && class != builtins.WindowClass {
			return nil, b.pos(fc.Location, pgerrorOverNonWindow(name))
		}
		if !b.ctx.AllowWindows {
			return nil, b.pos(fc.Location, errWindowNotAllowed(b.clause()))
		}
	case class == builtins.WindowClass:
		return nil, b.pos(fc.Location, errWindowNeedsOver(name))
	case isAgg:
		if !b.ctx.AllowAggregates {
			return nil, b.pos(fc.Location, errAggNotAllowed(b.clause()))
		}
	default:
		if fc.AggDistinct {
			return nil, b.pos(fc.Location, errNotAggregate("DISTINCT", name))
		}
		if fc.AggFilter != nil {
			return nil, b.pos(fc.Location, errNotAggregate("FILTER", name))
		}
		if len(fc.AggOrder) > 0 {
			return nil, b.pos(fc.Location, errNotAggregate("ORDER BY", name))
		}
		return &FuncCall{Fn: res, Args: args}, nil
	}
	call := &AggCall{Fn: res, Name: res.Overload.Name(), Args: args, Star: fc.AggStar,
		Distinct: fc.AggDistinct, Window: fc.Over != nil}
	if fc.AggFilter != nil {
		inner := *b
		inner.ctx.AllowAggregates, inner.ctx.AllowWindows = false, false
		inner.ctx.Clause = "FILTER"
		f, err := inner.build(fc.AggFilter)
		if err != nil {
			return nil, err
		}
		if call.Filter, err = inner.coerceArg(f, types.Bool, "FILTER", location(fc.AggFilter)); err != nil {
			return nil, err
		}
	}
	return call, nil
}

func (b *builder) buildSQLValueFunction(f *pg_query.SQLValueFunction) (Expr, error) {
	name := map[pg_query.SQLValueFunctionOp]string{
		pg_query.SQLValueFunctionOp_SVFOP_CURRENT_DATE:      "current_date",
		pg_query.SQLValueFunctionOp_SVFOP_CURRENT_TIMESTAMP: "current_timestamp",
		pg_query.SQLValueFunctionOp_SVFOP_LOCALTIMESTAMP:    "localtimestamp",
		pg_query.SQLValueFunctionOp_SVFOP_CURRENT_ROLE:      "current_user",
		pg_query.SQLValueFunctionOp_SVFOP_CURRENT_USER:      "current_user",
		pg_query.SQLValueFunctionOp_SVFOP_USER:              "current_user",
		pg_query.SQLValueFunctionOp_SVFOP_SESSION_USER:      "session_user",
		pg_query.SQLValueFunctionOp_SVFOP_CURRENT_CATALOG:   "current_database",
		pg_query.SQLValueFunctionOp_SVFOP_CURRENT_SCHEMA:    "current_schema",
	}[f.Op]
	if name == "" {
		return nil, b.pos(f.Location, errUnsupported("%s is not supported", strings.TrimPrefix(f.Op.String(), "SVFOP_")))
	}
	res, err := builtins.ResolveFunc(name, nil)
	if err != nil {
		return nil, b.pos(f.Location, err)
	}
	return &FuncCall{Fn: res}, nil
}

// buildArray builds ARRAY[...]; elem, when known from a cast, is the
// element type to coerce to.
func (b *builder) buildArray(a *pg_query.A_ArrayExpr, elem *types.T) (Expr, error) {
	elems, err := b.buildList(a.Elements)
	if err != nil {
		return nil, err
	}
	if elem == nil {
		if len(elems) == 0 {
			return nil, b.pos(a.Location, errEmptyArray())
		}
		if elem, err = b.unify("ARRAY", elems, a.Elements, a.Location); err != nil {
			return nil, err
		}
	} else {
		for i := range elems {
			if elems[i], err = b.coerceTo(elems[i], elem, types.CastAssignment, location(a.Elements[i])); err != nil {
				return nil, err
			}
		}
	}
	if elem.Family == types.ArrayFamily {
		return nil, b.pos(a.Location, errUnsupported("multidimensional arrays are not supported"))
	}
	t, err := types.MakeArray(elem)
	if err != nil {
		return nil, b.pos(a.Location, err)
	}
	return &ArrayExpr{Elems: elems, T: t}, nil
}

func (b *builder) buildSubLink(s *pg_query.SubLink) (Expr, error) {
	if b.ctx.Subqueries == nil {
		return nil, b.pos(s.Location, errSubqueryNotAllowed(b.clause()))
	}
	kind := map[pg_query.SubLinkType]SubqueryKind{
		pg_query.SubLinkType_EXPR_SUBLINK: ScalarSubquery, pg_query.SubLinkType_EXISTS_SUBLINK: ExistsSubquery,
		pg_query.SubLinkType_ANY_SUBLINK: AnySubquery, pg_query.SubLinkType_ALL_SUBLINK: AllSubquery,
		pg_query.SubLinkType_ARRAY_SUBLINK: ArraySubquery,
	}
	k, ok := kind[s.SubLinkType]
	if !ok {
		return nil, b.pos(s.Location, errUnsupported("unsupported subquery form %s", s.SubLinkType))
	}
	id, cols, err := b.ctx.Subqueries.Plan(s.Subselect, k)
	if err != nil {
		return nil, b.pos(s.Location, err)
	}
	if k != ExistsSubquery && len(cols) != 1 {
		return nil, b.pos(s.Location, errSubqueryColumns(len(cols) > 1 && k == AnySubquery))
	}
	ref := &SubqueryRef{ID: id, Kind: k}
	switch k {
	case ExistsSubquery:
		ref.T = types.Bool
	case ScalarSubquery:
		ref.T = cols[0]
	case ArraySubquery:
		if ref.T, err = types.MakeArray(cols[0]); err != nil {
			return nil, b.pos(s.Location, err)
		}
	default:
		op := "="
		if len(s.OperName) > 0 {
			op = opName(s.OperName)
		}
		left, err := b.build(s.Testexpr)
		if err != nil {
			return nil, err
		}
		// The subquery's column is typed; coerce only the left side, and
		// check that the operator takes the column's type as it is.
		res, err := builtins.LookupBinaryOp(op, left.Type(), cols[0])
		if err != nil {
			return nil, b.pos(s.Location, err)
		}
		if res.Return.Family != types.BoolFamily {
			return nil, b.pos(s.Location, errOpNotBoolean(op))
		}
		if left, err = b.coerce(left, res.ArgTypes[0], s.Location); err != nil {
			return nil, err
		}
		ref.T, ref.Op, ref.Fn, ref.Left, ref.Col = types.Bool, CmpOp(op), res, left, cols[0]
	}
	return ref, nil
}

// isAggregateName reports whether every overload of name is an aggregate,
// so its arguments can be built knowing they are an aggregate's.
func isAggregateName(name string) bool {
	ovs := builtins.Lookup(name)
	for _, o := range ovs {
		if o.Class != builtins.AggregateClass {
			return false
		}
	}
	return len(ovs) > 0
}

// buildRow builds ROW(a, b, ...) as a record value (comparisons of rows
// are expanded field by field before this). Its fields are named by
// Colnames where the binder set them (a set-returning function's columns),
// else f1, f2, ... as PostgreSQL names an anonymous row's.
func (b *builder) buildRow(r *pg_query.RowExpr) (Expr, error) {
	args := make([]Expr, len(r.Args))
	fields := make([]types.Field, len(r.Args))
	for i, a := range r.Args {
		e, err := b.build(a)
		if err != nil {
			return nil, err
		}
		if e.Type().Family == types.UnknownFamily {
			// An untyped literal in a row is text, as in PostgreSQL.
			if e, err = b.coerce(e, types.Text, location(a)); err != nil {
				return nil, err
			}
		}
		args[i] = e
		fields[i] = types.Field{Name: "f" + strconv.Itoa(i+1), T: e.Type()}
		if i < len(r.Colnames) {
			fields[i].Name = r.Colnames[i].GetString_().GetSval()
		}
	}
	return &RowCons{Args: args, T: types.MakeRecord(fields)}, nil
}

// fieldSelect builds (e).name.
func (b *builder) fieldSelect(e Expr, name string, loc int32) (Expr, error) {
	t := e.Type()
	if t.Family != types.RecordFamily {
		return nil, b.pos(loc, pgerror.New(pgerrcode.WrongObjectType,
			"column notation .%s applied to type %s, which is not a composite type", name, t.Name()))
	}
	i := t.FieldIndex(name)
	if i < 0 {
		return nil, b.pos(loc, pgerror.New(pgerrcode.UndefinedColumn,
			"could not identify column \"%s\" in record data type", name))
	}
	return &FieldSelect{Arg: e, Index: i}, nil
}
