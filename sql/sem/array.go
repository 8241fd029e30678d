package sem

import (
	"github.com/jackc/pgerrcode"
	pg_query "github.com/pganalyze/pg_query_go/v6"

	"github.com/cairn-db/cairn/sql/builtins"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/types"
)

// Array slices (a[1:2], a[:2], a[2:]) and the new value of an array column
// that UPDATE ... SET a[i] = x or SET a[i:j] = y computes. Both are
// one-dimensional, as every Cairn array is; the element work is in
// types.ArraySlice and types.ArraySetSlice.

// Slice is Array[Lower:Upper]; a nil bound stands for the array's own.
type Slice struct {
	Array, Lower, Upper Expr
	T                   *types.T // the array type of the result
}

// ArrayAssign is Array with the element at Lower (IsSlice false) or the
// elements Lower..Upper (IsSlice true; a nil bound is the array's own)
// replaced by Value: the value UPDATE stores for SET a[i] = x. Array is
// NULL for a column that has no array yet.
type ArrayAssign struct {
	Array, Lower, Upper, Value Expr
	IsSlice                    bool
}

func (e *Slice) Type() *types.T       { return e.T }
func (e *ArrayAssign) Type() *types.T { return e.Array.Type() }
func (*Slice) expr()                  {}
func (*ArrayAssign) expr()            {}

func (e *Slice) String() string {
	b := ""
	if e.Lower != nil {
		b = e.Lower.String()
	}
	b += ":"
	if e.Upper != nil {
		b += e.Upper.String()
	}
	if _, ok := e.Array.(*ColRef); ok {
		return e.Array.String() + "[" + b + "]"
	}
	return "(" + e.Array.String() + ")[" + b + "]"
}

func (e *ArrayAssign) String() string {
	sub := ""
	if e.Lower != nil {
		sub = e.Lower.String()
	}
	if e.IsSlice {
		sub += ":"
		if e.Upper != nil {
			sub += e.Upper.String()
		}
	}
	return e.Array.String() + "[" + sub + "] := " + e.Value.String()
}

// optChildren lists the non-nil expressions of es, in order.
func optChildren(es ...Expr) []Expr {
	out := make([]Expr, 0, len(es))
	for _, e := range es {
		if e != nil {
			out = append(out, e)
		}
	}
	return out
}

// fillOpt is optChildren's inverse: it returns es with each non-nil entry
// replaced by the next of k, in order.
func fillOpt(k []Expr, es ...Expr) []Expr {
	out := make([]Expr, len(es))
	for i, e := range es {
		if e != nil {
			out[i], k = k[0], k[1:]
		}
	}
	return out
}

func arrayChildren(e Expr) ([]Expr, bool) {
	switch v := e.(type) {
	case *Slice:
		return optChildren(v.Array, v.Lower, v.Upper), true
	case *ArrayAssign:
		return optChildren(v.Array, v.Lower, v.Upper, v.Value), true
	}
	return nil, false
}

func arrayWithChildren(e Expr, k []Expr) (Expr, bool) {
	switch v := e.(type) {
	case *Slice:
		f := fillOpt(k, v.Array, v.Lower, v.Upper)
		return &Slice{Array: f[0], Lower: f[1], Upper: f[2], T: v.T}, true
	case *ArrayAssign:
		f := fillOpt(k, v.Array, v.Lower, v.Upper, v.Value)
		return &ArrayAssign{Array: f[0], Lower: f[1], Upper: f[2], Value: f[3], IsSlice: v.IsSlice}, true
	}
	return nil, false
}

// compileBound compiles an optional subscript; nil yields a nil evalFn.
func (c *compiler) compileBound(e Expr) (evalFn, error) {
	if e == nil {
		return nil, nil
	}
	return c.compile(e)
}

// evalBound evaluates an optional subscript: a nil result pointer for an
// omitted bound, null reports a NULL subscript.
func evalBound(ctx *EvalContext, row []types.Datum, f evalFn) (v *int64, null bool, err error) {
	if f == nil {
		return nil, false, nil
	}
	d, err := f(ctx, row)
	if err != nil || types.IsNull(d) {
		return nil, err == nil, err
	}
	i := int64(d.(types.DInt))
	return &i, false, nil
}

