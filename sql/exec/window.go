package exec

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"strings"

	"github.com/cairn-db/cairn/sql/builtins"
	"github.com/cairn-db/cairn/sql/mon"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/rowcontainer"
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
	// col is, for each key (part then order), the input column it reads
	// when it is a plain column reference, else -1: such a key is read
	// from the input column, not copied after the row (keyPos).
	col []int
	// computed are the keys with no column (col -1), in key order: what
	// addStage appends after the row.
	computed []rowFn
}

// keyPos is where key i (part then order) of s is in a staged row: its
// input column, or its place among the computed keys after base.
func (s *windowSpec) keyPos(i, base int) int {
	if s.col[i] >= 0 {
		return s.col[i]
	}
	for j := range i {
		if s.col[j] < 0 {
			base++
		}
	}
	return base
}

// keyPositions is keyPos of every key, from first to last.
func (s *windowSpec) keyPositions(base int) []int {
	pos := make([]int, len(s.col))
	for i := range pos {
		pos[i] = s.keyPos(i, base)
	}
	return pos
}

// plainColumn is the position in cols of the column e is, or -1 when e
// is not a column reference (the first of equal IDs, as compile binds).
func plainColumn(e sem.Expr, cols []plan.Column) int {
	c, ok := e.(*sem.ColRef)
	if !ok {
		return -1
	}
	for i, col := range cols {
		if col.ID == c.ID {
			return i
		}
	}
	return -1
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
			s.col = append(s.col, plainColumn(e, cols))
			if s.col[len(s.col)-1] < 0 {
				s.computed = append(s.computed, c)
			}
		}
		for j, o := range f.OrderBy {
			c, err := r.compile(o.Expr, cols)
			if err != nil {
				return nil, err
			}
			s.order = append(s.order, c)
			s.keys = append(s.keys, sortKey{pos: len(f.PartitionBy) + j, desc: o.Desc, nullsFirst: o.NullsFirst})
			s.col = append(s.col, plainColumn(o.Expr, cols))
			if s.col[len(s.col)-1] < 0 {
				s.computed = append(s.computed, c)
			}
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
	return &windowOp{r: r, in: in, specs: specs, width: len(cols)}, nil
}

// windowOp computes window functions a stage at a time, each stage the
// functions sharing one (PARTITION BY, ORDER BY) (stageGroups), last
// first, each over its input sorted by (PARTITION BY, ORDER BY, input
// position) with a rowcontainer.Sorter, so only one partition at a time
// is in memory and the sorts spill past work_mem. The last sort is by the
// first function's keys, which is the order PostgreSQL's WindowAgg emits rows in; the input
// position as the last key keeps each sort stable. That last stage is
// computed as Next asks for rows, a partition at a time: a partition in
// memory is returned from memory, a spilled one through a Buffer.
//
// Rows in flight are laid out as
//
//	input columns | one result per function | input position | sort keys
//
// where the sort keys are only those that are not input columns (a key
// that is a plain column is compared where it is: windowSpec.keyPos), and
// the input position is there, and sorted on, only when there are
// several stages: with one, the sorter's own stability (rowcontainer
// invariant 3) keeps input order among equal keys, and the row is a
// value shorter (o.base).
type windowOp struct {
	r     *runner
	in    op
	specs []*windowSpec
	width int
	// seq: the input position is set and sorted on (several stages).
	seq   bool
	sorts []*rowcontainer.Sorter
	acc   *mon.Account // the partition being computed
	ran   bool
	// The output: last, the first function's stage, stepped a partition
	// at a time; its rows in queue (a partition in memory, still
	// reserved in acc) or read from out (a spilled partition's results,
	// computed as they are asked for, streamSpilled; without functions,
	// the input).
	last  *windowStage
	queue [][]types.Datum
	qi    int
	out   rowcontainer.Iterator
}

func (o *windowOp) Next(ctx context.Context) ([]types.Datum, error) {
	if !o.ran {
		o.ran = true
		if err := o.run(ctx); err != nil {
			return nil, err
		}
	}
	w := o.width + len(o.specs)
	for {
		if o.out != nil {
			row, err := o.out.Next(ctx)
			if err != nil {
				return nil, err
			}
			if row != nil {
				return row[:w:w], nil
			}
			o.out.Close()
			o.out = nil
		}
		if o.qi < len(o.queue) {
			row := o.queue[o.qi]
			o.queue[o.qi] = nil
			o.qi++
			return row[:w:w], nil
		}
		if o.last == nil {
			return nil, nil
		}
		o.queue, o.qi = o.queue[:0], 0
		more, err := o.last.step(ctx)
		if err != nil {
			return nil, err
		}
		if !more {
			o.last.it.Close()
			o.last = nil
		}
	}
}

