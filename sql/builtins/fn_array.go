package builtins

import (
	"strings"

	"github.com/cairn-db/cairn/sql/types"
)

// Array functions and operators over one-dimensional arrays with lower
// bound 1 (types.DArray). Element equality is types.Compare == 0, with
// NULL elements equal to each other where Postgres uses IS NOT DISTINCT
// FROM (array_position, array_remove, array_replace).

func arr(d types.Datum) *types.DArray { return d.(*types.DArray) }

// ElemEqual is the element comparison of `x = ANY (array)`: true, false, or
// NULL when either side is NULL.
func ElemEqual(a, b types.Datum) types.Datum { return CompareOp("=", a, b) }

func notDistinct(a, b types.Datum) bool {
	an, bn := types.IsNull(a), types.IsNull(b)
	if an || bn {
		return an && bn
	}
	return types.Compare(a, b) == 0
}

func containsAll(a, b *types.DArray) bool {
outer:
	for _, y := range b.Elems {
		if types.IsNull(y) {
			return false // NULL is never contained
		}
		for _, x := range a.Elems {
			if !types.IsNull(x) && types.Compare(x, y) == 0 {
				continue outer
			}
		}
		return false
	}
	return true
}

func init() {
	aa, ae, i4, text := AnyArray, AnyElement, types.Int4, types.Text
	ca, ce := AnyCompatibleArray, AnyCompatible
	fn := func(name string, args []*types.T, ret ReturnFunc, strict bool, f Fn) {
		registerFn(name, Overload{Args: args, Return: ret, Strict: strict, Fn: f})
	}
	fn("array_length", []*types.T{aa, i4}, Fixed(i4), true, func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		if i64(a[1]) != 1 || len(arr(a[0]).Elems) == 0 {
			return types.DNull, nil
		}
		return types.DInt(len(arr(a[0]).Elems)), nil
	})
	fn("cardinality", []*types.T{aa}, Fixed(i4), true, func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		return types.DInt(len(arr(a[0]).Elems)), nil
	})
	fn("array_lower", []*types.T{aa, i4}, Fixed(i4), true, func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		if i64(a[1]) != 1 || len(arr(a[0]).Elems) == 0 {
			return types.DNull, nil
		}
		return types.DInt(arr(a[0]).Lower()), nil
	})
	fn("array_upper", []*types.T{aa, i4}, Fixed(i4), true, func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		if i64(a[1]) != 1 || len(arr(a[0]).Elems) == 0 {
			return types.DNull, nil
		}
		return types.DInt(arr(a[0]).Lower() + len(arr(a[0]).Elems) - 1), nil
	})
	appendFn := func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		if types.IsNull(a[0]) {
			return types.NewArray(datumType(a[1]), a[1]), nil
		}
		x := arr(a[0])
		return types.NewArray(x.Elem, append(append([]types.Datum{}, x.Elems...), a[1])...), nil
	}
	fn("array_append", []*types.T{ca, ce}, SameAsArg(0), false, appendFn)
	prependFn := func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		if types.IsNull(a[1]) {
			return types.NewArray(datumType(a[0]), a[0]), nil
		}
		x := arr(a[1])
		return types.NewArray(x.Elem, append([]types.Datum{a[0]}, x.Elems...)...), nil
	}
	fn("array_prepend", []*types.T{ce, ca}, SameAsArg(1), false, prependFn)
	catFn := func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		switch {
		case types.IsNull(a[0]):
			return a[1], nil
		case types.IsNull(a[1]):
			return a[0], nil
		}
		x, y := arr(a[0]), arr(a[1])
		return types.NewArray(x.Elem, append(append([]types.Datum{}, x.Elems...), y.Elems...)...), nil
	}
	fn("array_cat", []*types.T{ca, ca}, SameAsArg(0), false, catFn)
	registerBinary("||",
		Overload{Args: []*types.T{ca, ca}, Return: SameAsArg(0), Fn: catFn},
		Overload{Args: []*types.T{ca, ce}, Return: SameAsArg(0), Fn: appendFn},
		Overload{Args: []*types.T{ce, ca}, Return: SameAsArg(1), Fn: prependFn},
	)
	fn("array_position", []*types.T{ca, ce}, Fixed(i4), false, func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		if types.IsNull(a[0]) {
			return types.DNull, nil
		}
		for i, e := range arr(a[0]).Elems {
			if notDistinct(e, a[1]) {
				return types.DInt(i + arr(a[0]).Lower()), nil
			}
		}
		return types.DNull, nil
	})
	fn("array_positions", []*types.T{ca, ce}, Fixed(types.MustArray(i4)), false, func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		if types.IsNull(a[0]) {
			return types.DNull, nil
		}
		out := types.NewArray(types.Int4)
		for i, e := range arr(a[0]).Elems {
			if notDistinct(e, a[1]) {
				out.Elems = append(out.Elems, types.DInt(i+arr(a[0]).Lower()))
			}
		}
		return out, nil
	})
	fn("array_remove", []*types.T{aa, ae}, SameAsArg(0), false, func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		if types.IsNull(a[0]) {
			return types.DNull, nil
		}
		x := arr(a[0])
		out := types.NewArray(x.Elem)
		for _, e := range x.Elems {
			if !notDistinct(e, a[1]) {
				out.Elems = append(out.Elems, e)
			}
		}
		return out, nil
	})
	fn("array_replace", []*types.T{aa, ae, ae}, SameAsArg(0), false, func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		if types.IsNull(a[0]) {
			return types.DNull, nil
		}
		x := arr(a[0])
		out := types.NewArray(x.Elem, append([]types.Datum{}, x.Elems...)...)
		for i, e := range out.Elems {
			if notDistinct(e, a[1]) {
				out.Elems[i] = a[2]
			}
		}
		return out, nil
	})
	fn("array_to_string", []*types.T{aa, text}, Fixed(text), true, func(ctx EvalContext, a []types.Datum) (types.Datum, error) {
		return types.DString(joinText(ctx, arr(a[0]).Elems, str(a[1]))), nil
	})
	fn("array_to_string", []*types.T{aa, text, text}, Fixed(text), false, func(ctx EvalContext, a []types.Datum) (types.Datum, error) {
		if types.IsNull(a[0]) || types.IsNull(a[1]) {
			return types.DNull, nil
		}
		elems := arr(a[0]).Elems
		if !types.IsNull(a[2]) {
			elems = append([]types.Datum{}, elems...)
			for i, e := range elems {
				if types.IsNull(e) {
					elems[i] = a[2]
				}
			}
		}
		return types.DString(joinText(ctx, elems, str(a[1]))), nil
	})
	splitFn := func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		if types.IsNull(a[0]) {
			return types.DNull, nil
		}
		s := str(a[0])
		out := types.NewArray(types.Text)
		if s == "" {
			return out, nil
		}
		var parts []string
		switch {
		case types.IsNull(a[1]):
			for _, r := range s {
				parts = append(parts, string(r))
			}
		case str(a[1]) == "":
			parts = []string{s}
		default:
			parts = strings.Split(s, str(a[1]))
		}
		for _, p := range parts {
			if len(a) > 2 && !types.IsNull(a[2]) && p == str(a[2]) {
				out.Elems = append(out.Elems, types.DNull)
			} else {
				out.Elems = append(out.Elems, types.DString(p))
			}
		}
		return out, nil
	}
	textArr := Fixed(types.MustArray(text))
	fn("string_to_array", []*types.T{text, text}, textArr, false, splitFn)
	fn("string_to_array", []*types.T{text, text, text}, textArr, false, splitFn)
	registerBinary("@>", Overload{Args: []*types.T{aa, aa}, Return: Fixed(types.Bool), Strict: true, Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		return types.DBool(containsAll(arr(a[0]), arr(a[1]))), nil
	}})
	registerBinary("<@", Overload{Args: []*types.T{aa, aa}, Return: Fixed(types.Bool), Strict: true, Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		return types.DBool(containsAll(arr(a[1]), arr(a[0]))), nil
	}})
	registerBinary("&&", Overload{Args: []*types.T{aa, aa}, Return: Fixed(types.Bool), Strict: true, Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		for _, x := range arr(a[0]).Elems {
			for _, y := range arr(a[1]).Elems {
				if !types.IsNull(x) && !types.IsNull(y) && types.Compare(x, y) == 0 {
					return types.DBool(true), nil
				}
			}
		}
		return types.DBool(false), nil
	}})
	registerFn("unnest", Overload{Args: []*types.T{aa}, Class: Generator, Strict: true,
		Return:  func(a []*types.T) *types.T { return a[0].Elem },
		Columns: func(a []*types.T) []Column { return []Column{{"unnest", a[0].Elem}} },
		SRF: func(_ EvalContext, a []types.Datum) (RowIter, error) {
			rows := make([][]types.Datum, len(arr(a[0]).Elems))
			for i, e := range arr(a[0]).Elems {
				rows[i] = []types.Datum{e}
			}
			return &sliceIter{rows: rows}, nil
		}})
	// _pg_expandarray is information_schema's: each element of an array
	// with its 1-based position n (pgjdbc reads primary and index keys
	// with it, from int2vectors, which count from 0).
	registerFn("_pg_expandarray", Overload{Args: []*types.T{aa}, Class: Generator, Strict: true,
		Return: func(a []*types.T) *types.T {
			return types.MakeRecord([]types.Field{{Name: "x", T: a[0].Elem}, {Name: "n", T: i4}})
		},
		Columns: func(a []*types.T) []Column { return []Column{{"x", a[0].Elem}, {"n", i4}} },
		SRF: func(_ EvalContext, a []types.Datum) (RowIter, error) {
			rows := make([][]types.Datum, len(arr(a[0]).Elems))
			for i, e := range arr(a[0]).Elems {
				rows[i] = []types.Datum{e, types.DInt(i + 1)}
			}
			return &sliceIter{rows: rows}, nil
		}})
	subs := func(_ EvalContext, a []types.Datum) (RowIter, error) {
		x := arr(a[0])
		if i64(a[1]) != 1 {
			return &sliceIter{}, nil
		}
		rev := len(a) > 2 && !types.IsNull(a[2]) && bool(a[2].(types.DBool))
		rows := make([][]types.Datum, len(x.Elems))
		for i := range rows {
			v := i + x.Lower()
			if rev {
				v = len(rows) - 1 - i + x.Lower()
			}
			rows[i] = []types.Datum{types.DInt(v)}
		}
		return &sliceIter{rows: rows}, nil
	}
	for _, args := range [][]*types.T{{aa, i4}, {aa, i4, types.Bool}} {
		registerFn("generate_subscripts", Overload{Args: args, Class: Generator, Strict: true, Return: Fixed(i4),
			Columns: func([]*types.T) []Column { return []Column{{"generate_subscripts", i4}} }, SRF: subs})
	}
}
