package sem

import (
	"github.com/jackc/pgerrcode"

	"github.com/cairn-db/cairn/sql/builtins"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/types"
)

// EvalContext is what evaluation reads besides the row: the session (for
// functions and casts), parameter values and the values the executor
// computed for placeholders.
type EvalContext struct {
	// Fn is the session as builtins see it; nil means a fixed UTC
	// context (for tests and planning).
	Fn builtins.EvalContext
	// Params are the values of $1..$n, already of ParamTypes' types.
	Params []types.Datum
	// Aggs and Windows hold the values AggRef and WindowRef read.
	Aggs, Windows []types.Datum
	// Subqueries supplies subquery results; nil fails SubqueryRef.
	Subqueries SubqueryValues
}

// SubqueryValues is how the executor hands sem the results of the
// subqueries a SubqueryRef stands for.
type SubqueryValues interface {
	// Value returns a scalar subquery's value (NULL when it returned no
	// row), an EXISTS subquery's DBool, or an ARRAY subquery's array.
	Value(id int) (types.Datum, error)
	// Column returns every value of an ANY/ALL subquery's column.
	Column(id int) ([]types.Datum, error)
}

// SubquerySets is what a SubqueryValues may also implement to answer
// x = ANY (subquery) (IN) and x <> ALL (subquery) (NOT IN) by looking x
// up in a set of the column's values, which it may keep on disk, instead
// of handing sem every value to compare x with. ok is false when it does
// not answer for ref (sem then compares with Column's values).
type SubquerySets interface {
	Member(ref *SubqueryRef, x types.Datum) (m SetMembership, ok bool, err error)
}

// SetMembership is what a SubquerySets knows of a subquery's column for
// one x: whether it has no value, whether a value equals x (x not NULL),
// and whether a value is NULL.
type SetMembership struct {
	Empty, Found, HasNull bool
}

// result is x = ANY (all false) or x <> ALL (all true) by SQL's rules, as
// anyOf computes it from the values themselves.
func (m SetMembership) result(x types.Datum, all bool) types.Datum {
	switch {
	case m.Empty:
		return types.DBool(all)
	case types.IsNull(x):
		return types.DNull
	case m.Found:
		return types.DBool(!all)
	case m.HasNull:
		return types.DNull
	}
	return types.DBool(all)
}

func (c *EvalContext) fn() builtins.EvalContext {
	if c.Fn == nil {
		return &builtins.FixedContext{}
	}
	return c.Fn
}

func (c *EvalContext) typesCtx() *types.Context {
	if c.Fn == nil {
		return nil
	}
	return c.Fn.Types()
}

// Evaluator computes a compiled expression over one row. It reuses
// internal argument buffers, so one Evaluator must not run on two
// goroutines at once (invariant 5); compile one per goroutine.
type Evaluator func(ctx *EvalContext, row []types.Datum) (types.Datum, error)

// Compile turns e into a tree of closures, so per-row evaluation does no
// type switching. cols maps a ColRef's ColumnID to its index in the row;
// nil means the ID is the index. AggCall nodes cannot be compiled (the
// binder must have replaced them).
func Compile(e Expr, cols map[ColumnID]int) (Evaluator, error) {
	c := compiler{cols: cols}
	f, err := c.compile(e)
	if err != nil {
		return nil, err
	}
	return Evaluator(f), nil
}

// Eval compiles and evaluates e once: for one-off evaluation (tests,
// DEFAULT values); executors should Compile once and run per row.
func Eval(ctx *EvalContext, e Expr, row []types.Datum) (types.Datum, error) {
	f, err := Compile(e, nil)
	if err != nil {
		return nil, err
	}
	return f(ctx, row)
}

type evalFn = func(ctx *EvalContext, row []types.Datum) (types.Datum, error)

type compiler struct {
	cols map[ColumnID]int
}

func (c *compiler) compileAll(es []Expr) ([]evalFn, error) {
	out := make([]evalFn, len(es))
	for i, e := range es {
		f, err := c.compile(e)
		if err != nil {
			return nil, err
		}
		out[i] = f
	}
	return out, nil
}

