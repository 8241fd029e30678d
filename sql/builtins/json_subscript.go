package builtins

import (
	"strconv"
	"strings"

	"github.com/jackc/pgerrcode"

	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/types"
)

// Assignment through jsonb subscripts, PostgreSQL 14's
// UPDATE t SET j['a'][0] = v. It is jsonb_set with three differences that
// PostgreSQL's jsonb_subscript_assign makes (setPath with create, fill
// gaps and consistent position):
//
//   - a missing key or index creates the rest of the path, each level an
//     array when its subscript reads as an integer and an object
//     otherwise, arrays padded with nulls up to the index;
//   - an index past an array's end pads it with nulls; one before its
//     start is an error rather than a prepend;
//   - a scalar met on the way (the root included) is an error rather than
//     the value left as it was; a NULL root is an empty array or object,
//     as the first subscript's type says; a NULL value is JSON null.

// JSONBSubscriptAssign returns the function that computes the new value of
// a jsonb column for an assignment through n subscripts: its arguments are
// the old value, the n subscripts as text, and the new element. firstIsInt
// says whether the first subscript was an integer, which decides what a
// NULL old value becomes. It is not a function users can name: the binder
// builds it for SET j[...] = v.
func JSONBSubscriptAssign(n int, firstIsInt bool) *Resolved {
	jb := types.JSONB
	args := make([]*types.T, 0, n+2)
	args = append(args, jb)
	for range n {
		args = append(args, types.Text)
	}
	args = append(args, jb)
	o := &Overload{
		name:   "jsonb_subscript_assign",
		Args:   args,
		Return: Fixed(jb),
		Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
			path := make([]string, n)
			for i, d := range a[1 : n+1] {
				if types.IsNull(d) {
					return nil, pgerror.New(pgerrcode.NullValueNotAllowedDataException,
						"jsonb subscript in assignment must not be null")
				}
				path[i] = str(d)
			}
			var root types.JSON
			switch {
			case !types.IsNull(a[0]):
				root = jsonArg(a[0])
			case firstIsInt:
				root = types.JSONArrayValue()
			default:
				root = types.JSONObjectValue()
			}
			v := types.JSONNullValue
			if d := a[n+1]; !types.IsNull(d) {
				v = jsonArg(d)
			}
			j, err := jsonSubscriptSet(root, path, 0, v)
			if err != nil {
				return nil, err
			}
			return jsonOut(j), nil
		},
		Volatility: Immutable,
	}
	return &Resolved{Overload: o, ArgTypes: args, Return: jb}
}

// jsonSubscriptSet sets path[level:] of j to v by the rules above.
func jsonSubscriptSet(j types.JSON, path []string, level int, v types.JSON) (types.JSON, error) {
	last := level == len(path)-1
	key := path[level]
	switch j.Kind {
	case types.JSONObject:
		nv := v
		if !last {
			var err error
			cur, ok := j.FetchKey(key)
			if !ok {
				nv = jsonPushPath(path, level+1, v)
			} else if nv, err = jsonSubscriptSet(cur, path, level+1, v); err != nil {
				return types.JSON{}, err
			}
		}
		ps := append(append([]types.JSONPair{}, j.Pairs...), types.JSONPair{Key: key, Value: nv})
		return types.JSONObjectValue(ps...), nil
	case types.JSONArray:
		i, ok := jsonPathIndex(key)
		if !ok {
			return types.JSON{}, pgerror.New(pgerrcode.InvalidTextRepresentation,
				"path element at position %d is not an integer: \"%s\"", level+1, key)
		}
		n := len(j.Elems)
		if i < 0 {
			if -i > n {
				return types.JSON{}, errJSON("path element at position %d is out of range: %d", level+1, i)
			}
			i += n
		}
		es := append([]types.JSON{}, j.Elems...)
		if i < n {
			if last {
				es[i] = v
				return types.JSONArrayValue(es...), nil
			}
			nv, err := jsonSubscriptSet(es[i], path, level+1, v)
			if err != nil {
				return types.JSON{}, err
			}
			es[i] = nv
			return types.JSONArrayValue(es...), nil
		}
		for ; n < i; n++ {
			es = append(es, types.JSONNullValue)
		}
		nv := v
		if !last {
			nv = jsonPushPath(path, level+1, v)
		}
		return types.JSONArrayValue(append(es, nv)...), nil
	}
	return types.JSON{}, errJSON("cannot replace existing key").
		WithDetail("The path assumes key is a composite object, but it is a scalar value.")
}

// jsonPushPath builds the containers of path[from:] around v, which do
// not exist yet: an array (padded with nulls up to a non-negative index)
// where the subscript reads as an integer, an object otherwise.
func jsonPushPath(path []string, from int, v types.JSON) types.JSON {
	for k := len(path) - 1; k >= from; k-- {
		i, ok := jsonPathIndex(path[k])
		if !ok {
			v = types.JSONObjectValue(types.JSONPair{Key: path[k], Value: v})
			continue
		}
		es := make([]types.JSON, 0, max(i, 0)+1)
		for ; i > 0; i-- {
			es = append(es, types.JSONNullValue)
		}
		v = types.JSONArrayValue(append(es, v)...)
	}
	return v
}

// jsonPathIndex reads a subscript as PostgreSQL's strtoint does: leading
// white space and a sign allowed, nothing after the digits, int4 range.
func jsonPathIndex(s string) (int, bool) {
	i, err := strconv.ParseInt(strings.TrimLeft(s, " \t\n\r\v\f"), 10, 32)
	return int(i), err == nil
}
