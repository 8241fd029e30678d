package builtins

import (
	"strconv"
	"strings"

	"github.com/jackc/pgerrcode"

	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/types"
)

// More jsonb operators: #- (delete at a path).

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
}