func (o *windowOp) Close() {
	o.in.Close()
	if o.out != nil {
		o.out.Close()
	}
	if o.last != nil {
		o.last.it.Close()
	}
	for _, s := range o.sorts {
		s.Close()
	}
	o.queue = nil
	if o.acc != nil {
		o.acc.Clear()
	}
}

// base is where a staged row's computed sort keys start: after the
// input columns, the results and, with several stages, the position.
func (o *windowOp) base() int {
	if o.seq {
		return o.width + len(o.specs) + 1
	}
	return o.width + len(o.specs)
}

// newSort returns the sorter for function fi's stage: rows ordered by
// its keys (after the position column), then by input position.
func (o *windowOp) newSort(s *windowSpec) *rowcontainer.Sorter {
	seq, base := o.width+len(o.specs), o.base()
	keys := make([]sortKey, len(s.keys), len(s.keys)+1)
	for i, k := range s.keys {
		keys[i] = sortKey{pos: s.keyPos(i, base), desc: k.desc, nullsFirst: k.nullsFirst}
	}
	if o.seq {
		keys = append(keys, sortKey{pos: seq})
	}
	srt := rowcontainer.NewSorter(func(a, b []types.Datum) int { return compareRows(keys, a, b) }, o.r.account(), o.r.tempScope())
	// The keys abbreviated together (rowcontainer.NormalizedKey):
	// PARTITION BY's values, ORDER BY's, the input position, so rows of
	// one partition are ordered by the key too, not only told apart from
	// other partitions' rows.
	cols := make([]rowcontainer.KeyCol, len(keys))
	for i, k := range keys {
		t := types.Int8 // the position
		switch {
		case i < len(s.f.PartitionBy):
			t = s.f.PartitionBy[i].Type()
		case i < len(s.keys):
			t = s.f.OrderBy[i-len(s.f.PartitionBy)].Expr.Type()
		}
		cols[i] = rowcontainer.KeyCol{T: t, Pos: k.pos, Desc: k.desc, NullsFirst: k.nullsFirst}
	}
	srt.SetKey(rowcontainer.NormalizedKey(cols))
	o.sorts = append(o.sorts, srt)
	return srt
}

// addStage adds row (input columns, results, position) to the stage of
// spec s with its computed sort keys appended: in place when row is
// fresh (the input's, made with room for them), else in a copy (a row of
// the previous stage, which that stage may still read, keys included).
func (o *windowOp) addStage(ctx context.Context, srt *rowcontainer.Sorter, s *windowSpec, row []types.Datum, fresh bool) error {
	base := o.base()
	out := row[:base]
	if !fresh || cap(row) < base+len(s.computed) {
		out = make([]types.Datum, base, base+len(s.computed))
		copy(out, row)
	}
	for _, f := range s.computed {
		d, err := f(row)
		if err != nil {
			return err
		}
		out = append(out, d)
	}
	return srt.Add(ctx, out)
}

func (o *windowOp) run(ctx context.Context) error {
	nf := len(o.specs)
	if nf == 0 {
		o.out = &opIter{o.in}
		return nil
	}
	o.acc = o.r.account()
	groups := o.stageGroups()
	o.seq = len(groups) > 1
	last := o.specs[groups[0][0]]
	srt := o.newSort(last)
	for seq := 0; ; seq++ {
		row, err := nextChecked(ctx, o.in, seq)
		if err != nil {
			return err
		}
		if row == nil {
			break
		}
		staged := make([]types.Datum, o.base(), o.base()+len(last.computed))
		copy(staged, row)
		if o.seq {
			staged[o.width+nf] = types.DInt(seq)
		}
		if err := o.addStage(ctx, srt, last, staged, true); err != nil {
			return err
		}
	}
	for gi, g := range groups {
		it, err := srt.Sort(ctx)
		if err != nil {
			return err
		}
		if gi == len(groups)-1 {
			// The first function's order is the output's: Next steps
			// its stage a partition at a time.
			o.last = &windowStage{o: o, fis: g, it: it, emit: o.emitOut, keepAcc: true, stream: true}
			return nil
		}
		ns := o.specs[groups[gi+1][0]]
		next := o.newSort(ns)
		st := &windowStage{o: o, fis: g, it: it, emit: func(row []types.Datum) error {
			return o.addStage(ctx, next, ns, row, false)
		}}
		for {
			more, err := st.step(ctx)
			if err != nil {
				it.Close()
				return err
			}
			if !more {
				break
			}
		}
		it.Close()
		srt = next
	}
	return nil
}

