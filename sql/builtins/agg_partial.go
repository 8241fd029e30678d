package builtins

import (
	"github.com/cockroachdb/apd/v3"

	"github.com/cairn-db/cairn/sql/types"
)

// Two-phase aggregation (issue 17): a distributed GROUP BY computes
// partial aggregates on every fragment and merges them at the gateway.
// A partial state travels as ordinary values (the results of the Parts
// aggregates), so fragments need no serialized accumulators, and the
// Final accumulator merges those values exactly as Merger would merge
// the accumulators (TestPartialMatchesSequential).
//
// Only aggregates whose merge is exact are split: count, sum and avg
// over integers and numeric, min, max, bool_and, bool_or, every,
// bit_and and bit_or. A float sum depends on the order of its additions,
// so sum, avg and the variances over float4/float8 are not split (a
// distributed plan would differ from a local one in the last bits); nor
// are ordered, DISTINCT or FILTERed calls (the executor's decision).

// Part is one aggregate a fragment computes for a split aggregate: the
// function Name over the call's own arguments (none for count(*), Star).
type Part struct {
	Name string
	Star bool
}

// Partial is how an aggregate call splits: Parts on every fragment, then
// Final at the gateway over one row of the parts' results per fragment
// group (len(Parts) arguments, of the parts' result types).
type Partial struct {
	Parts []Part
	Final *Resolved
}

// PartialOf returns how the aggregate call name(args) resolved as r (star
// for count(*)) splits, or false when it does not.
func PartialOf(name string, star bool, r *Resolved) (Partial, bool) {
	arg := (*types.T)(nil)
	if len(r.ArgTypes) == 1 {
		arg = r.ArgTypes[0]
	}
	exactNum := arg != nil && (arg.Family == types.IntFamily || arg.Family == types.NumericFamily)
	// sum and avg over int2/int4 sum as int8 (intSumAgg); over int8
	// and numeric as numeric.
	smallInt := arg != nil && arg.Family == types.IntFamily && arg.Width < 64
	final := func(parts []Part, partTypes []*types.T, mk func() Aggregate) (Partial, bool) {
		o := &Overload{Args: partTypes, Class: AggregateClass, Volatility: Immutable, name: name + "_final",
			NewAggregate: func([]*types.T) Aggregate { return mk() }}
		return Partial{Parts: parts, Final: &Resolved{Overload: o, ArgTypes: partTypes, Return: r.Return}}, true
	}
	one := []Part{{Name: name, Star: star}}
	switch name {
	case "count":
		if star || arg != nil {
			return final(one, []*types.T{types.Int8}, func() Aggregate { return &countMerge{} })
		}
	case "sum":
		switch {
		case smallInt:
			return final(one, []*types.T{types.Int8}, func() Aggregate { return &intSumAgg{} })
		case exactNum:
			return final(one, []*types.T{types.Numeric}, func() Aggregate { return &decSumAgg{} })
		}
	case "avg":
		if exactNum {
			sumType := types.Numeric
			if smallInt {
				sumType = types.Int8
			}
			return final([]Part{{Name: "sum"}, {Name: "count"}}, []*types.T{sumType, types.Int8}, func() Aggregate { return &avgMerge{} })
		}
	case "min", "max":
		if arg != nil && arg.Family != types.ArrayFamily {
			dir := -1
			if name == "max" {
				dir = 1
			}
			return final(one, []*types.T{r.Return}, func() Aggregate { return &minMaxAgg{dir: dir} })
		}
	case "bool_and", "every", "bool_or":
		and := name != "bool_or"
		return final(one, []*types.T{types.Bool}, func() Aggregate { return &boolAgg{and: and} })
	case "bit_and", "bit_or":
		and := name == "bit_and"
		return final(one, []*types.T{r.Return}, func() Aggregate { return &bitAgg{and: and} })
	}
	return Partial{}, false
}

// countMerge adds fragments' counts (an empty input counts 0, as count
// does).
type countMerge struct{ n int64 }

func (a *countMerge) Add(_ EvalContext, args []types.Datum) error {
	if types.IsNull(args[0]) {
		return nil
	}
	r, of, _ := intArith('+', a.n, int64(args[0].(types.DInt)))
	if of {
		return errIntRange(64)
	}
	a.n = r
	return nil
}
func (a *countMerge) Result() (types.Datum, error) { return types.DInt(a.n), nil }

// avgMerge adds fragments' sums and counts and divides once, as
// decSumAgg's avg does over all the rows.
type avgMerge struct {
	sum apd.Decimal
	n   int64
}

func (a *avgMerge) Add(_ EvalContext, args []types.Datum) error {
	if types.IsNull(args[0]) || types.IsNull(args[1]) {
		return nil
	}
	if err := numAdd(&a.sum, &a.sum, toDecimal(args[0])); err != nil {
		return err
	}
	a.n += int64(args[1].(types.DInt))
	return checkNumeric(&a.sum)
}

func (a *avgMerge) Result() (types.Datum, error) {
	if a.n == 0 {
		return types.DNull, nil
	}
	var r apd.Decimal
	if err := numDiv(&r, &a.sum, apd.New(a.n, 0)); err != nil {
		return nil, err
	}
	return newDec(&r), nil
}
