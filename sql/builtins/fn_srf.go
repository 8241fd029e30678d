package builtins

import (
	"github.com/cockroachdb/apd/v3"

	"github.com/cairn-db/cairn/sql/types"
)

// generate_series yields lazily, so `generate_series(1, 1e9) LIMIT 3`
// costs three rows.

type seriesIter struct {
	cur, stop types.Datum
	next      func(cur types.Datum) (types.Datum, error)
	desc      bool
	done      bool
}

func (s *seriesIter) Next() ([]types.Datum, bool, error) {
	if s.done {
		return nil, false, nil
	}
	c := types.Compare(s.cur, s.stop)
	if s.desc && c < 0 || !s.desc && c > 0 {
		s.done = true
		return nil, false, nil
	}
	row := []types.Datum{s.cur}
	n, err := s.next(s.cur)
	if err != nil {
		// Stepping past the type's range ends the series, as in Postgres.
		s.done = true
		return row, true, nil
	}
	s.cur = n
	return row, true, nil
}

func seriesOverload(args []*types.T, ret *types.T, start func(a []types.Datum) (*seriesIter, error)) Overload {
	return Overload{Args: args, Class: Generator, Strict: true, Return: Fixed(ret),
		Columns: func([]*types.T) []Column { return []Column{{"generate_series", ret}} },
		SRF: func(_ EvalContext, a []types.Datum) (RowIter, error) {
			it, err := start(a)
			if err != nil {
				return nil, err
			}
			return it, nil
		}}
}

func init() {
	for _, t := range []*types.T{types.Int4, types.Int8} {
		w := t.Width
		mk := func(a []types.Datum) (*seriesIter, error) {
			step := int64(1)
			if len(a) > 2 {
				step = i64(a[2])
			}
			if step == 0 {
				return nil, errInvalidParam("step size cannot equal zero")
			}
			return &seriesIter{cur: a[0], stop: a[1], desc: step < 0, next: func(c types.Datum) (types.Datum, error) {
				r, of, _ := intArith('+', i64(c), step)
				if of {
					return nil, errIntRange(w)
				}
				return checkInt(r, w)
			}}, nil
		}
		registerFn("generate_series", seriesOverload([]*types.T{t, t}, t, mk), seriesOverload([]*types.T{t, t, t}, t, mk))
	}
	numMk := func(a []types.Datum) (*seriesIter, error) {
		step := apd.New(1, 0)
		if len(a) > 2 {
			step = toDecimal(a[2])
		}
		for _, d := range a {
			if isNaN(toDecimal(d)) {
				return nil, errInvalidParam("start value cannot be NaN")
			}
		}
		if step.IsZero() {
			return nil, errInvalidParam("step size cannot equal zero")
		}
		return &seriesIter{cur: a[0], stop: a[1], desc: step.Negative, next: func(c types.Datum) (types.Datum, error) {
			var r apd.Decimal
			err := numAdd(&r, toDecimal(c), step)
			return newDec(&r), err
		}}, nil
	}
	n := types.Numeric
	registerFn("generate_series", seriesOverload([]*types.T{n, n}, n, numMk), seriesOverload([]*types.T{n, n, n}, n, numMk))
	for _, t := range []*types.T{types.Timestamp, types.TimestampTZ} {
		tz := t == types.TimestampTZ
		registerFn("generate_series", Overload{Args: []*types.T{t, t, types.Interval}, Class: Generator, Strict: true,
			Return: Fixed(t), Volatility: Stable,
			Columns: func([]*types.T) []Column { return []Column{{"generate_series", t}} },
			SRF: func(ctx EvalContext, a []types.Datum) (RowIter, error) {
				step := a[2].(types.DInterval)
				if types.Compare(step, types.DInterval{}) == 0 {
					return nil, errInvalidParam("step size cannot equal zero")
				}
				return &seriesIter{cur: a[0], stop: a[1], desc: types.Compare(step, types.DInterval{}) < 0,
					next: func(c types.Datum) (types.Datum, error) {
						if tz {
							return timestampTZAddInterval(ctx, c.(types.DTimestampTZ), step)
						}
						return timestampAddInterval(c.(types.DTimestamp), step)
					}}, nil
			}})
	}
}