// emitOut queues a row of the last stage's partition in memory for Next.
func (o *windowOp) emitOut(row []types.Datum) error {
	o.queue = append(o.queue, row)
	return nil
}

// errStopped ends a spilled partition's computation whose reader closed.
var errStopped = errors.New("exec: window output closed")

// streamSpilled makes Next read the last stage's spilled partition (which
// it then owns) as its rows are computed: computeSpilledGroup runs as a
// coroutine (iter.Pull2) yielding each row, so the results are not
// written to disk and read back. Closing the iterator stops it.
func (o *windowOp) streamSpilled(ctx context.Context, fis []int, spilled *rowcontainer.Buffer) {
	next, stop := iter.Pull2(func(yield func([]types.Datum, error) bool) {
		err := o.computeSpilledGroup(ctx, fis, spilled, func(row []types.Datum) error {
			if !yield(row, nil) {
				return errStopped
			}
			return nil
		})
		if err != nil && !errors.Is(err, errStopped) {
			yield(nil, err)
		}
	})
	o.out = &pullIter{next: next, stop: stop, buf: spilled}
}

// pullIter reads a coroutine's rows as a rowcontainer.Iterator.
type pullIter struct {
	next func() ([]types.Datum, error, bool)
	stop func()
	buf  *rowcontainer.Buffer
}

func (it *pullIter) Next(context.Context) ([]types.Datum, error) {
	row, err, ok := it.next()
	if !ok {
		return nil, nil
	}
	return row, err
}

func (it *pullIter) Close() {
	it.stop()
	it.buf.Close()
}

// windowStage computes functions fis (whose PARTITION BY and ORDER BY are
// the same, stageGroups) over their sorted stage, one partition per step,
// passing each row with its results to emit. keepAcc leaves a
// partition held in memory reserved in o.acc until the next step (emit
// kept its rows); stream (the last stage) hands a spilled partition to
// Next instead of emitting it (streamSpilled).
type windowStage struct {
	o       *windowOp
	fis     []int
	it      rowcontainer.Iterator
	emit    func([]types.Datum) error
	keepAcc bool
	stream  bool
	// pending is the first row of the next partition, read ahead.
	pending []types.Datum
	done    bool
}

