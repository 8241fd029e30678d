package exec

import (
	"context"

	"github.com/cairn-db/cairn/sql/builtins"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
	"github.com/jackc/pgerrcode"
)

// buildSetOp runs UNION, INTERSECT and EXCEPT with PostgreSQL's multiset
// semantics: UNION ALL concatenates; INTERSECT ALL keeps min(m, n) copies
// of a row appearing m times on the left and n on the right, EXCEPT ALL
// max(m - n, 0); without ALL each result row appears once. NULLs compare
// equal here, as in DISTINCT.
func (r *runner) buildSetOp(n *plan.SetOp) (op, error) {
	width := len(n.Cols)
	if len(n.Left.Columns()) != width || len(n.Right.Columns()) != width {
		return nil, pgerror.New(pgerrcode.InternalError, "exec: set operation inputs of different widths")
	}
	left, err := r.build(n.Left)
	if err != nil {
		return nil, err
	}
	right, err := r.build(n.Right)
	if err != nil {
		left.Close()
		return nil, err
	}
	all := allPositions(width)
	closeBoth := func() { left.Close(); right.Close() }
	var key []byte
	if n.Kind == plan.Union {
		cur := left
		cat := &funcOp{next: func(ctx context.Context) ([]types.Datum, error) {
			for {
				row, err := cur.Next(ctx)
				if err != nil || row != nil {
					return row, err
				}
				if cur == right {
					return nil, nil
				}
				cur = right
			}
		}, close: closeBoth}
		if n.All {
			return cat, nil
		}
		return r.newDedup(cat, all, width), nil
	}
	var counts map[string]int
	emitted := map[string]struct{}{}
	return &funcOp{next: func(ctx context.Context) ([]types.Datum, error) {
		if counts == nil {
			counts = map[string]int{}
			rows, err := drain(ctx, right)
			if err != nil {
				return nil, err
			}
			for _, row := range rows {
				if key, err = hashKey(key[:0], row, all); err != nil {
					return nil, err
				}
				counts[string(key)]++
			}
		}
		for {
			row, err := left.Next(ctx)
			if err != nil || row == nil {
				return nil, err
			}
			if key, err = hashKey(key[:0], row, all); err != nil {
				return nil, err
			}
			k := string(key)
			c := counts[k]
			keep := false
			switch {
			case n.Kind == plan.Intersect && n.All:
				if keep = c > 0; keep {
					counts[k]--
				}
			case n.Kind == plan.Intersect:
				_, done := emitted[k]
				keep = c > 0 && !done
			case n.All: // EXCEPT ALL
				if c > 0 {
					counts[k]--
				} else {
					keep = true
				}
			default: // EXCEPT
				_, done := emitted[k]
				keep = c == 0 && !done
			}
			if keep {
				if !n.All {
					emitted[k] = struct{}{}
				}
				return row, nil
			}
		}
	}, close: closeBoth}, nil
}

// sharedRows iterates rows others also read (a CTE, a work table)
// without giving up its hold on them.
type sharedRows struct {
	rows func() [][]types.Datum
	cur  [][]types.Datum
	i    int
	init bool
}

func (o *sharedRows) Next(ctx context.Context) ([]types.Datum, error) {
	if !o.init {
		o.init = true
		o.cur = o.rows()
	}
	if o.i >= len(o.cur) {
		return nil, nil
	}
	o.i++
	return o.cur[o.i-1], nil
}

func (o *sharedRows) Close() { o.cur = nil }

func (r *runner) buildCTEScan(n *plan.CTEScan) (op, error) {
	if n.ID < 0 || n.ID >= len(r.p.CTEs) || r.p.CTEs[n.ID] == nil {
		return nil, pgerror.New(pgerrcode.InternalError, "exec: CTE %d is not in the plan", n.ID)
	}
	var err error
	s := &sharedRows{}
	s.rows = func() [][]types.Datum {
		rows, ok := r.ctes[n.ID]
		if !ok {
			var o op
			if o, err = r.build(r.p.CTEs[n.ID]); err != nil {
				return nil
			}
			defer o.Close()
			if rows, err = drain(r.ctx, o); err != nil {
				return nil
			}
			if r.ctes == nil {
				r.ctes = map[int][][]types.Datum{}
			}
			r.ctes[n.ID] = rows
		}
		return rows
	}
	return &funcOp{next: func(ctx context.Context) ([]types.Datum, error) {
		row, _ := s.Next(ctx)
		if err != nil {
			return nil, err
		}
		return row, nil
	}, close: s.Close}, nil
}

func (r *runner) buildWorkTable(n *plan.WorkTable) (op, error) {
	return &sharedRows{rows: func() [][]types.Datum { return r.work[n.ID] }}, nil
}

