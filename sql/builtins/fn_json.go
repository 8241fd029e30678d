package builtins

import (
	"math"
	"strconv"
	"strings"

	"github.com/cockroachdb/apd/v3"
	"github.com/jackc/pgerrcode"

	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/types"
)

// jsonb operators and functions. Values are types.JSON trees; every
// function builds new trees and never modifies its inputs (sql/types
// invariant 5).

// toJSON converts a value of type t as to_jsonb does: numbers stay numbers
// (non-finite floats become strings), booleans booleans, arrays arrays,
// jsonb itself, timestamps ISO 8601 strings, anything else its text.
func toJSON(ctx EvalContext, d types.Datum, t *types.T) (types.JSON, error) {
	if types.IsNull(d) {
		return types.JSONNullValue, nil
	}
	switch v := d.(type) {
	case types.DBool:
		return types.JSONBoolValue(bool(v)), nil
	case types.DInt:
		return types.JSONNumberValue(apd.New(int64(v), 0)), nil
	case types.DFloat:
		f := float64(v)
		if math.IsInf(f, 0) || math.IsNaN(f) {
			return types.JSONStringValue(types.Format(nil, t, v)), nil
		}
		dec, err := types.ParseDatum(nil, types.Numeric, types.Format(nil, t, v))
		if err != nil {
			return types.JSON{}, err
		}
		return types.JSONNumberValue(&dec.(*types.DDecimal).Decimal), nil
	case *types.DDecimal:
		if v.Form != apd.Finite {
			return types.JSONStringValue(v.String()), nil
		}
		return types.JSONNumberValue(&v.Decimal), nil
	case *types.DJSON:
		return v.JSON, nil
	case types.DJSONText:
		return types.ParseJSON(string(v))
	case *types.DArray:
		elems := make([]types.JSON, len(v.Elems))
		for i, e := range v.Elems {
			j, err := toJSON(ctx, e, v.Elem)
			if err != nil {
				return types.JSON{}, err
			}
			elems[i] = j
		}
		return types.JSONArrayValue(elems...), nil
	case types.DTimestamp, types.DTimestampTZ:
		s := types.Format(typesCtx(ctx), t, v)
		if len(s) > 10 && s[10] == ' ' {
			s = s[:10] + "T" + s[11:]
		}
		return types.JSONStringValue(s), nil
	}
	if t == nil || isPseudo(t) || t.Family == types.UnknownFamily {
		return types.JSONStringValue(d.String()), nil
	}
	return types.JSONStringValue(types.Format(typesCtx(ctx), t, d)), nil
}

// jsonKeyText is an object key from any value: its text output.
func jsonKeyText(ctx EvalContext, d types.Datum, t *types.T) (string, error) {
	if s, ok := d.(types.DString); ok {
		return string(s), nil
	}
	if t == nil || isPseudo(t) || t.Family == types.UnknownFamily {
		return d.String(), nil
	}
	return types.Format(typesCtx(ctx), t, d), nil
}

func jsonArg(d types.Datum) types.JSON { return d.(*types.DJSON).JSON }

func jsonOut(j types.JSON) types.Datum { return types.NewJSON(j) }

func textArray(d types.Datum) ([]string, bool) {
	a := d.(*types.DArray)
	out := make([]string, len(a.Elems))
	for i, e := range a.Elems {
		if types.IsNull(e) {
			return nil, false
		}
		out[i] = string(e.(types.DString))
	}
	return out, true
}

func asText(j types.JSON, ok bool) types.Datum {
	if !ok {
		return types.DNull
	}
	s, ok := j.AsText()
	if !ok {
		return types.DNull
	}
	return types.DString(s)
}

func jsonOrNull(j types.JSON, ok bool) types.Datum {
	if !ok {
		return types.DNull
	}
	return jsonOut(j)
}

func errJSON(format string, args ...any) *pgerror.Error {
	return pgerror.New(pgerrcode.InvalidParameterValue, format, args...)
}

// jsonConcat is jsonb || jsonb.
func jsonConcat(a, b types.JSON) types.JSON {
	if a.Kind == types.JSONObject && b.Kind == types.JSONObject {
		pairs := append(append([]types.JSONPair{}, a.Pairs...), b.Pairs...)
		return types.JSONObjectValue(pairs...)
	}
	wrap := func(j types.JSON) []types.JSON {
		if j.Kind == types.JSONArray {
			return j.Elems
		}
		return []types.JSON{j}
	}
	return types.JSONArrayValue(append(append([]types.JSON{}, wrap(a)...), wrap(b)...)...)
}