// step computes the next partition; false when none is left.
func (st *windowStage) step(ctx context.Context) (bool, error) {
	o := st.o
	if st.keepAcc {
		o.acc.Clear()
	}
	if st.done {
		return false, nil
	}
	s := o.specs[st.fis[0]]
	base := o.base()
	var part [][]types.Datum
	// spilled holds the partition instead of part once it outgrew
	// work_mem (window_spill.go); first is the partition's first row.
	var spilled *rowcontainer.Buffer
	var first []types.Datum
	partKeys := make([]sortKey, len(s.part))
	for i := range partKeys {
		partKeys[i] = sortKey{pos: s.keyPos(i, base)}
	}
	canSpill := o.r.tempScope().Spillable()
	fwd, _ := o.forwardOnly(st.fis)
	for {
		row := st.pending
		st.pending = nil
		if row == nil {
			var err error
			if row, err = st.it.Next(ctx); err != nil {
				if spilled != nil {
					spilled.Close()
				}
				return false, err
			}
		}
		if row == nil {
			st.done = true
			break
		}
		if first != nil && compareRows(partKeys, first, row) != 0 {
			st.pending = row
			break
		}
		if first == nil {
			first = row
			if fwd != nil {
				// Forward-only functions need no partition held, in
				// memory or spilled: computed as the rows come.
				return st.streamSorted(ctx, [][]types.Datum{row}, first, partKeys, func(src rowSource) rowcontainer.Iterator {
					return o.newFwdIter(fwd, src, true)
				})
			}
		}
		if spilled != nil {
			if err := spilled.Add(row); err != nil {
				spilled.Close()
				return false, err
			}
			continue
		}
		n := rowcontainer.RowSize(row)
		err := o.acc.Grow(n)
		if err != nil && canSpill && len(part) >= minSpillRows {
			if ring, ok := o.ringOnly(st.fis); ok {
				return st.streamSorted(ctx, append(part, row), first, partKeys, func(src rowSource) rowcontainer.Iterator {
					return o.newRingIter(ring, src, true)
				})
			}
			// Past work_mem: the partition goes to a buffer that spills,
			// and is computed reading it from there (window_spill.go).
			spilled = rowcontainer.NewBuffer(o.r.account(), o.r.tempScope())
			for i, r := range append(part, row) {
				if err := spilled.Add(r); err != nil {
					spilled.Close()
					return false, err
				}
				if i < len(part) {
					part[i] = nil
				}
			}
			part = nil
			o.acc.Clear()
			continue
		}
		if err != nil {
			// Without temporary storage, a partition is held past
			// work_mem if need be, bounded by the node budget.
			if err = o.acc.Force(n); err != nil {
				return false, err
			}
		}
		part = append(part, row)
	}
	if spilled != nil {
		if st.stream {
			o.streamSpilled(ctx, st.fis, spilled)
			return true, nil
		}
		defer spilled.Close()
		err := o.computeSpilledGroup(ctx, st.fis, spilled, st.emit)
		return err == nil, err
	}
	if len(part) == 0 {
		return false, nil
	}
	for _, fi := range st.fis {
		res, err := o.r.computePartition(o.specs[fi], part, base)
		if err != nil {
			return false, err
		}
		for j, row := range part {
			row[o.width+fi] = res[j]
		}
	}
	for _, row := range part {
		row = row[:base:base]
		if err := st.emit(row); err != nil {
			return false, err
		}
	}
	if !st.keepAcc {
		o.acc.Clear()
	}
	return true, nil
}

// ringOnly returns the ring functions of fis (ringFn) when every one
// is one and together they hold no more than maxRingRows rows.
func (o *windowOp) ringOnly(fis []int) ([]ringFn, bool) {
	fns := make([]ringFn, 0, len(fis))
	for _, fi := range fis {
		f, ok := o.ringFnOf(fi)
		if !ok {
			return nil, false
		}
		fns = append(fns, f)
	}
	return fns, ringFits(fns)
}

// rowSource gives a partition's rows in window order, nil at its end.
type rowSource = func(context.Context) ([]types.Datum, error)

// streamSorted computes a partition past work_mem whose functions are
// all ring functions (ringOnly: lag and lead by constant offsets,
// aggregates over ROWS frames with constant offsets) or all forward-only
// (forwardOnly: row_number, rank, running aggregates, window_forward.go)
// straight from the stage's sorted rows: held (the rows read so far,
// reserved in o.acc) and then the rest of the partition as the iterator
// mk makes asks for them, so the partition is never written to a Buffer
// and read back (which is what its size would otherwise cost: one more
// write and read of every row). The last stage hands the iterator to
// Next; another stage emits its rows now.
func (st *windowStage) streamSorted(ctx context.Context, held [][]types.Datum, first []types.Datum, partKeys []sortKey, mk func(rowSource) rowcontainer.Iterator) (bool, error) {
	o := st.o
	ended := false
	src := func(ctx context.Context) ([]types.Datum, error) {
		if len(held) > 0 {
			row := held[0]
			held[0], held = nil, held[1:]
			return row, nil
		}
		if ended {
			return nil, nil
		}
		row, err := st.it.Next(ctx)
		if err != nil {
			return nil, err
		}
		switch {
		case row == nil:
			st.done, ended = true, true
			return nil, nil
		case compareRows(partKeys, first, row) != 0:
			st.pending, ended = row, true
			return nil, nil
		}
		return row, nil
	}
	ri := mk(src)
	if st.stream {
		o.out = ri
		return true, nil
	}
	defer ri.Close()
	for {
		row, err := ri.Next(ctx)
		if err != nil {
			return false, err
		}
		if row == nil {
			break
		}
		if err := st.emit(row); err != nil {
			return false, err
		}
	}
	if !st.keepAcc {
		o.acc.Clear()
	}
	return true, nil
}

