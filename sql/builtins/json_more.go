package builtins

import (
	"strconv"
	"strings"

	"github.com/jackc/pgerrcode"

	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/types"
)

// More jsonb operators and functions: #- (delete at a path) and
// jsonb_set_lax.

// jsonDeletePath implements jsonb #- text[] as PostgreSQL's
// jsonb_delete_path does: a missing key, an index out of range or a
// scalar met before the path ends leave the value as it is.
func jsonDeletePath(j types.JSON, path []types.Datum, depth int) (types.JSON, error) {
	if len(path) == 0 {
		return j, nil
	}
	if types.IsNull(path[0]) {
		return types.JSON{}, pgerror.New(pgerrcode.NullValueNotAllowedDataException, "path element at position %d is null", depth+1)
	}
	key, last := str(path[0]), len(path) == 1
	switch j.Kind {
	case types.JSONObject:
		for i, p := range j.Pairs {
			if p.Key != key {
				continue
			}
			ps := append([]types.JSONPair(nil), j.Pairs...)
			if last {
				return types.JSON{Kind: types.JSONObject, Pairs: append(ps[:i], ps[i+1:]...)}, nil
			}
			v, err := jsonDeletePath(p.Value, path[1:], depth+1)
			if err != nil {
				return types.JSON{}, err
			}
			ps[i].Value = v
			return types.JSON{Kind: types.JSONObject, Pairs: ps}, nil
		}
		return j, nil
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
		if i < 0 || i >= n {
			return j, nil
		}
		es := append([]types.JSON(nil), j.Elems...)
		if last {
			return types.JSONArrayValue(append(es[:i], es[i+1:]...)...), nil
		}
		v, err := jsonDeletePath(es[i], path[1:], depth+1)
		if err != nil {
			return types.JSON{}, err
		}
		es[i] = v
		return types.JSONArrayValue(es...), nil
	}
	return j, nil
}

func init() {
	jb := types.JSONB
	registerBinary("#-", Overload{Args: []*types.T{jb, types.MustArray(types.Text)}, Return: Fixed(jb), Strict: true,
		Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
			j := jsonArg(a[0])
			if j.Kind != types.JSONObject && j.Kind != types.JSONArray {
				return nil, errJSON("cannot delete path in scalar")
			}
			out, err := jsonDeletePath(j, arr(a[1]).Elems, 0)
			if err != nil {
				return nil, err
			}
			return jsonOut(out), nil
		}})

	// jsonb_set_lax is jsonb_set with a choice of what a NULL new value
	// does: 'use_json_null' (the default) sets JSON null, 'delete_key'
	// deletes the path, 'return_target' changes nothing,
	// 'raise_exception' fails.
	setLax := func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		if types.IsNull(a[0]) || types.IsNull(a[1]) {
			return types.DNull, nil
		}
		create := len(a) < 4 || types.IsNull(a[3]) || bool(a[3].(types.DBool))
		treatment := "use_json_null"
		if len(a) > 4 {
			if types.IsNull(a[4]) {
				return nil, pgerror.New(pgerrcode.NullValueNotAllowedDataException, "null_value_treatment must be \"delete_key\", \"return_target\", \"use_json_null\", or \"raise_exception\"")
			}
			treatment = str(a[4])
		}
		v := a[2]
		if types.IsNull(v) {
			switch treatment {
			case "use_json_null":
				v = jsonOut(types.JSONNullValue)
			case "delete_key":
				j := jsonArg(a[0])
				if j.Kind != types.JSONObject && j.Kind != types.JSONArray {
					return nil, errJSON("cannot delete path in scalar")
				}
				out, err := jsonDeletePath(j, arr(a[1]).Elems, 0)
				return jsonOut(out), err
			case "return_target":
				return a[0], nil
			case "raise_exception":
				return nil, pgerror.New(pgerrcode.NullValueNotAllowedDataException, "JSON value must not be null").
					WithDetail("Exception was raised because null_value_treatment is \"raise_exception\".").
					WithHint("To avoid, either change the null_value_treatment argument or ensure that an SQL NULL is not passed.")
			default:
				return nil, errJSON("null_value_treatment must be \"delete_key\", \"return_target\", \"use_json_null\", or \"raise_exception\"")
			}
		}
		p, ok := textArray(a[1])
		if !ok {
			return nil, errJSON("path element at position %d is null", 1)
		}
		j, err := jsonSet(jsonArg(a[0]), p, jsonArg(v), create, false, false, 0)
		return jsonOut(j), err
	}
	textArr := types.MustArray(types.Text)
	for _, n := range []int{3, 4, 5} {
		args := []*types.T{jb, textArr, jb, types.Bool, types.Text}[:n]
		registerFn("jsonb_set_lax", Overload{Args: args, Return: Fixed(jb), Fn: setLax})
	}
}

// objectPairs reads json_object's and jsonb_object's arguments: one array
// of alternating keys and values, or an array of keys and one of values.
// Values are strings or null.
func objectPairs(a []types.Datum) ([][2]types.Datum, error) {
	var keys, vals []types.Datum
	if len(a) == 1 {
		all := arr(a[0]).Elems
		if len(all)%2 != 0 {
			return nil, pgerror.New(pgerrcode.ArraySubscriptError, "array must have even number of elements")
		}
		for i := 0; i < len(all); i += 2 {
			keys, vals = append(keys, all[i]), append(vals, all[i+1])
		}
	} else {
		keys, vals = arr(a[0]).Elems, arr(a[1]).Elems
		if len(keys) != len(vals) {
			return nil, pgerror.New(pgerrcode.ArraySubscriptError, "mismatched array dimensions")
		}
	}
	out := make([][2]types.Datum, len(keys))
	for i := range keys {
		if types.IsNull(keys[i]) {
			return nil, pgerror.New(pgerrcode.NullValueNotAllowedDataException, "null value not allowed for object key")
		}
		out[i] = [2]types.Datum{keys[i], vals[i]}
	}
	return out, nil
}

func init() {
	textArr := types.MustArray(types.Text)
	jsonbObject := func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		pairs, err := objectPairs(a)
		if err != nil {
			return nil, err
		}
		ps := make([]types.JSONPair, len(pairs))
		for i, p := range pairs {
			v := types.JSONNullValue
			if !types.IsNull(p[1]) {
				v = types.JSONStringValue(str(p[1]))
			}
			ps[i] = types.JSONPair{Key: str(p[0]), Value: v}
		}
		return jsonOut(types.JSONObjectValue(ps...)), nil
	}
	jsonObject := func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		pairs, err := objectPairs(a)
		if err != nil {
			return nil, err
		}
		dst := []byte{'{'}
		for i, p := range pairs {
			if i > 0 {
				dst = append(dst, ", "...)
			}
			dst = append(types.AppendJSONString(dst, str(p[0])), " : "...)
			if types.IsNull(p[1]) {
				dst = append(dst, "null"...)
			} else {
				dst = types.AppendJSONString(dst, str(p[1]))
			}
		}
		return types.DJSONText(append(dst, '}')), nil
	}
	for _, args := range [][]*types.T{{textArr}, {textArr, textArr}} {
		registerFn("jsonb_object", Overload{Args: args, Return: Fixed(types.JSONB), Strict: true, Fn: jsonbObject})
		registerFn("json_object", Overload{Args: args, Return: Fixed(types.JSONText), Strict: true, Fn: jsonObject})
	}
}