// compile2 compiles the two operands of a binary node, left first, so a
// build error names the left operand's fault before the right's.
func (c *compiler) compile2(left, right Expr) (l, r evalFn, err error) {
	if l, err = c.compile(left); err != nil {
		return nil, nil, err
	}
	if r, err = c.compile(right); err != nil {
		return nil, nil, err
	}
	return l, r, nil
}

// eval2 evaluates two operands left to right, both always (either may be
// NULL): for operators that are not strict in their arguments.
func eval2(ctx *EvalContext, row []types.Datum, l, r evalFn) (a, b types.Datum, err error) {
	if a, err = l(ctx, row); err != nil {
		return nil, nil, err
	}
	if b, err = r(ctx, row); err != nil {
		return nil, nil, err
	}
	return a, b, nil
}

// evalStrict2 evaluates the operands of a strict operator left to right:
// a NULL left operand decides the result (NULL), so the right one is not
// evaluated and b is nil. The result is NULL when either is.
func evalStrict2(ctx *EvalContext, row []types.Datum, l, r evalFn) (a, b types.Datum, err error) {
	if a, err = l(ctx, row); err != nil || types.IsNull(a) {
		return a, nil, err
	}
	b, err = r(ctx, row)
	return a, b, err
}

func (c *compiler) compile(e Expr) (evalFn, error) {
	if f, ok, err := c.compileArray(e); ok {
		return f, err
	}
	switch v := e.(type) {
	case *Const:
		d := v.Datum
		return func(*EvalContext, []types.Datum) (types.Datum, error) { return d, nil }, nil
	case *Param:
		i := v.Index
		return func(ctx *EvalContext, _ []types.Datum) (types.Datum, error) {
			if i > len(ctx.Params) {
				return nil, errNoParam(i)
			}
			return ctx.Params[i-1], nil
		}, nil
	case *ColRef:
		ord := int(v.ID)
		if c.cols != nil {
			o, ok := c.cols[v.ID]
			if !ok {
				return nil, pgerror.New(pgerrcode.InternalError, "sem: column %s (id %d) is not in the row", v.Name, v.ID)
			}
			ord = o
		}
		return func(_ *EvalContext, row []types.Datum) (types.Datum, error) {
			if ord >= len(row) {
				return nil, pgerror.New(pgerrcode.InternalError, "sem: row has %d columns, want column %d", len(row), ord)
			}
			return row[ord], nil
		}, nil
	case *FuncCall:
		return c.call(v.Fn, v.Args)
	case *BinOp:
		return c.call(v.Fn, []Expr{v.Left, v.Right})
	case *UnaryOp:
		return c.call(v.Fn, []Expr{v.Arg})
	case *Cmp:
		return c.cmp(v)
	case *And:
		return c.andOr(v.Args, false)
	case *Or:
		return c.andOr(v.Args, true)
	case *Not:
		arg, err := c.compile(v.Arg)
		if err != nil {
			return nil, err
		}
		return func(ctx *EvalContext, row []types.Datum) (types.Datum, error) {
			d, err := arg(ctx, row)
			if err != nil || types.IsNull(d) {
				return types.DNull, err
			}
			return !d.(types.DBool), nil
		}, nil
	case *IsNull:
		arg, err := c.compile(v.Arg)
		if err != nil {
			return nil, err
		}
		neg := v.Negated
		return func(ctx *EvalContext, row []types.Datum) (types.Datum, error) {
			d, err := arg(ctx, row)
			if err != nil {
				return nil, err
			}
			return types.DBool(types.IsNull(d) != neg), nil
		}, nil
	case *BoolTest:
		return c.boolTest(v)
	case *Case:
		return c.caseExpr(v)
	case *Coalesce:
		args, err := c.compileAll(v.Args)
		if err != nil {
			return nil, err
		}
		return func(ctx *EvalContext, row []types.Datum) (types.Datum, error) {
			for _, a := range args {
				d, err := a(ctx, row)
				if err != nil || !types.IsNull(d) {
					return d, err
				}
			}
			return types.DNull, nil
		}, nil
	case *NullIf:
		return c.nullIf(v)
	case *MinMax:
		return c.minMax(v)
	case *Cast:
		return c.cast(v)
	case *DomainCoerce:
		return c.compileDomain(v)
	case *In:
		return c.in(v)
	case *AnyAll:
		return c.anyAll(v)
	case *RowCmp:
		return c.rowCmp(v)
	case *ArrayExpr:
		elems, err := c.compileAll(v.Elems)
		if err != nil {
			return nil, err
		}
		et := v.T.Elem
		return func(ctx *EvalContext, row []types.Datum) (types.Datum, error) {
			ds := make([]types.Datum, len(elems))
			for i, f := range elems {
				d, err := f(ctx, row)
				if err != nil {
					return nil, err
				}
				ds[i] = d
			}
			return types.NewArray(et, ds...), nil
		}, nil
	case *Subscript:
		return c.subscript(v)
	case *RowCons:
		args, err := c.compileAll(v.Args)
		if err != nil {
			return nil, err
		}
		t := v.T
		return func(ctx *EvalContext, row []types.Datum) (types.Datum, error) {
			ds := make([]types.Datum, len(args))
			for i, f := range args {
				d, err := f(ctx, row)
				if err != nil {
					return nil, err
				}
				ds[i] = d
			}
			return &types.DTuple{T: t, Elems: ds}, nil
		}, nil
	case *FieldSelect:
		arg, err := c.compile(v.Arg)
		if err != nil {
			return nil, err
		}
		i := v.Index
		return func(ctx *EvalContext, row []types.Datum) (types.Datum, error) {
			d, err := arg(ctx, row)
			if err != nil || types.IsNull(d) {
				return types.DNull, err
			}
			return d.(*types.DTuple).Elems[i], nil
		}, nil
	case *SubqueryRef:
		return c.subquery(v)
	case *AggRef:
		i := v.Index
		return func(ctx *EvalContext, _ []types.Datum) (types.Datum, error) {
			if i >= len(ctx.Aggs) {
				return nil, pgerror.New(pgerrcode.InternalError, "sem: aggregate %d has no value", i)
			}
			return ctx.Aggs[i], nil
		}, nil
	case *WindowRef:
		i := v.Index
		return func(ctx *EvalContext, _ []types.Datum) (types.Datum, error) {
			if i >= len(ctx.Windows) {
				return nil, pgerror.New(pgerrcode.InternalError, "sem: window function %d has no value", i)
			}
			return ctx.Windows[i], nil
		}, nil
	}
	return nil, errNotEvaluable(e)
}

