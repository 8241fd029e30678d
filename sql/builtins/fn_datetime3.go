package builtins

import (
	"github.com/cairn-db/cairn/sql/types"
)

// overlaps implements (s1, e1) OVERLAPS (s2, e2) as Postgres's
// overlaps_timestamp does: each period's ends are put in order, a NULL
// end is unknown, and periods sharing only an end point do not overlap.
func overlaps(s1, e1, s2, e2 types.Datum) types.Datum {
	null1, null2 := types.IsNull(e1), types.IsNull(e2)
	if types.IsNull(s1) {
		if null1 {
			return types.DNull
		}
		s1, null1 = e1, true
	} else if !null1 && types.Compare(s1, e1) > 0 {
		s1, e1 = e1, s1
	}
	if types.IsNull(s2) {
		if null2 {
			return types.DNull
		}
		s2, null2 = e2, true
	} else if !null2 && types.Compare(s2, e2) > 0 {
		s2, e2 = e2, s2
	}
	switch c := types.Compare(s1, s2); {
	case c > 0:
		if null2 {
			return types.DNull
		}
		if types.Compare(s1, e2) < 0 {
			return types.DBool(true)
		}
		if null1 {
			return types.DNull
		}
		return types.DBool(false)
	case c < 0:
		if null1 {
			return types.DNull
		}
		if types.Compare(s2, e1) < 0 {
			return types.DBool(true)
		}
		if null2 {
			return types.DNull
		}
		return types.DBool(false)
	default:
		if null1 || null2 {
			return types.DNull
		}
		return types.DBool(true)
	}
}

func init() {
	// The grammar turns (a, b) OVERLAPS (c, d) into overlaps(a, b, c, d).
	// As in pg_proc, each period is (start, end) or (start, length); the
	// latter are Postgres's SQL wrappers overlaps($1, $1 + $2, ...), so
	// they are not strict (a NULL length is an unknown end).
	iv := types.Interval
	for _, t := range []*types.T{types.TimestampTZ, types.Timestamp, types.Time} {
		vol := Immutable
		if t == types.TimestampTZ {
			vol = Stable // timestamptz + interval depends on TimeZone
		}
		for _, shape := range [][2]bool{{false, false}, {true, true}, {false, true}, {true, false}} {
			args := []*types.T{t, t, t, t}
			if shape[0] {
				args[1] = iv
			}
			if shape[1] {
				args[3] = iv
			}
			registerFn("overlaps", Overload{Args: args, Return: Fixed(types.Bool), Volatility: vol,
				Fn: func(ctx EvalContext, a []types.Datum) (types.Datum, error) {
					end := func(s, x types.Datum, isLen bool) (types.Datum, error) {
						if !isLen {
							return x, nil
						}
						if types.IsNull(s) || types.IsNull(x) {
							return types.DNull, nil
						}
						add, err := LookupBinaryOp("+", t, iv)
						if err != nil {
							return nil, err
						}
						return add.Eval(ctx, []types.Datum{s, x})
					}
					e1, err := end(a[0], a[1], shape[0])
					if err != nil {
						return nil, err
					}
					e2, err := end(a[2], a[3], shape[1])
					if err != nil {
						return nil, err
					}
					return overlaps(a[0], e1, a[2], e2), nil
				}})
		}
	}
}
