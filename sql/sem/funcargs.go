package sem

import (
	"github.com/jackc/pgerrcode"
	pg_query "github.com/pganalyze/pg_query_go/v6"

	"github.com/cairn-db/cairn/sql/builtins"
	"github.com/cairn-db/cairn/sql/pgerror"
)

// Function call arguments beyond a plain positional list: named arguments
// (make_interval(days => 3)) and the ORDER BY arguments of an
// ordered-set aggregate (percentile_cont(0.5) WITHIN GROUP (ORDER BY x)),
// which Postgres passes after the direct arguments.

// buildCallArgs builds a call's arguments, returning each one's name (""
// when positional) and position for coercion errors. Under WITHIN GROUP
// the ORDER BY expressions follow the direct arguments.
func (b *builder) buildCallArgs(fc *pg_query.FuncCall) ([]Expr, []string, []int32, error) {
	var args []Expr
	var names []string
	var locs []int32
	sawNamed := false
	add := func(n *pg_query.Node, name string) error {
		e, err := b.build(n)
		if err != nil {
			return err
		}
		args, names, locs = append(args, e), append(names, name), append(locs, location(n))
		return nil
	}
	for _, a := range fc.Args {
		if na := a.GetNamedArgExpr(); na != nil {
			sawNamed = true
			for _, n := range names {
				if n == na.Name {
					return nil, nil, nil, b.pos(na.Location, pgerror.New(pgerrcode.SyntaxError,
						"argument name \"%s\" used more than once", na.Name))
				}
			}
			if err := add(na.Arg, na.Name); err != nil {
				return nil, nil, nil, err
			}
			continue
		}
		if sawNamed {
			return nil, nil, nil, b.pos(location(a), pgerror.New(pgerrcode.SyntaxError,
				"positional argument cannot follow named argument"))
		}
		if err := add(a, ""); err != nil {
			return nil, nil, nil, err
		}
	}
	if fc.AggWithinGroup {
		for _, o := range fc.AggOrder {
			if err := add(o.GetSortBy().Node, ""); err != nil {
				return nil, nil, nil, err
			}
		}
	}
	return args, names, locs, nil
}

// placeArgs coerces the arguments to the resolved parameter types and,
// for a named call, puts them in parameter order with the defaults of the
// parameters no argument supplies.
func (b *builder) placeArgs(res *builtins.Resolved, args []Expr, locs []int32) ([]Expr, error) {
	var err error
	if res.Order == nil {
		for i := range args {
			if args[i], err = b.coerce(args[i], res.ArgTypes[i], locs[i]); err != nil {
				return nil, err
			}
		}
		return args, nil
	}
	o := res.Overload
	out := make([]Expr, len(res.Order))
	for p, i := range res.Order {
		if i < 0 {
			d := o.Defaults[p-(len(o.Args)-len(o.Defaults))]
			out[p] = &Const{Datum: d, T: res.ArgTypes[p]}
			continue
		}
		if out[p], err = b.coerce(args[i], res.ArgTypes[p], locs[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// checkWithinGroup enforces that ordered-set aggregates, and only they,
// are called WITHIN GROUP, with Postgres's errors.
func (b *builder) checkWithinGroup(fc *pg_query.FuncCall, name string, res *builtins.Resolved) error {
	o := res.Overload
	switch {
	case fc.AggWithinGroup && o.Class != builtins.AggregateClass:
		return b.pos(fc.Location, pgerror.New(pgerrcode.WrongObjectType,
			"WITHIN GROUP specified, but %s is not an aggregate function", name))
	case fc.AggWithinGroup && !o.OrderedSet:
		return b.pos(fc.Location, pgerror.New(pgerrcode.WrongObjectType,
			"%s is not an ordered-set aggregate, so it cannot have WITHIN GROUP", name))
	case o.OrderedSet && !fc.AggWithinGroup:
		return b.pos(fc.Location, pgerror.New(pgerrcode.WrongObjectType,
			"WITHIN GROUP is required for ordered-set aggregate %s", name))
	case o.OrderedSet && fc.Over != nil:
		return b.pos(fc.Location, pgerror.New(pgerrcode.FeatureNotSupported,
			"OVER is not supported for ordered-set aggregate %s", name))
	case o.OrderedSet && fc.AggDistinct:
		return b.pos(fc.Location, pgerror.New(pgerrcode.FeatureNotSupported,
			"DISTINCT is not supported for ordered-set aggregate %s", name))
	}
	return nil
}