// call evaluates a resolved function or operator. A strict one returns
// NULL as soon as an argument is NULL (builtins invariant 3).
func (c *compiler) call(r *builtins.Resolved, argExprs []Expr) (evalFn, error) {
	args, err := c.compileAll(argExprs)
	if err != nil {
		return nil, err
	}
	if r.Overload.Class != builtins.Normal || r.Func() == nil {
		return nil, pgerror.New(pgerrcode.InternalError, "sem: %s is not a scalar function", r.Overload.Signature())
	}
	fn, strict := r.Func(), r.Overload.Strict
	buf := make([]types.Datum, len(args))
	return func(ctx *EvalContext, row []types.Datum) (types.Datum, error) {
		for i, a := range args {
			d, err := a(ctx, row)
			if err != nil {
				return nil, err
			}
			if strict && types.IsNull(d) {
				return types.DNull, nil
			}
			buf[i] = d
		}
		return fn(ctx.fn(), buf)
	}, nil
}

// apply2 applies a resolved binary operator to two non-NULL values.
func apply2(ctx *EvalContext, r *builtins.Resolved, buf []types.Datum, l, rv types.Datum) (types.Datum, error) {
	buf[0], buf[1] = l, rv
	return r.Func()(ctx.fn(), buf)
}

func (c *compiler) cmp(v *Cmp) (evalFn, error) {
	l, r, err := c.compile2(v.Left, v.Right)
	if err != nil {
		return nil, err
	}
	fn := v.Fn
	buf := make([]types.Datum, 2)
	distinct := v.Op == IsDistinctFrom
	if v.Op == IsDistinctFrom || v.Op == IsNotDistinctFrom {
		return func(ctx *EvalContext, row []types.Datum) (types.Datum, error) {
			a, b, err := eval2(ctx, row, l, r)
			if err != nil {
				return nil, err
			}
			an, bn := types.IsNull(a), types.IsNull(b)
			if an || bn {
				return types.DBool((an != bn) == distinct), nil
			}
			eq, err := apply2(ctx, fn, buf, a, b)
			if err != nil || types.IsNull(eq) {
				return eq, err
			}
			return types.DBool(bool(eq.(types.DBool)) != distinct), nil
		}, nil
	}
	return func(ctx *EvalContext, row []types.Datum) (types.Datum, error) {
		a, b, err := evalStrict2(ctx, row, l, r)
		if err != nil || types.IsNull(a) || types.IsNull(b) {
			return types.DNull, err
		}
		return apply2(ctx, fn, buf, a, b)
	}, nil
}

