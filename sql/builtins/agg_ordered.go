package builtins

import (
	"math"

	"github.com/jackc/pgerrcode"

	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/types"
)

// Ordered-set aggregates: percentile_cont, percentile_disc and mode, used
// as f(direct) WITHIN GROUP (ORDER BY x). The executor sorts the group by
// x and calls Add(direct..., x) per row (Overload.OrderedSet), so the
// accumulators keep the sorted non-NULL x values and read the direct
// argument, which Postgres requires to be constant within the group, from
// the first row.

type orderedSetAgg struct {
	direct    types.Datum
	hasDirect bool
	vals      []types.Datum
	result    func(direct types.Datum, vals []types.Datum) (types.Datum, error)
}

func (a *orderedSetAgg) Add(_ EvalContext, args []types.Datum) error {
	if !a.hasDirect && len(args) > 1 {
		a.direct, a.hasDirect = args[0], true
	}
	if x := args[len(args)-1]; !types.IsNull(x) {
		a.vals = append(a.vals, x)
	}
	return nil
}

func (a *orderedSetAgg) Result() (types.Datum, error) {
	if len(a.vals) == 0 || a.hasDirect && types.IsNull(a.direct) {
		return types.DNull, nil
	}
	return a.result(a.direct, a.vals)
}

func errPercentile(p float64) error {
	return pgerror.New(pgerrcode.NumericValueOutOfRange, "percentile value %s is not between 0 and 1", formatFloatG(p))
}

// formatFloatG prints p as C's %g does for the values Postgres's message
// shows (0.5, 1.5, -1).
func formatFloatG(p float64) string {
	return types.Format(nil, types.Float8, types.DFloat(p))
}

// percentileCont interpolates linearly between the two values around
// position p*(n-1), as Postgres's percentile_cont_final_common.
func percentileCont(p float64, vals []types.Datum, lerp func(lo, hi types.Datum, t float64) (types.Datum, error)) (types.Datum, error) {
	if p < 0 || p > 1 || math.IsNaN(p) {
		return nil, errPercentile(p)
	}
	pos := p * float64(len(vals)-1)
	first, second := int(math.Floor(pos)), int(math.Ceil(pos))
	if first == second {
		return vals[first], nil
	}
	return lerp(vals[first], vals[second], pos-float64(first))
}

// percentileDisc is the first value whose position in the ordering is at
// least p of the way, as Postgres's percentile_disc_final.
func percentileDisc(p float64, vals []types.Datum) (types.Datum, error) {
	if p < 0 || p > 1 || math.IsNaN(p) {
		return nil, errPercentile(p)
	}
	row := int(math.Ceil(p * float64(len(vals))))
	if row <= 0 {
		row = 1
	}
	return vals[row-1], nil
}

func floatLerp(lo, hi types.Datum, t float64) (types.Datum, error) {
	l, h := float64(lo.(types.DFloat)), float64(hi.(types.DFloat))
	return types.DFloat(l + (h-l)*t), nil
}

func intervalLerp(lo, hi types.Datum, t float64) (types.Datum, error) {
	l, h := lo.(types.DInterval), hi.(types.DInterval)
	diff, err := intervalAdd(h, intervalNeg(l))
	if err != nil {
		return nil, err
	}
	d, err := intervalMul(diff, t)
	if err != nil {
		return nil, err
	}
	return intervalAdd(l, d.(types.DInterval))
}

// overArray applies one percentile function to each element of an array
// of fractions (NULL elements give NULL), for the float8[] forms.
func overArray(elem *types.T, f func(p float64) (types.Datum, error)) func(types.Datum, []types.Datum) (types.Datum, error) {
	return func(direct types.Datum, _ []types.Datum) (types.Datum, error) {
		in := direct.(*types.DArray)
		out := types.NewArray(elem)
		for _, e := range in.Elems {
			if types.IsNull(e) {
				out.Elems = append(out.Elems, types.DNull)
				continue
			}
			v, err := f(float64(e.(types.DFloat)))
			if err != nil {
				return nil, err
			}
			out.Elems = append(out.Elems, v)
		}
		return out, nil
	}
}

func registerOrderedSet(name string, args []*types.T, ret ReturnFunc, mk func(args []*types.T) Aggregate) {
	registerFn(name, Overload{Args: args, Return: ret, Class: AggregateClass, NewAggregate: mk,
		OrderedSet: true, Volatility: Immutable})
}

func init() {
	f8, iv := types.Float8, types.Interval
	f8s := types.MustArray(f8)
	for _, t := range []*types.T{f8, iv} {
		lerp := floatLerp
		if t == iv {
			lerp = intervalLerp
		}
		registerOrderedSet("percentile_cont", []*types.T{f8, t}, Fixed(t), func([]*types.T) Aggregate {
			return &orderedSetAgg{result: func(direct types.Datum, vals []types.Datum) (types.Datum, error) {
				return percentileCont(float64(direct.(types.DFloat)), vals, lerp)
			}}
		})
		registerOrderedSet("percentile_cont", []*types.T{f8s, t}, Fixed(types.MustArray(t)), func([]*types.T) Aggregate {
			a := &orderedSetAgg{}
			a.result = func(direct types.Datum, vals []types.Datum) (types.Datum, error) {
				return overArray(t, func(p float64) (types.Datum, error) { return percentileCont(p, vals, lerp) })(direct, vals)
			}
			return a
		})
	}
	registerOrderedSet("percentile_disc", []*types.T{f8, AnyElement}, SameAsArg(1), func([]*types.T) Aggregate {
		return &orderedSetAgg{result: func(direct types.Datum, vals []types.Datum) (types.Datum, error) {
			return percentileDisc(float64(direct.(types.DFloat)), vals)
		}}
	})
	registerOrderedSet("percentile_disc", []*types.T{f8s, AnyElement},
		func(a []*types.T) *types.T { return types.MustArray(a[1]) }, func(at []*types.T) Aggregate {
			a := &orderedSetAgg{}
			a.result = func(direct types.Datum, vals []types.Datum) (types.Datum, error) {
				return overArray(at[1], func(p float64) (types.Datum, error) { return percentileDisc(p, vals) })(direct, vals)
			}
			return a
		})
	// mode() is the most frequent value; among equally frequent ones the
	// first in the ordering.
	registerOrderedSet("mode", []*types.T{AnyElement}, SameAsArg(0), func([]*types.T) Aggregate {
		return &orderedSetAgg{result: func(_ types.Datum, vals []types.Datum) (types.Datum, error) {
			best, bestN := vals[0], 0
			for i := 0; i < len(vals); {
				j := i + 1
				for j < len(vals) && types.Compare(vals[j], vals[i]) == 0 {
					j++
				}
				if j-i > bestN {
					best, bestN = vals[i], j-i
				}
				i = j
			}
			return best, nil
		}}
	})
}
