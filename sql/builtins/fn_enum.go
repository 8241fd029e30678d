package builtins

import (
	"bytes"

	"github.com/cairn-db/cairn/sql/types"
)

// The enum support functions (PostgreSQL's enum_first, enum_last and
// enum_range). Their argument only names the type, so it may be NULL
// (enum_range(NULL::mood)): the bodies are bound to the resolved enum type
// and read its members, in declaration order.

func enumArrayOf(a []*types.T) *types.T {
	t, err := types.MakeArray(a[0])
	if err != nil {
		return a[0] // not an enum: resolution never gets here
	}
	return t
}

func init() {
	end := func(last bool) Overload {
		return Overload{Args: []*types.T{AnyEnum}, Return: SameAsArg(0), Volatility: Stable,
			Bind: func(at, _ []*types.T) Fn {
				t := at[0]
				return func(EvalContext, []types.Datum) (types.Datum, error) {
					n := len(t.Enum.Members)
					if n == 0 {
						return types.DNull, nil
					}
					if last {
						return types.EnumMemberDatum(t, n-1), nil
					}
					return types.EnumMemberDatum(t, 0), nil
				}
			}}
	}
	// enum_out is pg_type.typoutput of every enum (text where PostgreSQL
	// declares cstring, as Cairn's other output functions).
	registerFn("enum_out", Overload{Args: []*types.T{AnyEnum}, Return: Fixed(types.Text), Strict: true,
		Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
			return types.DString(a[0].(types.DEnum).Label), nil
		}})
	registerFn("enum_first", end(false))
	registerFn("enum_last", end(true))
	// enum_range(lo, hi): the members from lo to hi inclusive, a NULL
	// bound meaning the first or the last; enum_range(x): all of them.
	rng := func(t *types.T, lo, hi types.Datum) types.Datum {
		out := &types.DArray{Elem: t}
		for i, m := range t.Enum.Members {
			if l, ok := lo.(types.DEnum); ok && bytes.Compare(m.PhysRep, []byte(l.PhysRep)) < 0 {
				continue
			}
			if h, ok := hi.(types.DEnum); ok && bytes.Compare(m.PhysRep, []byte(h.PhysRep)) > 0 {
				continue
			}
			out.Elems = append(out.Elems, types.EnumMemberDatum(t, i))
		}
		return out
	}
	registerFn("enum_range",
		Overload{Args: []*types.T{AnyEnum}, Return: enumArrayOf, Volatility: Stable,
			Bind: func(at, _ []*types.T) Fn {
				return func(_ EvalContext, _ []types.Datum) (types.Datum, error) {
					return rng(at[0], types.DNull, types.DNull), nil
				}
			}},
		Overload{Args: []*types.T{AnyEnum, AnyEnum}, Return: enumArrayOf, Volatility: Stable,
			Bind: func(at, _ []*types.T) Fn {
				return func(_ EvalContext, a []types.Datum) (types.Datum, error) {
					return rng(at[0], a[0], a[1]), nil
				}
			}})
}