// andOr evaluates AND (or, with or set, OR) left to right, stopping at the
// first false (true): false AND NULL is false, true OR NULL is true, and
// otherwise a NULL makes the result NULL.
func (c *compiler) andOr(argExprs []Expr, or bool) (evalFn, error) {
	args, err := c.compileAll(argExprs)
	if err != nil {
		return nil, err
	}
	stop := types.DBool(or)
	return func(ctx *EvalContext, row []types.Datum) (types.Datum, error) {
		sawNull := false
		for _, a := range args {
			d, err := a(ctx, row)
			if err != nil {
				return nil, err
			}
			if types.IsNull(d) {
				sawNull = true
				continue
			}
			if d.(types.DBool) == stop {
				return stop, nil
			}
		}
		if sawNull {
			return types.DNull, nil
		}
		return !stop, nil
	}, nil
}

func (c *compiler) boolTest(v *BoolTest) (evalFn, error) {
	arg, err := c.compile(v.Arg)
	if err != nil {
		return nil, err
	}
	kind := v.Kind
	return func(ctx *EvalContext, row []types.Datum) (types.Datum, error) {
		d, err := arg(ctx, row)
		if err != nil {
			return nil, err
		}
		isNull := types.IsNull(d)
		val := !isNull && bool(d.(types.DBool))
		var res bool
		switch kind {
		case IsTrue:
			res = val
		case IsNotTrue:
			res = !val
		case IsFalse:
			res = !isNull && !val
		case IsNotFalse:
			res = isNull || val
		case IsUnknown:
			res = isNull
		case IsNotUnknown:
			res = !isNull
		}
		return types.DBool(res), nil
	}, nil
}

func (c *compiler) caseExpr(v *Case) (evalFn, error) {
	type arm struct {
		cond, result evalFn
		eq           *builtins.Resolved
		operandTo    *types.T
	}
	arms := make([]arm, len(v.Whens))
	for i, w := range v.Whens {
		cond, err := c.compile(w.Cond)
		if err != nil {
			return nil, err
		}
		res, err := c.compile(w.Result)
		if err != nil {
			return nil, err
		}
		arms[i] = arm{cond, res, w.Eq, w.OperandTo}
	}
	elseFn := func(*EvalContext, []types.Datum) (types.Datum, error) { return types.DNull, nil }
	if v.Else != nil {
		f, err := c.compile(v.Else)
		if err != nil {
			return nil, err
		}
		elseFn = f
	}
	if v.Operand == nil {
		return func(ctx *EvalContext, row []types.Datum) (types.Datum, error) {
			for _, a := range arms {
				d, err := a.cond(ctx, row)
				if err != nil {
					return nil, err
				}
				if d == types.DBool(true) {
					return a.result(ctx, row)
				}
			}
			return elseFn(ctx, row)
		}, nil
	}
	operand, err := c.compile(v.Operand)
	if err != nil {
		return nil, err
	}
	from := v.Operand.Type()
	buf := make([]types.Datum, 2)
	return func(ctx *EvalContext, row []types.Datum) (types.Datum, error) {
		x, err := operand(ctx, row)
		if err != nil {
			return nil, err
		}
		for _, a := range arms {
			w, err := a.cond(ctx, row)
			if err != nil {
				return nil, err
			}
			if types.IsNull(x) || types.IsNull(w) {
				continue
			}
			xv := x
			if a.operandTo != nil {
				if xv, err = types.Cast(ctx.typesCtx(), x, from, a.operandTo); err != nil {
					return nil, err
				}
			}
			eq, err := apply2(ctx, a.eq, buf, xv, w)
			if err != nil {
				return nil, err
			}
			if eq == types.DBool(true) {
				return a.result(ctx, row)
			}
		}
		return elseFn(ctx, row)
	}, nil
}