// buildRecursiveCTE runs Init, then Recursive over the previous
// iteration's rows until an iteration adds none. With UNION (not ALL),
// rows already produced are dropped, which is also what ends most
// recursions over cyclic data.
func (r *runner) buildRecursiveCTE(n *plan.RecursiveCTE) (op, error) {
	init, err := r.build(n.Init)
	if err != nil {
		return nil, err
	}
	var seen map[string]struct{}
	if !n.UnionAll {
		seen = map[string]struct{}{}
	}
	all := allPositions(len(n.Cols))
	var key []byte
	cur := init
	var produced [][]types.Datum // this iteration's rows: the next work table
	return &funcOp{next: func(ctx context.Context) ([]types.Datum, error) {
		for {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			row, err := cur.Next(ctx)
			if err != nil {
				return nil, err
			}
			if row == nil {
				cur.Close()
				if len(produced) == 0 {
					cur = &sliceOp{}
					return nil, nil
				}
				if r.work == nil {
					r.work = map[int][][]types.Datum{}
				}
				r.work[n.ID], produced = produced, nil
				if cur, err = r.build(n.Recursive); err != nil {
					cur = &sliceOp{}
					return nil, err
				}
				continue
			}
			if seen != nil {
				if key, err = hashKey(key[:0], row, all); err != nil {
					return nil, err
				}
				if _, dup := seen[string(key)]; dup {
					continue
				}
				seen[string(key)] = struct{}{}
			}
			produced = append(produced, row)
			return row, nil
		}
	}, close: func() { cur.Close() }}, nil
}

func (r *runner) buildProjectSet(n *plan.ProjectSet) (op, error) {
	cols := n.Input.Columns()
	type srf struct {
		f     *plan.SetFunc
		args  []rowFn
		width int
	}
	fns := make([]srf, len(n.Funcs))
	for i := range n.Funcs {
		f := &n.Funcs[i]
		if f.Call == nil || f.Call.Fn.Overload.Class != builtins.Generator || f.Call.Fn.Overload.SRF == nil {
			return nil, pgerror.New(pgerrcode.InternalError, "exec: ProjectSet function %d is not set-returning", i)
		}
		fns[i] = srf{f: f, width: len(f.Cols)}
		for _, a := range f.Call.Args {
			c, err := r.compile(a, cols)
			if err != nil {
				return nil, err
			}
			fns[i].args = append(fns[i].args, c)
		}
	}
	in, err := r.build(n.Input)
	if err != nil {
		return nil, err
	}
	var cur []types.Datum
	iters := make([]builtins.RowIter, len(fns))
	return &funcOp{next: func(ctx context.Context) ([]types.Datum, error) {
		for {
			if cur == nil {
				row, err := in.Next(ctx)
				if err != nil || row == nil {
					return nil, err
				}
				cur = row
				for i, f := range fns {
					iters[i] = nil
					args, err := evalAll(f.args, row)
					if err != nil {
						return nil, err
					}
					if f.f.Call.Fn.Overload.Strict && anyNull(args) {
						continue
					}
					if iters[i], err = f.f.Call.Fn.Overload.SRF(r.fn(), args); err != nil {
						return nil, err
					}
				}
			}
			out := append([]types.Datum(nil), cur...)
			any := false
			for i, f := range fns {
				var vals []types.Datum
				if iters[i] != nil {
					v, ok, err := iters[i].Next()
					if err != nil {
						return nil, err
					}
					if ok {
						vals, any = v, true
					} else {
						iters[i] = nil
					}
				}
				if vals == nil {
					vals = nulls(f.width)
				}
				if len(vals) != f.width {
					return nil, pgerror.New(pgerrcode.InternalError, "exec: %s returned %d columns, want %d", f.f.Call.Fn.Overload.Name(), len(vals), f.width)
				}
				out = append(out, vals...)
			}
			if !any {
				cur = nil
				continue
			}
			return out, nil
		}
	}, close: in.Close}, nil
}

func anyNull(ds []types.Datum) bool {
	for _, d := range ds {
		if types.IsNull(d) {
			return true
		}
	}
	return false
}

func (r *runner) buildVirtualScan(n *plan.VirtualScan) (op, error) {
	filter, err := r.compilePred(n.Filter, n.Cols)
	if err != nil {
		return nil, err
	}
	if r.x.Virtual == nil {
		return nil, pgerror.New(pgerrcode.InternalError, "exec: no virtual table environment for %s.%s", n.Table.Schema(), n.Table.Name())
	}
	return &lazyOp{fill: func(ctx context.Context) ([][]types.Datum, error) {
		rows, err := n.Table.Rows(ctx, r.x.Virtual)
		if err != nil {
			return nil, err
		}
		var out [][]types.Datum
		for _, row := range rows {
			p := make([]types.Datum, len(n.ColIdx))
			for i, c := range n.ColIdx {
				p[i] = row[c]
			}
			ok, err := filter(p)
			if err != nil {
				return nil, err
			}
			if ok {
				out = append(out, p)
			}
		}
		return out, nil
	}}, nil
}

var _ sem.SubqueryValues = (*runner)(nil)