// stageGroups groups the functions into sorted stages, in the order they
// run: functions whose PARTITION BY and ORDER BY are the same share one
// sort and are computed over each partition together (PostgreSQL's
// WindowAgg does the same for one WINDOW), so two functions OVER w sort
// the rows once. The group holding the first function runs last: its
// order is the output's. Keys calling a volatile function never share.
func (o *windowOp) stageGroups() [][]int {
	var groups [][]int
	index := map[string]int{}
	for fi := len(o.specs) - 1; fi >= 0; fi-- {
		k, ok := windowKeyOf(o.specs[fi].f)
		if gi, seen := index[k]; ok && seen {
			groups[gi] = append(groups[gi], fi)
			continue
		}
		if ok {
			index[k] = len(groups)
		}
		groups = append(groups, []int{fi})
	}
	// Move the group of function 0 to the end.
	for gi, g := range groups {
		if slices.Contains(g, 0) && gi != len(groups)-1 {
			groups = append(append(groups[:gi:gi], groups[gi+1:]...), g)
			break
		}
	}
	return groups
}

// windowKeyOf renders f's PARTITION BY and ORDER BY with columns by ID;
// false when a key calls a volatile function.
func windowKeyOf(f *plan.WindowFunc) (string, bool) {
	var b strings.Builder
	ok := true
	key := func(e sem.Expr) {
		sem.Walk(e, func(x sem.Expr) bool {
			if c, isFn := x.(*sem.FuncCall); isFn && c.Fn != nil && c.Fn.Overload != nil && c.Fn.Overload.Volatility == builtins.Volatile {
				ok = false
			}
			return ok
		})
		b.WriteString(sem.Map(e, func(x sem.Expr) sem.Expr {
			if c, isCol := x.(*sem.ColRef); isCol {
				return &sem.ColRef{ID: c.ID, T: c.T, Name: "#" + strconv.Itoa(int(c.ID))}
			}
			return x
		}).String())
		b.WriteByte(0)
	}
	for _, e := range f.PartitionBy {
		key(e)
	}
	b.WriteByte(1)
	for _, s := range f.OrderBy {
		key(s.Expr)
		fmt.Fprintf(&b, "%v%v", s.Desc, s.NullsFirst)
	}
	return b.String(), ok
}

// opIter adapts an op to a rowcontainer.Iterator.
type opIter struct{ o op }

func (it *opIter) Next(ctx context.Context) ([]types.Datum, error) { return it.o.Next(ctx) }
func (it *opIter) Close()                                          {}

// computePartition computes one window function over one partition's
// rows (in window order, sort keys from position base) and returns the
// results in that order.
func (r *runner) computePartition(s *windowSpec, rows [][]types.Datum, base int) ([]types.Datum, error) {
	n := len(rows)
	np, nk := len(s.part), len(s.order)
	p := &builtins.Partition{Args: make([][]types.Datum, n)}
	// The ORDER BY values of every row, gathered from where they are
	// (keyPos) into one array: a row's are p.Keys[j].
	var opos []int
	var okeys []types.Datum
	if nk > 0 {
		p.Keys = make([][]types.Datum, n)
		p.Desc, p.NullsFirst = s.f.OrderBy[0].Desc, s.f.OrderBy[0].NullsFirst
		opos = s.keyPositions(base)[np:]
		okeys = make([]types.Datum, n*nk)
	}
	for j, row := range rows {
		args, err := evalAll(s.args, row)
		if err != nil {
			return nil, err
		}
		if s.filter != nil {
			d, err := s.filter(row)
			if err != nil {
				return nil, err
			}
			args = append(args, d)
		}
		p.Args[j] = args
		if p.Keys != nil {
			k := okeys[j*nk : (j+1)*nk : (j+1)*nk]
			for i, at := range opos {
				k[i] = row[at]
			}
			p.Keys[j] = k
		}
	}
	out := make([]types.Datum, 0, n)
	err := newWindowFunc(s).Compute(r.fn(), p, s.frame, func(d types.Datum) error {
		out = append(out, d)
		return nil
	})
	return out, err
}

// newWindowFunc returns the builtins.WindowFunc computing s.
func newWindowFunc(s *windowSpec) builtins.WindowFunc {
	o := s.f.Fn.Overload
	argTypes := s.f.Fn.ArgTypes
	if o.NewWindow != nil {
		return o.NewWindow(argTypes)
	}
	newAgg := func() builtins.Aggregate { return o.NewAggregate(argTypes) }
	if s.filter != nil {
		newAgg = func() builtins.Aggregate { return filteredAgg{o.NewAggregate(argTypes)} }
	}
	return builtins.AggregateWindow(newAgg)
}
