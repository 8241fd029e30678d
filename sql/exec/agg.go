package exec

import (
	"context"
	"slices"

	"github.com/cairn-db/cairn/sql/builtins"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/types"
	"github.com/jackc/pgerrcode"
)

// aggSpec is one compiled aggregate call.
type aggSpec struct {
	a      *plan.Aggregate
	args   []rowFn
	filter func([]types.Datum) (bool, error)
	order  []rowFn
	keys   []sortKey // over the order values
	// buffered: ORDER BY or DISTINCT needs the group's inputs before
	// feeding the accumulator.
	buffered bool
}

// aggInput is one row's arguments (and ORDER BY values) for a buffered
// aggregate.
type aggInput struct {
	args, order []types.Datum
}

type aggState struct {
	acc  builtins.Aggregate
	buf  []aggInput
	seen map[string]struct{} // DISTINCT without ORDER BY
}

type group struct {
	vals []types.Datum
	aggs []aggState
}

func (r *runner) compileAggs(aggs []plan.Aggregate, cols []plan.Column) ([]*aggSpec, error) {
	specs := make([]*aggSpec, len(aggs))
	for i := range aggs {
		a := &aggs[i]
		if a.Fn == nil || a.Fn.Overload.NewAggregate == nil {
			return nil, pgerror.New(pgerrcode.InternalError, "exec: %s is not an aggregate", a.Name)
		}
		s := &aggSpec{a: a, buffered: a.Distinct || len(a.OrderBy) > 0}
		for _, e := range a.Args {
			f, err := r.compile(e, cols)
			if err != nil {
				return nil, err
			}
			s.args = append(s.args, f)
		}
		var err error
		if a.Filter != nil {
			if s.filter, err = r.compilePred(a.Filter, cols); err != nil {
				return nil, err
			}
		}
		for j, o := range a.OrderBy {
			f, err := r.compile(o.Expr, cols)
			if err != nil {
				return nil, err
			}
			s.order = append(s.order, f)
			s.keys = append(s.keys, sortKey{pos: j, desc: o.Desc, nullsFirst: o.NullsFirst})
		}
		specs[i] = s
	}
	return specs, nil
}

func (r *runner) newGroup(specs []*aggSpec, vals []types.Datum) *group {
	g := &group{vals: vals, aggs: make([]aggState, len(specs))}
	for i, s := range specs {
		g.aggs[i].acc = s.a.Fn.Overload.NewAggregate(s.a.Fn.ArgTypes)
		if s.a.Distinct && len(s.a.OrderBy) == 0 {
			g.aggs[i].seen = map[string]struct{}{}
		}
	}
	return g
}

func evalAll(fns []rowFn, row []types.Datum) ([]types.Datum, error) {
	out := make([]types.Datum, len(fns))
	for i, f := range fns {
		d, err := f(row)
		if err != nil {
			return nil, err
		}
		out[i] = d
	}
	return out, nil
}

func (r *runner) addRow(specs []*aggSpec, g *group, row []types.Datum) error {
	for i, s := range specs {
		if s.filter != nil {
			ok, err := s.filter(row)
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
		}
		args, err := evalAll(s.args, row)
		if err != nil {
			return err
		}
		st := &g.aggs[i]
		if st.seen != nil {
			k, err := hashKey(nil, args, allPositions(len(args)))
			if err != nil {
				return err
			}
			if _, dup := st.seen[string(k)]; dup {
				continue
			}
			st.seen[string(k)] = struct{}{}
		} else if s.buffered {
			order, err := evalAll(s.order, row)
			if err != nil {
				return err
			}
			st.buf = append(st.buf, aggInput{args, order})
			continue
		}
		if err := st.acc.Add(r.fn(), args); err != nil {
			return err
		}
	}
	return nil
}