func (c *compiler) compileArray(e Expr) (evalFn, bool, error) {
	switch v := e.(type) {
	case *Slice:
		f, err := c.slice(v)
		return f, true, err
	case *ArrayAssign:
		f, err := c.arrayAssign(v)
		return f, true, err
	}
	return nil, false, nil
}

func (c *compiler) slice(v *Slice) (evalFn, error) {
	arr, err := c.compile(v.Array)
	if err != nil {
		return nil, err
	}
	lo, err := c.compileBound(v.Lower)
	if err != nil {
		return nil, err
	}
	hi, err := c.compileBound(v.Upper)
	if err != nil {
		return nil, err
	}
	return func(ctx *EvalContext, row []types.Datum) (types.Datum, error) {
		a, err := arr(ctx, row)
		if err != nil || types.IsNull(a) {
			return types.DNull, err
		}
		l, lnull, err := evalBound(ctx, row, lo)
		if err != nil || lnull {
			return types.DNull, err
		}
		h, hnull, err := evalBound(ctx, row, hi)
		if err != nil || hnull {
			return types.DNull, err
		}
		return types.ArraySlice(a.(*types.DArray), l, h), nil
	}, nil
}

func (c *compiler) arrayAssign(v *ArrayAssign) (evalFn, error) {
	arr, err := c.compile(v.Array)
	if err != nil {
		return nil, err
	}
	lo, err := c.compileBound(v.Lower)
	if err != nil {
		return nil, err
	}
	hi, err := c.compileBound(v.Upper)
	if err != nil {
		return nil, err
	}
	val, err := c.compile(v.Value)
	if err != nil {
		return nil, err
	}
	elem, isSlice := v.Array.Type().Elem, v.IsSlice
	return func(ctx *EvalContext, row []types.Datum) (types.Datum, error) {
		a, err := arr(ctx, row)
		if err != nil {
			return nil, err
		}
		l, lnull, err := evalBound(ctx, row, lo)
		if err != nil {
			return nil, err
		}
		h, hnull, err := evalBound(ctx, row, hi)
		if err != nil {
			return nil, err
		}
		if lnull || hnull {
			return nil, pgerror.New(pgerrcode.NullValueNotAllowedDataException, "array subscript in assignment must not be null")
		}
		x, err := val(ctx, row)
		if err != nil {
			return nil, err
		}
		if !isSlice {
			return types.ArraySetElement(a, elem, *l, x)
		}
		if types.IsNull(x) {
			// Postgres leaves the array as it was when the source is NULL.
			return a, nil
		}
		return types.ArraySetSlice(a, elem, l, h, x.(*types.DArray))
	}, nil
}

// buildIndirection builds subscripts: a[i] (Subscript), a[i:j] (Slice).
// Several subscripts on an array address a multidimensional array, which
// Cairn does not have (tooManySubscripts).
func (b *builder) buildIndirection(ind *pg_query.A_Indirection) (Expr, error) {
	e, err := b.build(ind.Arg)
	if err != nil {
		return nil, err
	}
	loc := location(ind.Arg)
	slices := 0
	for _, n := range ind.Indirection {
		if idx, ok := n.Node.(*pg_query.Node_AIndices); ok && idx.AIndices.IsSlice {
			slices++
		}
	}
	if len(ind.Indirection) > 1 && e.Type().Family == types.ArrayFamily {
		return b.tooManySubscripts(e, ind.Indirection, slices > 0)
	}
	for _, n := range ind.Indirection {
		if f := n.GetString_(); f != nil {
			if e, err = b.fieldSelect(e, f.Sval, loc); err != nil {
				return nil, err
			}
			continue
		}
		idx, ok := n.Node.(*pg_query.Node_AIndices)
		if !ok {
			return nil, b.pos(loc, errUnsupported("field selection is not supported"))
		}
		if e.Type().Family == types.JSONBFamily {
			if e, err = b.jsonbSubscript(e, idx.AIndices, loc); err != nil {
				return nil, err
			}
			continue
		}
		isName := e.Type().Family == types.StringFamily && e.Type().Oid == types.Name.Oid
		if e.Type().Family != types.ArrayFamily && !isName {
			return nil, b.pos(loc, errNotSubscriptable(e.Type()))
		}
		if isName && idx.AIndices.IsSlice {
			// PostgreSQL's raw array subscripting of a fixed-length type.
			return nil, b.pos(loc, pgerror.New(pgerrcode.FeatureNotSupported, "slices of fixed-length arrays not implemented"))
		}
		if idx.AIndices.IsSlice {
			lo, err := b.subscript(idx.AIndices.Lidx)
			if err != nil {
				return nil, err
			}
			hi, err := b.subscript(idx.AIndices.Uidx)
			if err != nil {
				return nil, err
			}
			t, err := types.MakeArray(e.Type().Elem) // a vector's slice is a plain array
			if err != nil {
				return nil, b.pos(loc, err)
			}
			e = &Slice{Array: e, Lower: lo, Upper: hi, T: t}
			continue
		}
		i, err := b.subscript(idx.AIndices.Uidx)
		if err != nil {
			return nil, err
		}
		e = &Subscript{Array: e, Index: i}
	}
	return e, nil
}

