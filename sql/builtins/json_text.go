package builtins

import (
	"strconv"
	"strings"

	"github.com/cairn-db/cairn/sql/types"
)

// The json type's operators and functions. json values are their text as
// written (types.DJSONText): extraction returns sub-values exactly as
// written (types.JSONTextNode), and the functions that build json print
// it as PostgreSQL's json producers do, which is not jsonb's spacing:
// json_build_object gives {"a" : 1}, to_json and row_to_json {"a":1},
// json_agg [1, 2] with a line break before each structured element after
// the first, json_object_agg { "a" : 1 }.

func jsonText(d types.Datum) types.JSONTextNode {
	// The datum was validated when it was made json; parsing cannot fail.
	n, _ := types.ParseJSONText(string(d.(types.DJSONText)))
	return n
}

func jsonTextOut(n types.JSONTextNode, ok bool) types.Datum {
	if !ok {
		return types.DNull
	}
	return types.DJSONText(n.Raw)
}

func textOrNull(n types.JSONTextNode, ok bool) types.Datum {
	if !ok {
		return types.DNull
	}
	return n.Text()
}

// jsonTextPath follows a #> path: keys into objects, integers into arrays
// (a non-integer step into an array finds nothing).
func jsonTextPath(n types.JSONTextNode, path *types.DArray) (types.JSONTextNode, bool) {
	for _, e := range path.Elems {
		if types.IsNull(e) {
			return types.JSONTextNode{}, false
		}
		k := str(e)
		var ok bool
		switch n.Kind {
		case types.JSONObject:
			n, ok = n.Field(k)
		case types.JSONArray:
			i, err := strconv.ParseInt(strings.TrimSpace(k), 10, 32)
			if err != nil {
				return types.JSONTextNode{}, false
			}
			n, ok = n.Index(i)
		}
		if !ok {
			return types.JSONTextNode{}, false
		}
	}
	return n, true
}

// appendJSONDatum appends d (of type t) as PostgreSQL's datum_to_json
// prints it: json as written, jsonb as jsonb prints, arrays as [a,b]
// without spaces, numbers bare when they are JSON numbers, everything
// else as to_jsonb converts it.
func appendJSONDatum(dst []byte, ctx EvalContext, d types.Datum, t *types.T) ([]byte, error) {
	switch v := d.(type) {
	case types.DJSONText:
		return append(dst, v...), nil
	case *types.DArray:
		return appendJSONArray(dst, ctx, v, false)
	}
	j, err := toJSON(ctx, d, t)
	if err != nil {
		return nil, err
	}
	return append(dst, j.String()...), nil
}

func appendJSONArray(dst []byte, ctx EvalContext, a *types.DArray, pretty bool) ([]byte, error) {
	dst = append(dst, '[')
	sep := ","
	if pretty {
		sep = ",\n "
	}
	for i, e := range a.Elems {
		if i > 0 {
			dst = append(dst, sep...)
		}
		var err error
		if dst, err = appendJSONDatum(dst, ctx, e, a.Elem); err != nil {
			return nil, err
		}
	}
	return append(dst, ']'), nil
}

// structured reports whether json_agg puts a line break before a value of
// type t: arrays and rows, as PostgreSQL's JSONTYPE_ARRAY/COMPOSITE.
func structured(t *types.T) bool { return t != nil && t.Family == types.ArrayFamily }

// jsonTextStripNulls rebuilds n without the object members whose value is
// null, compactly (json_strip_nulls does not keep the input's spacing).
func jsonTextStripNulls(dst []byte, n types.JSONTextNode) []byte {
	switch n.Kind {
	case types.JSONObject:
		dst = append(dst, '{')
		first := true
		for i, k := range n.Keys {
			if n.Vals[i].Kind == types.JSONNull {
				continue
			}
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = append(types.AppendJSONString(dst, k), ':')
			dst = jsonTextStripNulls(dst, n.Vals[i])
		}
		return append(dst, '}')
	case types.JSONArray:
		dst = append(dst, '[')
		for i, v := range n.Vals {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = jsonTextStripNulls(dst, v)
		}
		return append(dst, ']')
	}
	return append(dst, n.Raw...)
}

func buildJSONTextObject(ctx EvalContext, a []types.Datum) (types.Datum, error) {
	if len(a)%2 != 0 {
		return nil, errJSON("argument list must have even number of elements").
			WithHint("The arguments of json_build_object() must consist of alternating keys and values.")
	}
	dst := []byte{'{'}
	for i := 0; i < len(a); i += 2 {
		if types.IsNull(a[i]) {
			return nil, errJSON("argument %d cannot be null", i+1).WithHint("Object keys should be text.")
		}
		if i > 0 {
			dst = append(dst, ", "...)
		}
		k, err := jsonKeyText(ctx, a[i], nil)
		if err != nil {
			return nil, err
		}
		dst = append(types.AppendJSONString(dst, k), " : "...)
		if dst, err = appendJSONDatum(dst, ctx, a[i+1], nil); err != nil {
			return nil, err
		}
	}
	return types.DJSONText(append(dst, '}')), nil
}