func (c *compiler) nullIf(v *NullIf) (evalFn, error) {
	l, r, err := c.compile2(v.Left, v.Right)
	if err != nil {
		return nil, err
	}
	buf := make([]types.Datum, 2)
	eqFn := v.Eq
	return func(ctx *EvalContext, row []types.Datum) (types.Datum, error) {
		a, b, err := eval2(ctx, row, l, r)
		if err != nil {
			return nil, err
		}
		if types.IsNull(a) || types.IsNull(b) {
			return a, nil
		}
		eq, err := apply2(ctx, eqFn, buf, a, b)
		if err != nil {
			return nil, err
		}
		if eq == types.DBool(true) {
			return types.DNull, nil
		}
		return a, nil
	}, nil
}

func (c *compiler) minMax(v *MinMax) (evalFn, error) {
	args, err := c.compileAll(v.Args)
	if err != nil {
		return nil, err
	}
	sign := -1
	if v.Greatest {
		sign = 1
	}
	return func(ctx *EvalContext, row []types.Datum) (types.Datum, error) {
		var best types.Datum = types.DNull
		for _, a := range args {
			d, err := a(ctx, row)
			if err != nil {
				return nil, err
			}
			if types.IsNull(d) {
				continue
			}
			if types.IsNull(best) || types.Compare(d, best)*sign > 0 {
				best = d
			}
		}
		return best, nil
	}, nil
}

func (c *compiler) cast(v *Cast) (evalFn, error) {
	arg, err := c.compile(v.Expr)
	if err != nil {
		return nil, err
	}
	from, to := v.Expr.Type(), v.To
	cast := types.Cast
	if v.Context == types.CastAssignment {
		cast = types.AssignmentCast
	}
	return func(ctx *EvalContext, row []types.Datum) (types.Datum, error) {
		d, err := arg(ctx, row)
		if err != nil || types.IsNull(d) {
			return types.DNull, err
		}
		return cast(ctx.typesCtx(), d, from, to)
	}, nil
}

// anyOf applies `x op ANY/ALL (elems)` with Postgres's NULL rules: an
// empty set is false for ANY and true for ALL whatever x is; otherwise a
// NULL x, or no decisive element but a NULL one, gives NULL.
func anyOf(ctx *EvalContext, fn *builtins.Resolved, buf []types.Datum, x types.Datum, elems []types.Datum, all bool) (types.Datum, error) {
	if len(elems) == 0 {
		return types.DBool(all), nil
	}
	if types.IsNull(x) {
		return types.DNull, nil
	}
	sawNull := false
	for _, el := range elems {
		if types.IsNull(el) {
			sawNull = true
			continue
		}
		r, err := apply2(ctx, fn, buf, x, el)
		if err != nil {
			return nil, err
		}
		if types.IsNull(r) {
			sawNull = true
			continue
		}
		if bool(r.(types.DBool)) != all {
			return types.DBool(!all), nil
		}
	}
	if sawNull {
		return types.DNull, nil
	}
	return types.DBool(all), nil
}

func (c *compiler) in(v *In) (evalFn, error) {
	l, err := c.compile(v.Left)
	if err != nil {
		return nil, err
	}
	list, err := c.compileAll(v.List)
	if err != nil {
		return nil, err
	}
	eq, neg := v.Eq, v.Negated
	buf := make([]types.Datum, 2)
	return func(ctx *EvalContext, row []types.Datum) (types.Datum, error) {
		x, err := l(ctx, row)
		if err != nil || types.IsNull(x) {
			return types.DNull, err
		}
		sawNull := false
		for _, f := range list {
			d, err := f(ctx, row)
			if err != nil {
				return nil, err
			}
			if types.IsNull(d) {
				sawNull = true
				continue
			}
			r, err := apply2(ctx, eq, buf, x, d)
			if err != nil {
				return nil, err
			}
			if r == types.DBool(true) {
				return types.DBool(!neg), nil
			}
		}
		if sawNull {
			return types.DNull, nil
		}
		return types.DBool(neg), nil
	}, nil
}