// jsonbSubscript builds j[i], PostgreSQL 14's jsonb subscripting, which
// reads as j -> i (jsonbSubscriptType gives the subscript's type).
func (b *builder) jsonbSubscript(j Expr, idx *pg_query.A_Indices, loc int32) (Expr, error) {
	i, err := b.jsonbSubscriptIndex(idx, loc)
	if err != nil {
		return nil, err
	}
	return b.binary("->", j, i, loc)
}

// jsonbSubscriptIndex builds one jsonb subscript, coerced to the type
// jsonbSubscriptType gives it; a slice is 42804.
func (b *builder) jsonbSubscriptIndex(idx *pg_query.A_Indices, loc int32) (Expr, error) {
	if idx.IsSlice {
		at := loc
		if idx.Uidx != nil {
			at = location(idx.Uidx)
		}
		return nil, b.pos(at, pgerror.New(pgerrcode.DatatypeMismatch, "jsonb subscript does not support slices"))
	}
	i, err := b.build(idx.Uidx)
	if err != nil {
		return nil, err
	}
	to, err := b.jsonbSubscriptType(i, idx.Uidx)
	if err != nil {
		return nil, err
	}
	return b.coerce(i, to, loc)
}

// jsonbSubscriptType is the type jsonb subscript i is read as: int4 (an
// array element) or text (an object key; an untyped literal or parameter
// is text), as PostgreSQL's jsonb_subscript_transform decides.
func (b *builder) jsonbSubscriptType(i Expr, n *pg_query.Node) (*types.T, error) {
	switch t := i.Type(); {
	case t.Family == types.UnknownFamily:
		return types.Text, nil
	case types.ImplicitCastAllowed(t, types.Int4):
		return types.Int4, nil
	case types.ImplicitCastAllowed(t, types.Text):
		return types.Text, nil
	default:
		return nil, b.pos(location(n), pgerror.New(pgerrcode.DatatypeMismatch,
			"subscript type %s is not supported", t.Name()).
			WithHint("jsonb subscript must be coercible to either integer or text."))
	}
}

// jsonbAssign builds the new value of jsonb column j for SET
// j[s1]...[sn] = val: builtins.JSONBSubscriptAssign over the old value,
// the subscripts as text and val as jsonb.
func (b *builder) jsonbAssign(j Expr, ind []*pg_query.Node, val *pg_query.Node, col string) (Expr, error) {
	args := []Expr{j}
	firstIsInt := false
	for k, n := range ind {
		idx := n.GetAIndices()
		if idx == nil {
			return nil, errUnsupported("assignment to a field of a jsonb value is not supported; use a subscript")
		}
		i, err := b.jsonbSubscriptIndex(idx, location(idx.Uidx))
		if err != nil {
			return nil, err
		}
		if k == 0 {
			firstIsInt = i.Type().Oid == types.Int4.Oid
		}
		if i, err = b.coerceTo(i, types.Text, types.CastExplicit, location(idx.Uidx)); err != nil {
			return nil, err
		}
		args = append(args, i)
	}
	v, err := BuildAssign(b.ctx, val, types.JSONB, col)
	if err != nil {
		return nil, err
	}
	out := &FuncCall{Fn: builtins.JSONBSubscriptAssign(len(ind), firstIsInt), Args: append(args, v)}
	if err := b.checkParams(out); err != nil {
		return nil, err
	}
	return out, nil
}

