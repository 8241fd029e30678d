package exec

import (
	"context"
	"slices"

	"github.com/cairn-db/cairn/sql/builtins"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
	"github.com/jackc/pgerrcode"
)

// filteredAgg runs an aggregate window function with FILTER: the filter's
// value rides as an extra last argument and rows without a true one are
// not added.
type filteredAgg struct{ builtins.Aggregate }

func (a filteredAgg) Add(ctx builtins.EvalContext, args []types.Datum) error {
	last := len(args) - 1
	if b, ok := args[last].(types.DBool); !ok || !bool(b) {
		return nil
	}
	return a.Aggregate.Add(ctx, args[:last])
}

type windowSpec struct {
	f      *plan.WindowFunc
	args   []rowFn
	filter rowFn
	part   []rowFn
	order  []rowFn
	keys   []sortKey // over part values then order values
	frame  builtins.Frame
}

func (r *runner) buildWindow(n *plan.Window) (op, error) {
	cols := n.Input.Columns()
	specs := make([]*windowSpec, len(n.Funcs))
	for i := range n.Funcs {
		f := &n.Funcs[i]
		s := &windowSpec{f: f, frame: f.Frame}
		var err error
		for _, e := range f.Args {
			c, err := r.compile(e, cols)
			if err != nil {
				return nil, err
			}
			s.args = append(s.args, c)
		}
		if s.filter, err = r.compile(f.Filter, cols); err != nil {
			return nil, err
		}
		for j, e := range f.PartitionBy {
			c, err := r.compile(e, cols)
			if err != nil {
				return nil, err
			}
			s.part = append(s.part, c)
			s.keys = append(s.keys, sortKey{pos: j})
		}
		for j, o := range f.OrderBy {
			c, err := r.compile(o.Expr, cols)
			if err != nil {
				return nil, err
			}
			s.order = append(s.order, c)
			s.keys = append(s.keys, sortKey{pos: len(f.PartitionBy) + j, desc: o.Desc, nullsFirst: o.NullsFirst})
		}
		for _, b := range []struct {
			e   sem.Expr
			dst *builtins.Bound
		}{{f.FrameStartOffset, &s.frame.Start}, {f.FrameEndOffset, &s.frame.End}} {
			if b.e == nil {
				continue
			}
			c, err := r.compile(b.e, nil)
			if err != nil {
				return nil, err
			}
			if b.dst.Offset, err = c(nil); err != nil {
				return nil, err
			}
		}
		o := f.Fn.Overload
		if o.NewWindow == nil && o.NewAggregate == nil {
			return nil, pgerror.New(pgerrcode.InternalError, "exec: %s is not a window function", f.Name)
		}
		if f.Filter != nil && o.NewAggregate == nil {
			return nil, pgerror.New(pgerrcode.FeatureNotSupported, "FILTER is not implemented for non-aggregate window functions")
		}
		specs[i] = s
	}
	in, err := r.build(n.Input)
	if err != nil {
		return nil, err
	}
	return &lazyOp{fill: func(ctx context.Context) ([][]types.Datum, error) {
		rows, err := drain(ctx, in)
		if err != nil {
			return nil, err
		}
		var firstOrder []int
		for fi, s := range specs {
			res, order, err := r.computeWindow(s, rows)
			if err != nil {
				return nil, err
			}
			if fi == 0 {
				firstOrder = order
			}
			for i := range rows {
				rows[i] = append(rows[i][:len(cols)+fi:len(cols)+fi], res[i])
			}
		}
		// Rows come out in the first function's partition and ORDER BY
		// order, as PostgreSQL's WindowAgg emits them.
		out := make([][]types.Datum, len(rows))
		for i, p := range firstOrder {
			out[i] = rows[p]
		}
		if firstOrder == nil {
			out = rows
		}
		return out, nil
	}, close: in.Close}, nil
}

// computeWindow computes one window function for every row (results by
// row index) and returns the order it sorted the rows in.
func (r *runner) computeWindow(s *windowSpec, rows [][]types.Datum) ([]types.Datum, []int, error) {
	n := len(rows)
	keys := make([][]types.Datum, n)
	args := make([][]types.Datum, n)
	for i, row := range rows {
		k, err := evalAll(append(slices.Clip(s.part), s.order...), row)
		if err != nil {
			return nil, nil, err
		}
		keys[i] = k
		if args[i], err = evalAll(s.args, row); err != nil {
			return nil, nil, err
		}
		if s.filter != nil {
			d, err := s.filter(row)
			if err != nil {
				return nil, nil, err
			}
			args[i] = append(args[i], d)
		}
	}
	order := allPositions(n)
	slices.SortStableFunc(order, func(a, b int) int { return compareRows(s.keys, keys[a], keys[b]) })
	np := len(s.part)
	res := make([]types.Datum, n)
	o := s.f.Fn.Overload
	argTypes := s.f.Fn.ArgTypes
	for start := 0; start < n; {
		end := start + 1
		for end < n && compareRows(s.keys[:np], keys[order[start]], keys[order[end]]) == 0 {
			end++
		}
		p := &builtins.Partition{Args: make([][]types.Datum, end-start)}
		if len(s.order) > 0 {
			p.Keys = make([][]types.Datum, end-start)
			p.Desc = s.f.OrderBy[0].Desc
		}
		for j := start; j < end; j++ {
			p.Args[j-start] = args[order[j]]
			if p.Keys != nil {
				p.Keys[j-start] = keys[order[j]][np:]
			}
		}
		var wf builtins.WindowFunc
		if o.NewWindow != nil {
			wf = o.NewWindow(argTypes)
		} else {
			newAgg := func() builtins.Aggregate { return o.NewAggregate(argTypes) }
			if s.filter != nil {
				newAgg = func() builtins.Aggregate { return filteredAgg{o.NewAggregate(argTypes)} }
			}
			wf = builtins.AggregateWindow(newAgg)
		}
		out := make([]types.Datum, end-start)
		if err := wf.Compute(r.fn(), p, s.frame, out); err != nil {
			return nil, nil, err
		}
		for j := start; j < end; j++ {
			res[order[j]] = out[j-start]
		}
		start = end
	}
	return res, order, nil
}
