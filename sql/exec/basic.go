package exec

import (
	"context"
	"fmt"
	"math"

	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/rowcontainer"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
	"github.com/jackc/pgerrcode"
)

// sliceOp returns rows from memory.
type sliceOp struct {
	rows [][]types.Datum
	i    int
}

func (o *sliceOp) Next(ctx context.Context) ([]types.Datum, error) {
	if o.i >= len(o.rows) {
		return nil, nil
	}
	if o.i%checkEvery == checkEvery-1 {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	row := o.rows[o.i]
	o.rows[o.i] = nil
	o.i++
	return row, nil
}

func (o *sliceOp) Close() { o.rows = nil }

// lazyOp computes its rows on the first Next (sorts, hash tables, CTEs).
type lazyOp struct {
	fill  func(ctx context.Context) ([][]types.Datum, error)
	close func()
	s     *sliceOp
}

func (o *lazyOp) Next(ctx context.Context) ([]types.Datum, error) {
	if o.s == nil {
		rows, err := o.fill(ctx)
		if err != nil {
			return nil, err
		}
		o.s = &sliceOp{rows: rows}
	}
	return o.s.Next(ctx)
}

func (o *lazyOp) Close() {
	if o.close != nil {
		o.close()
		o.close = nil
	}
	o.s = nil
}

// funcOp is an operator written as closures.
type funcOp struct {
	next  func(ctx context.Context) ([]types.Datum, error)
	close func()
}

func (o *funcOp) Next(ctx context.Context) ([]types.Datum, error) { return o.next(ctx) }
func (o *funcOp) Close() {
	if o.close != nil {
		o.close()
		o.close = nil
	}
}

func (r *runner) buildValues(n *plan.Values) (op, error) {
	fns := make([][]rowFn, len(n.Rows))
	for i, row := range n.Rows {
		fns[i] = make([]rowFn, len(row))
		for j, e := range row {
			f, err := r.compile(e, nil)
			if err != nil {
				return nil, err
			}
			fns[i][j] = f
		}
	}
	i := 0
	return &funcOp{next: func(ctx context.Context) ([]types.Datum, error) {
		if i >= len(fns) {
			return nil, nil
		}
		out := make([]types.Datum, len(fns[i]))
		for j, f := range fns[i] {
			d, err := f(nil)
			if err != nil {
				return nil, err
			}
			out[j] = d
		}
		i++
		return out, nil
	}}, nil
}

func (r *runner) buildFilter(n *plan.Filter) (op, error) {
	// x [NOT] IN (uncorrelated subquery) as a conjunct: a semi- or
	// anti-join that spills (inset.go).
	if o, err := r.buildInSetFilter(n); err != nil || o != nil {
		return o, err
	}
	in, err := r.build(n.Input)
	if err != nil {
		return nil, err
	}
	pred, err := r.compilePred(n.Pred, n.Input.Columns())
	if err != nil {
		in.Close()
		return nil, err
	}
	return &funcOp{next: func(ctx context.Context) ([]types.Datum, error) {
		for k := 0; ; k++ {
			row, err := nextChecked(ctx, in, k)
			if err != nil || row == nil {
				return nil, err
			}
			ok, err := pred(row)
			if err != nil {
				return nil, err
			}
			if ok {
				return row, nil
			}
		}
	}, close: in.Close}, nil
}

func (r *runner) buildProject(n *plan.Project) (op, error) {
	in, err := r.build(n.Input)
	if err != nil {
		return nil, err
	}
	cols := n.Input.Columns()
	fns := make([]rowFn, len(n.Exprs))
	for i, e := range n.Exprs {
		if fns[i], err = r.compile(e, cols); err != nil {
			in.Close()
			return nil, err
		}
	}
	return &funcOp{next: func(ctx context.Context) ([]types.Datum, error) {
		row, err := in.Next(ctx)
		if err != nil || row == nil {
			return nil, err
		}
		out := make([]types.Datum, len(fns))
		for i, f := range fns {
			if out[i], err = f(row); err != nil {
				return nil, err
			}
		}
		return out, nil
	}, close: in.Close}, nil
}

func (r *runner) buildMax1Row(n *plan.Max1Row) (op, error) {
	in, err := r.build(n.Input)
	if err != nil {
		return nil, err
	}
	done := false
	return &funcOp{next: func(ctx context.Context) ([]types.Datum, error) {
		if done {
			return nil, nil
		}
		done = true
		row, err := in.Next(ctx)
		if err != nil || row == nil {
			return nil, err
		}
		extra, err := in.Next(ctx)
		if err != nil {
			return nil, err
		}
		if extra != nil {
			return nil, sem.ErrScalarSubqueryRows()
		}
		return row, nil
	}, close: in.Close}, nil
}

// colPositions maps column IDs to their positions in cols.
func colPositions(cols []plan.Column, ids []sem.ColumnID) ([]int, error) {
	out := make([]int, len(ids))
	for i, id := range ids {
		out[i] = -1
		for j, c := range cols {
			if c.ID == id {
				out[i] = j
				break
			}
		}
		if out[i] < 0 {
			return nil, pgerror.New(pgerrcode.InternalError, "exec: column %d is not in the input", id)
		}
	}
	return out, nil
}

// sortKey is one key of a row comparison: a row position and its order.
type sortKey struct {
	pos        int
	desc       bool
	nullsFirst bool
}

func orderingKeys(cols []plan.Column, order []plan.Ordering) ([]sortKey, error) {
	keys := make([]sortKey, len(order))
	for i, o := range order {
		p, err := colPositions(cols, []sem.ColumnID{o.Col})
		if err != nil {
			return nil, err
		}
		keys[i] = sortKey{pos: p[0], desc: o.Desc, nullsFirst: o.NullsFirst}
	}
	return keys, nil
}

// compareDatums orders two values with Postgres's btree semantics under
// one sort key's direction and NULL placement.
func compareDatums(a, b types.Datum, desc, nullsFirst bool) int {
	an, bn := types.IsNull(a), types.IsNull(b)
	switch {
	case an && bn:
		return 0
	case an:
		if nullsFirst {
			return -1
		}
		return 1
	case bn:
		if nullsFirst {
			return 1
		}
		return -1
	}
	c := types.Compare(a, b)
	if desc {
		c = -c
	}
	return c
}

func compareRows(keys []sortKey, a, b []types.Datum) int {
	for _, k := range keys {
		if c := compareDatums(a[k.pos], b[k.pos], k.desc, k.nullsFirst); c != 0 {
			return c
		}
	}
	return 0
}

func (r *runner) buildSort(n *plan.Sort) (op, error) {
	keys, err := orderingKeys(n.Input.Columns(), n.Order)
	if err != nil {
		return nil, err
	}
	in, err := r.build(n.Input)
	if err != nil {
		return nil, err
	}
	return &sortOp{r: r, n: n, in: in, cmp: func(a, b []types.Datum) int { return compareRows(keys, a, b) }, key: abbrevKey(n.Input.Columns(), keys)}, nil
}

// abbrevKey is the abbreviated sort key of rows laid out as cols
// (rowcontainer.NormalizedKey over the sort columns), or nil.
func abbrevKey(cols []plan.Column, keys []sortKey) rowcontainer.KeyFunc {
	kc := make([]rowcontainer.KeyCol, len(keys))
	for i, k := range keys {
		kc[i] = rowcontainer.KeyCol{T: cols[k.pos].T, Pos: k.pos, Desc: k.desc, NullsFirst: k.nullsFirst}
	}
	return rowcontainer.NormalizedKey(kc)
}

// topK evaluates a top-k sort's bound: limit+offset, or -1 (sort
// everything) for none. Errors are the Limit's own (the Limit above
// evaluates the same expressions), so a negative count fails here first
// with the same SQLSTATE.
func (r *runner) topK(n *plan.Sort) (int64, error) {
	if n.Limit == nil {
		return -1, nil
	}
	limit, err := r.evalCount(n.Limit, "LIMIT", pgerrcode.InvalidRowCountInLimitClause)
	if err != nil || limit < 0 {
		return -1, err
	}
	offset, err := r.evalCount(n.Offset, "OFFSET", pgerrcode.InvalidRowCountInResultOffsetClause)
	if err != nil {
		return -1, err
	}
	if offset > math.MaxInt64-limit {
		return -1, nil
	}
	return limit + max(offset, 0), nil
}

// sorter is what sortOp fills: a Sorter, or a TopK for a bounded sort.
type sorter interface {
	Add(ctx context.Context, row []types.Datum) error
	Sort(ctx context.Context) (rowcontainer.Iterator, error)
	Close()
}

// sortOp sorts its input with a rowcontainer.Sorter: in memory within
// work_mem, an external merge sort past it.
type sortOp struct {
	r   *runner
	n   *plan.Sort
	in  op
	cmp rowcontainer.Compare
	key rowcontainer.KeyFunc
	s   sorter
	it  rowcontainer.Iterator
}

func (o *sortOp) Next(ctx context.Context) ([]types.Datum, error) {
	if o.it == nil {
		k, err := o.r.topK(o.n)
		if err != nil {
			return nil, err
		}
		if k >= 0 {
			o.s = rowcontainer.NewTopK(o.cmp, k, o.r.account(), o.r.tempScope())
		} else {
			s := rowcontainer.NewSorter(o.cmp, o.r.account(), o.r.tempScope())
			s.SetKey(o.key)
			o.s = s
		}
		for k := 0; ; k++ {
			row, err := nextChecked(ctx, o.in, k)
			if err != nil {
				return nil, err
			}
			if row == nil {
				break
			}
			if err := o.s.Add(ctx, row); err != nil {
				return nil, err
			}
		}
		it, err := o.s.Sort(ctx)
		if err != nil {
			return nil, err
		}
		o.it = it
	}
	return o.it.Next(ctx)
}

func (o *sortOp) Close() {
	o.in.Close()
	if o.it != nil {
		o.it.Close()
	}
	if o.s != nil {
		o.s.Close()
	}
}

// evalCount evaluates a LIMIT or OFFSET expression: -1 for none (nil or
// NULL).
func (r *runner) evalCount(e sem.Expr, what string, code string) (int64, error) {
	if e == nil {
		return -1, nil
	}
	f, err := r.compile(e, nil)
	if err != nil {
		return 0, err
	}
	d, err := f(nil)
	if err != nil {
		return 0, err
	}
	if types.IsNull(d) {
		return -1, nil
	}
	v, ok := d.(types.DInt)
	if !ok {
		return 0, pgerror.New(pgerrcode.InternalError, "exec: %s is %T, not int8", what, d)
	}
	if v < 0 {
		return 0, pgerror.New(code, "%s must not be negative", what)
	}
	return int64(v), nil
}

func (r *runner) buildLimit(n *plan.Limit) (op, error) {
	var keys []sortKey
	if n.WithTies {
		var err error
		if keys, err = orderingKeys(n.Input.Columns(), n.Order); err != nil {
			return nil, err
		}
	}
	in, err := r.build(n.Input)
	if err != nil {
		return nil, err
	}
	started := false
	var limit, offset, emitted int64
	var last []types.Datum
	return &funcOp{next: func(ctx context.Context) ([]types.Datum, error) {
		if !started {
			started = true
			var err error
			if limit, err = r.evalCount(n.Limit, "LIMIT", pgerrcode.InvalidRowCountInLimitClause); err != nil {
				return nil, err
			}
			if n.WithTies && n.Limit != nil && limit < 0 {
				return nil, pgerror.New(pgerrcode.InvalidRowCountInLimitClause, "row count cannot be null in FETCH FIRST ... WITH TIES clause")
			}
			if offset, err = r.evalCount(n.Offset, "OFFSET", pgerrcode.InvalidRowCountInResultOffsetClause); err != nil {
				return nil, err
			}
			for ; offset > 0; offset-- {
				row, err := in.Next(ctx)
				if err != nil || row == nil {
					limit = 0
					return nil, err
				}
			}
		}
		if limit >= 0 && emitted >= limit {
			if !n.WithTies || last == nil {
				return nil, nil
			}
			row, err := in.Next(ctx)
			if err != nil || row == nil {
				return nil, err
			}
			if compareRows(keys, last, row) != 0 {
				last = nil
				return nil, nil
			}
			return row, nil
		}
		row, err := in.Next(ctx)
		if err != nil || row == nil {
			return nil, err
		}
		emitted++
		last = row
		return row, nil
	}, close: in.Close}, nil
}

// hashKey encodes the values at pos so that values types.Compare calls
// equal give equal keys (rowenc.EncodeKey's guarantee); NULLs get a key
// too (GROUP BY and DISTINCT treat them as equal).
func hashKey(dst []byte, row []types.Datum, pos []int) ([]byte, error) {
	for _, p := range pos {
		var err error
		d := row[p]
		if d == nil {
			d = types.DNull
		}
		if dst, err = rowenc.EncodeKey(dst, d, rowenc.Asc); err != nil {
			// Types without a key encoding (json): their text form is
			// canonical for equality in the cases Cairn supports.
			dst = fmt.Appendf(dst, "\xff%T:%s\x00", d, d.String())
		}
	}
	return dst, nil
}

func allPositions(n int) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	return p
}

func (r *runner) buildDistinct(n *plan.Distinct) (op, error) {
	cols := n.Input.Columns()
	pos := allPositions(len(cols))
	if len(n.On) > 0 {
		var err error
		if pos, err = colPositions(cols, n.On); err != nil {
			return nil, err
		}
	}
	in, err := r.build(n.Input)
	if err != nil {
		return nil, err
	}
	return r.newDedup(in, pos, len(cols)), nil
}