// tooManySubscripts builds an array with several subscripts, which
// address more dimensions than Cairn's arrays have. PostgreSQL's answer
// then is NULL for elements and an empty array for slices (NULL when the
// array or a given bound is NULL), whatever the subscripts' values.
func (b *builder) tooManySubscripts(arr Expr, ind []*pg_query.Node, slice bool) (Expr, error) {
	nulls := []Expr{&IsNull{Arg: arr}}
	for _, n := range ind {
		idx := n.GetAIndices()
		if idx == nil {
			return nil, b.pos(location(n), errUnsupported("field selection is not supported"))
		}
		for _, bound := range []*pg_query.Node{idx.Lidx, idx.Uidx} {
			e, err := b.subscript(bound)
			if err != nil {
				return nil, err
			}
			if e != nil {
				nulls = append(nulls, &IsNull{Arg: e})
			}
		}
	}
	if !slice {
		return &Const{Datum: types.DNull, T: arr.Type().Elem}, nil
	}
	t, err := types.MakeArray(arr.Type().Elem)
	if err != nil {
		return nil, err
	}
	return &Case{Whens: []When{{Cond: &Or{Args: nulls}, Result: &Const{Datum: types.DNull, T: t}}},
		Else: &Const{Datum: types.NewArray(t.Elem), T: t}, T: t}, nil
}

// subscript builds one array subscript as an int4 (nil when omitted). As
// in PostgreSQL, any type with an assignment cast to integer will do
// (bigint, numeric: rounded), and others are 42804.
func (b *builder) subscript(n *pg_query.Node) (Expr, error) {
	if n == nil {
		return nil, nil
	}
	i, err := b.build(n)
	if err != nil {
		return nil, err
	}
	if t := i.Type(); t.Family != types.UnknownFamily && !types.AssignmentCastAllowed(t, types.Int4) {
		return nil, b.pos(location(n), pgerror.New(pgerrcode.DatatypeMismatch, "array subscript must have type integer"))
	}
	return b.coerceTo(i, types.Int4, types.CastAssignment, location(n))
}

// BuildArrayAssign builds the new value of array column arr (an
// expression over the row being updated) for SET col[...] = val: the
// subscripts of ind (one: Cairn arrays have one dimension) and val, coerced
// to the element type (the array type for a slice).
func BuildArrayAssign(ctx BuildContext, arr Expr, ind []*pg_query.Node, val *pg_query.Node, col string) (Expr, error) {
	b := &builder{ctx: ctx}
	t := arr.Type()
	if t.Family == types.JSONBFamily {
		return b.jsonbAssign(arr, ind, val, col)
	}
	if t.Family != types.ArrayFamily {
		return nil, pgerror.New(pgerrcode.DatatypeMismatch,
			"cannot subscript type %s because it does not support subscripting", t.Name())
	}
	var idx *pg_query.A_Indices
	if len(ind) == 1 {
		idx = ind[0].GetAIndices()
	}
	if idx == nil {
		return nil, errUnsupported("assignment to a subfield or to an element of a multidimensional array is not supported")
	}
	lo, err := b.subscript(idx.Lidx)
	if err != nil {
		return nil, err
	}
	hi, err := b.subscript(idx.Uidx)
	if err != nil {
		return nil, err
	}
	out := &ArrayAssign{Array: arr, IsSlice: idx.IsSlice}
	if idx.IsSlice {
		out.Lower, out.Upper = lo, hi
		st, err := types.MakeArray(t.Elem)
		if err != nil {
			return nil, err
		}
		if out.Value, err = BuildAssign(ctx, val, st, col); err != nil {
			return nil, err
		}
	} else {
		out.Lower = hi // a[i] parses with the subscript in Uidx
		if out.Value, err = BuildAssign(ctx, val, t.Elem, col); err != nil {
			return nil, err
		}
	}
	if err := b.checkParams(out); err != nil {
		return nil, err
	}
	return out, nil
}
