package exec

import (
	"context"
	"errors"

	"github.com/cairn-db/cairn/sql/builtins"
	"github.com/cairn-db/cairn/sql/mon"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/rowcontainer"
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
	return &setOpOp{r: r, n: n, left: left, right: right, all: all, width: width, acc: r.account()}, nil
}

// setOpOp runs INTERSECT and EXCEPT: it counts the right side's rows by
// value, then streams the left side, keeping or dropping each row. Past
// work_mem, the counts so far and the rest of the right side go to hash
// partitions as (key, count) rows, the left side follows into the same
// partitions tagged with its input position, each partition is decided in
// memory, and the kept rows come out in input order through a Sorter, so
// spilling changes neither the rows nor their order.
type setOpOp struct {
	r           *runner
	n           *plan.SetOp
	left, right op
	all         []int
	width       int
	acc         *mon.Account
	part        *partitioner

	started bool
	counts  map[string]int
	emitted map[string]struct{}
	key     []byte
	out     rowcontainer.Iterator
	sort    *rowcontainer.Sorter
	rparts  *partitions
	lparts  *partitions
}

func (o *setOpOp) Next(ctx context.Context) ([]types.Datum, error) {
	if !o.started {
		o.started = true
		if err := o.count(ctx); err != nil {
			return nil, err
		}
		if o.rparts != nil {
			if err := o.spilled(ctx); err != nil {
				return nil, err
			}
		}
	}
	if o.out != nil {
		row, err := o.out.Next(ctx)
		if err != nil || row == nil {
			return nil, err
		}
		return row[:o.width:o.width], nil
	}
	for {
		row, err := o.left.Next(ctx)
		if err != nil || row == nil {
			return nil, err
		}
		keep, err := o.decide(row, o.counts, o.emitted)
		if err != nil {
			return nil, err
		}
		if keep {
			return row, nil
		}
	}
}

// keyRow is a spilled count: the encoded row and how many times the
// right side had it.
func keyRow(key []byte, n int) []types.Datum {
	return []types.Datum{types.DBytes(key), types.DInt(n)}
}

// count reads the right side into o.counts, or into partitions once they
// outgrow work_mem.
func (o *setOpOp) count(ctx context.Context) error {
	o.counts = map[string]int{}
	o.emitted = map[string]struct{}{}
	for k := 0; ; k++ {
		row, err := nextChecked(ctx, o.right, k)
		if err != nil {
			return err
		}
		if row == nil {
			return nil
		}
		if o.key, err = hashKey(o.key[:0], row, o.all); err != nil {
			return err
		}
		if o.rparts != nil {
			if err := o.rparts.add(o.part.of(0, o.key), keyRow(o.key, 1)); err != nil {
				return err
			}
			continue
		}
		if _, ok := o.counts[string(o.key)]; !ok {
			size := int64(len(o.key)) + keyCost
			err := o.acc.Grow(size)
			if err != nil && o.r.canSpill(0, len(o.counts)) {
				o.part = newPartitioner()
				o.rparts, _ = o.r.newPartitions(1)
				for k, n := range o.counts {
					if err := o.rparts.add(o.part.of(0, []byte(k)), keyRow([]byte(k), n)); err != nil {
						return err
					}
				}
				o.counts = nil
				o.acc.Clear()
				if err := o.rparts.add(o.part.of(0, o.key), keyRow(o.key, 1)); err != nil {
					return err
				}
				continue
			}
			if errors.Is(err, mon.ErrWorkMem) {
				err = o.acc.Force(size)
			}
			if err != nil {
				return err
			}
		}
		o.counts[string(o.key)]++
	}
}

// decide applies the set operation to one left row.
func (o *setOpOp) decide(row []types.Datum, counts map[string]int, emitted map[string]struct{}) (bool, error) {
	var err error
	if o.key, err = hashKey(o.key[:0], row, o.all); err != nil {
		return false, err
	}
	k := string(o.key)
	c := counts[k]
	keep := false
	switch {
	case o.n.Kind == plan.Intersect && o.n.All:
		if keep = c > 0; keep {
			counts[k]--
		}
	case o.n.Kind == plan.Intersect:
		_, done := emitted[k]
		keep = c > 0 && !done
	case o.n.All: // EXCEPT ALL
		if c > 0 {
			counts[k]--
		} else {
			keep = true
		}
	default: // EXCEPT
		_, done := emitted[k]
		keep = c == 0 && !done
	}
	if keep && !o.n.All {
		// Remembered keys cost memory too; they cannot spill (they are
		// the rows already returned), so only the node budget bounds
		// them.
		if err := o.acc.Force(int64(len(k)) + keyCost); err != nil {
			return false, err
		}
		emitted[k] = struct{}{}
	}
	return keep, nil
}

// spilled partitions the left side and decides each partition.
func (o *setOpOp) spilled(ctx context.Context) error {
	o.lparts, _ = o.r.newPartitions(1)
	for seq := 0; ; seq++ {
		row, err := nextChecked(ctx, o.left, seq)
		if err != nil {
			return err
		}
		if row == nil {
			break
		}
		if o.key, err = hashKey(o.key[:0], row, o.all); err != nil {
			return err
		}
		if err := o.lparts.add(o.part.of(0, o.key), append(row[:o.width:o.width], types.DInt(seq))); err != nil {
			return err
		}
	}
	w := o.width
	o.sort = rowcontainer.NewSorter(func(a, b []types.Datum) int {
		return compareDatums(a[w], b[w], false, false)
	}, o.r.account(), o.r.tempScope())
	for i := range o.lparts.files {
		lf, rf := o.lparts.files[i], o.rparts.files[i]
		if lf == nil {
			continue
		}
		o.acc.Clear()
		counts := map[string]int{}
		if rf != nil {
			src, err := openSource(rf)
			if err != nil {
				return err
			}
			for {
				kr, err := src.Next(ctx)
				if err != nil {
					return err
				}
				if kr == nil {
					break
				}
				k := string(kr[0].(types.DBytes))
				if _, ok := counts[k]; !ok {
					// One partition's counts are held whole.
					if err := o.acc.Force(int64(len(k)) + keyCost); err != nil {
						return err
					}
				}
				counts[k] += int(kr[1].(types.DInt))
			}
		}
		src, err := openSource(lf)
		if err != nil {
			return err
		}
		emitted := map[string]struct{}{}
		for {
			row, err := src.Next(ctx)
			if err != nil {
				return err
			}
			if row == nil {
				break
			}
			keep, err := o.decide(row[:w], counts, emitted)
			if err != nil {
				return err
			}
			if keep {
				if err := o.sort.Add(ctx, row); err != nil {
					return err
				}
			}
		}
	}
	o.lparts.close()
	o.rparts.close()
	o.acc.Clear()
	it, err := o.sort.Sort(ctx)
	if err != nil {
		return err
	}
	o.out = it
	return nil
}

func (o *setOpOp) Close() {
	o.left.Close()
	o.right.Close()
	if o.out != nil {
		o.out.Close()
	}
	if o.sort != nil {
		o.sort.Close()
	}
	if o.lparts != nil {
		o.lparts.close()
	}
	if o.rparts != nil {
		o.rparts.close()
	}
	o.counts, o.emitted = nil, nil
	o.acc.Clear()
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
			var size int64
			for _, row := range rows {
				size += rowcontainer.RowSize(row)
			}
			if err = r.heldAccount().Force(size); err != nil {
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
				if err := r.heldAccount().Force(int64(len(key)) + keyCost); err != nil {
					return nil, err
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
