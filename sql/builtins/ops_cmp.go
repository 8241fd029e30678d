package builtins

import (
	"github.com/cairn-db/cairn/sql/types"
)

// Comparison operators. Every comparable type compares with itself; the
// integer widths, the float widths and date/timestamp/timestamptz also
// compare across each other without casts, as pg_operator has them.
// types.Compare does the work (invariant 3 of sql/types: a total order).

// ComparisonOps are the operator names CompareOp accepts.
var ComparisonOps = []string{"=", "<>", "<", "<=", ">", ">="}

// CompareOp applies a comparison operator to two values with SQL's NULL
// logic (NULL when either side is NULL). The evaluator uses it for
// `x op ANY (array)` element by element; both values must be of
// comparable types (the binder resolved the operator).
func CompareOp(op string, a, b types.Datum) types.Datum {
	if types.IsNull(a) || types.IsNull(b) {
		return types.DNull
	}
	return types.DBool(cmpResult(op, types.Compare(a, b)))
}

func cmpResult(op string, c int) bool {
	switch op {
	case "=":
		return c == 0
	case "<>", "!=":
		return c != 0
	case "<":
		return c < 0
	case "<=":
		return c <= 0
	case ">":
		return c > 0
	case ">=":
		return c >= 0
	}
	panic("builtins: unknown comparison " + op)
}

func cmpFn(op string) Fn {
	return func(_ EvalContext, a []types.Datum) (types.Datum, error) {
		return types.DBool(cmpResult(op, types.Compare(a[0], a[1]))), nil
	}
}

func init() {
	comparable := []*types.T{types.Bool, types.Numeric, types.Text, types.BPChar, types.Bytea,
		types.Date, types.Time, types.Timestamp, types.TimestampTZ, types.Interval, types.UUID,
		types.JSONB, types.Oid, types.Name, types.Char}
	var pairs [][2]*types.T
	for _, t := range comparable {
		pairs = append(pairs, [2]*types.T{t, t})
	}
	// name = text and text = name (PostgreSQL's nameeqtext, ...), so that
	// a catalog name compared with a text value needs no cast either way.
	pairs = append(pairs, [2]*types.T{types.Name, types.Text}, [2]*types.T{types.Text, types.Name})
	for _, group := range [][]*types.T{intTypes, {types.Float4, types.Float8}, {types.Date, types.Timestamp, types.TimestampTZ}} {
		for _, l := range group {
			for _, r := range group {
				if group[0].Family != types.DateFamily || l != r {
					pairs = append(pairs, [2]*types.T{l, r})
				}
			}
		}
	}
	for _, op := range ComparisonOps {
		var ovs []Overload
		for _, p := range pairs {
			ovs = append(ovs, Overload{Args: []*types.T{p[0], p[1]}, Return: Fixed(types.Bool), Fn: cmpFn(op), Strict: true})
		}
		// Arrays compare element-wise, for any element type.
		ovs = append(ovs, Overload{Args: []*types.T{AnyArray, AnyArray}, Return: Fixed(types.Bool), Fn: cmpFn(op), Strict: true})
		// Enums compare with their own type, in declaration order
		// (types.Compare orders DEnum by representation).
		ovs = append(ovs, Overload{Args: []*types.T{AnyEnum, AnyEnum}, Return: Fixed(types.Bool), Fn: cmpFn(op), Strict: true})
		registerBinary(op, ovs...)
	}
	// Mixed date/timestamp comparisons need the session zone to compare a
	// date or timestamp with a timestamptz; fix them up here.
	for _, op := range ComparisonOps {
		for _, o := range binaryOps[op] {
			l, r := o.Args[0], o.Args[1]
			if isPseudo(l) || l.Family == r.Family || !isDateTime(l) {
				continue
			}
			op := op
			o.Fn = func(ctx EvalContext, a []types.Datum) (types.Datum, error) {
				x, y, err := toCommonInstant(ctx, a[0], a[1])
				if err != nil {
					return nil, err
				}
				return types.DBool(cmpResult(op, types.Compare(x, y))), nil
			}
		}
	}
	registerUnary("NOT", Overload{Args: []*types.T{types.Bool}, Return: Fixed(types.Bool), Strict: true,
		Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) { return !a[0].(types.DBool), nil }})
}

func isDateTime(t *types.T) bool {
	switch t.Family {
	case types.DateFamily, types.TimestampFamily, types.TimestampTZFamily:
		return true
	}
	return false
}

// toCommonInstant converts a date/timestamp/timestamptz pair to the wider
// of the two (date < timestamp < timestamptz) so types.Compare applies.
func toCommonInstant(ctx EvalContext, a, b types.Datum) (types.Datum, types.Datum, error) {
	rank := func(d types.Datum) int {
		switch d.(type) {
		case types.DDate:
			return 0
		case types.DTimestamp:
			return 1
		}
		return 2
	}
	target := []*types.T{types.Date, types.Timestamp, types.TimestampTZ}[max(rank(a), rank(b))]
	x, err := types.Cast(typesCtx(ctx), a, nil, target)
	if err != nil {
		return nil, nil, err
	}
	y, err := types.Cast(typesCtx(ctx), b, nil, target)
	return x, y, err
}