func (c *compiler) anyAll(v *AnyAll) (evalFn, error) {
	l, arr, err := c.compile2(v.Left, v.Array)
	if err != nil {
		return nil, err
	}
	fn, all := v.Fn, v.All
	buf := make([]types.Datum, 2)
	return func(ctx *EvalContext, row []types.Datum) (types.Datum, error) {
		// A NULL x still needs the array: x = ANY('{}') is false.
		x, a, err := eval2(ctx, row, l, arr)
		if err != nil || types.IsNull(a) {
			return types.DNull, err
		}
		return anyOf(ctx, fn, buf, x, a.(*types.DArray).Elems, all)
	}, nil
}

func (c *compiler) rowCmp(v *RowCmp) (evalFn, error) {
	ls, err := c.compileAll(v.Left)
	if err != nil {
		return nil, err
	}
	rs, err := c.compileAll(v.Right)
	if err != nil {
		return nil, err
	}
	fns := v.Fns
	orEqual := v.Op == LE || v.Op == GE
	buf := make([]types.Datum, 2)
	return func(ctx *EvalContext, row []types.Datum) (types.Datum, error) {
		for i := range ls {
			a, b, err := eval2(ctx, row, ls[i], rs[i])
			if err != nil {
				return nil, err
			}
			if types.IsNull(a) || types.IsNull(b) {
				return types.DNull, nil
			}
			if types.Compare(a, b) == 0 {
				continue
			}
			return apply2(ctx, fns[i], buf, a, b)
		}
		return types.DBool(orEqual), nil
	}, nil
}

func (c *compiler) subscript(v *Subscript) (evalFn, error) {
	arr, idx, err := c.compile2(v.Array, v.Index)
	if err != nil {
		return nil, err
	}
	return func(ctx *EvalContext, row []types.Datum) (types.Datum, error) {
		a, i, err := evalStrict2(ctx, row, arr, idx)
		if err != nil || types.IsNull(a) || types.IsNull(i) {
			return types.DNull, err
		}
		if name, ok := a.(types.DString); ok {
			return types.NameByte(name, int64(i.(types.DInt))), nil
		}
		da := a.(*types.DArray)
		elems := da.Elems
		n := int64(i.(types.DInt)) - int64(da.Lower()) // int2vector counts from 0
		if n < 0 || n >= int64(len(elems)) {
			return types.DNull, nil
		}
		return elems[n], nil
	}, nil
}

func (c *compiler) subquery(v *SubqueryRef) (evalFn, error) {
	id := v.ID
	if v.Kind != AnySubquery && v.Kind != AllSubquery {
		return func(ctx *EvalContext, _ []types.Datum) (types.Datum, error) {
			if ctx.Subqueries == nil {
				return nil, pgerror.New(pgerrcode.InternalError, "sem: no value for subquery %d", id)
			}
			return ctx.Subqueries.Value(id)
		}, nil
	}
	l, err := c.compile(v.Left)
	if err != nil {
		return nil, err
	}
	fn, all, col := v.Fn, v.Kind == AllSubquery, v.Col
	// IN and NOT IN (<> ALL) are set lookups.
	setOp := (!all && v.Op == EQ) || (all && v.Op == NE)
	castTo := fn.ArgTypes[1]
	needCast := col != nil && !col.Identical(castTo) && !(col.Family == castTo.Family && col.Oid == castTo.Oid)
	buf := make([]types.Datum, 2)
	return func(ctx *EvalContext, row []types.Datum) (types.Datum, error) {
		if ctx.Subqueries == nil {
			return nil, pgerror.New(pgerrcode.InternalError, "sem: no value for subquery %d", id)
		}
		x, err := l(ctx, row)
		if err != nil {
			return nil, err
		}
		if sets, ok := ctx.Subqueries.(SubquerySets); ok && setOp {
			m, ok, err := sets.Member(v, x)
			if err != nil {
				return nil, err
			}
			if ok {
				return m.result(x, all), nil
			}
		}
		vals, err := ctx.Subqueries.Column(id)
		if err != nil {
			return nil, err
		}
		if needCast {
			cv := make([]types.Datum, len(vals))
			for i, d := range vals {
				if cv[i], err = types.Cast(ctx.typesCtx(), d, col, castTo); err != nil {
					return nil, err
				}
			}
			vals = cv
		}
		return anyOf(ctx, fn, buf, x, vals, all)
	}, nil
}