// finish feeds buffered inputs (sorted, deduplicated) and returns the
// group's output row.
func (r *runner) finish(specs []*aggSpec, g *group) ([]types.Datum, error) {
	out := append([]types.Datum(nil), g.vals...)
	for i, s := range specs {
		st := &g.aggs[i]
		if st.buf != nil {
			slices.SortStableFunc(st.buf, func(a, b aggInput) int { return compareRows(s.keys, a.order, b.order) })
			var seen map[string]struct{}
			if s.a.Distinct {
				seen = map[string]struct{}{}
			}
			for _, in := range st.buf {
				if seen != nil {
					k, err := hashKey(nil, in.args, allPositions(len(in.args)))
					if err != nil {
						return nil, err
					}
					if _, dup := seen[string(k)]; dup {
						continue
					}
					seen[string(k)] = struct{}{}
				}
				if err := st.acc.Add(r.fn(), in.args); err != nil {
					return nil, err
				}
			}
			st.buf = nil
		}
		d, err := st.acc.Result()
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

func (r *runner) buildGroupBy(n *plan.GroupBy) (op, error) {
	cols := n.Input.Columns()
	gpos, err := colPositions(cols, n.GroupCols)
	if err != nil {
		return nil, err
	}
	specs, err := r.compileAggs(n.Aggs, cols)
	if err != nil {
		return nil, err
	}
	in, err := r.build(n.Input)
	if err != nil {
		return nil, err
	}
	groupVals := func(row []types.Datum) []types.Datum {
		v := make([]types.Datum, len(gpos))
		for i, p := range gpos {
			v[i] = row[p]
		}
		return v
	}
	if n.Ordered && len(gpos) > 0 {
		return r.streamGroupBy(in, specs, gpos, groupVals), nil
	}
	return &lazyOp{fill: func(ctx context.Context) ([][]types.Datum, error) {
		var groups []*group
		index := map[string]*group{}
		var key []byte
		for k := 0; ; k++ {
			if k%checkEvery == checkEvery-1 {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
			}
			row, err := in.Next(ctx)
			if err != nil {
				return nil, err
			}
			if row == nil {
				break
			}
			if key, err = hashKey(key[:0], row, gpos); err != nil {
				return nil, err
			}
			g := index[string(key)]
			if g == nil {
				g = r.newGroup(specs, groupVals(row))
				index[string(key)] = g
				groups = append(groups, g)
			}
			if err := r.addRow(specs, g, row); err != nil {
				return nil, err
			}
		}
		if len(gpos) == 0 && len(groups) == 0 {
			// A scalar aggregate yields one row over an empty input.
			groups = append(groups, r.newGroup(specs, nil))
		}
		out := make([][]types.Datum, len(groups))
		for i, g := range groups {
			if out[i], err = r.finish(specs, g); err != nil {
				return nil, err
			}
		}
		return out, nil
	}, close: in.Close}, nil
}

// streamGroupBy aggregates input sorted by the group columns, emitting a
// group as soon as the next one starts.
func (r *runner) streamGroupBy(in op, specs []*aggSpec, gpos []int, groupVals func([]types.Datum) []types.Datum) op {
	var cur *group
	var curKey, key []byte
	done := false
	return &funcOp{next: func(ctx context.Context) ([]types.Datum, error) {
		for !done {
			row, err := in.Next(ctx)
			if err != nil {
				return nil, err
			}
			if row == nil {
				done = true
				break
			}
			if key, err = hashKey(key[:0], row, gpos); err != nil {
				return nil, err
			}
			var out []types.Datum
			if cur != nil && string(key) != string(curKey) {
				if out, err = r.finish(specs, cur); err != nil {
					return nil, err
				}
				cur = nil
			}
			if cur == nil {
				cur = r.newGroup(specs, groupVals(row))
				curKey = append(curKey[:0], key...)
			}
			if err := r.addRow(specs, cur, row); err != nil {
				return nil, err
			}
			if out != nil {
				return out, nil
			}
		}
		if cur != nil {
			g := cur
			cur = nil
			return r.finish(specs, g)
		}
		return nil, nil
	}, close: in.Close}
}