func jsonDeleteKey(j types.JSON, key string) (types.JSON, error) {
	switch j.Kind {
	case types.JSONObject:
		var ps []types.JSONPair
		for _, p := range j.Pairs {
			if p.Key != key {
				ps = append(ps, p)
			}
		}
		return types.JSONObjectValue(ps...), nil
	case types.JSONArray:
		var es []types.JSON
		for _, e := range j.Elems {
			if !(e.Kind == types.JSONString && e.Str == key) {
				es = append(es, e)
			}
		}
		return types.JSONArrayValue(es...), nil
	}
	return types.JSON{}, errJSON("cannot delete from scalar")
}

func jsonDeleteIndex(j types.JSON, i int64) (types.JSON, error) {
	switch j.Kind {
	case types.JSONObject:
		return types.JSON{}, errJSON("cannot delete from object using integer index")
	case types.JSONArray:
	default:
		return types.JSON{}, errJSON("cannot delete from scalar")
	}
	n := int64(len(j.Elems))
	if i < 0 {
		i += n
	}
	if i < 0 || i >= n {
		return j, nil
	}
	es := append(append([]types.JSON{}, j.Elems[:i]...), j.Elems[i+1:]...)
	return types.JSONArrayValue(es...), nil
}

// jsonSet implements jsonb_set (insert false) and jsonb_insert (insert
// true, after choosing before or after an array element).
func jsonSet(j types.JSON, path []string, v types.JSON, create, insert, after bool, depth int) (types.JSON, error) {
	if len(path) == 0 {
		return v, nil
	}
	key, last := path[0], len(path) == 1
	switch j.Kind {
	case types.JSONObject:
		cur, ok := j.FetchKey(key)
		if ok && last && insert {
			return types.JSON{}, errJSON("cannot replace existing key").WithHint("Try using the function jsonb_set to replace key value.")
		}
		if !ok && !(last && (create || insert)) {
			return j, nil
		}
		nv := v
		if ok && !last {
			var err error
			if nv, err = jsonSet(cur, path[1:], v, create, insert, after, depth+1); err != nil {
				return types.JSON{}, err
			}
		}
		ps := append(append([]types.JSONPair{}, j.Pairs...), types.JSONPair{Key: key, Value: nv})
		return types.JSONObjectValue(ps...), nil
	case types.JSONArray:
		i, err := strconv.ParseInt(strings.TrimSpace(key), 10, 32)
		if err != nil {
			return types.JSON{}, pgerror.New(pgerrcode.InvalidTextRepresentation,
				"path element at position %d is not an integer: \"%s\"", depth+1, key)
		}
		n := int64(len(j.Elems))
		if i < 0 {
			i += n
		}
		es := append([]types.JSON{}, j.Elems...)
		switch {
		case i < 0 || i >= n:
			if !last || !(create || insert) {
				return j, nil
			}
			if i < 0 {
				es = append([]types.JSON{v}, es...)
			} else {
				es = append(es, v)
			}
		case last && insert:
			at := i
			if after {
				at++
			}
			es = append(es[:at], append([]types.JSON{v}, es[at:]...)...)
		default:
			nv, err := jsonSet(j.Elems[i], path[1:], v, create, insert, after, depth+1)
			if err != nil {
				return types.JSON{}, err
			}
			es[i] = nv
		}
		return types.JSONArrayValue(es...), nil
	}
	if depth == 0 {
		return types.JSON{}, errJSON("cannot set path in scalar")
	}
	return j, nil
}

func jsonStripNulls(j types.JSON) types.JSON {
	switch j.Kind {
	case types.JSONObject:
		var ps []types.JSONPair
		for _, p := range j.Pairs {
			if p.Value.Kind != types.JSONNull {
				ps = append(ps, types.JSONPair{Key: p.Key, Value: jsonStripNulls(p.Value)})
			}
		}
		return types.JSONObjectValue(ps...)
	case types.JSONArray:
		es := make([]types.JSON, len(j.Elems))
		for i, e := range j.Elems {
			es[i] = jsonStripNulls(e)
		}
		return types.JSONArrayValue(es...)
	}
	return j
}