func buildJSONTextArray(ctx EvalContext, a []types.Datum) (types.Datum, error) {
	dst := []byte{'['}
	for i, d := range a {
		if i > 0 {
			dst = append(dst, ", "...)
		}
		var err error
		if dst, err = appendJSONDatum(dst, ctx, d, nil); err != nil {
			return nil, err
		}
	}
	return types.DJSONText(append(dst, ']')), nil
}

// rowToJSON prints the fields of a row, which the binder spreads into
// the arguments as alternating names and values (sem's rowToJSONCall), as
// row_to_json does: {"f1":1,"f2":"x"}.
func rowToJSON(ctx EvalContext, a []types.Datum) (types.Datum, error) {
	if len(a)%2 != 0 {
		return nil, errJSON("row_to_json takes a row")
	}
	dst := []byte{'{'}
	for i := 0; i < len(a); i += 2 {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(types.AppendJSONString(dst, str(a[i])), ':')
		var err error
		if dst, err = appendJSONDatum(dst, ctx, a[i+1], nil); err != nil {
			return nil, err
		}
	}
	return types.DJSONText(append(dst, '}')), nil
}

type jsonTextAgg struct {
	typ *types.T
	buf []byte
}

func (a *jsonTextAgg) Add(ctx EvalContext, args []types.Datum) error {
	if a.buf == nil {
		a.buf = []byte{'['}
	} else {
		a.buf = append(a.buf, ", "...)
		if !types.IsNull(args[0]) && structured(a.typ) {
			a.buf = append(a.buf, "\n "...)
		}
	}
	var err error
	a.buf, err = appendJSONDatum(a.buf, ctx, args[0], a.typ)
	return err
}

func (a *jsonTextAgg) Result() (types.Datum, error) {
	if a.buf == nil {
		return types.DNull, nil
	}
	return types.DJSONText(string(a.buf) + "]"), nil
}

type jsonTextObjectAgg struct {
	kt, vt *types.T
	buf    []byte
}

func (a *jsonTextObjectAgg) Add(ctx EvalContext, args []types.Datum) error {
	if types.IsNull(args[0]) {
		return errInvalidParam("field name must not be null")
	}
	if a.buf == nil {
		a.buf = []byte("{ ")
	} else {
		a.buf = append(a.buf, ", "...)
	}
	k, err := jsonKeyText(ctx, args[0], a.kt)
	if err != nil {
		return err
	}
	a.buf = append(types.AppendJSONString(a.buf, k), " : "...)
	a.buf, err = appendJSONDatum(a.buf, ctx, args[1], a.vt)
	return err
}

func (a *jsonTextObjectAgg) Result() (types.Datum, error) {
	if a.buf == nil {
		return types.DNull, nil
	}
	return types.DJSONText(string(a.buf) + " }"), nil
}