// jsonPretty indents by four spaces, as jsonb_pretty does.
func jsonPretty(b *strings.Builder, j types.JSON, indent int) {
	pad := func(n int) { b.WriteString(strings.Repeat("    ", n)) }
	switch j.Kind {
	case types.JSONObject:
		b.WriteString("{\n")
		for i, p := range j.Pairs {
			pad(indent + 1)
			b.WriteString(types.JSONStringValue(p.Key).String())
			b.WriteString(": ")
			jsonPretty(b, p.Value, indent+1)
			if i < len(j.Pairs)-1 {
				b.WriteByte(',')
			}
			b.WriteByte('\n')
		}
		pad(indent)
		b.WriteByte('}')
	case types.JSONArray:
		b.WriteString("[\n")
		for i, e := range j.Elems {
			pad(indent + 1)
			jsonPretty(b, e, indent+1)
			if i < len(j.Elems)-1 {
				b.WriteByte(',')
			}
			b.WriteByte('\n')
		}
		pad(indent)
		b.WriteByte(']')
	default:
		b.WriteString(j.String())
	}
}

func init() {
	jb, text, textArr, i4 := types.JSONB, types.Text, types.MustArray(types.Text), types.Int4
	bin := func(op string, l, r, ret *types.T, fn Fn) {
		registerBinary(op, Overload{Args: []*types.T{l, r}, Return: Fixed(ret), Fn: fn, Strict: true})
	}
	bin("->", jb, text, jb, func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		return jsonOrNull(jsonArg(a[0]).FetchKey(string(a[1].(types.DString)))), nil
	})
	bin("->", jb, i4, jb, func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		return jsonOrNull(jsonArg(a[0]).FetchIndex(int64(a[1].(types.DInt)))), nil
	})
	bin("->>", jb, text, text, func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		return asText(jsonArg(a[0]).FetchKey(string(a[1].(types.DString)))), nil
	})
	bin("->>", jb, i4, text, func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		return asText(jsonArg(a[0]).FetchIndex(int64(a[1].(types.DInt)))), nil
	})
	bin("#>", jb, textArr, jb, func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		p, ok := textArray(a[1])
		if !ok {
			return types.DNull, nil
		}
		return jsonOrNull(jsonArg(a[0]).FetchPath(p)), nil
	})
	bin("#>>", jb, textArr, text, func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		p, ok := textArray(a[1])
		if !ok {
			return types.DNull, nil
		}
		return asText(jsonArg(a[0]).FetchPath(p)), nil
	})
	bin("@>", jb, jb, types.Bool, func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		return types.DBool(jsonArg(a[0]).Contains(jsonArg(a[1]))), nil
	})
	bin("<@", jb, jb, types.Bool, func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		return types.DBool(jsonArg(a[1]).Contains(jsonArg(a[0]))), nil
	})
	bin("?", jb, text, types.Bool, func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		return types.DBool(jsonArg(a[0]).Exists(string(a[1].(types.DString)))), nil
	})
	for _, op := range []string{"?|", "?&"} {
		all := op == "?&"
		bin(op, jb, textArr, types.Bool, func(_ EvalContext, a []types.Datum) (types.Datum, error) {
			j := jsonArg(a[0])
			for _, e := range a[1].(*types.DArray).Elems {
				if types.IsNull(e) {
					continue // Postgres ignores NULL keys here
				}
				if j.Exists(string(e.(types.DString))) != all {
					return types.DBool(!all), nil
				}
			}
			return types.DBool(all), nil
		})
	}
	bin("||", jb, jb, jb, func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		return jsonOut(jsonConcat(jsonArg(a[0]), jsonArg(a[1]))), nil
	})
	bin("-", jb, text, jb, func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		j, err := jsonDeleteKey(jsonArg(a[0]), string(a[1].(types.DString)))
		return jsonOut(j), err
	})
	bin("-", jb, i4, jb, func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		j, err := jsonDeleteIndex(jsonArg(a[0]), int64(a[1].(types.DInt)))
		return jsonOut(j), err
	})
	bin("-", jb, textArr, jb, func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		j := jsonArg(a[0])
		for _, e := range a[1].(*types.DArray).Elems {
			if types.IsNull(e) {
				continue
			}
			var err error
			if j, err = jsonDeleteKey(j, string(e.(types.DString))); err != nil {
				return nil, err
			}
		}
		return jsonOut(j), nil
	})

	fn := func(name string, args []*types.T, ret *types.T, f Fn) {
		registerFn(name, Overload{Args: args, Return: Fixed(ret), Fn: f, Strict: true})
	}
	registerFn("jsonb_build_object",
		Overload{Args: nil, Return: Fixed(jb), Fn: func(EvalContext, []types.Datum) (types.Datum, error) {
			return jsonOut(types.JSONObjectValue()), nil
		}},
		Overload{Args: []*types.T{Any}, Variadic: true, Return: Fixed(jb), Fn: nil})
	registerFn("jsonb_build_array",
		Overload{Args: nil, Return: Fixed(jb), Fn: func(EvalContext, []types.Datum) (types.Datum, error) {
			return jsonOut(types.JSONArrayValue()), nil
		}},
		Overload{Args: []*types.T{Any}, Variadic: true, Return: Fixed(jb), Fn: nil})
	fn("jsonb_typeof", []*types.T{jb}, text, func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		return types.DString(jsonArg(a[0]).TypeOf()), nil
	})
	fn("jsonb_array_length", []*types.T{jb}, i4, func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		j := jsonArg(a[0])
		switch j.Kind {
		case types.JSONArray:
			return types.DInt(len(j.Elems)), nil
		case types.JSONObject:
			return nil, errJSON("cannot get array length of a non-array")
		}
		return nil, errJSON("cannot get array length of a scalar")
	})
	for _, name := range []string{"jsonb_extract_path", "jsonb_extract_path_text"} {
		asTxt := strings.HasSuffix(name, "_text")
		ret := jb
		if asTxt {
			ret = text
		}
		registerFn(name, Overload{Args: []*types.T{jb, text}, Variadic: true, Return: Fixed(ret), Strict: true,
			Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
				path := make([]string, len(a)-1)
				for i, e := range a[1:] {
					path[i] = string(e.(types.DString))
				}
				j, ok := jsonArg(a[0]).FetchPath(path)
				if asTxt {
					return asText(j, ok), nil
				}
				return jsonOrNull(j, ok), nil
			}})
	}
	setFn := func(insert bool) Fn {
		return func(_ EvalContext, a []types.Datum) (types.Datum, error) {
			p, ok := textArray(a[1])
			if !ok {
				return nil, errJSON("path element at position %d is null", 1)
			}
			flag := !insert // create_missing defaults to true, insert_after to false
			if len(a) > 3 {
				flag = bool(a[3].(types.DBool))
			}
			j, err := jsonSet(jsonArg(a[0]), p, jsonArg(a[2]), !insert && flag, insert, insert && flag, 0)
			return jsonOut(j), err
		}
	}
	for _, n := range []int{3, 4} {
		args := []*types.T{jb, textArr, jb, types.Bool}[:n]
		fn("jsonb_set", args, jb, setFn(false))
		fn("jsonb_insert", args, jb, setFn(true))
	}
	fn("jsonb_strip_nulls", []*types.T{jb}, jb, func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		return jsonOut(jsonStripNulls(jsonArg(a[0]))), nil
	})
	fn("jsonb_pretty", []*types.T{jb}, text, func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		var b strings.Builder
		jsonPretty(&b, jsonArg(a[0]), 0)
		return types.DString(b.String()), nil
	})
	registerFn("to_jsonb", Overload{Args: []*types.T{Any}, Return: Fixed(jb), Strict: true, Volatility: Stable})

	// Set-returning jsonb functions.
	srf := func(name string, cols []Column, f func(j types.JSON) ([][]types.Datum, error)) {
		registerFn(name, Overload{Args: []*types.T{jb}, Class: Generator, Strict: true,
			Return:  Fixed(cols[0].Type),
			Columns: func([]*types.T) []Column { return cols },
			SRF: func(_ EvalContext, a []types.Datum) (RowIter, error) {
				rows, err := f(jsonArg(a[0]))
				return &sliceIter{rows: rows}, err
			}})
	}
	elements := func(asTxt bool) func(j types.JSON) ([][]types.Datum, error) {
		return func(j types.JSON) ([][]types.Datum, error) {
			switch j.Kind {
			case types.JSONObject:
				return nil, errJSON("cannot extract elements from an object")
			case types.JSONArray:
			default:
				return nil, errJSON("cannot extract elements from a scalar")
			}
			rows := make([][]types.Datum, len(j.Elems))
			for i, e := range j.Elems {
				if asTxt {
					rows[i] = []types.Datum{asText(e, true)}
				} else {
					rows[i] = []types.Datum{jsonOut(e)}
				}
			}
			return rows, nil
		}
	}
	srf("jsonb_array_elements", []Column{{"value", jb}}, elements(false))
	srf("jsonb_array_elements_text", []Column{{"value", text}}, elements(true))
	srf("jsonb_object_keys", []Column{{"jsonb_object_keys", text}}, func(j types.JSON) ([][]types.Datum, error) {
		if err := needObject(j, "jsonb_object_keys"); err != nil {
			return nil, err
		}
		rows := make([][]types.Datum, len(j.Pairs))
		for i, p := range j.Pairs {
			rows[i] = []types.Datum{types.DString(p.Key)}
		}
		return rows, nil
	})
	each := func(name string, asTxt bool, vt *types.T) {
		srf(name, []Column{{"key", text}, {"value", vt}}, func(j types.JSON) ([][]types.Datum, error) {
			if err := needObject(j, name); err != nil {
				return nil, err
			}
			rows := make([][]types.Datum, len(j.Pairs))
			for i, p := range j.Pairs {
				v := jsonOut(p.Value)
				if asTxt {
					v = asText(p.Value, true)
				}
				rows[i] = []types.Datum{types.DString(p.Key), v}
			}
			return rows, nil
		})
	}
	each("jsonb_each", false, jb)
	each("jsonb_each_text", true, text)

	// Bind the Fns left nil above: they refer to functions declared below.
	for _, o := range functions["jsonb_build_object"] {
		if o.Fn == nil {
			o.Fn = buildObject
		}
	}
	for _, o := range functions["jsonb_build_array"] {
		if o.Fn == nil {
			o.Fn = buildArray
		}
	}
	functions["to_jsonb"][0].Fn = func(ctx EvalContext, a []types.Datum) (types.Datum, error) {
		j, err := toJSON(ctx, a[0], nil)
		return jsonOut(j), err
	}
}