func init() {
	js, text, i4 := types.JSONText, types.Text, types.Int4
	textArr := types.MustArray(text)
	bin := func(op string, l, r, ret *types.T, fn Fn) {
		registerBinary(op, Overload{Args: []*types.T{l, r}, Return: Fixed(ret), Fn: fn, Strict: true})
	}
	bin("->", js, text, js, func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		return jsonTextOut(jsonText(a[0]).Field(str(a[1]))), nil
	})
	bin("->", js, i4, js, func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		return jsonTextOut(jsonText(a[0]).Index(i64(a[1]))), nil
	})
	bin("->>", js, text, text, func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		return textOrNull(jsonText(a[0]).Field(str(a[1]))), nil
	})
	bin("->>", js, i4, text, func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		return textOrNull(jsonText(a[0]).Index(i64(a[1]))), nil
	})
	bin("#>", js, textArr, js, func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		return jsonTextOut(jsonTextPath(jsonText(a[0]), arr(a[1]))), nil
	})
	bin("#>>", js, textArr, text, func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		return textOrNull(jsonTextPath(jsonText(a[0]), arr(a[1]))), nil
	})

	fn := func(name string, args []*types.T, ret *types.T, f Fn) {
		registerFn(name, Overload{Args: args, Return: Fixed(ret), Fn: f, Strict: true})
	}
	path := func(asText bool) Fn {
		return func(_ EvalContext, a []types.Datum) (types.Datum, error) {
			n, ok := jsonTextPath(jsonText(a[0]), types.NewArray(text, a[1:]...))
			if asText {
				return textOrNull(n, ok), nil
			}
			return jsonTextOut(n, ok), nil
		}
	}
	registerFn("json_extract_path", Overload{Args: []*types.T{js, text}, Variadic: true, Return: Fixed(js), Strict: true, Fn: path(false)})
	registerFn("json_extract_path_text", Overload{Args: []*types.T{js, text}, Variadic: true, Return: Fixed(text), Strict: true, Fn: path(true)})
	fn("json_typeof", []*types.T{js}, text, func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		return types.DString(jsonText(a[0]).Kind.String()), nil
	})
	fn("json_array_length", []*types.T{js}, i4, func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		n := jsonText(a[0])
		switch n.Kind {
		case types.JSONArray:
			return types.DInt(len(n.Vals)), nil
		case types.JSONObject:
			return nil, errJSON("cannot get array length of a non-array")
		}
		return nil, errJSON("cannot get array length of a scalar")
	})
	fn("json_strip_nulls", []*types.T{js}, js, func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		return types.DJSONText(jsonTextStripNulls(nil, jsonText(a[0]))), nil
	})
	registerFn("to_json", Overload{Args: []*types.T{AnyElement}, Return: Fixed(js), Strict: true, Volatility: Stable,
		Fn: func(ctx EvalContext, a []types.Datum) (types.Datum, error) {
			b, err := appendJSONDatum(nil, ctx, a[0], nil)
			return types.DJSONText(b), err
		}})
	arrayToJSON := func(ctx EvalContext, a []types.Datum) (types.Datum, error) {
		pretty := len(a) > 1 && bool(a[1].(types.DBool))
		b, err := appendJSONArray(nil, ctx, arr(a[0]), pretty)
		return types.DJSONText(b), err
	}
	registerFn("array_to_json",
		Overload{Args: []*types.T{AnyArray}, Return: Fixed(js), Strict: true, Volatility: Stable, Fn: arrayToJSON},
		Overload{Args: []*types.T{AnyArray, types.Bool}, Return: Fixed(js), Strict: true, Volatility: Stable, Fn: arrayToJSON})
	registerFn("row_to_json", Overload{Args: []*types.T{Any}, Variadic: true, Return: Fixed(js), Volatility: Stable, Fn: rowToJSON})

	srf := func(name string, cols []Column, f func(n types.JSONTextNode) ([][]types.Datum, error)) {
		registerFn(name, Overload{Args: []*types.T{js}, Class: Generator, Strict: true,
			Return:  Fixed(cols[0].Type),
			Columns: func([]*types.T) []Column { return cols },
			SRF: func(_ EvalContext, a []types.Datum) (RowIter, error) {
				rows, err := f(jsonText(a[0]))
				return &sliceIter{rows: rows}, err
			}})
	}
	// need refuses a value of the wrong kind with PostgreSQL's wording:
	// "on a non-array" for an object given to an array function.
	need := func(n types.JSONTextNode, kind types.JSONKind, fn string) error {
		switch {
		case n.Kind == kind:
			return nil
		case n.Kind == types.JSONArray:
			return errJSON("cannot call %s on an array", fn)
		case n.Kind == types.JSONObject:
			return errJSON("cannot call %s on a non-array", fn)
		}
		return errJSON("cannot call %s on a scalar", fn)
	}
	elements := func(name string, asText bool) {
		t := js
		if asText {
			t = text
		}
		srf(name, []Column{{"value", t}}, func(n types.JSONTextNode) ([][]types.Datum, error) {
			if err := need(n, types.JSONArray, name); err != nil {
				return nil, err
			}
			rows := make([][]types.Datum, len(n.Vals))
			for i, v := range n.Vals {
				if asText {
					rows[i] = []types.Datum{v.Text()}
				} else {
					rows[i] = []types.Datum{types.DJSONText(v.Raw)}
				}
			}
			return rows, nil
		})
	}
	elements("json_array_elements", false)
	elements("json_array_elements_text", true)
	srf("json_object_keys", []Column{{"json_object_keys", text}}, func(n types.JSONTextNode) ([][]types.Datum, error) {
		if err := need(n, types.JSONObject, "json_object_keys"); err != nil {
			return nil, err
		}
		rows := make([][]types.Datum, len(n.Keys))
		for i, k := range n.Keys {
			rows[i] = []types.Datum{types.DString(k)}
		}
		return rows, nil
	})
	each := func(name string, asText bool) {
		t := js
		if asText {
			t = text
		}
		srf(name, []Column{{"key", text}, {"value", t}}, func(n types.JSONTextNode) ([][]types.Datum, error) {
			switch n.Kind {
			case types.JSONObject:
			case types.JSONArray:
				return nil, errJSON("cannot deconstruct an array as an object")
			default:
				return nil, errJSON("cannot deconstruct a scalar")
			}
			rows := make([][]types.Datum, len(n.Keys))
			for i, k := range n.Keys {
				v := types.Datum(types.DJSONText(n.Vals[i].Raw))
				if asText {
					v = n.Vals[i].Text()
				}
				rows[i] = []types.Datum{types.DString(k), v}
			}
			return rows, nil
		})
	}
	each("json_each", false)
	each("json_each_text", true)

	for name, f := range map[string]Fn{"json_build_object": buildJSONTextObject, "json_build_array": buildJSONTextArray} {
		registerFn(name,
			Overload{Return: Fixed(js), Volatility: Stable, Fn: f},
			Overload{Args: []*types.T{Any}, Variadic: true, Return: Fixed(js), Volatility: Stable, Fn: f})
	}
	registerAgg("json_agg", []*types.T{AnyElement}, Fixed(js), func(a []*types.T) Aggregate { return &jsonTextAgg{typ: a[0]} })
	registerAgg("json_object_agg", []*types.T{Any, Any}, Fixed(js), func(a []*types.T) Aggregate {
		return &jsonTextObjectAgg{kt: a[0], vt: a[1]}
	})
}