func needObject(j types.JSON, fn string) error {
	switch j.Kind {
	case types.JSONObject:
		return nil
	case types.JSONArray:
		return errJSON("cannot call %s on an array", fn)
	}
	return errJSON("cannot call %s on a scalar", fn)
}

func buildObject(ctx EvalContext, a []types.Datum) (types.Datum, error) {
	if len(a)%2 != 0 {
		return nil, errJSON("argument list must have even number of elements").
			WithHint("The arguments of jsonb_build_object() must consist of alternating keys and values.")
	}
	pairs := make([]types.JSONPair, 0, len(a)/2)
	for i := 0; i < len(a); i += 2 {
		if types.IsNull(a[i]) {
			return nil, errJSON("argument %d: key must not be null", i+1)
		}
		k, err := jsonKeyText(ctx, a[i], nil)
		if err != nil {
			return nil, err
		}
		v, err := toJSON(ctx, a[i+1], nil)
		if err != nil {
			return nil, err
		}
		pairs = append(pairs, types.JSONPair{Key: k, Value: v})
	}
	return jsonOut(types.JSONObjectValue(pairs...)), nil
}

func buildArray(ctx EvalContext, a []types.Datum) (types.Datum, error) {
	elems := make([]types.JSON, len(a))
	for i, d := range a {
		j, err := toJSON(ctx, d, nil)
		if err != nil {
			return nil, err
		}
		elems[i] = j
	}
	return jsonOut(types.JSONArrayValue(elems...)), nil
}

// sliceIter yields precomputed rows.
type sliceIter struct {
	rows [][]types.Datum
	i    int
}

func (s *sliceIter) Next() ([]types.Datum, bool, error) {
	if s.i >= len(s.rows) {
		return nil, false, nil
	}
	s.i++
	return s.rows[s.i-1], true, nil
}
